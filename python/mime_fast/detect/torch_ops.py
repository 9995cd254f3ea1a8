"""The torch models' device, precision and pre-processing, shared by the offline stack on PyTorch
(:mod:`mime_fast.detect.torch_models`) and the HOG people detector's port
(:mod:`mime_fast.detect.hog`): which device (:func:`torch_cuda_available`), float32 without TF32
(:func:`strict_fp32`), frames batched by size, and the crops and downscale of the CPU stack, bit
for bit.

Pre-processing runs on the device:

* Face / chip crops: ``cv2.warpAffine(..., INTER_LINEAR, BORDER_CONSTANT 0)`` of OpenCV 4.x bit for
  bit (OpenCV's own inversion of the matrix, source coordinates rounded to 1/32 px in its fixed
  point, ``AB_BITS`` 10, ``INTER_BITS`` 5, integer bilinear weights and rounding) by the core's
  operator: :func:`mime_fast.ops.warp_affine` on the host for numpy frames (only the small crops are
  uploaded), its CUDA kernel for frames already in a CUDA tensor (CUDA builds of the core).
  :func:`warp_affine_u8`, the same arithmetic in torch ops, is the fallback elsewhere (a CUDA tensor
  with a CPU-only core, other torch devices).  The one possible difference from OpenCV: a
  coordinate exactly on a 1/2048 px rounding tie could round the other way under a different
  float64 evaluation order; not seen in the tests (the crops are equal).
* Downscale (``max_size``): the CPU path's 2x2 halvings (``(a+b+c+d+2) >> 2`` as OpenCV's fast
  INTER_AREA) then exact area resampling as two small matrix products (OpenCV's INTER_AREA weights,
  float32 sums, rounded half to even to uint8); OpenCV accumulates in another order, so a rare
  pixel can differ by one level.
* BGR mean subtraction, NMS (``torchvision.ops.batched_nms`` when torchvision imports, else
  :func:`~mime_fast.detect.interface.nms` on the host).

Precision: float32 only; on CUDA, TF32 is switched off for convolutions and matmuls
(:func:`strict_fp32`, a process-wide torch setting) so that results do not depend on the GPU
generation.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .. import _core, ops
from .interface import _check_frame

__all__ = ["DeviceFrame", "area_downscale", "strict_fp32", "to_host", "torch_cuda_available", "warp_affine_u8"]


def torch_cuda_available() -> bool:
    """True when torch can run on a CUDA device here."""
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001
        return False


def strict_fp32() -> None:
    """IEEE float32 for CUDA convolutions and matmuls (no TF32), through the torch >= 2.9 API when
    present, else the older ``allow_tf32`` flags; and cuDNN's convolutions chosen among its
    deterministic algorithms, by its heuristics rather than by timing them (``benchmark`` off: a
    timed choice can differ run to run with the machine's load), so that a clip's detections are
    the same run after run.  Process-wide."""
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
        return
    except (AttributeError, RuntimeError):
        pass
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except (AttributeError, RuntimeError):  # pragma: no cover - no known torch lacks both
        pass


def _device(device) -> torch.device:
    d = torch.device(device)
    if d.type == "cuda":
        if not torch_cuda_available():
            raise RuntimeError("device='cuda' requested but torch sees no CUDA device")
        strict_fp32()
    return d


# --------------------------------------------------------------------------------------------------
# Device pre-processing


def _cv_invert(M: np.ndarray) -> np.ndarray:
    """``cv2.invertAffineTransform`` as warpAffine does it internally (float64)."""
    m = [float(v) for v in np.asarray(M, np.float64).reshape(6)]
    D = m[0] * m[4] - m[1] * m[3]
    D = 1.0 / D if D != 0 else 0.0
    A11, A22 = m[4] * D, m[0] * D
    m[0], m[1], m[3], m[4] = A11, -m[1] * D, -m[3] * D, A22
    b1 = -m[0] * m[2] - m[1] * m[5]
    b2 = -m[3] * m[2] - m[4] * m[5]
    m[2], m[5] = b1, b2
    return np.array(m, np.float64).reshape(2, 3)


def warp_affine_u8(buf: torch.Tensor, face_base, face_hw, face_org, Ms, size: int) -> torch.Tensor:
    """``cv2.warpAffine(frame, M, (size, size), flags=INTER_LINEAR, borderMode=BORDER_CONSTANT,
    borderValue=0)`` for many crops at once, bit-exact on uint8 RGB frames.

    ``buf``: flat uint8 tensor holding the (patches of) frames, each ``H x W x 3`` row-major, plus
    three trailing zeros; per crop: ``face_base`` its patch's start in ``buf``,
    ``face_hw`` ``(h, w)`` of the patch, ``face_org`` ``(x, y)`` of the patch's top-left pixel in the
    frame, ``Ms`` the 2x3 frame -> crop matrix.  Returns ``(n, 3, size, size)`` float32 (values
    0..255 integers)."""
    dev = buf.device
    n = len(Ms)
    if n == 0:
        return torch.zeros(0, 3, size, size, device=dev)
    inv = torch.tensor(np.stack([_cv_invert(M) for M in Ms]), dtype=torch.float64, device=dev)
    r = torch.arange(size, dtype=torch.float64, device=dev)
    # OpenCV: X = (round(M00 x 1024) + round((M01 y + M02) 1024) + 16) >> 5, in 1/32 px
    adx = torch.round(inv[:, 0, 0, None] * r * 1024).long()
    bdx = torch.round(inv[:, 1, 0, None] * r * 1024).long()
    X0 = torch.round((inv[:, 0, 1, None] * r + inv[:, 0, 2, None]) * 1024).long() + 16
    Y0 = torch.round((inv[:, 1, 1, None] * r + inv[:, 1, 2, None]) * 1024).long() + 16
    X = torch.div(X0[:, :, None] + adx[:, None, :], 32, rounding_mode="floor")  # (n, y, x)
    Y = torch.div(Y0[:, :, None] + bdx[:, None, :], 32, rounding_mode="floor")
    org = torch.as_tensor(np.asarray(face_org, np.int64).reshape(n, 2), device=dev)
    hw = torch.as_tensor(np.asarray(face_hw, np.int64).reshape(n, 2), device=dev)
    base = torch.as_tensor(np.asarray(face_base, np.int64).reshape(n), device=dev)
    ix = torch.div(X, 32, rounding_mode="floor") - org[:, 0, None, None]
    iy = torch.div(Y, 32, rounding_mode="floor") - org[:, 1, None, None]
    fx, fy = (X % 32).int(), (Y % 32).int()
    h, w = hw[:, 0, None, None], hw[:, 1, None, None]
    acc = torch.zeros(n, size, size, 3, dtype=torch.int32, device=dev)
    sentinel = buf.numel() - 3
    for dy, dx, wt in ((0, 0, (32 - fx) * (32 - fy)), (0, 1, fx * (32 - fy)), (1, 0, (32 - fx) * fy), (1, 1, fx * fy)):
        xx, yy = ix + dx, iy + dy
        ok = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
        idx = torch.where(ok, base[:, None, None] + (yy * w + xx) * 3, sentinel)
        px = buf[idx[..., None] + torch.arange(3, device=dev)].int()
        acc += torch.where(ok[..., None], px, 0) * wt[..., None]
    out = (acc + 512) >> 10  # OpenCV: (sum * 32 + 2^14) >> 15 with weights in 1/32768
    return out.permute(0, 3, 1, 2).float()


class DeviceFrame:
    """A decoded RGB frame left where it is: ``tensor``, an ``(H, W, 3)`` uint8 torch tensor (on the
    GPU for NVDEC's frames, :meth:`of_nv12`).  The torch models read it there (the detector's input
    shrunk on the device, :meth:`downscale`; the face crops cut there); host code that needs pixels
    (a body's colour histogram, the shot thumbnail, the head's flow) indexes it like the numpy frame
    and gets a numpy copy of that region only (positive steps); ``numpy.asarray`` gives the whole
    frame (the CPU models' way in).  ``shape``, ``ndim``, ``dtype`` are the numpy frame's."""

    ndim = 3
    dtype = np.dtype(np.uint8)

    def __init__(self, tensor: torch.Tensor):
        if tensor.dtype != torch.uint8 or tensor.dim() != 3 or tensor.shape[2] != 3:
            raise ValueError(f"expected a uint8 (H, W, 3) tensor, got {tensor.dtype} {tuple(tensor.shape)}")
        self.tensor = tensor
        self.shape = tuple(int(v) for v in tensor.shape)
        self._host: np.ndarray | None = None

    @classmethod
    def of_nv12(cls, frame, matrix: str = "bt601") -> "DeviceFrame":
        """The RGB of an NV12 frame in device memory (:class:`mime_fast.media.Nv12Frame`), made
        on the device by the core's kernels (:func:`mime_fast.ops.nv12_to_rgb_device`: the samples
        the host's ``frame_rgb`` gives on the same planes)."""
        out = torch.empty((frame.height, frame.width, 3), dtype=torch.uint8, device=frame.tensor.device)
        with torch.cuda.device(out.device):
            ops.nv12_to_rgb_device(frame, out.data_ptr(), out.stride(0), matrix=matrix,
                                   stream=torch.cuda.current_stream().cuda_stream)
        return cls(out)

    def __getitem__(self, key) -> np.ndarray:
        if self._host is not None:
            return self._host[key]
        return self.tensor[key].cpu().numpy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._host is None:
            self._host = self.tensor.cpu().numpy()
        return self._host if dtype is None else self._host.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def turned(self) -> "DeviceFrame":
        """The frame turned half a turn, on its device (another input of its shape: the model
        broker's batch-invariance probe)."""
        return DeviceFrame(self.tensor.flip(0, 1).contiguous())

    def thumbnail(self, step: int, width: int, height: int) -> np.ndarray:
        """``interface._area(frame[::step, ::step], width, height)`` (the shot detector's thumbnail),
        shrunk on the device where the core's area operator takes the size (the same bytes), and
        only the thumbnail copied to the host."""
        sub = self.tensor[::step, ::step]
        x = _core_area(sub.permute(2, 0, 1)[None].float(), height, width)
        if x is None:
            from .interface import _area

            return _area(sub.cpu().numpy(), width, height)
        return np.ascontiguousarray(x[0].permute(1, 2, 0).to(torch.uint8).cpu().numpy())

    def green_sample(self, step: int) -> torch.Tensor:
        """``frame[::step, ::step, 1]`` (the shot detector's picture of the frame for re-framed
        returns), copied on the device: read to the host only at a cut."""
        return self.tensor[::step, ::step, 1].clone()

    def downscale(self, max_size: int | None) -> tuple["DeviceFrame", float]:
        """:func:`mime_fast.detect.interface._downscale` on the device (:func:`area_downscale`, the
        same bytes): the frame shrunk so its longer side is at most ``max_size``, and the scale."""
        x, s = area_downscale(self.tensor.permute(2, 0, 1)[None].float(), max_size)
        if s == 1.0:
            return self, s
        return DeviceFrame(x[0].permute(1, 2, 0).round().to(torch.uint8).contiguous()), s


def to_host(*tensors: torch.Tensor) -> list[np.ndarray]:
    """``tensors`` as numpy arrays (same dtypes, shapes and bits) through one device-to-host copy:
    each ``.cpu()`` of a CUDA tensor is a copy and a wait for the device, so a call's results come
    back together.  CPU tensors are their own memory (no copy)."""
    if all(t.device.type == "cpu" for t in tensors):
        return [t.numpy() for t in tensors]
    return _one_copy(tensors)


def _one_copy(tensors) -> list[np.ndarray]:
    """:func:`to_host`'s copy: the tensors' bytes concatenated on their device, copied once."""
    parts, spans, off = [], [], 0
    for t in tensors:
        b = t.contiguous().reshape(-1).view(torch.uint8)
        pad = -b.numel() % 8  # every array starts 8-byte aligned in the host buffer
        parts.append(b)
        if pad:
            parts.append(b.new_zeros(pad))
        spans.append((off, b.numel()))
        off += b.numel() + pad
    host = torch.cat(parts).cpu().numpy()
    dt = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64, torch.int32: np.int32,
          torch.uint8: np.uint8, torch.bool: np.bool_, torch.float16: np.float16}
    return [host[o:o + n].view(dt[t.dtype]).reshape(tuple(t.shape)) for t, (o, n) in zip(tensors, spans)]


def _as_frames(frames, device) -> list | torch.Tensor:
    """numpy frames stay a list (host); a uint8 ``(N, H, W, 3)`` tensor goes to ``device``; in a
    list, each :class:`DeviceFrame` becomes its tensor on ``device`` (not stacked: the crops are cut
    from each where it is; :func:`_size_batches` stacks the detector's small inputs) and numpy
    frames beside them stay on the host.  A list may mix the two (a broker's batch of an NVDEC clip
    and a PyAV clip): each frame is read where it is, no device frame is copied to the host."""
    if isinstance(frames, torch.Tensor):
        if frames.dtype != torch.uint8 or frames.dim() != 4 or frames.shape[3] != 3:
            raise ValueError(f"expected a uint8 (N, H, W, 3) tensor, got {frames.dtype} {tuple(frames.shape)}")
        return frames.to(device)
    return [f.tensor.to(device) if isinstance(f, DeviceFrame) else _check_frame(f) for f in frames]


def _size_batches(frames, device, max_size: int | None, cache: dict):
    """``frames`` (:func:`_as_frames`) in batches of one size: ``(H, W, indices, x, scale)``, ``x``
    the batch as float NCHW RGB on ``device`` downscaled by :func:`area_downscale` to ``max_size``."""
    groups: dict = {}
    for i in range(len(frames)):
        groups.setdefault(tuple(frames[i].shape[:2]), []).append(i)
    for (H, W), idx in groups.items():
        if isinstance(frames, torch.Tensor):
            x = frames[idx]
        elif all(isinstance(frames[i], torch.Tensor) for i in idx):
            x = torch.stack([frames[i] for i in idx])
        else:  # host frames (some beside device ones): each distinct one uploaded once (a broker
            # pads a call with copies of its first)
            first: dict[int, int] = {}
            slot = [first.setdefault(id(frames[i]), len(first)) for i in idx]
            distinct = [frames[idx[slot.index(k)]] for k in range(len(first))]
            if all(isinstance(f, np.ndarray) for f in distinct):
                x = torch.from_numpy(np.stack(distinct)).to(device)
            else:
                x = torch.stack([f.to(device) if isinstance(f, torch.Tensor) else torch.from_numpy(f).to(device)
                                 for f in distinct])
            if len(first) < len(idx):
                x = x[torch.tensor(slot, device=x.device)]
        x, scale = area_downscale(x.permute(0, 3, 1, 2).float(), max_size, cache)
        yield H, W, idx, x, scale


def _crops(frames, Ms_per_frame, size: int, device) -> torch.Tensor:
    """All crops (frame-major, face order) as ``(n, 3, size, size)`` float32 0..255 on ``device``,
    each ``cv2.warpAffine`` (OpenCV 4.x) of its frame: numpy frames (and CPU tensors) are cropped on
    the host by :func:`mime_fast.ops.warp_affine` and only the crops uploaded; frames in a CUDA
    tensor are cropped where they are by the core's CUDA kernel (CUDA builds), else by
    :func:`warp_affine_u8`.  All three give the same bytes."""
    n = sum(len(m) for m in Ms_per_frame)
    if not isinstance(frames, torch.Tensor) and any(isinstance(f, torch.Tensor) for f in frames):
        # device frames (_as_frames), maybe beside host ones: each frame's crops where it is
        parts = [_crops(f[None] if isinstance(f, torch.Tensor) else [f], [mats], size, device)
                 for f, mats in zip(frames, Ms_per_frame) if len(mats)]
        return torch.cat(parts) if parts else torch.zeros((0, 3, size, size), device=device)
    if isinstance(frames, torch.Tensor):
        frames = frames.to(device)
        if frames.is_cuda and _core.cuda_built() and _core.cuda_available():
            frames = frames.contiguous()
            _, H, W, _ = frames.shape
            out = torch.empty((n, size, size, 3), dtype=torch.uint8, device=frames.device)
            k = 0
            with torch.cuda.device(frames.device):
                stream = torch.cuda.current_stream().cuda_stream
                for f, mats in enumerate(Ms_per_frame):
                    if len(mats):
                        _core.cuda_warp_affine(frames[f].data_ptr(), H, W, 3, W * 3, out[k].data_ptr(),
                                               np.asarray(mats, np.float64).reshape(-1, 2, 3), size, stream)
                        k += len(mats)
            return out.permute(0, 3, 1, 2).float()
        if frames.device.type != "cpu":  # CUDA without the core's kernels, or another device
            _, H, W, _ = frames.shape
            buf = torch.cat([frames.reshape(-1), frames.new_zeros(3)])
            Ms, base = [], []
            for f, mats in enumerate(Ms_per_frame):
                for M in mats:
                    Ms.append(M), base.append(f * H * W * 3)
            return warp_affine_u8(buf, base, [(H, W)] * n, [(0, 0)] * n, Ms, size)
        frames = [f for f in frames.contiguous().numpy()]
    crops = [ops.warp_affine(frame, np.asarray(mats, np.float64).reshape(-1, 2, 3), size)
             for frame, mats in zip(frames, Ms_per_frame) if len(mats)]
    host = np.concatenate(crops) if crops else np.zeros((0, size, size, 3), np.uint8)
    return torch.from_numpy(host).to(device).permute(0, 3, 1, 2).float()


def _area_matrix(src: int, dst: int) -> np.ndarray:
    """``(dst, src)`` weights of OpenCV's INTER_AREA from ``src`` to ``dst`` samples (``src >= dst``)."""
    scale = src / dst
    A = np.zeros((dst, src), np.float64)
    for d in range(dst):
        f0, f1 = d * scale, min((d + 1) * scale, src)
        s0, s1 = math.ceil(f0), math.floor(f1)
        if s0 - f0 > 1e-3:
            A[d, s0 - 1] = s0 - f0
        A[d, s0:s1] = 1.0
        if f1 - s1 > 1e-3:
            A[d, s1] = f1 - s1
        A[d] /= min(scale, src - f0)
    return A.astype(np.float32)


def _core_area(x: torch.Tensor, th: int, tw: int) -> torch.Tensor | None:
    """The last step of :func:`area_downscale` by the core's :func:`mime_fast.ops.area_resize`
    (OpenCV 4.x's INTER_AREA bytes, as the host's ``_downscale``): CPU tensors through the CPU
    operator, CUDA tensors through its kernel where the core was built with CUDA; ``None`` where
    neither applies (the caller's matrix products instead)."""
    n, c, H, W = x.shape
    if not ops.area_supported(W, H, tw, th):
        return None
    if x.device.type == "cpu":
        u8 = x.to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
        out = np.stack([ops.area_resize(u8[i], tw, th) for i in range(n)])
        return torch.from_numpy(out).permute(0, 3, 1, 2).float()
    if not (x.is_cuda and _core.cuda_built() and _core.cuda_available()):
        return None
    u8 = x.to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    out = torch.empty((n, th, tw, c), dtype=torch.uint8, device=x.device)
    with torch.cuda.device(x.device):  # the batch in one launch
        _core.cuda_area_resize(u8.data_ptr(), H, W, c, W * c, out.data_ptr(), tw, th, tw * c,
                               torch.cuda.current_stream().cuda_stream, n, H * W * c, th * tw * c)
    return out.permute(0, 3, 1, 2).float()


def area_downscale(x: torch.Tensor, max_size: int | None, cache: dict | None = None) -> tuple[torch.Tensor, float]:
    """:func:`mime_fast.detect.interface._downscale` on the device: ``x`` ``(N, 3, H, W)`` float32 with
    uint8 values; 2x2 halvings (``(a+b+c+d+2) >> 2``, exactly) while the half still covers the
    target, then the last step by the core's area operator (:func:`_core_area`: the same bytes as
    the host's ``_downscale``), or, on a device the core does not run on, OpenCV INTER_AREA weights
    as two matrix products, rounded half to even (within 1 of it, at a few pixels in a thousand).
    Returns the image and the scale."""
    H, W = x.shape[2:]
    if not max_size or max(H, W) <= max_size:
        return x, 1.0
    s = max_size / max(H, W)
    tw, th = max(1, round(W * s)), max(1, round(H * s))
    while x.shape[3] // 2 >= tw and x.shape[2] // 2 >= th:
        x = torch.floor(F.avg_pool2d(x, 2) + 0.5)
    if tuple(x.shape[2:]) != (th, tw):
        exact = _core_area(x, th, tw)
        if exact is not None:
            return exact, s
        cache = {} if cache is None else cache
        key = (x.shape[2], x.shape[3], th, tw, x.device)
        if key not in cache:
            cache[key] = (torch.from_numpy(_area_matrix(x.shape[2], th)).to(x.device),
                          torch.from_numpy(_area_matrix(x.shape[3], tw)).to(x.device))
        Ry, Rx = cache[key]
        x = torch.round(torch.matmul(torch.matmul(Ry, x), Rx.t()))
    return x, s
