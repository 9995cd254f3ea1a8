"""Hot-path operators of mime_fast: OpenCV-exact Gaussian blur, feathered convex-hull masks and
the fused masked blur that writes every blur level of a frame in one pass.

Over 400 lines on purpose: one typed wrapper per compiled operator, mirroring ``csrc/bindings/``
(one file per operator there): each is the argument checks and the documentation of one operator,
and they share the checks and types at the top.

All operators take C-contiguous ``uint8`` numpy arrays, ``(H, W)`` or ``(H, W, C)`` with 1 to 4
interleaved channels (channel order does not matter), and a keyword-only ``device``: ``"cpu"``
(default, multi-threaded) or ``"cuda"`` (needs a CUDA build and an NVIDIA GPU; raises
``RuntimeError`` saying why otherwise — never a silent fallback). Bad arguments raise
``TypeError`` (wrong types or dtype) or ``ValueError`` (wrong shapes or values).

Rectangles are ``(x, y, w, h)`` tuples in pixels.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Literal, Protocol, Sequence

import numpy as np

from . import _core

__all__ = [
    "AUTO_FEATHER_FRACTION",
    "Device",
    "Hull",
    "Rect",
    "blur_in_mask",
    "convex_hull",
    "gaussian_blur",
    "gaussian_blur_levels",
    "gaussian_weights",
    "hull_mask",
    "rgb_to_yuv420",
    "yuv420_shapes",
]

Device = Literal["cpu", "cuda"]
Rect = tuple[int, int, int, int]

#: Feather used when ``feather=None``: this fraction of sqrt(hull area), at least 1 px
#: (about 10 px for a 250 x 320 px face).
AUTO_FEATHER_FRACTION: float = float(_core.AUTO_FEATHER_FRACTION)


def _check_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    return int(value)


def _check_rect(rect: object, name: str) -> Rect:
    if not isinstance(rect, (tuple, list)) or len(rect) != 4:
        raise TypeError(f"{name} must be a tuple (x, y, w, h)")
    x, y, w, h = (_check_int(v, f"{name} entry") for v in rect)
    return (x, y, w, h)


def _check_array(a: object, name: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    return a


def gaussian_weights(ksize: int) -> np.ndarray:
    """The 8.8 fixed-point taps (uint16, sum 256) OpenCV uses for ``GaussianBlur(..., (k, k), 0)``
    on 8-bit images."""
    return _core.gaussian_weights_q8(_check_int(ksize, "ksize"))


def gaussian_blur(frame: np.ndarray, ksize: int, *, roi: Rect | None = None, device: Device = "cpu") -> np.ndarray:
    """Gaussian blur, bit-identical to ``cv2.GaussianBlur(frame, (ksize, ksize), 0)``.

    ``ksize`` is odd, 1..255; sigma is derived from it as OpenCV does (0.3*((k-1)/2 - 1) + 0.8).
    With ``roi=(x, y, w, h)`` only that rectangle is computed and returned (``h x w[x C]``); its
    pixels equal the same pixels of the full-frame blur, since the kernel reads the real neighbours
    outside the rectangle (reflected only at the frame's own edges, BORDER_REFLECT_101).
    """
    _check_array(frame, "frame")
    k = _check_int(ksize, "ksize")
    r = None if roi is None else _check_rect(roi, "roi")
    return _core.gaussian_blur(frame, k, r, device)


def gaussian_blur_levels(
    frame: np.ndarray, ksizes: Sequence[int], *, roi: Rect | None = None, device: Device = "cpu"
) -> list[np.ndarray]:
    """:func:`gaussian_blur` at several kernel sizes in one pass over the region's rows (each
    source row is loaded once for all levels). Returns one array per kernel size, in order."""
    _check_array(frame, "frame")
    if not isinstance(ksizes, (list, tuple)):
        raise TypeError("ksizes must be a list or tuple of kernel sizes")
    ks = [_check_int(k, "ksizes entry") for k in ksizes]
    r = None if roi is None else _check_rect(roi, "roi")
    if device != "cpu":
        return [_core.gaussian_blur(frame, k, r, device) for k in ks]
    return list(_core.gaussian_blur_levels(frame, ks, r))


def hull_mask(
    points: np.ndarray,
    shape: Sequence[int],
    *,
    feather: float | None = None,
    margin: float = 0.0,
    device: Device = "cpu",
) -> tuple[np.ndarray, Rect]:
    """Feathered, anti-aliased mask of the convex hull of ``points``.

    ``points`` is an ``(N, 2)`` array of ``(x, y)`` pixel coordinates (N >= 3, finite, not all
    collinear; integer coordinates are pixel centres); points may lie outside the frame.
    ``shape`` is ``(H, W)`` (a frame's ``(H, W, C)`` shape is accepted too).

    With d the signed distance from a pixel centre to the hull (negative inside), the mask is
    ``round(255 * clamp((margin + feather + 0.5 - d) / (feather + 1), 0, 1))``: 255 over the whole
    hull grown by ``margin`` pixels (rounded corners), a linear ramp to 0 over the next
    ``feather + 1`` pixels outside it. ``feather=0`` is a plain one-pixel anti-aliased edge;
    ``feather=None`` uses ``AUTO_FEATHER_FRACTION * sqrt(hull area)`` (at least 1 px), so the
    softening scales with the face.

    Returns ``(mask, bbox)``: an ``H x W`` uint8 mask and the ``(x, y, w, h)`` box of its non-zero
    pixels, ``(0, 0, 0, 0)`` when the hull does not reach into the frame.
    """
    pts = np.asarray(points)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"points must be an (N, 2) array of (x, y) coordinates, got shape {pts.shape}")
    if not np.issubdtype(pts.dtype, np.number) or np.issubdtype(pts.dtype, np.complexfloating):
        raise TypeError(f"points must be numeric, got dtype {pts.dtype}")
    if not isinstance(shape, (tuple, list)) or len(shape) not in (2, 3):
        raise TypeError("shape must be (H, W) or (H, W, C)")
    h, w = (_check_int(v, "shape entry") for v in shape[:2])
    f = None if feather is None else float(feather)
    mask, bbox = _core.hull_mask(pts, h, w, f, float(margin), device)
    return mask, tuple(bbox)


def blur_in_mask(
    frame: np.ndarray,
    mask: np.ndarray,
    ksizes: int | Sequence[int],
    *,
    bbox: Rect | None = None,
    out: Sequence[np.ndarray] | None = None,
    device: Device = "cpu",
) -> list[np.ndarray]:
    """Blur ``frame`` inside ``mask`` at one or several kernel sizes in one pass.

    Returns one full frame per kernel size with, per pixel and channel,
    ``round((src * (255 - m) + blur * m) / 255)``, where ``blur`` is
    ``cv2.GaussianBlur(frame, (k, k), 0)``: mask 0 keeps the source pixel exactly, mask 255 gives
    the blurred pixel exactly. Only the mask's rows and spans are blurred, reading real neighbours
    outside them; the levels share each loaded source row.

    ``bbox`` is a box holding every non-zero mask pixel (as returned by :func:`hull_mask`); it is
    computed from the mask when omitted, and mask pixels outside a given box are ignored.
    ``out`` optionally gives preallocated frames to write (one per kernel size, shaped like
    ``frame``, not sharing memory with it).
    """
    _check_array(frame, "frame")
    _check_array(mask, "mask")
    ks = [_check_int(ksizes, "ksizes")] if not isinstance(ksizes, (list, tuple)) else [
        _check_int(k, "ksizes entry") for k in ksizes
    ]
    b = None if bbox is None else _check_rect(bbox, "bbox")
    o = None if out is None else list(out)
    return list(_core.blur_in_mask(frame, mask, ks, b, o, device))


def yuv420_shapes(height: int, width: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Shapes of the luma and of each chroma plane of a 4:2:0 frame of ``height x width``."""
    return (height, width), ((height + 1) // 2, (width + 1) // 2)


def rgb_to_yuv420(
    frame: np.ndarray,
    out: Sequence[np.ndarray] | None = None,
    *,
    roi: Rect | None = None,
    matrix: Literal["bt601", "bt709"] = "bt601",
    mask: np.ndarray | None = None,
    device: Device = "cpu",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert an RGB (or RGBX) frame to YUV 4:2:0 planes, limited range, with the BT.601
    (default) or BT.709 ``matrix`` (the colour model of the H.264 outputs): for BT.601
    ``Y = 16 + (16829 R + 33039 G + 6416 B) / 2^16`` and Cb, Cr from the mean of each 2x2 block,
    rounded fixed point (exact formulas in ``kernels/rgb_to_yuv420.cuh``).

    Returns ``(y, u, v)``: ``(H, W)`` and two ``(ceil(H/2), ceil(W/2))`` arrays.  ``out`` gives
    the planes to write instead, e.g. the planes of an ``av.VideoFrame``; their rows may be padded
    (row stride >= width).  ``roi`` ``(x, y, w, h)`` converts only the 2x2 blocks that cover that
    rectangle and leaves the rest of ``out`` untouched (use it to patch a frame that differs from
    an already converted one only there).  ``mask`` (``(H, W)`` uint8, C-contiguous) further selects
    what is written: a luma sample only where its mask value is non-zero, a block's chroma only
    where any of its pixels' is; everything else in ``out`` keeps its value (use it to write only
    what a blur inside that mask changed).
    """
    _check_array(frame, "frame")
    if frame.ndim != 3:
        raise ValueError(f"frame must be an (H, W, 3) RGB or (H, W, 4) RGBX array, got shape {frame.shape}")
    r = None if roi is None else _check_rect(roi, "roi")
    if out is None:
        (yh, yw), (ch, cw) = yuv420_shapes(frame.shape[0], frame.shape[1])
        planes = (np.empty((yh, yw), np.uint8), np.empty((ch, cw), np.uint8), np.empty((ch, cw), np.uint8))
        if r is not None:
            raise ValueError("roi needs out= (the planes to patch)")
    else:
        planes = tuple(out)
        if len(planes) != 3:
            raise ValueError("out must be the three planes (y, u, v)")
        for name, p in zip("yuv", planes):
            _check_array(p, name)
    if mask is not None:
        _check_array(mask, "mask")
        if out is None:
            raise ValueError("mask needs out= (the planes to patch)")
    _core.rgb_to_yuv420(frame, planes[0], planes[1], planes[2], r, matrix, mask, device)
    return planes  # type: ignore[return-value]


@dataclass(frozen=True)
class Hull:
    """Convex hull of landmark points and the mask parameters resolved for it."""

    vertices: np.ndarray  # (K, 2) float64, counter-clockwise
    area: float  # px^2
    perimeter: float  # px
    feather: float  # resolved feather, px
    margin: float  # px


def convex_hull(points: np.ndarray, *, feather: float | None = None, margin: float = 0.0) -> Hull:
    """The hull :func:`hull_mask` rasterises for ``points``, with its area, perimeter and the
    feather it would use."""
    info = _core.convex_hull(np.asarray(points), None if feather is None else float(feather), float(margin))
    return Hull(info["vertices"], info["area"], info["perimeter"], info["feather"], info["margin"])


def yuv420_to_rgb(
    y: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    out: np.ndarray | None = None,
    *,
    roi: Rect | None = None,
    matrix: Literal["bt601", "bt709"] = "bt601",
    device: Device = "cpu",
) -> np.ndarray:
    """Convert YUV 4:2:0 planes, limited range, with the BT.601 (default) or BT.709 ``matrix``
    to an RGB frame: the inverse of :func:`rgb_to_yuv420`. Pixel ``(x, y)`` uses luma
    ``Y[y, x]`` and the chroma of its 2x2 block, ``U[y // 2, x // 2]``, ``V[y // 2, x // 2]``
    (replicated, as OpenCV's I420 converter does); for BT.601
    ``R = (76309 (Y - 16) + 104597 (V - 128)) / 2^16``, rounded and clamped, in exact integer
    fixed point (formulas in ``kernels/yuv420_to_rgb.cuh``).

    ``y`` is ``(H, W)``, ``u`` and ``v`` are ``(ceil(H/2), ceil(W/2))`` uint8 planes whose rows may
    be padded (row stride >= width), e.g. :func:`mime_fast.frames.yuv420_planes` of a decoded
    frame; they are only read (read-only arrays are fine).  Returns ``(H, W, 3)`` RGB, or with
    ``roi=(x, y, w, h)`` (any position inside the frame) only that rectangle, ``(h, w, 3)``.
    ``out`` gives a C-contiguous ``(h, w, 3)`` uint8 array to write instead (returned); it must
    not share memory with the planes.
    """
    for name, p in (("y", y), ("u", u), ("v", v)):
        _check_array(p, name)
    if out is not None:
        _check_array(out, "out")
    r = None if roi is None else _check_rect(roi, "roi")
    return _core.yuv420_to_rgb(y, u, v, out, r, matrix, device)


__all__ += ["yuv420_to_rgb"]


Planes = tuple[np.ndarray, np.ndarray, np.ndarray]


def _distinct_ksizes(ksizes: Sequence[int]) -> list[int]:
    ks = [_check_int(k, "ksizes entry") for k in ksizes]
    if len(set(ks)) != len(ks):
        raise ValueError(f"ksizes must be distinct, got {ks}")
    return ks


def blur_hull_yuv420(
    planes: Planes,
    points: np.ndarray,
    outs: Sequence[Planes],
    ksizes: Sequence[int],
    *,
    feather: float | None = None,
    margin: float = 0.0,
    matrix: Literal["bt601", "bt709"] = "bt601",
    device: Device = "cpu",
) -> Rect:
    """The face subsets' per-frame step, fused, on a decoded 4:2:0 frame.

    ``planes`` are the frame's ``(y, u, v)`` planes (limited range, ``matrix``; rows may be padded,
    e.g. :func:`mime_fast.frames.yuv420_planes`), only read.  ``outs[i]`` are the planes of the
    output for ``ksizes[i]`` (distinct kernel sizes), the frame's size, each holding a copy of the
    input: inside the feathered hull mask of ``points`` (:func:`hull_mask` with ``feather`` and
    ``margin``) their samples are replaced by the frame blurred with ``cv2.GaussianBlur(k, k, 0)``
    (:func:`blur_in_mask`) and converted back (:func:`rgb_to_yuv420` with the mask as selection:
    luma where the mask is non-zero, chroma of each 2x2 block with any such pixel); every other
    sample is left as it is.  The result is exactly what those operators give one after the other
    on the whole frame (after :func:`yuv420_to_rgb`), but only the region the blur reaches is
    converted, blurred and written; on ``"cuda"`` that region goes up once and comes back once.

    Returns the ``(x, y, w, h)`` box of the mask's non-zero pixels (``(0, 0, 0, 0)``: nothing
    changed).
    """
    ks = _distinct_ksizes(ksizes)
    for name, p in zip(("y", "u", "v"), planes):
        _check_array(p, name)
    f = None if feather is None else float(feather)
    return tuple(_core.blur_hull_yuv420(tuple(planes), np.asarray(points), [tuple(o) for o in outs], ks, f,
                                        float(margin), matrix, device))


__all__ += ["blur_hull_yuv420"]


class DeviceNv12(Protocol):
    """An NV12 frame in CUDA device memory (:class:`mime_fast.media.Nv12Frame`): ``pointers``
    (luma, chroma addresses), ``pitch`` (bytes per row of both planes), ``width``, ``height``."""

    width: int
    height: int

    @property
    def pitch(self) -> int: ...

    @property
    def pointers(self) -> tuple[int, int]: ...


def blur_hull_nv12(
    frame: DeviceNv12,
    points: np.ndarray,
    outs: Sequence[Planes],
    ksizes: Sequence[int],
    *,
    feather: float | None = None,
    margin: float = 0.0,
    matrix: Literal["bt601", "bt709"] = "bt601",
) -> Rect:
    """:func:`blur_hull_yuv420` on the GPU for a frame that is already there, as NVDEC decodes it:
    only the region the blur reaches is read from ``frame`` (NV12 in device memory), and only that
    region of each of ``outs`` (host yuv420p planes holding a copy of the frame) is written.
    Needs a CUDA build and device; the samples equal :func:`blur_hull_yuv420`'s on the frame's
    planes."""
    ks = _distinct_ksizes(ksizes)
    y, uv = frame.pointers
    f = None if feather is None else float(feather)
    return tuple(_core.cuda_blur_hull_nv12(y, uv, frame.pitch, frame.pitch, frame.height, frame.width,
                                           np.asarray(points), [tuple(o) for o in outs], ks, f, float(margin),
                                           matrix))


def nv12_split(uv: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """Split an NV12 chroma plane (``ch x 2 cw``: Cb, Cr pairs) into the Cb and Cr planes
    ``u``, ``v`` (``ch x cw``) of yuv420p: the same samples, NVDEC's layout to the encoders'."""
    for name, p in (("uv", uv), ("u", u), ("v", v)):
        _check_array(p, name)
    _core.nv12_split(uv, u, v)


def download_nv12(frame: DeviceNv12, planes: Planes) -> None:
    """Copy an NV12 frame in device memory (``frame``) into host yuv420p ``planes`` ``(y, u, v)``
    (rows may be padded, e.g. :func:`mime_fast.frames.yuv420_planes`): the same samples, NVDEC's
    layout to the encoders'.  Needs a CUDA build and device."""
    for name, p in zip(("y", "u", "v"), planes):
        _check_array(p, name)
    y, uv = frame.pointers
    _core.cuda_download_nv12(y, uv, frame.pitch, frame.pitch, frame.height, frame.width, *planes)


def nv12_to_rgb_device(frame: DeviceNv12, dst: int, dst_stride: int, *,
                       matrix: Literal["bt601", "bt709"] = "bt601", stream: int = 0) -> None:
    """The RGB of an NV12 frame in device memory into the device buffer at address ``dst``
    (``height x width x 3`` uint8, rows ``dst_stride`` bytes apart; e.g. a CUDA torch tensor's
    ``data_ptr()``), for the face models to read on the device: the samples
    :func:`yuv420_to_rgb` gives on the frame's yuv420p planes (:func:`download_nv12`), by the same
    kernels (:func:`nv12_split`'s and :func:`yuv420_to_rgb`'s).  Work queued on ``stream`` (a
    ``cudaStream_t`` as an integer; 0: the legacy default stream) is finished first, and ``dst``
    is complete on return.  Needs a CUDA build and device."""
    y, uv = frame.pointers
    _core.cuda_nv12_to_rgb(y, uv, frame.pitch, frame.pitch, frame.height, frame.width, _check_int(dst, "dst"),
                           _check_int(dst_stride, "dst_stride"), matrix, _check_int(stream, "stream"))


__all__ += ["blur_hull_nv12", "download_nv12", "nv12_split", "nv12_to_rgb_device"]


def warp_affine(frame: np.ndarray, Ms: np.ndarray, size: int, *, device: Device = "cpu") -> np.ndarray:
    """Square crops of ``frame`` through affine matrices, bit-identical to OpenCV 4.x
    ``cv2.warpAffine(frame, M, (size, size), flags=INTER_LINEAR, borderMode=BORDER_CONSTANT,
    borderValue=0)`` for each ``M`` (OpenCV 5 rounds differently).

    ``Ms`` are the forward ``2 x 3`` frame -> crop matrices as ``cv2.warpAffine`` takes them, an
    ``(n, 2, 3)`` array (or one ``(2, 3)`` matrix: ``n = 1``); like OpenCV, they are inverted in
    float64 and the source positions rounded to 1/32 px in OpenCV's fixed point, with integer
    bilinear weights (formulas in ``kernels/warp_affine.cuh``); pixels outside the frame count as 0.
    ``frame`` is ``(H, W)`` or ``(H, W, C)`` (1 to 4 channels), at most 32767 px on a side; ``size``
    is 1..8192.  Returns ``(n, size, size[, C])`` uint8 (the channel axis as the frame has it), one
    crop per matrix: the face mesh's 192 px crops of every face of a frame, SFace's 112 px chips,
    in one call.
    """
    _check_array(frame, "frame")
    s = _check_int(size, "size")
    try:
        m = np.asarray(Ms, np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Ms must be an (n, 2, 3) array of numbers: {e}") from None
    if m.shape == (2, 3):
        m = m[None]
    return _core.warp_affine(frame, np.ascontiguousarray(m), s, device)


__all__ += ["warp_affine"]


def area_supported(width: int, height: int, dst_width: int, dst_height: int) -> bool:
    """Whether :func:`area_resize` takes ``width x height`` to ``dst_width x dst_height``: a
    shrink that is either exactly 2:1 in both axes or not a whole-number ratio in both axes
    (OpenCV's test, on ``1 / (dst / src)`` in float64).  The others (3:1, 4:1, 1:1 x 2:1, ...)
    are OpenCV's ``resizeAreaFast`` path, which the core does not reproduce; enlargements are not
    area averaging."""
    return bool(_core.area_resize_supported(_check_int(height, "height"), _check_int(width, "width"),
                                            _check_int(dst_width, "dst_width"), _check_int(dst_height, "dst_height")))


def area_resize(src: np.ndarray, width: int, height: int, *, device: Device = "cpu") -> np.ndarray:
    """``src`` shrunk to ``width x height`` by area averaging, bit-identical to OpenCV 4.x
    ``cv2.resize(src, (width, height), interpolation=cv2.INTER_AREA)`` for the shrinks
    :func:`area_supported` admits (others raise ``ValueError``): OpenCV's general path (float
    weights per source cell and float sums in OpenCV's order) and its exact 2:1 path
    (``(a + b + c + d + 2) >> 2``); formulas in ``kernels/area_resize.cuh``, the same on both
    devices, and independent of the OpenCV installed (builds differ: the GPU machine's OpenCV 5 once
    shrank otherwise; PyPI's 5.0.0 agrees).

    ``src`` is ``(H, W)`` or ``(H, W, C)`` uint8 (1 to 4 channels, C-contiguous); ``1 <= width <= W``,
    ``1 <= height <= H``.  Returns ``(height, width[, C])`` uint8.  The detector's input (the last,
    non-whole step down to the detection size) and the shot detector's thumbnails go through it.
    """
    _check_array(src, "src")
    return _core.area_resize(src, _check_int(width, "width"), _check_int(height, "height"), device)


__all__ += ["area_resize", "area_supported"]
