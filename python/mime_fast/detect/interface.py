"""The interface every face / person model implements: the result types (:class:`Faces`,
:class:`Landmarks`, :class:`Persons`), the protocols, and what every model's pre- and
post-processing shares (the frame check, the area downscale, greedy NMS).  Both stacks implement
it (:mod:`mime_fast.detect.models`, the offline stack; :mod:`mime_fast.detect.paper`, the paper
stack), and so do their torch ports (:mod:`mime_fast.detect.torch_models`).

Interface (all frames are RGB24 ``H x W x 3`` uint8, as everywhere in mime_fast; all coordinates are
float32 pixels of that frame, ``x`` right, ``y`` down):

* :class:`FaceDetector` ``.detect(frame) -> Faces``: ``boxes (N, 4)`` as ``(x0, y0, x1, y1)``,
  ``scores (N,)`` in [0, 1], ``keypoints (N, 5, 2)`` in the InsightFace / RetinaFace order: eye on the
  image left, eye on the image right, nose tip, mouth corner on the image left, on the image right.
  Sorted by decreasing score.
* :class:`LandmarkModel` ``.landmarks(frame, faces) -> Landmarks``: ``points (N, P, 2)`` dense points
  per face and ``quality (N,)`` in [0, 1] (the model's own per-face confidence).
* :class:`FaceEmbedder` ``.embed(frame, faces) -> (N, D) float32``, each row L2-normalised (unit
  length), so that the cosine similarity of two faces is a dot product.
* :class:`PersonDetector` ``.detect(frame) -> Persons``: ``boxes (M, 4)`` ``(x0, y0, x1, y1)`` and
  ``scores (M,)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from .. import ops

__all__ = [
    "FaceDetector",
    "FaceEmbedder",
    "Faces",
    "LandmarkModel",
    "Landmarks",
    "PersonDetector",
    "Persons",
    "nms",
]


def _downscale(frame: np.ndarray, max_size: int | None) -> tuple[np.ndarray, float]:
    """``frame`` shrunk (area averaging) so that its longer side is at most ``max_size``, and the
    scale applied (1.0 when it already fits or ``max_size`` is falsy).

    Area averaging at a non-integer ratio is slow (OpenCV's general INTER_AREA path: 3.5 ms for
    720p to 384 px on one core), so the frame is first halved by exact 2x2 means (0.15 ms) as long
    as the half is still at least the target size, then area-resized the rest of the way (a last
    odd row / column is dropped before a halving: under half a target pixel).  Every step gives the
    bytes of OpenCV 4.x's INTER_AREA whatever OpenCV is installed: the core's
    :func:`mime_fast.ops.area_resize` (the same kernels on the GPU), or, for the halvings, the
    installed OpenCV where it gives those bytes (:func:`_area`)."""
    H, W = frame.shape[:2]
    if not max_size or max(H, W) <= max_size:
        return frame, 1.0
    if not isinstance(frame, np.ndarray) and hasattr(frame, "downscale"):
        return frame.downscale(max_size)  # a frame kept on a device (torch_ops.DeviceFrame): shrunk there
    s = max_size / max(H, W)
    tw, th = max(1, round(W * s)), max(1, round(H * s))
    img = frame
    while img.shape[1] // 2 >= tw and img.shape[0] // 2 >= th:
        h2, w2 = img.shape[0] // 2, img.shape[1] // 2
        img = _area(img[: 2 * h2, : 2 * w2], w2, h2)
    if img.shape[:2] != (th, tw):
        img = _area(img, tw, th)
    return img, s


def _area(img: np.ndarray, w: int, h: int) -> np.ndarray:
    """OpenCV 4.x's ``cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)``: by the core where
    it reproduces it (:func:`mime_fast.ops.area_supported`: every shrink the detector and the shot
    detector ask for), else by the OpenCV installed.  The exact 2:1 halvings go to the installed
    OpenCV where it halves exactly as the core (:func:`_opencv_halves_as_core`: the same bytes, its
    SIMD body about 1.5x the core's on a CPU)."""
    import cv2

    img = np.ascontiguousarray(img)
    H, W = img.shape[:2]
    if not ops.area_supported(W, H, w, h) or (2 * w == W and 2 * h == H and _opencv_halves_as_core()):
        return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    return ops.area_resize(img, w, h)


@functools.cache
def _opencv_halves_as_core() -> bool:
    """Whether the installed OpenCV's 2:1 INTER_AREA gives the core's bytes, checked once on a
    fixed image of 1 to 4 channels (OpenCV 4.x and PyPI's 5.0.0 do; builds differ, and the GPU
    machine's OpenCV 5 once shrank otherwise)."""
    import cv2

    rng = np.random.default_rng(2026)
    for c in (1, 2, 3, 4):
        img = rng.integers(0, 256, (38, 54, c), dtype=np.uint8)
        img[::3] = img[::3] // 64 * 64  # rounding ties
        ref = cv2.resize(img, (27, 19), interpolation=cv2.INTER_AREA).reshape(19, 27, c)
        if not np.array_equal(ref, ops.area_resize(img, 27, 19)):
            return False
    return True


def _f32(a, shape_tail: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    return a.reshape((-1, *shape_tail)) if a.size or shape_tail else a.reshape(0, *shape_tail)


@dataclass(frozen=True)
class Faces:
    """Detected faces: ``boxes (N, 4)`` x0 y0 x1 y1, ``scores (N,)``, ``keypoints (N, 5, 2)``."""

    boxes: np.ndarray
    scores: np.ndarray
    keypoints: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "boxes", _f32(self.boxes, (4,)))
        object.__setattr__(self, "scores", _f32(self.scores, ()).reshape(-1))
        object.__setattr__(self, "keypoints", _f32(self.keypoints, (5, 2)))
        n = len(self.boxes)
        if len(self.scores) != n or len(self.keypoints) != n:
            raise ValueError(f"inconsistent face arrays: {self.boxes.shape}, {self.scores.shape}, {self.keypoints.shape}")

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, idx) -> Faces:
        idx = np.atleast_1d(np.arange(len(self))[idx])
        return Faces(self.boxes[idx], self.scores[idx], self.keypoints[idx])


@dataclass(frozen=True)
class Landmarks:
    """Dense landmarks: ``points (N, P, 2)`` frame pixels, ``quality (N,)`` in [0, 1]."""

    points: np.ndarray
    quality: np.ndarray

    def __len__(self) -> int:
        return len(self.points)


@dataclass(frozen=True)
class Persons:
    """Person boxes ``(M, 4)`` x0 y0 x1 y1 and ``scores (M,)``."""

    boxes: np.ndarray
    scores: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        b = _f32(self.boxes, (4,))
        s = np.ones(len(b), np.float32) if self.scores is None else _f32(self.scores, ()).reshape(-1)
        object.__setattr__(self, "boxes", b)
        object.__setattr__(self, "scores", s)

    def __len__(self) -> int:
        return len(self.boxes)


@runtime_checkable
class FaceDetector(Protocol):
    def detect(self, frame: np.ndarray) -> Faces: ...


@runtime_checkable
class LandmarkModel(Protocol):
    num_points: int

    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks: ...


@runtime_checkable
class FaceEmbedder(Protocol):
    dim: int

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray: ...


@runtime_checkable
class PersonDetector(Protocol):
    def detect(self, frame: np.ndarray) -> Persons: ...


def _check_frame(frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"expected an RGB uint8 H x W x 3 frame, got {frame.dtype} {frame.shape}")
    return np.ascontiguousarray(frame)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, *, plus_one: bool = False) -> np.ndarray:
    """Greedy non-maximum suppression.  Returns the indices of the kept boxes by decreasing score
    (ties: lower index first).  A box is dropped when its IoU with a kept, higher-scoring box exceeds
    ``iou_threshold`` (as ``cv2.dnn.NMSBoxes``, ``torchvision.ops.nms`` and insightface's SCRFD).
    ``boxes (N, 4)`` x0 y0 x1 y1, computed in their own float dtype; ``plus_one``: pixel-inclusive
    widths ``x1 - x0 + 1`` (insightface's SCRFD)."""
    b = np.asarray(boxes)
    b = (b if np.issubdtype(b.dtype, np.floating) else b.astype(np.float64)).reshape(-1, 4)
    s = np.asarray(scores).reshape(-1)
    one = b.dtype.type(1 if plus_one else 0)
    x0, y0, x1, y1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    areas = (x1 - x0 + one) * (y1 - y0 + one)
    order = np.argsort(-s, kind="stable")
    keep = []
    with np.errstate(invalid="ignore", divide="ignore"):
        while order.size:
            i, rest = order[0], order[1:]
            keep.append(i)
            w = np.maximum(0, np.minimum(x1[i], x1[rest]) - np.maximum(x0[i], x0[rest]) + one)
            h = np.maximum(0, np.minimum(y1[i], y1[rest]) - np.maximum(y0[i], y0[rest]) + one)
            inter = w * h
            iou = inter / (areas[i] + areas[rest] - inter)
            order = rest[~(iou > iou_threshold)]
    return np.asarray(keep, np.int64)
