"""Media I/O of the MIME subsets on PyAV (FFmpeg), one concept per module:

* :mod:`~mime_fast.media.errors`: :class:`ClipError`, an input that cannot be processed, with a
  reason in plain words; opening a clip.
* :mod:`~mime_fast.media.source`: :func:`probe` and :class:`SourceInfo`, what a clip is (timestamps,
  rotation, the still-image and truncation gates).
* :mod:`~mime_fast.media.grid`: the constant-rate time grid (:class:`FrameStandardiser`).
* :mod:`~mime_fast.media.decode`: PyAV decoding in display orientation and presentation order,
  :func:`prefetch`, :class:`Behind` (a consumer on a thread of its own), :class:`KeptFrames` (one
  decode for two passes).
* :mod:`~mime_fast.media.nvdec`: NVDEC decoding for ``device="cuda"``.
* :mod:`~mime_fast.media.audio`: the 16 kHz WAV and the shared AAC track.
* :mod:`~mime_fast.media.x264`: libx264's options and stream.
* :mod:`~mime_fast.media.encode`: :class:`Mp4Writer` and the shared packets of a still picture
  (:class:`StillRun`).
* :mod:`~mime_fast.media.outputs`: remux, FM's stream copy and atomic outputs.
* :mod:`~mime_fast.media.mux`: PyAV's write loop: a container that leaves no partial file
  (:func:`writing`), a frame encoded and its packets muxed (:func:`encode_into`).

Pixels (RGB <-> yuv420p, plane views, patched frames) are :mod:`mime_fast.frames`, the layer below,
the only one that calls the compiled core.
"""

from __future__ import annotations

from .audio import AacTrack, WavReader, extract_audio_wav, read_wav, write_wav
from .decode import Behind, KeptFrames, apply_display_transform, decode_frames, frame_bytes, iter_display_frames, prefetch
from .encode import Mp4Writer, StillRun
from .errors import ClipError, av_path
from .grid import PTS_TOLERANCE, FrameStandardiser, output_frame_count
from .mux import encode_into, writing
from .nvdec import (Nv12Frame, NvdecFrame, frame_parts, iter_nvdec_frames, nv12_of_planes, nvdec_available, nvdec_reason,
                    open_nvdec_demuxer)
from .outputs import (MAX_ID_BYTES, atomic_outputs, check_writable, clip_id_problem, grid_packets, remux_video,
                      video_digest)
from .source import ColorTags, SourceInfo, StreamFacts, main_video_stream, probe, video_streams
from .x264 import add_x264_stream, x264_asm, x264_options

__all__ = [
    "Behind",
    "AacTrack",
    "MAX_ID_BYTES",
    "ClipError",
    "ColorTags",
    "FrameStandardiser",
    "KeptFrames",
    "Mp4Writer",
    "Nv12Frame",
    "NvdecFrame",
    "PTS_TOLERANCE",
    "SourceInfo",
    "StillRun",
    "StreamFacts",
    "WavReader",
    "add_x264_stream",
    "apply_display_transform",
    "atomic_outputs",
    "check_writable",
    "clip_id_problem",
    "av_path",
    "decode_frames",
    "encode_into",
    "extract_audio_wav",
    "frame_bytes",
    "frame_parts",
    "grid_packets",
    "iter_display_frames",
    "iter_nvdec_frames",
    "main_video_stream",
    "nv12_of_planes",
    "nvdec_available",
    "nvdec_reason",
    "open_nvdec_demuxer",
    "output_frame_count",
    "prefetch",
    "probe",
    "read_wav",
    "remux_video",
    "video_digest",
    "video_streams",
    "write_wav",
    "writing",
    "x264_asm",
    "x264_options",
]
