"""TFLite graphs converted to ONNX when loaded, for onnxruntime: the MediaPipe models whose files
OpenCV's TFLite importer cannot read (BlazePose's person detector stores its weights sparse,
behind DENSIFY operators) run in the same runtime as the offline stack's other models.

:func:`tflite_to_onnx` reads the file with :func:`mime_fast.detect.tflite.read_tflite` (constant
weights densified and dequantised from float16 once) and writes the graph in NCHW: the input is
taken as TFLite's NHWC and transposed once, 4-D outputs are transposed back, so the model's inputs
and outputs keep TFLite's layout.  Operators: CONV_2D, DEPTHWISE_CONV_2D (TensorFlow's SAME
padding made explicit from the static shapes), ADD, MUL, CONCATENATION, PAD, MAX_POOL_2D,
AVERAGE_POOL_2D, RESHAPE (in NHWC order), RESIZE_BILINEAR, DEPTH_TO_SPACE, LOGISTIC, RELU,
RELU6, PRELU, HARD_SWISH, with their fused activations.  Needs the ``onnx`` package.

:func:`prelu_as_relu` rewrites a graph's ``PRelu`` nodes into operators onnxruntime fuses into the
convolutions (SFace's graph and the face mesh's: about half their time on a CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .tflite import read_tflite, same_pad as _same_pad
from .weights import ModelNotAvailable

__all__ = ["prelu_as_relu", "tflite_to_onnx"]

_OPSET = 13


def _nchw(shape: list[int]) -> list[int]:
    return [shape[0], shape[3], shape[1], shape[2]] if len(shape) == 4 else list(shape)


def tflite_to_onnx(path: str | Path | bytes) -> Any:
    """The ``onnx.ModelProto`` of the float TFLite graph at ``path`` (see the module's docstring);
    ``NotImplementedError`` for an operator it does not convert."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        raise ModelNotAvailable(f"TFLite models are converted with the onnx package ({e}): pip install onnx") from e
    g = read_tflite(path)
    T = g["tensors"]
    const: dict[int, np.ndarray] = {i: t["data"].astype(np.float32) if t["data"].dtype == np.float16 else t["data"]
                                    for i, t in enumerate(T) if t["data"] is not None}
    nodes: list[Any] = []
    inits: list[Any] = []
    names: dict[int, str] = {}
    count = [0]

    def fresh(stem: str) -> str:
        count[0] += 1
        return f"{stem}_{count[0]}"

    def init(array: np.ndarray, stem: str = "c") -> str:
        name = fresh(stem)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, ins: list[str], out: str | None = None, **attrs: Any) -> str:
        out = out or fresh(op.lower())
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def value(i: int) -> str:
        """The ONNX name of tensor ``i`` (a constant becomes an initializer, in NCHW if 4-D)."""
        if i not in names:
            c = const[i]
            names[i] = init(c.transpose(0, 3, 1, 2) if c.ndim == 4 else c, "w")
        return names[i]

    def act(x: str, code: int) -> str:
        if code == 0:
            return x
        if code == 1:
            return node("Relu", [x])
        if code == 3:
            return node("Clip", [x, init(np.float32(0.0)), init(np.float32(6.0))])
        if code == 2:
            return node("Clip", [x, init(np.float32(-1.0)), init(np.float32(1.0))])
        raise NotImplementedError(f"TFLite fused activation {code}")

    (inp,) = g["inputs"]
    in_name = T[inp]["name"] or "input"
    names[inp] = node("Transpose", [in_name], perm=[0, 3, 1, 2])
    for op in g["ops"]:
        kind, ins, outs, o = op["op"], op["inputs"], op["outputs"], op["options"]
        out_shape = T[outs[0]]["shape"]
        if kind in ("DEQUANTIZE", "DENSIFY") and ins[0] in const:  # constant weights: done at read
            const[outs[0]] = const[ins[0]].astype(np.float32)
            continue
        x = value(ins[0]) if ins[0] in const else names[ins[0]]
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            w = const[ins[1]]
            in_shape = T[ins[0]]["shape"]
            if kind == "CONV_2D":  # (O, kh, kw, I) -> (O, I, kh, kw)
                wt, groups = w.transpose(0, 3, 1, 2), 1
                sw, sh, code, dw, dh = (o.scalar(1, "i"), o.scalar(2, "i"), o.scalar(3, "b"),
                                        o.scalar(4, "i", 1), o.scalar(5, "i", 1))
            else:  # (1, kh, kw, C * mult) -> (C * mult, 1, kh, kw)
                wt = w.transpose(3, 0, 1, 2)
                groups = in_shape[3]
                sw, sh, code, dw, dh = (o.scalar(1, "i"), o.scalar(2, "i"), o.scalar(4, "b"),
                                        o.scalar(5, "i", 1), o.scalar(6, "i", 1))
            kh, kw = wt.shape[2], wt.shape[3]
            if o.scalar(0, "b") == 0:  # SAME
                t, b = _same_pad(in_shape[1], kh, sh, dh)
                left, r = _same_pad(in_shape[2], kw, sw, dw)
            else:
                t = b = left = r = 0
            args = [x, init(wt.astype(np.float32), "w")]
            if len(ins) > 2 and ins[2] >= 0:
                args.append(init(const[ins[2]].astype(np.float32).reshape(-1), "b"))
            y = node("Conv", args, kernel_shape=[kh, kw], strides=[sh, sw], dilations=[dh, dw], group=groups,
                     pads=[t, left, b, r])
            y = act(y, code)
        elif kind in ("ADD", "MUL"):
            other = value(ins[1]) if ins[1] in const else names[ins[1]]
            y = act(node("Add" if kind == "ADD" else "Mul", [x, other]), o.scalar(0, "b") if o is not None else 0)
        elif kind == "CONCATENATION":
            axis = o.scalar(0, "i")
            rank = len(out_shape)
            axis = axis % rank
            if rank == 4:
                axis = [0, 2, 3, 1][axis]
            parts = [value(i) if i in const else names[i] for i in ins]
            y = act(node("Concat", parts, axis=axis), o.scalar(1, "b"))
        elif kind == "PAD":
            pads = const[ins[1]].reshape(-1, 2).astype(np.int64)
            if len(pads) == 4:
                pads = pads[[0, 3, 1, 2]]
            y = node("Pad", [x, init(np.concatenate([pads[:, 0], pads[:, 1]]).astype(np.int64))])
        elif kind in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            in_shape = T[ins[0]]["shape"]
            sw, sh, fw, fh = o.scalar(1, "i"), o.scalar(2, "i"), o.scalar(3, "i"), o.scalar(4, "i")
            if o.scalar(0, "b") == 0:
                t, b = _same_pad(in_shape[1], fh, sh)
                left, r = _same_pad(in_shape[2], fw, sw)
            else:
                t = b = left = r = 0
            extra = {"count_include_pad": 0} if kind == "AVERAGE_POOL_2D" else {}
            y = node("MaxPool" if kind == "MAX_POOL_2D" else "AveragePool", [x], kernel_shape=[fh, fw],
                     strides=[sh, sw], pads=[t, left, b, r], **extra)
            y = act(y, o.scalar(5, "b"))
        elif kind == "RESHAPE":
            in_shape = T[ins[0]]["shape"]
            if len(in_shape) == 4:  # NHWC order
                x = node("Transpose", [x], perm=[0, 2, 3, 1])
            y = node("Reshape", [x, init(np.array(out_shape, np.int64))])
            if len(out_shape) == 4:
                y = node("Transpose", [y], perm=[0, 3, 1, 2])
        elif kind == "RESIZE_BILINEAR":
            align, half = (bool(o.scalar(2, "b")), bool(o.scalar(3, "b"))) if o is not None else (False, False)
            mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
            sizes = np.array(_nchw(out_shape), np.int64)
            y = node("Resize", [x, "", "", init(sizes)], mode="linear", coordinate_transformation_mode=mode)
        elif kind == "DEPTH_TO_SPACE":
            y = node("DepthToSpace", [x], blocksize=o.scalar(0, "i"), mode="DCR")
        elif kind == "LOGISTIC":
            y = node("Sigmoid", [x])
        elif kind == "RELU":
            y = node("Relu", [x])
        elif kind == "RELU6":
            y = act(x, 3)
        elif kind == "PRELU":
            alpha = const[ins[1]].astype(np.float32).reshape(-1)
            y = node("PRelu", [x, init(alpha.reshape(-1, 1, 1) if len(out_shape) == 4 else alpha)])
        elif kind == "HARD_SWISH":
            y = node("HardSwish", [x])
        else:
            raise NotImplementedError(f"TFLite op {kind} is not converted to ONNX")
        names[outs[0]] = y
    outputs = []
    for i in g["outputs"]:
        shape = T[i]["shape"]
        y = names[i]
        name = T[i]["name"] or f"output_{i}"
        if len(shape) == 4:
            node("Transpose", [y], name, perm=[0, 2, 3, 1])
        else:
            node("Identity", [y], name)
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, Path(str(path)).stem if not isinstance(path, bytes) else "tflite",
                              [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, T[inp]["shape"])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="mime_fast")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def prelu_as_relu(model: Any, *, slope_shape: tuple[int, ...] | None = None) -> Any:
    """``model`` (an ``onnx.ModelProto``, changed in place and returned) with each ``PRelu(x)`` whose
    slope ``a`` is a constant written as ``a * x + (1 - a) * Relu(x)``, the same function, which
    onnxruntime fuses into the convolutions where its ``PRelu`` kernel runs on its own (SFace: 30
    -> 14 ms a face, the face mesh: 6 -> 2.6 ms, on one core; outputs equal to about 1e-5).
    ``slope_shape``: the shape the slopes are given (SFace's are per channel, ``(-1, 1, 1)``);
    ``None``: as stored.  Initializers no node uses any more are dropped."""
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    nodes, extra = [], []
    for n in g.node:
        if n.op_type != "PRelu" or n.input[1] not in inits:
            nodes.append(n)
            continue
        x, slope, y = n.input[0], n.input[1], n.output[0]
        a = numpy_helper.to_array(inits[slope]).astype(np.float32)
        if slope_shape is not None:
            a = a.reshape(slope_shape)
        p = (n.name or y) + "_prelu"
        extra += [numpy_helper.from_array(a, p + "_a"), numpy_helper.from_array(1 - a, p + "_1ma")]
        nodes += [helper.make_node("Relu", [x], [p + "_relu"]),
                  helper.make_node("Mul", [x, p + "_a"], [p + "_ax"]),
                  helper.make_node("Mul", [p + "_relu", p + "_1ma"], [p + "_br"]),
                  helper.make_node("Add", [p + "_ax", p + "_br"], [y])]
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(extra)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return model
