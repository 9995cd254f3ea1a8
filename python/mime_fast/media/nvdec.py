"""Decoding on the GPU's video engine (NVDEC, through PyNvVideoCodec) for the ``"cuda"`` device.

With ``device="cuda"`` (:class:`mime_fast.subsets.Settings`) a clip whose frames pass through to
the encoders unconverted (:attr:`mime_fast.media.SourceInfo.yuv_passthrough`: 8-bit 4:2:0,
limited range, no rotation) and whose codec NVDEC takes is decoded by NVDEC instead of FFmpeg.
Each frame stays in device memory as NV12 (:class:`Nv12Frame`, owned by a PyTorch tensor): the
face step reads only the region the blur reaches from there
(:func:`mime_fast.ops.blur_hull_nv12`), and the frame is copied once into host yuv420p planes for
the CPU's encoders (:func:`mime_fast.frames.nv12_host_frame`).  NVDEC's NV12 holds the same
samples as FFmpeg's yuv420p for these streams (checked frame by frame on an H100 for the H.264
clips of the tests), so outputs are the same bytes whichever decodes.  Frame times come from the
packets' timestamps as with PyAV, so the 30 fps mapping is unchanged.

Anything NVDEC cannot take (another codec, a size outside its limits, a frame that needs
conversion, PyNvVideoCodec or a CUDA-enabled PyTorch not installed) is decoded by PyAV, and
:func:`nvdec_reason` says why; so is a file whose video PyNvVideoCodec's own demuxer cannot open or
reads from another stream (:func:`open_nvdec_demuxer`).  The clip's result records which decoder
ran and why.

Install: ``pip install 'mime-fast[gpu]'`` (PyNvVideoCodec; the NVIDIA driver provides the NVDEC
library ``libnvcuvid``) and a CUDA build of PyTorch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..frames import frame_rgb, nv12_host_frame
from .errors import ClipError, av_path

__all__ = ["Nv12Frame", "NvdecFrame", "frame_parts", "iter_nvdec_frames", "nv12_frame", "nv12_of_planes",
           "nvdec_available", "nvdec_reason", "open_nvdec_demuxer"]

#: Codecs NVDEC decodes on the GPUs this targets (Ampere and Hopper), by FFmpeg's codec name.
#: Only H.264 is verified sample for sample against FFmpeg here; the others are NVDEC's documented
#: formats and are decoded by it too.
NVDEC_CODECS = ("h264", "hevc", "av1", "vp9")

#: NVDEC's size limits for these codecs (H.264's maximum is the smallest: 4096 x 4096).
MIN_SIZE = (48, 16)
MAX_SIZE = (4096, 4096)


def nvdec_available() -> str | None:
    """``None`` when PyNvVideoCodec and a CUDA-enabled PyTorch are importable and see a GPU; else
    why not, in words."""
    if importlib.util.find_spec("PyNvVideoCodec") is None:
        return "PyNvVideoCodec is not installed (pip install 'mime-fast[gpu]')"
    broken = _nvcodec_import_error()
    if broken:
        return f"PyNvVideoCodec is installed but cannot load: {broken}"
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (NVDEC's frames are held in PyTorch tensors)"
    import torch

    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def nvdec_reason(info) -> str | None:
    """``None`` when NVDEC decodes the clip described by ``info``
    (:class:`mime_fast.media.SourceInfo`) in place of PyAV; else why PyAV decodes it."""
    if not info.yuv_passthrough:
        return "its frames need converting (not 8-bit 4:2:0 limited range, odd-sized or rotated)"
    if info.codec not in NVDEC_CODECS:
        return f"codec {info.codec!r} is not one NVDEC decodes here ({', '.join(NVDEC_CODECS)})"
    w, h = info.coded_width, info.coded_height
    if not (MIN_SIZE[0] <= w <= MAX_SIZE[0] and MIN_SIZE[1] <= h <= MAX_SIZE[1]):
        return f"frame size {w}x{h} is outside NVDEC's limits"
    return nvdec_available()


@functools.lru_cache(maxsize=None)
def _nvcodec_import_error() -> str:
    """Why ``import PyNvVideoCodec`` fails here ("" when it loads): installed is not enough, its
    native libraries (its own CUDA runtime, the driver's ``libcuda``) must load too."""
    try:
        importlib.import_module("PyNvVideoCodec")
    except Exception as exc:  # noqa: BLE001 - ImportError, OSError from the loader, ...
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__  # (its first line: a manifest field)
    return ""


@dataclass
class Nv12Frame:
    """One decoded frame in device memory: ``tensor`` (a CUDA ``uint8`` tensor that owns it) holds
    ``height`` luma rows then ``ceil(height / 2)`` rows of Cb, Cr pairs, each ``pitch`` bytes (a
    :class:`mime_fast.ops.DeviceNv12`; :func:`mime_fast.ops.download_nv12` copies it to the host)."""

    tensor: Any
    width: int
    height: int

    @property
    def pitch(self) -> int:
        return int(self.tensor.stride(0))

    @property
    def pointers(self) -> tuple[int, int]:
        """Device addresses of the luma and of the chroma plane."""
        y = int(self.tensor.data_ptr())
        return y, y + self.pitch * self.height

    def copy(self) -> Nv12Frame:
        """The same frame in memory of its own (a decoder reuses its surfaces)."""
        return Nv12Frame(self.tensor.clone(), self.width, self.height)


def nv12_frame(tensor, width: int, height: int) -> Nv12Frame:
    """``tensor`` (a decoder's NV12 surface as a 2-D ``uint8`` tensor) as an :class:`Nv12Frame` of
    ``width`` x ``height``, once its layout is the one the kernels read: ``height`` luma rows, then
    ``ceil(height / 2)`` chroma rows, each at least ``width`` bytes, rows contiguous.  Anything
    else (a decoder that pads rows at the bottom, say, or crops differently from FFmpeg) is a
    ``ValueError`` naming both layouts: read as it is, its chroma would be taken from the wrong
    rows or past the end of the surface."""
    rows, row_bytes = height + (height + 1) // 2, max(width, 2 * ((width + 1) // 2))
    shape = tuple(tensor.shape)
    if len(shape) != 2 or shape[0] != rows or shape[1] < row_bytes or tensor.stride(1) != 1 or \
            str(tensor.dtype) != "torch.uint8":
        raise ValueError(f"NVDEC's frame is a {'x'.join(map(str, shape))} {tensor.dtype} surface (strides "
                         f"{tuple(tensor.stride())}), not the {rows} rows of at least {row_bytes} bytes of a "
                         f"{width}x{height} NV12 frame")
    return Nv12Frame(tensor, int(width), int(height))


@dataclass
class NvdecFrame:
    """What the NVDEC decode gives the pipeline for one source frame: ``frame``, the host yuv420p
    ``av.VideoFrame`` the encoders take (tagged with the stream's colour properties, as FFmpeg's
    frames are), and ``nv12``, the same frame on the device.  Kept for a later pass
    (:class:`mime_fast.media.KeptFrames`), it holds the device frame alone (:meth:`without_host`,
    ``frame`` ``None`` and its tags in ``color``) and makes its host copy again when replayed
    (:meth:`with_host`): the same samples, half the memory held."""

    frame: Any
    nv12: Nv12Frame
    color: tuple | None = None

    def without_host(self) -> NvdecFrame:
        """This frame without its host copy (:meth:`with_host` makes it again)."""
        f = self.frame
        if f is None:
            return self
        return NvdecFrame(None, self.nv12, (f.colorspace, f.color_range, f.color_primaries, f.color_trc))

    def with_host(self) -> NvdecFrame:
        """This frame with its host copy, downloaded again from the device frame if let go of."""
        if self.frame is not None:
            return self
        return NvdecFrame(nv12_host_frame(self.nv12, self.color), self.nv12)


def open_nvdec_demuxer(path, info) -> tuple[Any, str | None]:
    """NVDEC's demuxer on the clip: ``(demuxer, None)``, or ``(None, why)`` when it cannot stand in
    for PyAV's: PyNvVideoCodec's own FFmpeg cannot open the file, or it reads another video stream
    than the one :func:`mime_fast.media.probe` chose (``info.stream_index``; the frames would be
    another stream's).  The clip is then decoded by PyAV, with ``why`` recorded, rather than
    failed: nothing is wrong with it."""
    import PyNvVideoCodec as nvc

    try:
        dmx = nvc.CreateDemuxer(filename=av_path(path))  # (FFmpeg's open: a relative a:b.mp4 is a protocol)
        stream = int(dmx.GetVideoStreamId())
    except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec raises its own types
        if type(exc).__name__ in ("KeyboardInterrupt", "SystemExit"):
            raise
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        return None, f"NVDEC's demuxer cannot open it: {first}"
    if stream != info.stream_index:
        return None, f"NVDEC's demuxer reads video stream {stream}, not stream {info.stream_index}"
    return dmx, None


def iter_nvdec_frames(path, info, *, rgb: bool = False, gpu: int = 0, demuxer=None) -> Iterator[tuple]:
    """Decode the clip's video on NVDEC: ``(source_index, time_seconds, rgb, NvdecFrame)`` in
    presentation order, as :func:`mime_fast.media.iter_display_frames` with ``keep_yuv`` yields
    for frames that pass through (``rgb``: also the frame in RGB, ``H x W x 3`` on the host, for
    the subject detection; else ``None``).  ``demuxer``: one :func:`open_nvdec_demuxer` opened
    (default: opened here, and a demuxer that cannot stand in for PyAV's is a
    :class:`mime_fast.media.ClipError`).  Raises :class:`mime_fast.media.ClipError` when the
    stream is corrupt or yields fewer frames than the container holds."""
    path = Path(path)
    dmx = demuxer
    if dmx is None:
        dmx, why = open_nvdec_demuxer(path, info)
        if why:
            raise ClipError(path, why)
    import PyNvVideoCodec as nvc
    import torch

    step = Fraction(1, 30) if not info.average_rate else 1 / Fraction(info.average_rate).limit_denominator(100000)
    last_t = info.start - step
    n = 0
    try:
        tb = Fraction(int(dmx.GetTimebaseNum()), int(dmx.GetTimebaseDen()))
        dec = nvc.CreateDecoder(gpuid=gpu, codec=dmx.GetNvCodecId(), cudacontext=0, cudastream=0,
                                usedevicememory=True)
        for packet in dmx:  # the last packet is empty: it flushes the decoder
            for f in dec.Decode(packet):
                pts = int(f.getPTS())
                t = Fraction(pts) * tb if pts >= 0 else last_t + step  # AV_NOPTS_VALUE is negative
                last_t = t
                try:  # (our own copy: the decoder reuses its surfaces)
                    nv12 = nv12_frame(torch.from_dlpack(f), info.coded_width, info.coded_height).copy()
                except ValueError as exc:
                    raise ClipError(path, "NVDEC's frames are not laid out as this version reads them "
                                          "(decode it with --no-nvdec)", str(exc)) from None
                item = NvdecFrame(nv12_host_frame(nv12, info.facts.color), nv12)
                img = frame_rgb(item.frame) if rgb else None  # tagged as the stream: info.matrix
                yield n, t, img, item
                n += 1
    except ClipError:
        raise
    except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec raises its own types
        if type(exc).__name__ in ("KeyboardInterrupt", "SystemExit", "OutOfMemoryError"):
            raise  # (the device's memory full is no fault of the clip's)
        raise ClipError(path, f"corrupt video stream: NVDEC fails after {n} frames", str(exc)) from exc
    if n < info.video_frames:
        raise ClipError(path, f"decoded only {n} of {info.video_frames} video frames (truncated or corrupt)")


def frame_parts(decoded) -> tuple[Any, Nv12Frame | None]:
    """``(host frame, device frame)`` of what a decode pass gave for one source frame: an
    :class:`NvdecFrame`'s two halves, or a PyAV frame (or ``None``) and ``None``."""
    if isinstance(decoded, NvdecFrame):
        return decoded.frame, decoded.nv12
    return decoded, None


def nv12_of_planes(planes, pitch: int | None = None) -> Nv12Frame:
    """Upload host yuv420p planes as an NV12 device frame (tests and benchmarks: an NVDEC stand-in
    with the same layout); ``pitch``: its row length in bytes (default: the narrowest; NVDEC pads
    its rows).  Needs PyTorch with CUDA."""
    import torch

    y, u, v = (np.asarray(p) for p in planes)
    h, w = y.shape
    ch, cw = u.shape
    narrowest = 2 * cw if 2 * cw > w else w
    if pitch is not None and pitch < narrowest:
        raise ValueError(f"an NV12 pitch of {pitch} is below the frame's {narrowest} bytes")
    buf = np.zeros((h + ch, narrowest if pitch is None else pitch), np.uint8)
    buf[:h, :w] = y
    buf[h:, 0 : 2 * cw : 2] = u
    buf[h:, 1 : 2 * cw : 2] = v
    with contextlib.suppress(Exception):
        torch.cuda.init()
    return Nv12Frame(torch.from_numpy(buf).cuda(), w, h)
