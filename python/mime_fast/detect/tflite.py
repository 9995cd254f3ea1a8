"""TFLite model files read without TensorFlow: a minimal flatbuffers reader of the TFLite schema
(:func:`read_tflite`: tensors, constant data -- sparse constants densified -- operators and their
options), shared by the torch port (:class:`mime_fast.detect.torch_graphs.TFLiteModule`) and the
ONNX conversion (:func:`mime_fast.detect.tflite_onnx.tflite_to_onnx`)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["densify", "densify_levels", "read_tflite", "same_pad"]


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
#: TFLite's builtin operator codes (schema.fbs ``BuiltinOperator``) of the graphs read here.
_TFL_OPS = {0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 5: "DEPTH_TO_SPACE",
            6: "DEQUANTIZE", 9: "FULLY_CONNECTED", 14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU",
            21: "RELU6", 22: "RESHAPE", 23: "RESIZE_BILINEAR", 34: "PAD", 39: "TRANSPOSE", 40: "MEAN",
            54: "PRELU", 67: "TRANSPOSE_CONV", 97: "RESIZE_NEAREST_NEIGHBOR", 117: "HARD_SWISH", 124: "DENSIFY"}
_INDEX_TYPES = {1: np.int32, 2: np.uint16, 3: np.uint8}  # SparseIndexVector


def _index_vector(t: _Table, type_field: int) -> np.ndarray:
    """A ``SparseIndexVector`` union (its type in ``type_field``, its table in the next field)."""
    kind = t.scalar(type_field, "B")
    table = t.table(type_field + 1)
    if table is None or kind not in _INDEX_TYPES:
        return np.zeros(0, np.int64)
    return table.vector(0, _INDEX_TYPES[kind]).astype(np.int64)


def densify(values: np.ndarray, shape: list[int], sparsity: _Table) -> np.ndarray:
    """The dense ``shape`` array of a sparse TFLite tensor (``SparsityParameters``: traversal
    order, block map and per-dimension metadata, DENSE or compressed sparse row; the dense
    tensor is what the graph's DENSIFY operator makes of it)."""
    order = sparsity.vector(0, np.int32).tolist()
    block_map = sparsity.vector(1, np.int32).tolist()
    dims = sparsity.tables(2)
    meta = [(d.scalar(0, "b"), d.scalar(1, "i"), _index_vector(d, 2), _index_vector(d, 4)) for d in dims]
    return densify_levels(values, shape, order, block_map, meta)


def densify_levels(values: np.ndarray, shape: list[int], order: list[int], block_map: list[int],
                   meta: list[tuple[int, int, np.ndarray, np.ndarray]]) -> np.ndarray:
    """:func:`densify` on the parsed metadata: ``order`` the traversal order of the expanded
    dimensions (the tensor's, then one per blocked dimension), ``block_map`` the dimension each
    block dimension splits, ``meta`` per traversal level ``(format, dense_size, array_segments,
    array_indices)``, format 0 dense, 1 compressed sparse row."""
    rank = len(shape)
    blocks = {rank + j: d for j, d in enumerate(block_map)}  # expanded dimension -> original one
    sizes = [0] * len(order)
    for level, (fmt, dense, _, _) in enumerate(meta):
        if fmt == 0:
            sizes[order[level]] = dense
    block_size = {orig: sizes[exp] for exp, orig in blocks.items()}
    # walk the levels in traversal order, all entries at once: ``pos`` indexes the level's
    # segments (sparse) or its dense run; ``coord[k]`` is the coordinate of expanded dimension k
    pos = np.zeros(1, np.int64)
    coord = np.zeros((len(order), 1), np.int64)
    for level, (fmt, dense, segments, indices) in enumerate(meta):
        if fmt == 0:
            here = np.tile(np.arange(dense, dtype=np.int64), len(pos))
            pos, coord = np.repeat(pos, dense) * dense + here, np.repeat(coord, dense, axis=1)
        else:
            counts = segments[pos + 1] - segments[pos]
            starts = np.repeat(segments[pos] - np.cumsum(counts) + counts, counts)
            pos = starts + np.arange(int(counts.sum()), dtype=np.int64)
            here = indices[pos]
            coord = np.repeat(coord, counts, axis=1)
        coord[order[level]] = here
    idx = [coord[k] * block_size.get(k, 1) for k in range(rank)]
    for exp, orig in blocks.items():
        idx[orig] = idx[orig] + coord[exp]
    out = np.zeros(shape, values.dtype)
    out[tuple(idx)] = values[: len(pos)]
    return out


def read_tflite(path: str | Path | bytes) -> dict:
    """The first subgraph of a ``.tflite`` file, read with a minimal flatbuffers reader (TFLite
    schema: Model, SubGraph, Tensor, Operator, Buffer, OperatorCode): ``{"tensors": [{"name",
    "shape", "data" (ndarray or None; a sparse constant densified)}], "inputs", "outputs", "ops":
    [{"op", "inputs", "outputs", "options" (the builtin options table or None)}]}``."""
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
        sparsity = t.table(6)
        if not data.size or dtype is None:
            arr = None
        elif sparsity is not None:
            arr = densify(data.view(dtype), shape, sparsity)
        else:
            arr = data.view(dtype).reshape(shape)
        tensors.append({"name": t.string(3), "shape": shape, "data": arr})
    ops = [{"op": codes[o.scalar(0, "I")], "inputs": o.vector(1, np.int32).tolist(),
            "outputs": o.vector(2, np.int32).tolist(), "options": o.table(4)} for o in g.tables(3)]
    return {"tensors": tensors, "inputs": g.vector(1, np.int32).tolist(), "outputs": g.vector(2, np.int32).tolist(),
            "ops": ops}


def same_pad(size: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    """TensorFlow's SAME padding (before, after) of one dimension of ``size`` for a window ``k``,
    stride ``s``, dilation ``d``."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2
