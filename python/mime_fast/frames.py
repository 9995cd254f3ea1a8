"""Pictures between PyAV and the compiled core: the one Python layer where media meets
:mod:`mime_fast.ops`.

* :func:`frame_rgb` gives the RGB24 ``H x W x 3`` of a decoded frame: 8-bit limited-range yuv420p
  frames (nearly every H.264 clip) are converted by the compiled core
  (:func:`mime_fast.ops.yuv420_to_rgb`, with the frame's matrix, :func:`frame_matrix`), anything
  else by swscale.
* :func:`yuv420_frame` turns an RGB24 frame into the encoder's yuv420p frame with the compiled core
  (:func:`mime_fast.ops.rgb_to_yuv420`, BT.601 or BT.709 limited range; 5x faster than swscale);
  :func:`patched_frame` copies a yuv420p frame and converts only the pixels a blur changed, from
  the blurred region alone.
* :func:`yuv420_planes` are the numpy views of a yuv420p ``av.VideoFrame``'s planes;
  :func:`copy_frame`, :func:`black_frame` and :func:`nv12_host_frame` make new frames.
* :class:`Still` names a picture an output shows unchanged throughout (:data:`BLACK`); the encoder
  reuses its packets (:meth:`mime_fast.media.Mp4Writer.write_still`).

Conventions: frames are RGB24 everywhere in Python.  yuv420p needs even dimensions: masking and
blurring happen on the full displayed frame, the encoder then drops the last column and/or row
(:func:`even_crop`); coordinates are unchanged by this crop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

try:
    import av
except ImportError as exc:  # pragma: no cover - av is a runtime dependency
    raise ImportError("mime_fast needs PyAV: pip install 'av>=18.1'") from exc

from . import ops

__all__ = [
    "BLACK",
    "COLORSPACE",
    "Still",
    "black_frame",
    "copy_frame",
    "even_crop",
    "frame_matrix",
    "frame_rgb",
    "native_yuv",
    "nv12_host_frame",
    "patched_frame",
    "yuv420_frame",
    "yuv420_planes",
]

#: FFmpeg's AVColorSpace values of the two matrices the outputs use (BT.709, SMPTE 170M = BT.601).
COLORSPACE = {"bt709": 1, "bt601": 6}


def frame_matrix(frame) -> str:
    """``"bt709"`` for a frame tagged BT.709 (AVCOL_SPC_BT709), else ``"bt601"``: the matrix PyAV's
    ``to_ndarray(format="rgb24")`` decodes it with (BT.601 for untagged, SMPTE 170M and BT.470BG
    frames; other matrices are rare in these corpora and are treated as BT.601)."""
    return "bt709" if int(frame.colorspace) == COLORSPACE["bt709"] else "bt601"


def native_yuv(frame) -> bool:
    """Whether the compiled core converts ``frame`` (8-bit yuv420p, limited or unspecified range)."""
    return frame.format.name == "yuv420p" and int(frame.color_range) != 2


def yuv420_planes(vf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Writeable numpy views ``(y, u, v)`` of a yuv420p ``av.VideoFrame``'s planes (row padding
    excluded)."""
    out = []
    for i, plane in enumerate(vf.planes):
        h = vf.height if i == 0 else (vf.height + 1) // 2
        w = vf.width if i == 0 else (vf.width + 1) // 2
        buf = np.frombuffer(plane, dtype=np.uint8, count=plane.line_size * h)
        out.append(buf.reshape(h, plane.line_size)[:, :w])
    return out[0], out[1], out[2]


def frame_rgb(frame, roi: tuple[int, int, int, int] | None = None, *, device: str = "cpu") -> np.ndarray:
    """RGB24 ``H x W x 3`` of a decoded frame, in its coded orientation (``roi`` ``(x, y, w, h)``: only
    that rectangle): :func:`mime_fast.ops.yuv420_to_rgb` with the frame's matrix
    (:func:`frame_matrix`) for 8-bit limited-range yuv420p frames, swscale for any other format."""
    if native_yuv(frame):
        return ops.yuv420_to_rgb(*yuv420_planes(frame), roi=roi, matrix=frame_matrix(frame), device=device)
    rgb = frame.to_ndarray(format="rgb24")
    if roi is not None:
        x, y, w, h = roi
        rgb = rgb[y : y + h, x : x + w]
    return np.ascontiguousarray(rgb)


def even_crop(rgb: np.ndarray) -> np.ndarray:
    """Drop the last row/column when odd (yuv420p needs even sizes)."""
    h, w = rgb.shape[:2]
    if h % 2 or w % 2:
        rgb = rgb[: h - h % 2, : w - w % 2]
    return rgb


def yuv420_frame(rgb: np.ndarray, *, matrix: str = "bt601"):
    """The yuv420p ``av.VideoFrame`` of an RGB24 frame (cropped to even size, :func:`even_crop`),
    converted by :func:`mime_fast.ops.rgb_to_yuv420` with ``matrix`` (``"bt601"``/``"bt709"``)."""
    rgb = even_crop(rgb)
    if not rgb.flags.c_contiguous:
        rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    vf = av.VideoFrame(w, h, "yuv420p")
    ops.rgb_to_yuv420(rgb, yuv420_planes(vf), matrix=matrix)
    return vf


def copy_frame(base):
    """A new yuv420p ``av.VideoFrame`` with ``base``'s planes (each encoder owns its frames: it sets
    their timestamps)."""
    vf = av.VideoFrame(base.width, base.height, "yuv420p")
    for dst, src in zip(yuv420_planes(vf), yuv420_planes(base)):
        np.copyto(dst, src)
    return vf


def patched_frame(base, region: np.ndarray, origin: tuple[int, int], roi: tuple[int, int, int, int],
                  mask: np.ndarray, *, matrix: str = "bt601"):
    """A new yuv420p ``av.VideoFrame``: a copy of ``base`` (yuv420p, even size) where the RGB24
    ``region``, placed at ``origin`` ``(x0, y0)`` (both even) of the frame, is converted
    (:func:`mime_fast.ops.rgb_to_yuv420` with ``matrix``) inside ``roi`` ``(x, y, w, h)`` (region
    coordinates) wherever ``mask`` (region-sized) is non-zero: luma per pixel, chroma per 2x2 block
    with any masked pixel.  Everything else keeps ``base``'s samples, exactly.  The region may extend
    past ``base`` (an odd source's last row / column): that part is dropped.

    With ``region`` a blur of the frame inside ``mask``, this is the frame converted whole with the
    base's own samples where the blur changed nothing; ``roi`` must leave the region's last row and
    column out of every 2x2 block it touches unless they are the frame's (the blur's reach
    guarantees it in the pipeline)."""
    x0, y0 = (int(v) for v in origin)
    if x0 % 2 or y0 % 2:
        raise ValueError(f"origin {origin} must be even (whole 2x2 blocks)")
    vf = copy_frame(base)
    planes = yuv420_planes(vf)
    h = min(region.shape[0], base.height - y0)
    w = min(region.shape[1], base.width - x0)
    rx, ry, rw, rh = (int(v) for v in roi)
    rw, rh = min(rw, w - rx), min(rh, h - ry)
    if h <= 0 or w <= 0 or rw <= 0 or rh <= 0:
        return vf
    if (h, w) != region.shape[:2]:
        region, mask = np.ascontiguousarray(region[:h, :w]), np.ascontiguousarray(mask[:h, :w])
    cy0, cx0, ch, cw = y0 // 2, x0 // 2, (h + 1) // 2, (w + 1) // 2
    sub = (planes[0][y0 : y0 + h, x0 : x0 + w], planes[1][cy0 : cy0 + ch, cx0 : cx0 + cw],
           planes[2][cy0 : cy0 + ch, cx0 : cx0 + cw])
    ops.rgb_to_yuv420(region, sub, roi=(rx, ry, rw, rh), matrix=matrix, mask=mask)
    return vf


def black_frame(width: int, height: int):
    """A yuv420p ``av.VideoFrame`` that decodes to RGB (0, 0, 0) (limited range Y=16, U=V=128)."""
    vf = av.VideoFrame(width, height, "yuv420p")
    planes = vf.planes
    for plane, value in zip(planes, (16, 128, 128)):
        buf = np.frombuffer(plane, dtype=np.uint8)
        buf[:] = value
    return vf


def nv12_host_frame(nv12: ops.DeviceNv12, color: tuple[int, int, int, int]):
    """The host yuv420p ``av.VideoFrame`` of an NV12 frame in device memory
    (:func:`mime_fast.ops.download_nv12`), tagged with ``color`` ``(colorspace, color_range,
    color_primaries, color_trc)`` as FFmpeg's decoded frames are."""
    vf = av.VideoFrame(nv12.width, nv12.height, "yuv420p")
    ops.download_nv12(nv12, yuv420_planes(vf))
    vf.colorspace, vf.color_range, vf.color_primaries, vf.color_trc = color
    return vf


@dataclass(frozen=True)
class Still:
    """A picture an output shows unchanged from its first frame on: ``draw(width, height)`` makes
    it (a yuv420p ``av.VideoFrame``), ``name`` says which it is.  The encoders share the packets of
    a still per process (:class:`mime_fast.media.StillRun`), keyed by the still itself."""

    name: str
    draw: Callable[[int, int], Any]


#: The black picture (:func:`black_frame`): VMM's video.
BLACK = Still("black", black_frame)
