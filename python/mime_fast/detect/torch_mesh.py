"""The MediaPipe face mesh on PyTorch (:class:`TorchFaceMesh`): the offline stack's mesh in
:func:`mime_fast.detect.torch_models.load_torch_stack` (which re-exports it), and the backend of
:class:`mime_fast.detect.models.MediaPipeFaceMesh` on OpenCV 5, whose TFLite importer does not run the
mesh.  A module of its own so that the CPU models reach it without importing the torch stack, which
imports them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .align import _face_roi_transform
from .cuda_graphs import graphed
from .interface import Faces, Landmarks
from .torch_graphs import TFLiteModule
from .torch_ops import _as_frames, _crops, _cv_invert, _device, to_host
from .weights import package_file

__all__ = ["TorchFaceMesh"]


class TorchFaceMesh:
    """:class:`~mime_fast.detect.models.MediaPipeFaceMesh` on torch: same ``.tflite`` file, same
    ROI (``roi_scale`` x the box, rotated upright by the eyes, 192 x 192, the crop equal to
    OpenCV's warpAffine, see :func:`~mime_fast.detect.torch_ops._crops`), RGB / 255, points mapped
    back with the inverse affine, ``quality`` = sigmoid of the face-presence logit.  ``landmarks_batch`` runs one
    forward for all faces of all frames of the call.  ``graphs``: replay the forward from CUDA graphs
    (:mod:`mime_fast.detect.cuda_graphs`; default: on CUDA unless ``MIME_FAST_CUDA_GRAPHS=0``), as
    :class:`~mime_fast.detect.torch_models.TorchRetinaFace`'s."""

    num_points = 468
    _SIZE = 192

    def __init__(self, tflite_path: str | Path | None = None, *, device="cpu", roi_scale: float = 1.5,
                 graphs: bool | None = None):
        self.device = _device(device)
        if tflite_path is None:
            tflite_path = package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite")
        self.net = TFLiteModule(tflite_path).to(self.device).eval()
        with torch.inference_mode():  # which output is which: by size (1404 mesh values, 1 logit)
            sizes = [int(t[0].numel()) for t in self.net(torch.zeros(1, 3, self._SIZE, self._SIZE, device=self.device))]
        self._mesh, self._flag = sizes.index(self.num_points * 3), sizes.index(1)
        self.roi_scale = float(roi_scale)
        self.net = graphed(self.net, self.device, name="FaceMesh", enabled=graphs)

    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks:
        return self.landmarks_batch([frame], [faces])[0]

    @torch.inference_mode()
    def landmarks_batch(self, frames, faces_list) -> list[Landmarks]:
        frames = _as_frames(frames, self.device)
        Ms = [[_face_roi_transform(f.boxes[i], f.keypoints[i], self._SIZE, self.roi_scale) for i in range(len(f))]
              for f in faces_list]
        total = sum(len(m) for m in Ms)
        res = []
        if total == 0:
            return [Landmarks(np.zeros((0, self.num_points, 2), np.float32), np.zeros(0, np.float32)) for _ in Ms]
        crops = _crops(frames, Ms, self._SIZE, self.device) * (1.0 / 255.0)
        outs = self.net(crops)
        mesh, logit = to_host(outs[self._mesh].reshape(total, self.num_points, 3)[:, :, :2],
                              outs[self._flag].reshape(total))
        mesh, logit = mesh.astype(np.float64), logit.astype(np.float64)
        q_all = 1.0 / (1.0 + np.exp(-np.clip(logit, -60.0, 60.0)))
        k = 0
        for mats in Ms:
            pts = np.zeros((len(mats), self.num_points, 2), np.float32)
            for j, M in enumerate(mats):
                Minv = _cv_invert(M)
                pts[j] = (mesh[k + j] @ Minv[:, :2].T + Minv[:, 2]).astype(np.float32)
            res.append(Landmarks(pts, q_all[k:k + len(mats)].astype(np.float32)))
            k += len(mats)
        return res
