"""Model files as torch modules, for the offline stack on PyTorch (:mod:`mime_fast.detect.torch_models`).

The weights are the offline stack's files (:func:`~mime_fast.detect.weights.package_file`, which
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
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .tflite import read_tflite, same_pad as _same_pad
from .weights import ModelNotAvailable

__all__ = ["OnnxModule", "TFLiteModule", "read_tflite"]


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
            elif n[0] == "Resize" and len(n[1]) > 2 and n[1][2] in consts:
                # constant scales read here once, as numbers: read from a device buffer in the
                # forward they would sync the stream (and break a CUDA graph's capture)
                n[3]["scales_values"] = [float(v) for v in np.asarray(consts[n[1][2]]).ravel().tolist()]
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
                    scales = a.get("scales_values") or [float(v) for v in x[2].tolist()]
                    y = F.interpolate(x[0], scale_factor=tuple(scales[2:]), mode="nearest")
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
