"""Small generated ONNX models with the signatures of the paper stack's models (tests only).

Each is a deterministic function of its input, built with ``onnx.helper`` (opset 17), so that a
known picture gives a known result:

* :func:`scrfd` (``det_10g.onnx``: input ``input.1`` ``1 x 3 x H x W``, 9 outputs score/bbox/kps per
  stride 8/16/32, 2 anchors per cell).  Per stride ``s`` the "face" is a bright square of side
  ``F = FACE_CELLS * s`` centred on an anchor (a cell corner ``(x, y) * s``): with ``i`` the mean
  brightness (0 dark .. 1 white) of the ``F x F`` window around the anchor and ``r`` that of the ring
  up to ``2F``, the score is ``sigmoid(20 (i - r) - 15)`` (0.993 for the exact square, ~0.84 one
  stride off, ~0 for a square of another stride's size).  Anchor 0 predicts the window as its box
  and the keypoints at :data:`KPS_UNIT` of it; anchor 1 scores 0.98 x as much and predicts a box
  0.9 x as large (a duplicate for NMS).
* :func:`landmark106` (``2d106det.onnx``: ``data`` ``1 x 3 x 192 x 192`` -> ``fc1`` ``1 x 212``).
  Point ``k`` is the brightness-weighted centroid of a fixed rectangle of the crop
  (:func:`landmark_regions`: an 11 x 10 grid over the crop's central 128 x 128, where the face box
  lies; 4 interior cells unused), or the rectangle's centre when it is dark; outputs ``x / 96 - 1``.
  A dot drawn inside a rectangle comes back at the dot.  Indices are assigned so that the 106 -> 5
  reduction of a uniformly bright box lies near :data:`KPS_UNIT` (eye groups, nose tip, mouth
  corners).
* :func:`arcface` (``w600k_r50.onnx``: ``input.1`` ``1 x 3 x 112 x 112`` -> ``683`` ``1 x 512``):
  14 x 14 average pooling then a fixed random projection.
* :func:`yolov8` (``yolov8n.onnx``: ``images`` ``1 x 3 x 640 x 640`` -> ``output0``
  ``1 x (4 + nc) x 8400``).  Per stride ``s`` the "person" is a white rectangle ``PERSON_CELLS * s``
  (w x h) centred on an anchor ``(x + 0.5, y + 0.5) * s`` (same inner/ring rule, ``sigmoid(20 (i - r)
  - 16)``), class 0 responds to white (min of R, G, B), class 2 ("car") to red (R - B); the box is the
  window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
#: Face window side in strides (SCRFD fake).
FACE_CELLS = 8
#: Keypoints (eye, eye, nose, mouth, mouth) as fractions of the face box.
KPS_UNIT = np.array([[0.3, 0.35], [0.7, 0.35], [0.5, 0.55], [0.35, 0.725], [0.65, 0.725]])
#: Person window (width, height) in strides (YOLOv8 fake).
PERSON_CELLS = (5, 9)
LMK_SIZE = 192
LMK_GRID = (10, 11)  # rows, columns over the crop's central 128 x 128


class _Graph:
    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []

    def const(self, value, dtype=np.float32) -> str:
        name = f"const_{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], *, name: str | None = None, out: str | None = None, **attrs) -> str:
        out = out or f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name or f"n{len(self.nodes)}_{op_type.lower()}",
                                           **attrs))
        return out

    def affine(self, x: str, a: float, b: float) -> str:
        return self.op("Add", [self.op("Mul", [x, self.const(a)]), self.const(b)])

    def save(self, path, inputs, outputs) -> Path:
        graph = helper.make_graph(self.nodes, "fake", inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return Path(path)


def _vi(name: str, dims) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _window_score(g: _Graph, cells: str, kh: int, kw: int, k: float, t: float) -> str:
    """sigmoid(k (inner - ring) - t): inner = mean over a kh x kw cell window centred on each cell
    (even sizes: on its top-left corner), ring = mean of the 3x (odd) / 2x (even) larger window minus
    the inner one."""
    if kh % 2:  # odd: centred on the cell, outer 3x
        inner = g.op("AveragePool", [cells], kernel_shape=[kh, kw], pads=[kh // 2, kw // 2, kh // 2, kw // 2],
                     count_include_pad=1)
        outer = g.op("AveragePool", [cells], kernel_shape=[3 * kh, 3 * kw],
                     pads=[3 * kh // 2, 3 * kw // 2, 3 * kh // 2, 3 * kw // 2], count_include_pad=1)
        ratio = 9.0
    else:  # even: centred on the cell's top-left corner, outer 2x
        inner = g.op("AveragePool", [cells], kernel_shape=[kh, kw], pads=[kh // 2, kw // 2, kh // 2 - 1, kw // 2 - 1],
                     count_include_pad=1)
        outer = g.op("AveragePool", [cells], kernel_shape=[2 * kh, 2 * kw], pads=[kh, kw, kh - 1, kw - 1],
                     count_include_pad=1)
        ratio = 4.0
    ring = g.affine(g.op("Sub", [g.op("Mul", [outer, g.const(ratio)]), inner]), 1.0 / (ratio - 1.0), 0.0)
    return g.op("Sigmoid", [g.affine(g.op("Sub", [inner, ring]), k, -t)])


# --------------------------------------------------------------------------------------------------


def scrfd_keypoint_offsets(anchor: int) -> np.ndarray:
    """(5, 2) keypoint offsets from the anchor in strides."""
    shrink = 1.0 if anchor == 0 else 0.9
    return (KPS_UNIT - 0.5) * FACE_CELLS * shrink


def scrfd(path, *, kps: bool = True, batched: bool = False, input_name: str = "input.1") -> Path:
    """Fake SCRFD (see the module docstring): 9 outputs (6 with ``kps=False``), 2-D or ``batched``
    3-D."""
    g = _Graph()
    bright = g.op("ReduceMean", [g.affine(input_name, 128.0 / 255.0, 127.5 / 255.0)], axes=[1], keepdims=1)
    strides = (8, 16, 32)
    scores, boxes, points = [], [], []
    half = FACE_CELLS / 2
    shape = [1, -1] if batched else [-1]
    for s in strides:
        cells = g.op("AveragePool", [bright], kernel_shape=[s, s], strides=[s, s])
        s0 = _window_score(g, cells, FACE_CELLS, FACE_CELLS, 20.0, 15.0)
        s1 = g.op("Mul", [s0, g.const(0.98)])
        zero = g.op("Mul", [cells, g.const(0.0)])

        def head(maps: str, width: int, name: str) -> str:
            t = g.op("Transpose", [maps], perm=[0, 2, 3, 1])
            return g.op("Reshape", [t, g.const(shape + [width], np.int64)], out=name)

        scores.append(head(g.op("Concat", [s0, s1], axis=1), 1, f"score_{s}"))
        dist = np.array([half] * 4 + [0.9 * half] * 4, np.float32).reshape(1, 8, 1, 1)
        boxes.append(head(g.op("Add", [zero, g.const(dist)]), 4, f"bbox_{s}"))
        if kps:
            off = np.concatenate([scrfd_keypoint_offsets(0).ravel(), scrfd_keypoint_offsets(1).ravel()])
            points.append(head(g.op("Add", [zero, g.const(off.reshape(1, 20, 1, 1))]), 10, f"kps_{s}"))
    outs = [_vi(n, ([1] if batched else []) + [f"n{s}", w])
            for names, w in ((scores, 1), (boxes, 4), (points, 10)) for n, s in zip(names, strides)]
    return g.save(path, [_vi(input_name, [1, 3, "H", "W"])], outs)


# --------------------------------------------------------------------------------------------------


def landmark_regions() -> tuple[np.ndarray, np.ndarray]:
    """``(rects (106, 4) x0 y0 x1 y1 (half-open, crop pixels), centres (106, 2))`` of the fake
    2d106det's points, indices assigned as described in the module docstring."""
    rows, cols = LMK_GRID
    xe = np.round(np.linspace(32, 160, cols + 1)).astype(int)
    ye = np.round(np.linspace(32, 160, rows + 1)).astype(int)
    cells = [(xe[c], ye[r], xe[c + 1], ye[r + 1]) for r in range(rows) for c in range(cols)]
    centre = np.array([((x0 + x1 - 1) / 2, (y0 + y1 - 1) / 2) for x0, y0, x1, y1 in cells])
    target = 32 + KPS_UNIT * 128
    free = list(range(len(cells)))
    assign: dict[int, int] = {}

    def take(index: int, point: np.ndarray) -> None:
        best = min(free, key=lambda c: float(np.hypot(*(centre[c] - point))))
        free.remove(best)
        assign[index] = best

    take(86, target[2])
    take(52, target[3])
    take(61, target[4])
    for group, eye in ((range(33, 43), target[0]), (range(87, 97), target[1])):
        for i in group:
            take(i, eye)
    spare = len(cells) - 106  # leave out interior cells, so the points still span the whole box
    for c in sorted(free, key=lambda c: float(np.hypot(*(centre[c] - 96))))[:spare]:
        free.remove(c)
    for i in range(106):
        if i not in assign:
            assign[i] = free.pop(0)
    idx = [assign[i] for i in range(106)]
    return np.array(cells)[idx], centre[idx]


def landmark106(path, *, normalised_input: bool = False, eps: float = 1e-3) -> Path:
    """Fake 2d106det.  Default: the graph starts with nodes named ``Sub...`` and ``Mul...`` (mean 0,
    std 1 for insightface); ``normalised_input=True``: no such names, it expects (x - 127.5) / 128."""
    g = _Graph()
    if normalised_input:
        lum = g.affine(g.op("ReduceMean", ["data"], axes=[1], keepdims=1), 128.0 / 255.0, 127.5 / 255.0)
    else:
        x = g.op("Sub", ["data", g.const(0.0)], name="Sub_0")
        x = g.op("Mul", [x, g.const(1.0)], name="Mul_1")
        lum = g.op("Mul", [g.op("ReduceMean", [x], axes=[1], keepdims=1), g.const(1.0 / 255.0)])
    img = g.op("Reshape", [lum, g.const([LMK_SIZE, LMK_SIZE], np.int64)])
    rects, centres = landmark_regions()
    coord = np.arange(LMK_SIZE, dtype=np.float32)[:, None]
    B = np.stack([(coord[:, 0] >= x0) & (coord[:, 0] < x1) for x0, _, x1, _ in rects], 1).astype(np.float32)
    A = np.stack([(coord[:, 0] >= y0) & (coord[:, 0] < y1) for _, y0, _, y1 in rects], 1).astype(np.float32)
    IB = g.op("MatMul", [img, g.const(B)])
    IBx = g.op("MatMul", [img, g.const(B * coord)])

    def colsum(a: str, m: np.ndarray) -> str:
        return g.op("ReduceSum", [g.op("Mul", [a, g.const(m)]), g.const([0], np.int64)], keepdims=1)

    sw = g.op("Add", [colsum(IB, A), g.const(eps)])
    sx = g.op("Add", [colsum(IBx, A), g.const(eps * centres[:, 0])])
    sy = g.op("Add", [colsum(IB, A * coord), g.const(eps * centres[:, 1])])
    xy = g.op("Concat", [g.op("Div", [sx, sw]), g.op("Div", [sy, sw])], axis=0)  # (2, 106)
    xy = g.op("Transpose", [xy], perm=[1, 0])
    out = g.op("Reshape", [g.affine(xy, 2.0 / LMK_SIZE, -1.0), g.const([1, 212], np.int64)], out="fc1")
    return g.save(path, [_vi("data", [1, 3, LMK_SIZE, LMK_SIZE])], [_vi(out, [1, 212])])


# --------------------------------------------------------------------------------------------------


def arcface(path, *, dim: int = 512, self_normalising: bool = False, seed: int = 600) -> Path:
    """Fake ArcFace: expects (x - 127.5) / 127.5 (as insightface decides for a graph without Sub/Mul
    names); ``self_normalising=True``: starts with ``Sub``/``Mul`` nodes doing that itself (raw
    input, insightface mean 0 std 1), same function of the image."""
    g = _Graph()
    x = "input.1"
    if self_normalising:
        x = g.op("Sub", [x, g.const(127.5)], name="Sub_0")
        x = g.op("Mul", [x, g.const(1 / 127.5)], name="Mul_1")
    p = g.op("Flatten", [g.op("AveragePool", [x], kernel_shape=[14, 14], strides=[14, 14])], axis=1)
    w = np.random.default_rng(seed).standard_normal((192, dim)).astype(np.float32)
    out = g.op("MatMul", [p, g.const(w)], out="683")
    return g.save(path, [_vi("input.1", [1, 3, 112, 112])], [_vi(out, [1, dim])])


# --------------------------------------------------------------------------------------------------


def yolov8(path, *, nc: int = 80, car_class: int = 2) -> Path:
    """Fake YOLOv8 (module docstring): person = class 0 (white), ``car_class`` (red) when nc > 1."""
    g = _Graph()
    white = g.op("ReduceMin", ["images"], axes=[1], keepdims=1)
    red = g.op("Relu", [g.op("Conv", ["images", g.const(np.array([1, 0, -1], np.float32).reshape(1, 3, 1, 1))])])
    kw, kh = PERSON_CELLS
    per_stride = []
    for s in (8, 16, 32):
        n = (640 // s) ** 2
        yy, xx = np.mgrid[: 640 // s, : 640 // s]
        geo = np.stack([(xx.ravel() + 0.5) * s, (yy.ravel() + 0.5) * s, np.full(n, kw * s), np.full(n, kh * s)])
        maps = {}
        for cls, m in ((0, white), (car_class, red))[: 2 if car_class < nc else 1]:
            cells = g.op("AveragePool", [m], kernel_shape=[s, s], strides=[s, s])
            score = _window_score(g, cells, kh, kw, 20.0, 16.0)
            maps[cls] = g.op("Reshape", [score, g.const([1, 1, n], np.int64)])
        zero = g.op("Mul", [maps[0], g.const(0.0)])
        rows = [g.const(geo.reshape(1, 4, n))]
        c = 0
        while c < nc:
            if c in maps:
                rows.append(maps[c])
                c += 1
            else:
                run = min([k for k in maps if k > c] + [nc]) - c
                rows.append(g.op("Tile", [zero, g.const([1, run, 1], np.int64)]))
                c += run
        per_stride.append(g.op("Concat", rows, axis=1))
    out = g.op("Concat", per_stride, axis=2, out="output0")
    return g.save(path, [_vi("images", [1, 3, 640, 640])], [_vi(out, [1, 4 + nc, 8400])])


def yolov8_constant(path, table: np.ndarray) -> Path:
    """YOLOv8-shaped model whose output is ``table`` ``(4 + nc, 8400)`` whatever the image (the image
    is multiplied by 0 and added, so the graph still reads it)."""
    g = _Graph()
    table = np.asarray(table, np.float32)[None]
    zero = g.op("ReduceMean", [g.op("Mul", ["images", g.const(0.0)])], axes=[1, 2, 3], keepdims=1)  # (1, 1, 1, 1)
    zero = g.op("Reshape", [zero, g.const([1, 1, 1], np.int64)])
    out = g.op("Add", [zero, g.const(table)], out="output0")
    return g.save(path, [_vi("images", [1, 3, 640, 640])], [_vi(out, list(table.shape))])


def write_paper_models(folder, *, yolo: bool = True) -> Path:
    """The four fakes under the real file names in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    scrfd(folder / "det_10g.onnx")
    landmark106(folder / "2d106det.onnx")
    arcface(folder / "w600k_r50.onnx")
    if yolo:
        yolov8(folder / "yolov8n.onnx")
    return folder
