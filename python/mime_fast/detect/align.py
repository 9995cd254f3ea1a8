"""Face crops: the 2x3 affine transforms from a face's detector box and 5 keypoints to a model's
input -- the upright square around the box of the face mesh (:func:`_face_roi_transform`, as
MediaPipe's detection-to-ROI step) and the ArcFace chip (:func:`arcface_transform`, insightface's
``norm_crop``) that SFace and ArcFace embed.  The CPU models warp with OpenCV, the torch ports with
the core's operator (:mod:`mime_fast.detect.torch_ops`); both take these matrices.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ARCFACE_DST", "arcface_transform"]

#: insightface's ``arcface_dst``: where the 5 keypoints go in the 112 x 112 ArcFace chip.
ARCFACE_DST = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], np.float32)


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


def _umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """3x3 least-squares similarity transform src -> dst (Umeyama 1991), scikit-image's
    ``SimilarityTransform.estimate`` (which insightface's ``estimate_norm`` calls) step by step, in
    the inputs' own precision (float32 keypoints: float32 statistics, as there)."""
    src, dst = np.asarray(src), np.asarray(dst)
    num, dim = src.shape
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_d, dst_d = src - src_mean, dst - dst_mean
    A = dst_d.T @ src_d / num
    d = np.ones((dim,), np.float64)
    if np.linalg.det(A) < 0:
        d[dim - 1] = -1
    T = np.eye(dim + 1, dtype=np.float64)
    U, S, V = np.linalg.svd(A)
    rank = np.count_nonzero(S > S.max() * np.max(A.shape) * np.finfo(float).eps)
    if rank == 0:
        return np.nan * T
    if rank == dim - 1 and np.linalg.det(U) * np.linalg.det(V) > 0:
        T[:dim, :dim] = U @ V
    elif rank == dim - 1:
        T[:dim, :dim] = U @ np.diag(np.r_[d[:-1], -1.0]) @ V
    else:
        T[:dim, :dim] = U @ np.diag(d) @ V
    scale = 1.0 / src_d.var(axis=0).sum() * (S @ d)
    T[:dim, dim] = dst_mean - scale * (T[:dim, :dim] @ src_mean.T)
    T[:dim, :dim] *= scale
    return T


def arcface_transform(keypoints: np.ndarray, size: int = 112) -> np.ndarray:
    """2x3 affine frame -> ``size x size`` ArcFace chip: the similarity transform that best maps the 5
    keypoints onto :data:`ARCFACE_DST` (insightface ``face_align.estimate_norm``; sizes that are
    multiples of 128 get the template scaled and shifted 8 px right, as there)."""
    if size % 112 == 0:
        ratio, dx = size / 112.0, 0.0
    elif size % 128 == 0:
        ratio, dx = size / 128.0, 8.0 * size / 128.0
    else:
        raise ValueError(f"ArcFace chip size must be a multiple of 112 or 128, got {size}")
    dst = ARCFACE_DST * np.float32(ratio)
    dst[:, 0] += dx
    return _umeyama(np.asarray(keypoints, np.float32).reshape(5, 2), dst)[:2]
