"""The "paper stack": the models MIME used, behind the interface of :mod:`mime_fast.detect.interface`.

=====================  ==========================================  =====================================
need                   file (origin, licence)                      pre / post-processing (re-implemented)
=====================  ==========================================  =====================================
face boxes + 5 pts     ``det_10g.onnx`` (SCRFD-10GF, InsightFace   :class:`ScrfdDetector`: insightface's
                       ``buffalo_l``; non-commercial research      ``SCRFD`` -- letterbox, strides
                       licence)                                    8/16/32, 2 anchors, NMS 0.4, score 0.5
dense landmarks (106)  ``2d106det.onnx`` (``buffalo_l``)           :class:`Landmark106`: insightface's
                                                                   ``Landmark`` -- 192 x 192 crop, scale
                                                                   192 / (1.5 max(w, h)), no rotation
face embedding (512)   ``w600k_r50.onnx`` (ArcFace ResNet-50,      :class:`ArcFaceEmbedder`: insightface's
                       ``buffalo_l``)                              ``ArcFaceONNX`` on ``norm_crop``
person boxes           ``yolov8*.onnx`` (Ultralytics YOLOv8 COCO   :class:`YoloV8PersonDetector`:
                       weights exported to ONNX; AGPL-3.0)         ultralytics letterbox + NMS, class 0
=====================  ==========================================  =====================================

The weights are not shipped: insightface's ``FaceAnalysis(name="buffalo_l")`` downloads the three face
models to ``~/.insightface/models/buffalo_l``; ``yolo export model=yolov8n.pt format=onnx`` writes the
person detector (``mime-fast models --fetch`` does both where the packages and internet are there).

Discovery, loading and the choice between this stack and the offline one: :mod:`mime_fast.detect.stacks`.

(Over 400 lines on purpose: four step-by-step ports of insightface's and ultralytics' processing,
one class per model file, with the graph reading and the blob, box and keypoint helpers they share.)

Faithfulness: the arithmetic follows insightface 2.1 (``model_zoo/scrfd.py``, ``landmark.py``,
``arcface_onnx.py``, ``utils/face_align.py``) and ultralytics' ``LetterBox`` / ``scale_boxes`` /
``non_max_suppression``, step by step and in the same float precision where it matters; tests run
insightface's own classes on the same generated models and require equal results.  Our frames are
RGB, so where insightface converts BGR to RGB (``swapRB=True``) nothing is swapped here.
Differences: SCRFD boxes are not clipped to the frame (as insightface); a SCRFD model without
keypoint outputs gets keypoints placed in its boxes by the ArcFace template (insightface returns
none); :attr:`Landmarks.quality` of the 106-point model is defined here (:func:`landmark106_quality`),
2d106det having no confidence output.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .align import ARCFACE_DST, arcface_transform
from .interface import Faces, Landmarks, Persons, _check_frame, nms
from .weights import _ort_session

__all__ = [
    "PAPER_FILES",
    "ArcFaceEmbedder",
    "Landmark106",
    "ScrfdDetector",
    "YoloV8PersonDetector",
    "landmark106_quality",
]

#: The paper stack's files: role -> (file name, what it is).
PAPER_FILES = {
    "detector": ("det_10g.onnx", "face boxes + 5 points (SCRFD-10GF, buffalo_l)"),
    "landmarks": ("2d106det.onnx", "106 face landmarks (2d106det, buffalo_l)"),
    "embedder": ("w600k_r50.onnx", "512-D face embedding (ArcFace R50, buffalo_l)"),
    "persons": ("yolov8*.onnx", "person boxes (YOLOv8, Ultralytics)"),
}


def _fixed(dims) -> list[int] | None:
    """The ints of an ONNX Runtime shape, ``None`` when any is symbolic / unknown."""
    return [int(d) for d in dims] if all(isinstance(d, int) and d > 0 for d in dims) else None


# --------------------------------------------------------------------------------------------------
# Input normalisation decided from the graph, as insightface does (without needing the onnx package)


def _varint(f: BinaryIO) -> int:
    shift = value = 0
    while True:
        b = f.read(1)
        if not b:
            raise EOFError
        value |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return value
        shift += 7


def _skip(f: BinaryIO, wire: int) -> None:
    if wire == 0:
        _varint(f)
    elif wire in (1, 2, 5):
        f.seek({1: 8, 5: 4}.get(wire) or _varint(f), io.SEEK_CUR)
    else:
        raise ValueError(f"protobuf wire type {wire}")


def _first_node_names(path: str | Path, limit: int = 8) -> list[str]:
    """Names of the first ``limit`` nodes of an ONNX graph (``model.graph.node[:limit]``), read from
    the protobuf wire format (ModelProto.graph = 7, GraphProto.node = 1, NodeProto.name = 3) without
    loading the weights; ``[]`` when the file cannot be parsed."""
    names: list[str] = []
    try:
        with open(path, "rb") as f:
            while True:  # ModelProto: find the graph
                tag = _varint(f)
                if tag == (7 << 3 | 2):
                    end = _varint(f) + f.tell()
                    break
                _skip(f, tag & 7)
            while f.tell() < end and len(names) < limit:
                tag = _varint(f)
                if tag != (1 << 3 | 2):
                    _skip(f, tag & 7)
                    continue
                node = io.BytesIO(f.read(_varint(f)))
                name = ""
                while node.tell() < len(node.getbuffer()):
                    t = _varint(node)
                    if t == (3 << 3 | 2):
                        name = node.read(_varint(node)).decode("utf-8", "replace")
                        break
                    _skip(node, t & 7)
                names.append(name)
    except (EOFError, ValueError, OSError):
        return names
    return names


def _input_norm(path: str | Path, std: float, *, bn_data: bool) -> tuple[float, float]:
    """insightface's rule: ``Sub``/``_minus`` and ``Mul``/``_mul`` nodes among the first 8 (or, for
    ``Landmark``, a ``bn_data`` node among the first 3) mean the graph normalises its input itself
    (mean 0, std 1); otherwise mean 127.5 and ``std``."""
    names = _first_node_names(path)
    sub = any(n.startswith(("Sub", "_minus")) for n in names)
    mul = any(n.startswith(("Mul", "_mul")) for n in names)
    if bn_data and "bn_data" in names[:3]:
        sub = mul = True
    return (0.0, 1.0) if sub and mul else (127.5, std)


def _blob(imgs: list[np.ndarray], mean: float, std: float) -> np.ndarray:
    """NCHW float32 ``(img - mean) / std`` of RGB images (``cv2.dnn.blobFromImage``'s arithmetic)."""
    x = np.stack(imgs).astype(np.float32)
    x -= np.float32(mean)
    x *= np.float32(1.0 / std)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


# --------------------------------------------------------------------------------------------------
# SCRFD face detector


def _distance2bbox(points: np.ndarray, d: np.ndarray) -> np.ndarray:
    return np.stack([points[:, 0] - d[:, 0], points[:, 1] - d[:, 1], points[:, 0] + d[:, 2], points[:, 1] + d[:, 3]], -1)


def _distance2kps(points: np.ndarray, d: np.ndarray) -> np.ndarray:
    return points[:, None, :] + d.reshape(len(d), d.shape[1] // 2, 2)


def _template_keypoints(boxes: np.ndarray) -> np.ndarray:
    """Keypoints for boxes of a detector without keypoint outputs: the ArcFace template stretched over
    each box (the template's 112 x 112 chip = the box)."""
    b = np.asarray(boxes, np.float32).reshape(-1, 1, 4)
    return b[:, :, :2] + (ARCFACE_DST / 112.0)[None] * (b[:, :, 2:] - b[:, :, :2])


class ScrfdDetector:
    """SCRFD face detector (``det_10g.onnx``) with insightface's pre/post-processing.

    The frame is resized, keeping its aspect ratio, to fit ``det_size`` (int: square; or
    ``(width, height)``; a graph with a fixed input size is run at that size, as insightface does) and
    placed at the top-left of a zero canvas; input ``(rgb - 127.5) / 128``.  Per stride (8/16/32 with
    2 anchors per cell for 6/9 outputs, 8..128 with 1 anchor for 10/15 outputs) the anchors are the
    cell corners ``(x, y) * stride``, boxes and keypoints the outputs times the stride added to them
    (``distance2bbox`` / ``distance2kps``); scores ``>= score_threshold`` are kept, sorted by score and
    merged by NMS (IoU ``> nms_threshold`` with pixel-inclusive areas).  Outputs are read in graph
    order: scores, boxes, keypoints per stride (2-D, or 3-D with a batch axis).
    """

    def __init__(self, model_path: str | Path, *, det_size: int | tuple[int, int] = 640,
                 score_threshold: float = 0.5, nms_threshold: float = 0.4, threads: int | None = None):
        self._sess = _ort_session(model_path, threads)
        inp = self._sess.get_inputs()[0]
        self._input_name = inp.name
        fixed = _fixed(inp.shape[2:4]) if len(inp.shape) == 4 else None
        if fixed:
            self.input_size = (fixed[1], fixed[0])
        else:
            self.input_size = (int(det_size), int(det_size)) if np.isscalar(det_size) else tuple(map(int, det_size))
        outs = self._sess.get_outputs()
        self._output_names = [o.name for o in outs]
        n = len(outs)
        if n in (6, 9):
            self._strides, self._anchors = (8, 16, 32), 2
        elif n in (10, 15):
            self._strides, self._anchors = (8, 16, 32, 64, 128), 1
        else:
            raise ValueError(f"{model_path}: {n} outputs; a SCRFD graph has 6, 9, 10 or 15")
        self.use_kps = n in (9, 15)
        self._batched = len(outs[0].shape) == 3
        self.score_threshold = float(score_threshold)
        self.nms_threshold = float(nms_threshold)
        self._centers: dict[tuple[int, int, int], np.ndarray] = {}

    def _anchor_centers(self, h: int, w: int, stride: int) -> np.ndarray:
        key = (h, w, stride)
        if key not in self._centers:
            c = (np.stack(np.mgrid[:h, :w][::-1], axis=-1).astype(np.float32) * stride).reshape(-1, 2)
            self._centers[key] = np.repeat(c, self._anchors, axis=0)
        return self._centers[key]

    def detect(self, frame: np.ndarray) -> Faces:
        import cv2

        frame = _check_frame(frame)
        in_w, in_h = self.input_size
        im_ratio = frame.shape[0] / frame.shape[1]
        if im_ratio > in_h / in_w:
            new_h = in_h
            new_w = max(1, int(new_h / im_ratio))
        else:
            new_w = in_w
            new_h = max(1, int(new_w * im_ratio))
        det_scale = float(new_h) / frame.shape[0]
        canvas = np.zeros((in_h, in_w, 3), np.uint8)
        canvas[:new_h, :new_w] = cv2.resize(frame, (new_w, new_h))
        outs = self._sess.run(self._output_names, {self._input_name: _blob([canvas], 127.5, 128.0)})
        if self._batched:
            outs = [o[0] for o in outs]
        fmc = len(self._strides)
        scores, boxes, kps = [], [], []
        for i, stride in enumerate(self._strides):
            s = outs[i].reshape(-1)
            centers = self._anchor_centers(in_h // stride, in_w // stride, stride)
            pos = np.flatnonzero(s >= self.score_threshold)
            scores.append(s[pos])
            boxes.append(_distance2bbox(centers[pos], outs[i + fmc][pos] * stride))
            if self.use_kps:
                kps.append(_distance2kps(centers[pos], outs[i + 2 * fmc][pos] * stride))
        score = np.concatenate(scores).astype(np.float32)
        if not score.size:
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        order = np.argsort(-score, kind="stable")
        score = score[order]
        box = (np.concatenate(boxes) / det_scale).astype(np.float32)[order]
        keep = nms(box, score, self.nms_threshold, plus_one=True)
        if self.use_kps:
            kp = (np.concatenate(kps) / det_scale).astype(np.float32)[order][keep]
        else:
            kp = _template_keypoints(box[keep])
        return Faces(box[keep], score[keep], kp)


# --------------------------------------------------------------------------------------------------
# 106-point landmarks (2d106det)

#: 106-point markup (insightface ``alignment/coordinate_reg``, 2d106markup.jpg) as used by the
#: common 106 -> 5 reductions: the eye contours 33-42 and 87-96, nose tip 86, mouth corners 52 and 61.
LMK106_EYES = (np.arange(33, 43), np.arange(87, 97))
LMK106_NOSE_TIP = 86
LMK106_MOUTH_CORNERS = (52, 61)
#: Mean keypoint disagreement (fraction of the face size) at which the quality reaches 0.
QUALITY_TOLERANCE = 0.2


def landmark106_quality(points: np.ndarray, faces: Faces) -> np.ndarray:
    """Per-face quality in [0, 1] of 106-point landmarks: their agreement with the detector's 5
    keypoints, ``clip(1 - e / QUALITY_TOLERANCE, 0, 1)``, with ``e`` the mean distance over the five
    pairs divided by the face size ``max(box w, h)``.

    The five points taken from the 106: the centroids of the two eye contours, the nose tip and the
    two mouth corners (:data:`LMK106_EYES`, ...).  Which eye / mouth corner is the image-left one is
    decided by their order along the detector's eye axis, so only the grouping of the indices is
    relied on.  Two independent models agreeing within a few % of the face size (e ~ 0.03 on frontal
    faces: quality ~ 0.85) means a face whose structure both see; a non-face, an extreme pose or a
    broken crop makes them disagree (quality < 0.5 from e = 0.1, where the tracker falls back to the
    box ellipse).
    """
    pts = np.asarray(points, np.float64).reshape(len(faces), -1, 2)
    if pts.shape[1] < 97:
        raise ValueError(f"expected 106 points per face, got {pts.shape[1]}")
    k = faces.keypoints.astype(np.float64)
    axis = k[:, 1] - k[:, 0]
    eyes = np.stack([pts[:, g].mean(axis=1) for g in LMK106_EYES], 1)
    mouth = pts[:, list(LMK106_MOUTH_CORNERS)]

    def by_axis(pair: np.ndarray) -> np.ndarray:  # (N, 2, 2) ordered along the eye axis
        swap = np.einsum("nd,nd->n", pair[:, 1] - pair[:, 0], axis) < 0
        return np.where(swap[:, None, None], pair[:, ::-1], pair)

    five = np.concatenate([by_axis(eyes), pts[:, [LMK106_NOSE_TIP]], by_axis(mouth)], 1)
    b = faces.boxes.astype(np.float64)
    size = np.maximum(np.maximum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]), 1e-6)
    e = np.linalg.norm(five - k, axis=2).mean(axis=1) / size
    return np.clip(1.0 - e / QUALITY_TOLERANCE, 0.0, 1.0).astype(np.float32)


def _square_input_session(model_path: str | Path, threads: int | None):
    """Session of a model with a fixed square NCHW input: ``(session, input, side)``."""
    sess = _ort_session(model_path, threads)
    inp = sess.get_inputs()[0]
    size = _fixed(inp.shape[2:4])
    if not size or size[0] != size[1]:
        raise ValueError(f"{model_path}: expected a fixed square input, got {inp.shape}")
    return sess, inp, size[0]


class Landmark106:
    """106-point landmarks (``2d106det.onnx``) with insightface's ``Landmark`` processing.

    Per face: a ``192 x 192`` crop centred on the box, scale ``192 / (1.5 * max(w, h))``, no rotation
    (zeros outside the frame); input ``(rgb - mean) / std`` with mean/std chosen from the graph as
    insightface does (mean 0, std 1 when the graph starts with Sub and Mul nodes or ``bn_data``, as
    2d106det; else 127.5 / 128); the 212 outputs are ``(x, y)`` pairs in [-1, 1]: ``(v + 1) * 96``
    crop pixels, mapped back by the inverse affine.  ``quality``: :func:`landmark106_quality`.
    """

    num_points = 106

    def __init__(self, model_path: str | Path, *, threads: int | None = None):
        self._sess, inp, self.size = _square_input_session(model_path, threads)
        self._input_name = inp.name
        outs = self._sess.get_outputs()
        if len(outs) != 1 or not isinstance(outs[0].shape[-1], int) or outs[0].shape[-1] != 2 * self.num_points:
            raise ValueError(f"{model_path}: expected one output of {2 * self.num_points} values, got "
                             f"{[o.shape for o in outs]}")
        self._output_name = outs[0].name
        self.input_mean, self.input_std = _input_norm(model_path, 128.0, bn_data=True)

    def crop_transform(self, box: np.ndarray) -> np.ndarray:
        """The 2x3 affine frame -> crop of one box (insightface ``face_align.transform``, in its
        float32 / float64 mix)."""
        x0, y0, x1, y1 = np.asarray(box, np.float32)
        scale = self.size / (max(x1 - x0, y1 - y0) * np.float32(1.5))
        cx, cy = float((x1 + x0) / 2 * scale), float((y1 + y0) / 2 * scale)
        return np.array([[scale, 0.0, self.size / 2 - cx], [0.0, scale, self.size / 2 - cy]], np.float64)

    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks:
        import cv2

        frame = _check_frame(frame)
        pts = np.zeros((len(faces), self.num_points, 2), np.float32)
        for i, box in enumerate(faces.boxes):
            M = self.crop_transform(box)
            crop = cv2.warpAffine(frame, M, (self.size, self.size), borderValue=0.0)
            pred = self._sess.run([self._output_name], {self._input_name: _blob([crop], self.input_mean,
                                                                                 self.input_std)})[0][0]
            pred = pred.reshape(-1, 2)[-self.num_points:].astype(np.float32)
            pred = (pred + 1) * (self.size // 2)
            IM = cv2.invertAffineTransform(M)
            pts[i] = pred @ IM[:, :2].T + IM[:, 2]
        q = landmark106_quality(pts, faces) if len(faces) else np.zeros(0, np.float32)
        return Landmarks(pts, q)


# --------------------------------------------------------------------------------------------------
# ArcFace embedding


class ArcFaceEmbedder:
    """ArcFace embedding (``w600k_r50.onnx``, 512-D) with insightface's ``ArcFaceONNX`` processing:
    the chip is warped (bilinear, zeros outside) by :func:`arcface_transform` of the face's 5
    keypoints; input ``(rgb - mean) / std`` with mean/std from the graph (0/1 when it starts with Sub
    and Mul nodes, else 127.5 / 127.5, as w600k_r50); rows L2-normalised.  ``dim`` is the model's
    output width."""

    def __init__(self, model_path: str | Path, *, threads: int | None = None):
        self._sess, inp, self.size = _square_input_session(model_path, threads)
        self._input_name = inp.name
        self._batch = inp.shape[0] if isinstance(inp.shape[0], int) else None  # None: any batch
        out = self._sess.get_outputs()[0]
        self._output_name = out.name
        self.input_mean, self.input_std = _input_norm(model_path, 127.5, bn_data=False)
        if isinstance(out.shape[-1], int):
            self.dim = int(out.shape[-1])
        else:
            zero = np.zeros((self._batch or 1, 3, self.size, self.size), np.float32)
            self.dim = int(self._sess.run([self._output_name], {self._input_name: zero})[0].shape[-1])

    def chip(self, frame: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
        """The aligned ``size x size`` RGB chip of one face (insightface ``norm_crop``)."""
        import cv2

        return cv2.warpAffine(frame, arcface_transform(keypoints, self.size), (self.size, self.size), borderValue=0.0)

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        frame = _check_frame(frame)
        chips = [self.chip(frame, k) for k in faces.keypoints]
        out = np.zeros((len(chips), self.dim), np.float32)
        step = self._batch or max(1, len(chips))
        for i in range(0, len(chips), step):
            part = chips[i:i + step]
            blob = _blob(part + [part[-1]] * (step - len(part)), self.input_mean, self.input_std)
            out[i:i + len(part)] = self._sess.run([self._output_name], {self._input_name: blob})[0][:len(part)]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


# --------------------------------------------------------------------------------------------------
# YOLOv8 person detector


class YoloV8PersonDetector:
    """YOLOv8 (Ultralytics, exported to ONNX) keeping one class, with ultralytics' processing.

    Letterbox: scale ``r = min(size / H, size / W)``, resize to ``(round(W r), round(H r))``
    (bilinear), centre on a ``size x size`` canvas of value 114 (``top = round(dh - 0.1)``, ...);
    input RGB / 255 NCHW float32.  Output ``(1, 4 + nc, N)``: ``cx, cy, w, h`` then the class scores
    (COCO ``nc = 80`` or a one-class model).  A box counts as a person when its best class is
    ``person_class`` and that score exceeds ``score_threshold``; NMS (IoU ``> iou_threshold``), at
    most 300 boxes, mapped back to the frame (``scale_boxes``) and clipped.
    """

    MAX_DET = 300

    def __init__(self, model_path: str | Path, *, size: int = 640, score_threshold: float = 0.25,
                 iou_threshold: float = 0.45, person_class: int = 0, threads: int | None = None):
        self._sess = _ort_session(model_path, threads)
        inp = self._sess.get_inputs()[0]
        fixed = _fixed(inp.shape[2:4]) if len(inp.shape) == 4 else None
        self.input_hw = (fixed[0], fixed[1]) if fixed else (int(size), int(size))
        self._input_name = inp.name
        self._output_name = self._sess.get_outputs()[0].name
        self.score_threshold = float(score_threshold)
        self.iou_threshold = float(iou_threshold)
        self.person_class = int(person_class)

    def detect(self, frame: np.ndarray) -> Persons:
        import cv2

        frame = _check_frame(frame)
        H, W = frame.shape[:2]
        in_h, in_w = self.input_hw
        r = min(in_h / H, in_w / W)
        new_w, new_h = int(round(W * r)), int(round(H * r))
        dw, dh = (in_w - new_w) / 2, (in_h - new_h) / 2
        img = frame if (new_w, new_h) == (W, H) else cv2.resize(frame, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
        top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
        left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
        img = cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
        x = np.ascontiguousarray(img.transpose(2, 0, 1)[None], dtype=np.float32) / np.float32(255.0)
        out = self._sess.run([self._output_name], {self._input_name: x})[0][0]
        if out.shape[0] > out.shape[1]:  # (N, 4 + nc) exports
            out = out.T
        cls = out[4:]
        if self.person_class >= len(cls):
            raise ValueError(f"person_class {self.person_class} but the model has {len(cls)} classes")
        best = cls.argmax(axis=0)
        conf = cls.max(axis=0)
        sel = np.flatnonzero((conf > self.score_threshold) & (best == self.person_class))
        cx, cy, w, h = out[:4, sel]
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
        keep = nms(boxes, conf[sel], self.iou_threshold)[: self.MAX_DET]
        boxes, conf = boxes[keep].astype(np.float64), conf[sel][keep]
        gain = min(in_h / H, in_w / W)
        pad_x, pad_y = round((in_w - W * gain) / 2 - 0.1), round((in_h - H * gain) / 2 - 0.1)
        boxes[:, 0::2] = ((boxes[:, 0::2] - pad_x) / gain).clip(0, W)
        boxes[:, 1::2] = ((boxes[:, 1::2] - pad_y) / gain).clip(0, H)
        return Persons(boxes, conf)
