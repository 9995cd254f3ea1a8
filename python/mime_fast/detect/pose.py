"""BlazePose (MediaPipe's ``pose_detection.tflite`` and ``pose_landmark_full.tflite``, in the
mediapipe wheel) as the offline stack's person detector: it finds what movies show -- upper
bodies, seated people, close-ups -- where OpenCV's HOG finds only upright whole bodies of at least
64 x 128 px.

Two stages, as MediaPipe's pose graph:

1. **Detection** (``pose_detection_cpu``): the frame letterboxed into 224 x 224 (aspect kept, zero
   borders), RGB scaled to [-1, 1]; 2254 SSD anchors (strides 8, 16, 32, 32, 32, two fixed-size
   anchors a cell, offset 0.5); a box (the head) and four alignment points -- the hips' centre, a
   point on the circle holding the whole body, the shoulders' centre, a point on the circle
   holding the upper body -- decoded against the anchors (scale 224); scores the sigmoid of the
   logits clipped at +-100, kept from ``score_threshold`` (0.5); weighted non-maximum suppression
   at IoU 0.3; letterbox removed.
2. **Landmarks** (``pose_landmark_cpu``), per person: the square of side 1.25 x the whole-body
   circle's diameter, centred on the hips and turned so the body stands upright (the hips-to-
   circle-point direction up), warped to 256 x 256 (bilinear, zero borders), RGB in [0, 1]; 33
   landmarks (nose, eyes, ears, mouth, shoulders, elbows, wrists, hands, hips, knees, ankles,
   feet) with visibility and presence (sigmoids), and the pose's presence, mapped back.

Per person (:class:`PosePersons`): the **body box**, the box of the landmarks visible (visibility
and presence at least :data:`VISIBLE`) clipped to the frame -- the body as the picture shows it,
what MIME's body term measures (as a YOLO person box) --; the landmarks; the nose, by which the
selection gives each face its body (:func:`mime_fast.subject.selection.assign_bodies`).  A person
whose pose presence is under ``presence_threshold`` is dropped.  ``landmarks=False``: the
detection stage alone, the body box then the square around the whole-body circle, clipped.

Both models run in onnxruntime through :func:`mime_fast.detect.tflite_onnx.tflite_to_onnx`
(OpenCV cannot read the detector's sparse weights; the landmark model converted matches OpenCV's
own import of it to 3e-4 px).  The same CPU sessions serve ``device="cuda"``: the persons are
looked for once per clip, at the selection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .interface import Persons, _check_frame
from .weights import _ort_session, package_file

__all__ = ["HEAD_LANDMARKS", "VISIBLE", "BlazePoseDetector", "PersonDetectors", "PosePersons", "pose_anchors",
           "weighted_nms"]

_SIZE = 224


def pose_anchors(size: int = _SIZE, strides: tuple[int, ...] = (8, 16, 32, 32, 32)) -> np.ndarray:
    """``(N, 2)`` anchor centres (normalised) of MediaPipe's SSD anchor calculator with fixed-size
    anchors, one aspect ratio (1) and its interpolated scale: two anchors per cell of each stride,
    layers of one stride merged (2254 for the pose detector; the anchors' scales do not enter the
    decoding of fixed-size anchors)."""
    n = len(strides)
    out = []
    layer = 0
    while layer < n:
        last = layer
        per_cell = 0
        while last < n and strides[last] == strides[layer]:
            per_cell += 2
            last += 1
        fm = -(-size // strides[layer])
        ys, xs = np.meshgrid((np.arange(fm) + 0.5) / fm, (np.arange(fm) + 0.5) / fm, indexing="ij")
        cells = np.stack([xs.ravel(), ys.ravel()], 1)
        out.append(np.repeat(cells, per_cell, axis=0))
        layer = last
    return np.concatenate(out).astype(np.float32)


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, extra: np.ndarray, iou: float) -> list[tuple[int, np.ndarray]]:
    """MediaPipe's weighted non-maximum suppression: by decreasing score, each remaining box takes
    the boxes overlapping it above ``iou`` and is replaced by their score-weighted mean (of
    ``boxes`` and ``extra``, e.g. keypoints).  Returns ``(index of the best, merged row of
    [boxes | extra])`` per kept detection."""
    order = list(np.argsort(-scores, kind="stable"))
    rows = np.concatenate([boxes, extra], 1)
    kept = []
    while order:
        top = order[0]
        b = boxes[order]
        x0 = np.maximum(b[:, 0], boxes[top, 0])
        y0 = np.maximum(b[:, 1], boxes[top, 1])
        x1 = np.minimum(b[:, 2], boxes[top, 2])
        y1 = np.minimum(b[:, 3], boxes[top, 3])
        inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        union = area + area[0] - inter
        ov = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
        take = [order[k] for k in np.flatnonzero(ov > iou)] or [top]
        w = scores[take]
        kept.append((int(top), (rows[take] * w[:, None]).sum(0) / w.sum()))
        order = [i for k, i in enumerate(order) if ov[k] <= iou and i != top]
    return kept


#: A landmark counts as visible from this visibility and presence (sigmoids).
VISIBLE = 0.5
#: The 33 pose landmarks' indices of the head (nose, eyes, ears, mouth).
HEAD_LANDMARKS = tuple(range(11))
_LMK_SIZE = 256
_LMK_SCALE = 1.25


@dataclass(frozen=True)
class PosePersons(Persons):
    """:class:`~mime_fast.detect.interface.Persons` (the body boxes, the detection scores) with,
    per person, the detector's alignment points ``points (M, 4, 2)`` (hips' centre, whole-body
    circle point, shoulders' centre, upper-body circle point) and the landmarks ``landmarks (M, 33,
    3)`` (x, y in frame pixels, visibility x presence; all zero without the landmark stage)."""

    points: np.ndarray = field(default=None)  # type: ignore[assignment]
    landmarks: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        super().__post_init__()
        n = len(self.boxes)
        object.__setattr__(self, "points", np.zeros((n, 4, 2), np.float32) if self.points is None
                           else np.asarray(self.points, np.float32).reshape(n, 4, 2))
        object.__setattr__(self, "landmarks", np.zeros((n, 33, 3), np.float32) if self.landmarks is None
                           else np.asarray(self.landmarks, np.float32).reshape(n, 33, 3))

    @property
    def noses(self) -> np.ndarray:
        """``(M, 2)`` the nose of each person, NaN where it is not visible."""
        nose = self.landmarks[:, 0, :2].copy()
        nose[self.landmarks[:, 0, 2] < VISIBLE] = np.nan
        return nose


def _roi(points: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The landmark model's crop of one person: (centre, side, rotation in radians) from the
    detector's points (MediaPipe's alignment rect: the hips' centre, twice the hips-to-circle-point
    distance, turned so that direction points up; then scaled by 1.25)."""
    (x0, y0), (x1, y1) = points[0], points[1]
    side = 2.0 * float(np.hypot(x1 - x0, y1 - y0)) * _LMK_SCALE
    angle = np.pi / 2 - np.arctan2(-(y1 - y0), x1 - x0)
    angle = float(angle - 2 * np.pi * np.floor((angle + np.pi) / (2 * np.pi)))
    return np.array([x0, y0], np.float64), side, angle


def _crop_to_frame(centre: np.ndarray, side: float, angle: float) -> np.ndarray:
    """The 2 x 3 affine map from crop pixels (0 .. 256) to frame pixels."""
    c, s = np.cos(angle), np.sin(angle)
    k = side / _LMK_SIZE
    rot = np.array([[c, -s], [s, c]]) * k
    return np.concatenate([rot, (centre - rot @ np.array([_LMK_SIZE / 2, _LMK_SIZE / 2]))[:, None]], 1)


class BlazePoseDetector:
    """BlazePose (see the module's docstring): ``detect(frame)`` -> :class:`PosePersons`, at most
    ``max_persons`` (the best scores) through the landmark stage."""

    def __init__(self, model_path: str | Path | None = None, landmark_path: str | Path | None = None, *,
                 landmarks: bool = True, score_threshold: float = 0.5, iou_threshold: float = 0.3,
                 presence_threshold: float = 0.5, max_persons: int = 8, threads: int | None = None):
        from .tflite_onnx import tflite_to_onnx

        if model_path is None:
            model_path = package_file("mediapipe", "mediapipe/modules/pose_detection/pose_detection.tflite")
        self._sess = _ort_session(tflite_to_onnx(model_path).SerializeToString(), threads)
        self._input = self._sess.get_inputs()[0].name
        shapes = {o.name: o.shape for o in self._sess.get_outputs()}
        self._reg = next(n for n, sh in shapes.items() if sh[-1] == 12)
        self._cls = next(n for n, sh in shapes.items() if sh[-1] == 1)
        self._anchors = pose_anchors()
        self._lmk = None
        if landmarks:
            if landmark_path is None:
                landmark_path = package_file("mediapipe", "mediapipe/modules/pose_landmark/pose_landmark_full.tflite")
            self._lmk = _ort_session(tflite_to_onnx(landmark_path).SerializeToString(), threads)
            self._lmk_input = self._lmk.get_inputs()[0].name
            shapes = {o.name: o.shape for o in self._lmk.get_outputs()}
            self._lmk_points = next(n for n, sh in shapes.items() if sh == [1, 195])
            self._lmk_presence = next(n for n, sh in shapes.items() if sh == [1, 1])
        self.score_threshold, self.iou_threshold = float(score_threshold), float(iou_threshold)
        self.presence_threshold, self.max_persons = float(presence_threshold), int(max_persons)

    def detect(self, frame: np.ndarray) -> PosePersons:
        frame = _check_frame(frame)
        H, W = frame.shape[:2]
        scores, points = self._detect(frame)
        order = np.argsort(-scores, kind="stable")[: self.max_persons]
        scores, points = scores[order], points[order]
        if self._lmk is None or not len(scores):
            radius = np.linalg.norm(points[:, 1] - points[:, 0], axis=1)
            body = np.concatenate([points[:, 0] - radius[:, None], points[:, 0] + radius[:, None]], 1)
            return PosePersons(np.clip(body, 0, [W, H, W, H]).reshape(-1, 4), scores, points=points)
        boxes, keep, marks = [], [], []
        for k in range(len(scores)):
            presence, lmk = self._landmarks(frame, points[k])
            if presence < self.presence_threshold:
                continue
            seen = lmk[lmk[:, 2] >= VISIBLE, :2]
            if not len(seen):
                continue
            lo, hi = seen.min(0), seen.max(0)
            boxes.append(np.clip(np.concatenate([lo, hi]), 0, [W, H, W, H]))
            keep.append(k)
            marks.append(lmk)
        if not keep:
            return PosePersons(np.zeros((0, 4), np.float32), np.zeros(0, np.float32))
        return PosePersons(np.array(boxes, np.float32), scores[keep], points=points[keep], landmarks=np.array(marks))

    def _detect(self, frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(scores (M,), alignment points (M, 4, 2) in frame pixels) of the detection stage."""
        import cv2

        H, W = frame.shape[:2]
        scale = _SIZE / max(H, W)
        w, h = max(1, round(W * scale)), max(1, round(H * scale))
        img = cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        px, py = (_SIZE - w) // 2, (_SIZE - h) // 2
        canvas = np.zeros((_SIZE, _SIZE, 3), np.float32)
        canvas[py:py + h, px:px + w] = img.astype(np.float32) / np.float32(127.5) - np.float32(1.0)
        reg, logit = self._sess.run([self._reg, self._cls], {self._input: canvas[None]})
        reg, logit = reg[0], logit[0, :, 0]
        score = 1.0 / (1.0 + np.exp(-np.clip(logit.astype(np.float64), -100.0, 100.0)))
        sel = np.flatnonzero(score >= self.score_threshold)
        if not len(sel):
            return np.zeros(0, np.float32), np.zeros((0, 4, 2), np.float32)
        a = self._anchors[sel]
        r = reg[sel] / _SIZE
        cx, cy = r[:, 0] + a[:, 0], r[:, 1] + a[:, 1]
        heads = np.stack([cx - r[:, 2] / 2, cy - r[:, 3] / 2, cx + r[:, 2] / 2, cy + r[:, 3] / 2], 1)
        pts = r[:, 4:12].reshape(-1, 4, 2) + a[:, None, :]
        kept = weighted_nms(heads, score[sel], pts.reshape(-1, 8), self.iou_threshold)
        off = np.array([px, py], np.float64) / _SIZE
        points = np.array([(row[4:].reshape(4, 2) - off) * (_SIZE / scale) for _, row in kept]).reshape(-1, 4, 2)
        return np.array([score[sel][i] for i, _ in kept], np.float32), points.astype(np.float32)

    def _landmarks(self, frame: np.ndarray, points: np.ndarray) -> tuple[float, np.ndarray]:
        """(pose presence, landmarks (33, 3): x, y in frame pixels, visibility x presence) of one
        person from its detector points."""
        import cv2

        centre, side, angle = _roi(points.astype(np.float64))
        to_frame = _crop_to_frame(centre, side, angle)
        crop = cv2.warpAffine(frame, cv2.invertAffineTransform(to_frame), (_LMK_SIZE, _LMK_SIZE),
                              flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
        x = (crop.astype(np.float32) / np.float32(255.0))[None]
        raw, presence = self._lmk.run([self._lmk_points, self._lmk_presence], {self._lmk_input: x})
        raw = raw.reshape(39, 5)[:33].astype(np.float64)
        xy = raw[:, :2] @ to_frame[:, :2].T + to_frame[:, 2]
        vis = 1.0 / (1.0 + np.exp(-np.clip(raw[:, 3], -60, 60))) * 1.0 / (1.0 + np.exp(-np.clip(raw[:, 4], -60, 60)))
        return float(np.ravel(presence)[0]), np.concatenate([xy, vis[:, None]], 1).astype(np.float32)


class PersonDetectors:
    """Several person detectors as one (the offline stack's: BlazePose, then HOG for the upright
    whole bodies BlazePose's single-person detector leaves in a crowd): ``detect(frame)`` -> the
    persons of all, in order, as :class:`PosePersons` (the landmarks of those that have none all
    zero, so their nose is unknown: the selection gives their boxes to faces by geometry)."""

    def __init__(self, *detectors):
        self.detectors = detectors

    def detect(self, frame: np.ndarray) -> PosePersons:
        found = [d.detect(frame) for d in self.detectors]
        n = sum(len(p) for p in found)

        def part(p: Persons, name: str, shape: tuple[int, ...]) -> np.ndarray:
            v = getattr(p, name, None)
            return np.zeros((len(p), *shape), np.float32) if v is None else np.asarray(v, np.float32)

        if not n:
            return PosePersons(np.zeros((0, 4), np.float32), np.zeros(0, np.float32))
        return PosePersons(np.concatenate([p.boxes for p in found]), np.concatenate([p.scores for p in found]),
                           points=np.concatenate([part(p, "points", (4, 2)) for p in found]),
                           landmarks=np.concatenate([part(p, "landmarks", (33, 3)) for p in found]))
