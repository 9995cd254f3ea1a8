"""Video I/O for the MIME subsets, pure Python on PyAV (FFmpeg).

What this module does
---------------------
* :func:`probe` opens a clip, checks it is a decodable video, reads its video packet timestamps
  (demux only, no decoding) to get the exact video duration, and decodes the first frame to read the
  display rotation.  Anything wrong with the input raises :class:`ClipError`.
* :class:`FrameStandardiser` maps decoded source frames onto a constant-frame-rate grid by timestamp:
  output frame ``i`` shows the latest source frame whose presentation time is ``<= t0 + i/fps``
  (``t0`` = presentation time of the first video frame), with a 1 ms tolerance for container
  timestamp rounding.  Frames are duplicated or dropped as needed.  The number of output frames is
  ``round(video_duration * fps)`` (at least 1), where the video duration is
  ``max(pts + duration) - min(pts)`` over the video packets.  All arithmetic uses exact fractions,
  so there is no drift on long clips.
* :func:`iter_display_frames` decodes the video stream once and yields RGB24 ``H x W x 3`` uint8
  frames **as displayed**: the display matrix (FFmpeg ``AV_FRAME_DATA_DISPLAYMATRIX`` side data,
  what phones write as "rotate") is applied: rotations by multiples of 90 degrees and mirrorings
  (the eight EXIF orientations).  Other angles are snapped to the nearest quarter turn.  8-bit
  limited-range yuv420p frames (nearly every H.264 clip) are converted to RGB by the compiled core
  (:func:`frame_rgb`, :func:`mime_fast.ops.yuv420_to_rgb`), anything else by swscale.
* :func:`extract_audio_wav` decodes the first audio stream, resamples it with
  ``av.AudioResampler`` to 16-bit PCM at ``rate`` Hz / ``channels`` channels, aligns it to the first
  video frame (leading silence is inserted when audio starts late, leading samples are dropped when it
  starts early) and pads / trims it to exactly the output video duration, writing a WAV file.
* :class:`Mp4Writer` encodes frames with libx264 (yuv420p, CRF, preset, fixed thread count) into
  MP4, optionally with an AAC audio track fed from 16-bit PCM.
* :func:`yuv420_frame` turns an RGB24 frame into the encoder's yuv420p frame with the compiled core
  (:func:`mime_fast.ops.rgb_to_yuv420`, BT.601 or BT.709 limited range; 5x faster than swscale);
  :func:`patched_frame` copies a yuv420p frame and converts only the pixels a blur changed, from
  the blurred region alone.
* :func:`remux_video` copies the encoded video packets of an MP4 into a new MP4 without
  re-encoding (packets byte-identical), dropping every other stream.
* :func:`grid_packets` opens a source whose frames already lie on the output grid and hands its
  video stream (an :class:`Mp4Writer` ``video_template``) and its packets, byte-identical, with
  timestamps re-based onto the ``1/fps`` grid (FM's stream copy, :func:`mime_fast.subsets.fm_copy_reason`).
* :func:`atomic_outputs` hands out temporary names in the destination directories and renames them
  into place only when everything succeeded; on any exception every temporary file is removed.

Conventions
-----------
* Pixel format: frames are RGB24 (:func:`frame_rgb`) everywhere in Python.
* Odd sizes: yuv420p needs even dimensions.  Masking and blurring happen on the full displayed
  frame; the encoder then drops the last column and/or row (``frame[:H - H % 2, :W - W % 2]``).
  Coordinates are unchanged by this crop.
* Determinism: libx264 is run with an explicit ``threads`` count (never "auto", which depends on the
  machine), and PyAV's MP4 muxer writes no creation time, so the same input and settings give
  byte-identical files with the same PyAV/FFmpeg build.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import wave
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import numpy as np

try:
    import av
except ImportError as exc:  # pragma: no cover - av is a runtime dependency
    raise ImportError("mime_fast.video needs PyAV: pip install 'av>=12'") from exc

__all__ = [
    "ClipError",
    "SourceInfo",
    "probe",
    "output_frame_count",
    "FrameStandardiser",
    "decode_frames",
    "iter_display_frames",
    "extract_audio_wav",
    "read_wav",
    "write_wav",
    "Mp4Writer",
    "AacTrack",
    "BlackVideo",
    "WavReader",
    "black_frame",
    "remux_video",
    "grid_packets",
    "StreamFacts",
    "atomic_outputs",
    "even_crop",
    "yuv420_frame",
    "patched_frame",
    "copy_frame",
    "frame_matrix",
    "frame_rgb",
    "yuv420_planes",
    "apply_display_transform",
    "prefetch",
    "x264_asm",
    "x264_options",
]

#: Timestamp tolerance of the standardiser (container timestamps are often rounded to 1 ms).
PTS_TOLERANCE = Fraction(1, 1000)


class ClipError(ValueError):
    """An input clip that cannot be processed.  ``path`` is the clip, ``reason`` says why in plain
    words (``"not a media file"``, ``"truncated: ..."``, ``"corrupt video stream: ..."``, ``"no video
    stream ..."``, ``"a still image ..."``, ``"below the quality gate: ..."``); ``detail`` keeps
    FFmpeg's own message, when there is one, for whoever needs to dig (the manifest's ``detail``)."""

    def __init__(self, path, reason: str, detail: str | None = None):
        self.path = Path(path) if path is not None else None
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}")


def _interrupted(exc: BaseException) -> None:
    """Raise the ``KeyboardInterrupt`` an FFmpeg error stands for: a Ctrl-C while FFmpeg reads makes
    PyAV's interrupt callback stop it with AVERROR_EXIT (``av.error.ExitError``), which says nothing
    about the clip."""
    if isinstance(exc, av.error.ExitError):
        raise KeyboardInterrupt from exc


def _ffmpeg_detail(exc: BaseException) -> str:
    """FFmpeg's message of ``exc`` without the file name PyAV appends (the row names the clip)."""
    msg = getattr(exc, "strerror", None) or str(exc)
    return f"{type(exc).__name__}: {msg}"


#: Leading bytes of the containers FFmpeg reads that these corpora use: ``(offset, magic, name)``.
_SIGNATURES = (
    (4, b"ftyp", "MP4/MOV"), (4, b"moov", "MP4/MOV"), (4, b"mdat", "MP4/MOV"), (4, b"free", "MP4/MOV"),
    (4, b"wide", "MP4/MOV"), (0, b"\x1a\x45\xdf\xa3", "Matroska/WebM"), (0, b"RIFF", "AVI"),
    (0, b"FLV", "FLV"), (0, b"OggS", "Ogg"), (0, b"\x30\x26\xb2\x75", "ASF/WMV"), (0, b"\x00\x00\x01\xba", "MPEG-PS"),
)


def _mp4_boxes(path: Path, size: int) -> tuple[list[str], bool]:
    """The top-level box types of an MP4/MOV file and whether the last one runs past the end."""
    names: list[str] = []
    with open(path, "rb") as f:
        pos = 0
        while pos + 8 <= size and len(names) < 1000:
            f.seek(pos)
            head = f.read(16)
            n = int.from_bytes(head[:4], "big")
            names.append(head[4:8].decode("latin-1"))
            if n == 1 and len(head) >= 16:
                n = int.from_bytes(head[8:16], "big")
            elif n == 0:  # runs to the end of the file
                n = size - pos
            if n < 8:
                return names, True
            pos += n
        return names, pos > size


def _unreadable(path: Path, exc: BaseException) -> ClipError:
    """The :class:`ClipError` of a file FFmpeg cannot open, in plain words: not a media file, or a
    known container that is truncated (an MP4 whose index, ``moov``, never got written) or corrupt."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(16)
    kind = next((name for off, magic, name in _SIGNATURES if head[off:off + len(magic)] == magic), None)
    if head[:1] == b"\x47" and size >= 376:  # MPEG-TS: a sync byte every 188 bytes
        with open(path, "rb") as f:
            data = f.read(188 * 3)
        if data[188:189] == b"\x47" and data[376:377] == b"\x47":
            kind = "MPEG-TS"
    detail = _ffmpeg_detail(exc)
    if kind is None:
        return ClipError(path, "not a media file (no audio or video container FFmpeg recognises)", detail)
    if kind == "MP4/MOV":
        names, cut = _mp4_boxes(path, size)
        if "moov" not in names:
            return ClipError(path, "truncated: an MP4/MOV file without its index ('moov' box missing), "
                                   "as when a download or copy stops early", detail)
        if cut:
            return ClipError(path, "truncated: the MP4/MOV file ends inside a box", detail)
    return ClipError(path, f"corrupt {kind} file: FFmpeg cannot read its structure", detail)


#: Colour tags ``(colorspace, color_range, color_primaries, color_trc)`` as FFmpeg numbers them
#: (AVColorSpace, AVColorRange, AVColorPrimaries, AVColorTransferCharacteristic); 2 / 0 = unspecified.
ColorTags = tuple[int, int, int, int]


@dataclass(frozen=True)
class StreamFacts:
    """What the stream copy of FM (:func:`mime_fast.subsets.fm_copy_reason`) needs to know about the
    video stream beyond :class:`SourceInfo`'s other fields: the first decoded frame's pixel format,
    colour tags, interlacing and sample aspect ratio (``None``: unset), whether the H.264 packets are
    length-prefixed (``avcC`` extradata, as MP4/MOV/Matroska store them; Annex B otherwise), whether
    the first packet in decoding order is an IDR picture that is also shown first, and how many
    packets came without a presentation time or marked to be discarded (an edit list cutting into a
    GOP)."""

    pixel_format: str = ""
    color: ColorTags = (2, 0, 2, 2)
    interlaced: bool = False
    sample_aspect_ratio: Fraction | None = None
    avcc: bool = False
    first_idr: bool = False
    missing_pts: int = 0
    discarded: int = 0


def _h264_idr(data: bytes, extradata: bytes | None) -> bool:
    """Whether a length-prefixed H.264 access unit (``avcC`` ``extradata``) holds an IDR slice (NAL
    type 5)."""
    if not extradata or extradata[0] != 1 or len(extradata) < 5:
        return False
    size = (extradata[4] & 3) + 1
    pos = 0
    while pos + size < len(data):
        n = int.from_bytes(data[pos:pos + size], "big")
        if data[pos + size] & 0x1F == 5:
            return True
        pos += size + n
    return False


@dataclass
class SourceInfo:
    """What :func:`probe` found out about a clip.

    ``width``/``height`` are the *displayed* size (after rotation); ``coded_width``/``coded_height``
    the stored size.  ``rotation`` is the display rotation in degrees counter-clockwise (0, 90, 180,
    270; what ``VideoFrame.rotation`` reports for unmirrored matrices), applied before the mirror
    when ``mirrored``.  ``duration`` and ``start`` are exact seconds (``Fraction``).
    """

    path: Path
    format_name: str
    codec: str
    coded_width: int
    coded_height: int
    width: int
    height: int
    rotation: int
    video_frames: int
    start: Fraction
    duration: Fraction
    average_rate: float | None
    is_vfr: bool
    has_audio: bool
    audio_codec: str | None = None
    audio_rate: int | None = None
    audio_channels: int | None = None
    size_bytes: int = 0
    frame_times: list = field(default_factory=list, repr=False)  # sorted video pts, seconds
    #: ``(a, b, c, d)`` in {-1, 0, 1}: display = (a x + c y, b x + d y) of the decoded frame
    #: (FFmpeg display-matrix convention); ``(1, 0, 0, 1)`` when none.
    display_transform: tuple = (1, 0, 0, 1)
    mirrored: bool = False
    stream_index: int = 0  #: container index of the video stream used (cover art is skipped)
    #: Colour matrix of the decoded frames (first frame's tag): ``"bt709"`` when tagged BT.709,
    #: else ``"bt601"`` (also for untagged video, as FFmpeg assumes).  RGB frames are decoded with
    #: it and the outputs are converted back with it and tagged so.
    matrix: str = "bt601"
    #: Decoded frames are 8-bit yuv420p, limited range, even-sized and need no rotation: the encoders
    #: get them as they are (FM) or patched only inside the blurred box (FDM/FSM).
    yuv_passthrough: bool = False
    facts: StreamFacts = field(default_factory=StreamFacts)

    @property
    def fps(self) -> float:
        """Mean source frame rate (frames / duration)."""
        return float(self.video_frames / self.duration) if self.duration else 0.0


def _open(path: Path):
    try:
        return av.open(str(path), "r")
    except av.FFmpegError as exc:
        _interrupted(exc)
        raise _unreadable(Path(path), exc) from exc
    except (OSError, ValueError) as exc:
        raise ClipError(path, f"cannot be read ({exc.strerror or exc})" if isinstance(exc, OSError)
                        else f"cannot be read ({exc})") from exc


def _video_streams(c):
    """Real video streams of a container (cover art / attached pictures excluded)."""
    out = []
    for st in c.streams.video:
        disp = getattr(st, "disposition", 0)
        try:
            pic = bool(disp & av.stream.Disposition.attached_pic) or bool(disp & av.stream.Disposition.still_image)
        except Exception:  # older PyAV
            pic = False
        if not pic:
            out.append(st)
    return out


#: FFmpeg demuxers of image files (a JPEG renamed .mp4 opens as ``jpeg_pipe``; every ``*_pipe``
#: demuxer reads one image format) and codecs that only store still pictures.
_IMAGE_DEMUXERS = frozenset({"image2", "image2pipe", "gif_pipe"})
_IMAGE_CODECS = frozenset({"mjpeg", "png", "apng", "bmp", "tiff", "webp", "jpeg2000", "jpegls", "jpegxl", "gif",
                           "pam", "pbm", "pgm", "ppm", "qoi", "sgi", "targa", "dds", "exr", "hdr", "pcx",
                           "sunrast", "xbm", "xwd", "photocd", "avif"})


def _display_transform(frame) -> tuple[int, int, int, int]:
    """``(a, b, c, d)`` of the frame's display matrix, snapped to a quarter-turn / mirror."""
    raw = None
    with contextlib.suppress(Exception):
        for sd in frame.side_data:
            if "DISPLAYMATRIX" in str(getattr(sd, "type", "")):
                raw = bytes(sd)
                break
    if raw is None or len(raw) < 36:
        return (1, 0, 0, 1)
    m = np.frombuffer(raw[:36], dtype="<i4").astype(np.float64)
    a, b, c, d = m[0], m[1], m[3], m[4]
    if abs(a) + abs(d) >= abs(b) + abs(c):
        return (1 if a >= 0 else -1, 0, 0, 1 if d >= 0 else -1)
    return (0, 1 if b >= 0 else -1, 1 if c >= 0 else -1, 0)


def apply_display_transform(img: np.ndarray, t: tuple[int, int, int, int]) -> np.ndarray:
    """Map a decoded frame to its displayed orientation: ``out[y', x'] = img[y, x]`` with
    ``x' = a x + c y``, ``y' = b x + d y`` (up to a translation).  Returns a view."""
    a, b, c, d = t
    if b == 0 and c == 0:
        out = img
        if a < 0:
            out = out[:, ::-1]
        if d < 0:
            out = out[::-1]
        return out
    out = img.swapaxes(0, 1)  # out[x, y] = img[y, x]: y' = x, x' = y
    if b < 0:
        out = out[::-1]
    if c < 0:
        out = out[:, ::-1]
    return out


def probe(path) -> SourceInfo:
    """Validate ``path`` and describe it.  Raises :class:`ClipError` for unusable input.

    Demuxes all video packets (no decoding) for exact timestamps and decodes the first frame.
    """
    path = Path(path)
    if not path.exists():
        raise ClipError(path, "file does not exist")
    if not path.is_file():
        raise ClipError(path, "not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise ClipError(path, "empty file (0 bytes)")
    with contextlib.closing(_open(path)) as c:
        videos = _video_streams(c)
        if not videos:
            kind = "audio-only file" if c.streams.audio else "no audio or video streams"
            raise ClipError(path, f"no video stream ({kind})")
        vs = videos[0]
        stream_index = vs.index
        tb = vs.time_base or Fraction(1, 90000)
        codec = vs.codec_context.name
        cw, ch = vs.codec_context.width, vs.codec_context.height
        avg = vs.average_rate or vs.guessed_rate
        avg_rate = float(avg) if avg else None
        audio = c.streams.audio[0] if c.streams.audio else None
        pts_list: list = []
        durations: list[int] = []
        audio_end = None  # end (s, from time 0) of the last audio packet
        first_pkt = None  # (bytes, pts, keyframe) of the first video packet in decoding order
        missing_pts = discarded = 0
        try:
            for pkt in c.demux(*([vs, audio] if audio is not None else [vs])):
                if pkt.size == 0:
                    continue
                ts = pkt.pts if pkt.pts is not None else pkt.dts
                if pkt.stream.index != stream_index:
                    if ts is not None and pkt.stream.time_base:
                        e = Fraction(ts + int(pkt.duration or 0)) * pkt.stream.time_base
                        audio_end = e if audio_end is None else max(audio_end, e)
                    continue
                pts_list.append(ts)  # None: filled in below from the frame rate
                missing_pts += pkt.pts is None
                discarded += bool(pkt.is_discard)
                if first_pkt is None:
                    first_pkt = (bytes(pkt), pkt.pts, bool(pkt.is_keyframe))
                durations.append(int(pkt.duration or 0))
        except av.FFmpegError as exc:
            _interrupted(exc)
            raise ClipError(path, f"corrupt or truncated: the video stream breaks off after {len(pts_list)} packets",
                            _ffmpeg_detail(exc)) from exc
        if not pts_list:
            raise ClipError(path, "video stream has no frames")
        fmt = c.format.name
        if fmt in _IMAGE_DEMUXERS or fmt.endswith("_pipe") or (codec in _IMAGE_CODECS and len(pts_list) == 1):
            raise ClipError(path, f"a still image ({codec} in {fmt}), not a video")
        declared_frames = int(vs.frames or 0)
        declared_dur = None
        if vs.duration:
            declared_dur = Fraction(vs.duration) * tb
        elif c.duration:
            declared_dur = Fraction(c.duration, 1_000_000)
        if any(p is None for p in pts_list):
            # no timestamps at all (raw elementary stream): assume constant rate
            rate = Fraction(avg) if avg else Fraction(25)
            step = 1 / (rate * tb)
            pts_list = [int(round(i * step)) for i in range(len(pts_list))]
            durations = [int(round(step))] * len(pts_list)
        order = sorted(range(len(pts_list)), key=lambda i: pts_list[i])
        spts = [pts_list[i] for i in order]
        sdur = [durations[i] for i in order]
        deltas = [b - a for a, b in zip(spts, spts[1:]) if b > a]
        if deltas:
            med = sorted(deltas)[len(deltas) // 2]
        elif avg:
            med = max(1, int(round(1 / (Fraction(avg) * tb))))
        else:
            med = max(1, int(round(1 / (30 * tb))))
        last_dur = sdur[-1] if sdur[-1] > 0 else med
        ends = [p + (d if d > 0 else med) for p, d in zip(spts, sdur)]
        end = max(max(ends), spts[-1] + last_dur)
        start_pts = spts[0]
        start = Fraction(start_pts) * tb
        duration = Fraction(end - start_pts) * tb
        if declared_frames and len(spts) < declared_frames:
            raise ClipError(path, f"truncated: the index declares {declared_frames} video frames, "
                                  f"only {len(spts)} are readable")
        # containers without a frame index (Matroska, WebM, TS) stop early on truncated data:
        # compare with the declared duration (heuristic: >25% and >0.5 s missing).  The video
        # stream's own duration is its length; the container's spans every stream and, in
        # Matroska, counts from time 0: it is compared with where the last packet of the video or
        # the audio ends (a clip whose first frame is late, or whose audio outlasts the video, is
        # not truncated).
        got = duration
        if declared_dur is not None and not vs.duration:
            got = max([Fraction(end) * tb] + ([audio_end] if audio_end is not None else []))
        if declared_dur is not None and got < declared_dur * 3 / 4 and declared_dur - got > Fraction(1, 2):
            raise ClipError(path, f"truncated: video lasts {float(duration):.3f} s of the declared "
                                  f"{float(declared_dur):.3f} s")
        is_vfr = bool(deltas) and (max(deltas) - min(deltas)) > max(1, med // 100)
        frame_times = [Fraction(p) * tb for p in spts]

    # decode the first frame: proves the stream decodes and gives the display matrix
    with contextlib.closing(_open(path)) as c:
        vs = c.streams[stream_index]
        try:
            first = next(iter(c.decode(vs)), None)
        except av.FFmpegError as exc:
            _interrupted(exc)
            raise ClipError(path, "corrupt video stream: its first frame does not decode", _ffmpeg_detail(exc)) from exc
        if first is None:
            raise ClipError(path, "video stream decodes to no frames")
        transform = _display_transform(first)
        cw, ch = first.width, first.height
        matrix = frame_matrix(first)
        passthrough = (first.format.name == "yuv420p" and int(first.color_range) != 2 and transform == (1, 0, 0, 1)
                       and cw % 2 == 0 and ch % 2 == 0)
        extradata = vs.codec_context.extradata
        sar = vs.codec_context.sample_aspect_ratio
        facts = StreamFacts(
            pixel_format=first.format.name,
            color=(int(first.colorspace), int(first.color_range), int(first.color_primaries), int(first.color_trc)),
            interlaced=bool(first.interlaced_frame),
            sample_aspect_ratio=Fraction(sar) if sar else None,
            avcc=codec == "h264" and bool(extradata) and extradata[0] == 1,
            first_idr=(codec == "h264" and first_pkt[2] and first_pkt[1] is not None and first_pkt[1] == start_pts
                       and _h264_idr(first_pkt[0], extradata)),
            missing_pts=missing_pts,
            discarded=discarded,
        )
    w, h = (ch, cw) if transform[0] == 0 else (cw, ch)
    a, b, c_, d = transform
    mirrored = a * d - b * c_ < 0
    if mirrored:  # display = hflip(rotate(frame)): take the mirror out to report the rotation
        a, c_ = -a, -c_
    rotation = int(round(np.degrees(np.arctan2(c_, a)))) % 360
    return SourceInfo(
        path=path,
        format_name=c.format.name,
        codec=codec,
        coded_width=cw,
        coded_height=ch,
        width=w,
        height=h,
        rotation=rotation,
        video_frames=len(spts),
        start=start,
        duration=duration,
        average_rate=avg_rate,
        is_vfr=is_vfr,
        has_audio=audio is not None,
        audio_codec=audio.codec_context.name if audio is not None else None,
        audio_rate=audio.codec_context.sample_rate if audio is not None else None,
        audio_channels=audio.codec_context.channels if audio is not None else None,
        size_bytes=size,
        frame_times=frame_times,
        display_transform=transform,
        mirrored=bool(mirrored),
        stream_index=stream_index,
        matrix=matrix,
        yuv_passthrough=passthrough,
        facts=facts,
    )


#: FFmpeg's AVColorSpace values of the two matrices the outputs use (BT.709, SMPTE 170M = BT.601).
_COLORSPACE = {"bt709": 1, "bt601": 6}


def frame_matrix(frame) -> str:
    """``"bt709"`` for a frame tagged BT.709 (AVCOL_SPC_BT709), else ``"bt601"``: the matrix PyAV's
    ``to_ndarray(format="rgb24")`` decodes it with (BT.601 for untagged, SMPTE 170M and BT.470BG
    frames; other matrices are rare in these corpora and are treated as BT.601)."""
    return "bt709" if int(frame.colorspace) == _COLORSPACE["bt709"] else "bt601"


def output_frame_count(duration: Fraction, fps: int | Fraction) -> int:
    """``round(duration * fps)`` (half up), at least 1."""
    n = Fraction(duration) * Fraction(fps)
    return max(1, int(n + Fraction(1, 2)))


class FrameStandardiser:
    """Constant-frame-rate resampling by timestamps, streaming.

    ``push(time, item)`` with source frames in presentation order yields ``(out_index, item)`` for every
    output frame that is now decided; ``finish()`` yields the remaining ones up to ``n_out``.  Output
    frame ``i`` at ``t_i = t0 + i / fps`` gets the latest pushed item with ``time <= t_i + tolerance``.
    Only the current item is held, so memory is constant.
    """

    def __init__(self, t0: Fraction, fps, n_out: int, tolerance: Fraction = PTS_TOLERANCE):
        self.t0 = Fraction(t0)
        self.fps = Fraction(fps)
        self.n_out = int(n_out)
        self.tol = Fraction(tolerance)
        self.next_out = 0
        self.current = None
        self._have = False

    def _t(self, i: int) -> Fraction:
        return self.t0 + Fraction(i) / self.fps

    def push(self, time: Fraction, item):
        time = Fraction(time)
        # every output slot strictly before this frame's time is decided by the current item
        while self._have and self.next_out < self.n_out and self._t(self.next_out) + self.tol < time:
            yield self.next_out, self.current
            self.next_out += 1
        self.current = item
        self._have = True

    def finish(self):
        while self._have and self.next_out < self.n_out:
            yield self.next_out, self.current
            self.next_out += 1


def _frame_time(frame, tb, fallback: Fraction) -> Fraction:
    if frame.pts is not None:
        return Fraction(frame.pts) * (frame.time_base or tb)
    return fallback


def native_yuv(frame) -> bool:
    """Whether the compiled core converts ``frame`` (8-bit yuv420p, limited or unspecified range)."""
    return frame.format.name == "yuv420p" and int(frame.color_range) != 2


def frame_rgb(frame, roi: tuple[int, int, int, int] | None = None, *, device: str = "cpu") -> np.ndarray:
    """RGB24 ``H x W x 3`` of a decoded frame, in its coded orientation (``roi`` ``(x, y, w, h)``: only
    that rectangle): :func:`mime_fast.ops.yuv420_to_rgb` with the frame's matrix
    (:func:`frame_matrix`) for 8-bit limited-range yuv420p frames, swscale for any other format."""
    if native_yuv(frame):
        from . import ops  # the compiled core

        return ops.yuv420_to_rgb(*yuv420_planes(frame), roi=roi, matrix=frame_matrix(frame), device=device)
    rgb = frame.to_ndarray(format="rgb24")
    if roi is not None:
        x, y, w, h = roi
        rgb = rgb[y : y + h, x : x + w]
    return np.ascontiguousarray(rgb)


def iter_display_frames(path, info: SourceInfo, *, rgb: bool = True, keep_yuv: bool = False) -> Iterator[tuple]:
    """Decode the video once; yield ``(source_index, time_seconds, rgb)`` in presentation order
    (``(source_index, time_seconds, rgb, frame)`` with ``keep_yuv``: ``frame`` is the decoded
    yuv420p ``av.VideoFrame`` when ``info.yuv_passthrough`` and the frame still qualifies, else
    ``None``).

    ``rgb`` is H x W x 3 uint8, C-contiguous, rotated to the display orientation
    (:func:`frame_rgb`).  With ``rgb=False`` and ``keep_yuv``, frames that come with their decoded
    ``frame`` are not converted (``rgb`` is ``None``): a caller that needs RGB only in places
    converts just those (:func:`frame_rgb` with a ``roi``).  Raises :class:`ClipError` when decoding
    fails or yields fewer frames than the container holds.
    """
    path = Path(path)
    transform = tuple(info.display_transform)
    identity = transform == (1, 0, 0, 1)
    step = Fraction(1, 30) if not info.average_rate else 1 / Fraction(info.average_rate).limit_denominator(100000)
    n = 0
    last_t = info.start - step
    with contextlib.closing(_open(path)) as c:
        vs = c.streams[info.stream_index]
        vs.thread_type = "AUTO"
        tb = vs.time_base or Fraction(1, 90000)
        try:
            for frame in c.decode(vs):
                t = _frame_time(frame, tb, last_t + step)
                last_t = t
                same = keep_yuv and (info.yuv_passthrough and native_yuv(frame) and frame_matrix(frame) == info.matrix
                                     and (frame.width, frame.height) == (info.coded_width, info.coded_height))
                img = None
                if rgb or not same:
                    img = frame_rgb(frame)
                    if not identity:
                        img = np.ascontiguousarray(apply_display_transform(img, transform))
                if keep_yuv:
                    yield n, t, img, (frame if same else None)
                else:
                    yield n, t, img
                n += 1
        except av.FFmpegError as exc:
            _interrupted(exc)
            raise ClipError(path, f"corrupt video stream: decoding fails after {n} frames", _ffmpeg_detail(exc)) from exc
    if n < info.video_frames:
        raise ClipError(path, f"decoded only {n} of {info.video_frames} video frames (truncated or corrupt)")


def decode_frames(path, indices) -> list[np.ndarray]:
    """The RGB frames (display orientation, :func:`iter_display_frames`) at the source frame
    ``indices`` of the clip at ``path``, in increasing index order, decoding no further than the
    last one (reference frames for tests and golden files).  Raises :class:`ClipError` when the clip
    has fewer frames."""
    path = Path(path)
    wanted, out = set(int(i) for i in indices), []
    if not wanted:
        return out
    for i, _, rgb in iter_display_frames(path, probe(path)):
        if i in wanted:
            out.append(np.ascontiguousarray(rgb))
        if i >= max(wanted):
            break
    if len(out) != len(wanted):
        raise ClipError(path, f"has {len(out)} of the {len(wanted)} frames asked for")
    return out


def prefetch(iterable, maxsize: int = 4):
    """Run ``iterable`` on a worker thread, handing its items over through a bounded queue.

    Exceptions of the producer are re-raised in the consumer; closing the returned generator early
    stops the producer.  ``maxsize=0`` returns a plain iterator (no thread).
    """
    if maxsize <= 0:
        yield from iterable
        return
    import queue

    q: queue.Queue = queue.Queue(maxsize=maxsize)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("done", done))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            q.put(("error", exc))
        finally:
            close = getattr(iterable, "close", None)
            if close is not None and stop.is_set():
                with contextlib.suppress(Exception):
                    close()

    t = threading.Thread(target=run, name="prefetch", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        while t.is_alive():
            with contextlib.suppress(queue.Empty):
                q.get(timeout=0.05)
        t.join()


# ----------------------------------------------------------------------------------------- audio


def write_wav(path, samples: np.ndarray, rate: int) -> None:
    """Write int16 samples (``(n,)`` mono or ``(n, channels)``) as a PCM WAV file."""
    s = np.asarray(samples, dtype=np.int16)
    if s.ndim == 1:
        s = s[:, None]
    with wave.open(str(path), "wb") as w:
        w.setnchannels(s.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(rate))
        w.writeframes(np.ascontiguousarray(s).tobytes())


def read_wav(path) -> tuple[np.ndarray, int]:
    """Read a 16-bit PCM WAV: ``(samples (n, channels) int16, rate)``."""
    with wave.open(str(path), "rb") as w:
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        data = np.frombuffer(w.readframes(n), dtype="<i2").reshape(-1, ch)
    return data, rate


def extract_audio_wav(path, info: SourceInfo, wav_path, *, n_samples: int, rate: int = 16000,
                      channels: int = 1) -> int:
    """Decode + resample the first audio stream to ``wav_path`` (16-bit PCM), streaming.

    The result starts at the first video frame and has exactly ``n_samples`` samples per channel
    (silence-padded or trimmed).  Returns the number of samples that came from the source (the rest is
    padding).
    """
    path = Path(path)
    layout = {1: "mono", 2: "stereo"}.get(channels)
    if layout is None:
        raise ValueError(f"audio_channels must be 1 or 2, got {channels}")
    resampler = av.AudioResampler(format="s16", layout=layout, rate=rate)
    written = 0
    from_source = 0
    skip = 0
    started = False

    with wave.open(str(wav_path), "wb") as w, contextlib.closing(_open(path)) as c:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)

        def emit(arr: np.ndarray, real: bool):
            nonlocal written, from_source
            room = n_samples - written
            if room <= 0:
                return
            arr = arr[:room]
            w.writeframes(np.ascontiguousarray(arr).tobytes())
            written += len(arr)
            if real:
                from_source += len(arr)

        def consume(rframes):
            nonlocal skip
            for rf in rframes:
                a = rf.to_ndarray()  # packed s16: (1, n * channels)
                a = a.reshape(-1, channels)
                if skip:
                    d = min(skip, len(a))
                    a = a[d:]
                    skip -= d
                if len(a):
                    emit(a, True)

        ast = c.streams.audio[0]
        atb = ast.time_base
        try:
            for frame in c.decode(ast):
                if not started:
                    started = True
                    if frame.pts is not None and atb is not None:
                        offset = (Fraction(frame.pts) * atb - info.start) * rate
                        off = int(round(offset))
                        if off > 0:
                            emit(np.zeros((off, channels), np.int16), False)
                        elif off < 0:
                            skip = -off
                frame.pts = None  # let the resampler count samples; we align by the first frame only
                consume(resampler.resample(frame))
                if written >= n_samples:
                    break
            else:
                consume(resampler.resample(None))
        except av.FFmpegError as exc:
            _interrupted(exc)
            raise ClipError(path, "corrupt audio stream: decoding fails", _ffmpeg_detail(exc)) from exc
        if written < n_samples:
            emit(np.zeros((n_samples - written, channels), np.int16), False)
    return from_source


class WavReader:
    """Sequential reader of a 16-bit WAV: ``read_until(n)`` returns the samples up to index ``n``."""

    def __init__(self, path):
        self._w = wave.open(str(path), "rb")
        self.channels = self._w.getnchannels()
        self.rate = self._w.getframerate()
        self.total = self._w.getnframes()
        self.pos = 0

    def read_until(self, n: int) -> np.ndarray:
        n = min(n, self.total)
        if n <= self.pos:
            return np.zeros((0, self.channels), np.int16)
        data = np.frombuffer(self._w.readframes(n - self.pos), dtype="<i2").reshape(-1, self.channels)
        self.pos += len(data)
        return data

    def close(self):
        self._w.close()


# ----------------------------------------------------------------------------------------- video out


def even_crop(rgb: np.ndarray) -> np.ndarray:
    """Drop the last row/column when odd (yuv420p needs even sizes)."""
    h, w = rgb.shape[:2]
    if h % 2 or w % 2:
        rgb = rgb[: h - h % 2, : w - w % 2]
    return rgb


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


def yuv420_frame(rgb: np.ndarray, *, matrix: str = "bt601"):
    """The yuv420p ``av.VideoFrame`` of an RGB24 frame (cropped to even size, :func:`even_crop`),
    converted by :func:`mime_fast.ops.rgb_to_yuv420` with ``matrix`` (``"bt601"``/``"bt709"``)."""
    from . import ops  # the compiled core

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
    from . import ops  # the compiled core

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


class AacTrack:
    """The AAC encoding of a 16-bit WAV, made once and muxed as it is into every output that
    carries that audio (:class:`Mp4Writer` ``audio_track=``): the encoder is deterministic, so each
    output gets the packets it would have encoded itself, for a quarter of the work when four
    outputs share the track.  Held in memory (about 20 KB per 10 s of 16 kHz mono)."""

    def __init__(self, wav_path):
        import io

        with contextlib.closing(wave.open(str(wav_path), "rb")) as w:
            channels, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
            pcm = np.frombuffer(w.readframes(n), dtype="<i2").reshape(1, -1)
        self.rate, self.channels, self.samples = rate, channels, n
        layout = {1: "mono", 2: "stereo"}[channels]
        buf = io.BytesIO()
        with contextlib.closing(av.open(buf, "w", format="mp4")) as c:
            st = c.add_stream("aac", rate=rate, layout=layout)
            if n:
                af = av.AudioFrame.from_ndarray(pcm, format="s16", layout=layout)
                af.sample_rate, af.pts, af.time_base = rate, 0, Fraction(1, rate)
                for p in st.encode(af):
                    c.mux(p)
            for p in st.encode(None):
                c.mux(p)
        self.data = buf.getvalue()

    def open(self):
        """``(container, stream)``: a new reader of the encoded track."""
        import io

        c = av.open(io.BytesIO(self.data), "r")
        return c, c.streams.audio[0]


#: x264's instruction-set levels (its ``asm`` option names) and the CPU flags each needs, as
#: ``/proc/cpuinfo`` spells them, best first.  AVX-512 is left out on purpose: see :func:`x264_asm`.
_X264_LEVELS = (
    ("AVX2", ("avx2", "fma", "bmi1", "bmi2", "abm", "avx", "sse4_2", "ssse3", "sse2")),
    ("AVX", ("avx", "sse4_2", "sse4_1", "ssse3", "sse3", "sse2")),
    ("SSE4.2", ("sse4_2", "sse4_1", "ssse3", "sse3", "sse2")),
    ("SSSE3", ("ssse3", "sse3", "sse2")),
    ("SSE2", ("sse2",)),
)


def _cpu_flags() -> set[str] | None:
    """The CPU's feature flags (``/proc/cpuinfo`` names), ``None`` where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    try:  # other systems: numpy's own dispatch table (no BMI/LZCNT there; every AVX2 CPU has them)
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as feats
        except ImportError:  # numpy 1.x
            from numpy.core._multiarray_umath import __cpu_features__ as feats
    except ImportError:
        return None
    names = {"SSE2": "sse2", "SSE3": "sse3", "SSSE3": "ssse3", "SSE41": "sse4_1", "SSE42": "sse4_2",
             "AVX": "avx", "FMA3": "fma", "AVX2": "avx2"}
    flags = {v for k, v in names.items() if feats.get(k)}
    if "avx2" in flags:
        flags |= {"bmi1", "bmi2", "abm"}
    return flags


@functools.lru_cache(maxsize=None)
def x264_asm() -> str | None:
    """The value of libx264's ``asm`` option every encoder of this package uses: the best of x264's
    x86 instruction-set levels this CPU has, **AVX-512 excluded**; ``None`` (x264's own choice)
    off x86 or where the flags cannot be read.

    Why: the AVX-512 code of libx264 (as bundled in PyAV's wheels) reads memory it never wrote,
    so on a CPU with AVX-512 the same frames encode to different packets depending on what earlier
    allocations of the process left behind (reproduced with ``MALLOC_PERTURB_``: every value gives
    other bytes; ``tests/test_determinism.py``).  Up to AVX2 the output does not depend on it and
    is the same bytes at every level from SSSE3 to AVX2 (tested), so outputs are also identical
    across x86 machines with and without AVX-512 (CPUs with SSE2 alone, from before 2006, give other
    bytes; so would the C code, and ARM's NEON code is not compared).  Encoding speed is unchanged (AVX2 and AVX-512
    measured within noise on 720p veryfast).
    """
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return None
    flags = _cpu_flags()
    if flags is None:
        return None
    if "bmi1" not in flags and "bmi" in flags:  # /proc/cpuinfo spells BMI1 "bmi1"; tolerate "bmi"
        flags.add("bmi1")
    for name, need in _X264_LEVELS:
        if all(f in flags for f in need):
            return name
    return None


def x264_options(crf: int, preset: str) -> dict[str, str]:
    """libx264's options for an encode of this package (outputs and generated sample clips):
    ``crf``, ``preset`` and the instruction-set pin of :func:`x264_asm` that keeps its output
    independent of memory it never wrote."""
    opts = {"crf": str(crf), "preset": str(preset)}
    asm = x264_asm()
    if asm is not None:
        opts["x264-params"] = f"asm={asm}"
    return opts


def _add_x264_stream(c, width: int, height: int, fps: Fraction, crf: int, preset: str, threads: int, matrix: str):
    """The libx264 yuv420p stream of every output (one place, so cached packets match a writer's)."""
    vs = c.add_stream("libx264", rate=fps)
    vs.width, vs.height = width, height
    vs.pix_fmt = "yuv420p"
    vs.codec_context.time_base = 1 / fps
    vs.codec_context.thread_count = threads
    vs.codec_context.thread_type = "FRAME" if threads != 1 else "SLICE"
    vs.options = x264_options(crf, preset)
    # the colour matrix the frames were converted with, limited range
    vs.codec_context.colorspace = _COLORSPACE[matrix]
    vs.codec_context.color_range = 1
    return vs


class BlackVideo:
    """The libx264 packets of a run of black frames (:func:`black_frame`, VMM's picture) for one
    encoder configuration, kept per process and muxed as they are into every VMM of that
    configuration (:meth:`Mp4Writer.write_black`).

    With preset ``"ultrafast"`` (no lookahead, no B-frames) libx264 gives frame ``i`` the same
    packet whatever frames follow, so the first ``n`` packets of a longer run are exactly the
    encode of ``n`` black frames: the files are the bytes a direct encode writes
    (``tests/test_video.py`` compares them).  The run is encoded frame by frame as far as a clip
    asks, so the first clip of a configuration costs what encoding its black frames costs and a
    later one only the frames beyond the longest before it (re-encoded from the start: the encoder
    is released when the writer closes, as its buffers are large, 30 MB at 720p).  The packets
    stay: about 24 bytes a frame (3 KB for the key frame every 250 frames), for the 8
    configurations used last.  Thread-safe (one lock for all); use :meth:`shared`.
    """

    _lock = threading.RLock()
    _instances: dict = {}  # config -> BlackVideo, most recently used last (at most 8)

    def __init__(self, config: tuple):
        self.config = config  # (width, height, fps, crf, preset, threads, matrix) of _add_x264_stream
        self._packets: list[tuple[bytes, int, int, int, bool]] = []
        self._enc = None  # [container, stream, frame, frames fed] while a writer extends the run

    @classmethod
    def reset(cls) -> None:
        """Forget every run."""
        with cls._lock:
            for inst in cls._instances.values():
                inst.release()
            cls._instances.clear()

    @classmethod
    def shared(cls, config: tuple) -> "BlackVideo":
        """The process's instance for ``config``."""
        with cls._lock:
            inst = cls._instances.pop(config, None) or cls(config)
            cls._instances[config] = inst
            while len(cls._instances) > 8:
                cls._instances.pop(next(iter(cls._instances))).release()
            return inst

    def packet(self, i: int) -> tuple[bytes, int, int, int, bool]:
        """``(data, pts, dts, duration, keyframe)`` of frame ``i`` (times in ``1/fps``), encoding
        black frames until libx264 has returned it."""
        with self._lock:
            while i >= len(self._packets):
                self._feed()
            return self._packets[i]

    def release(self) -> None:
        """Free the encoder (the packets stay)."""
        with self._lock:
            enc, self._enc = self._enc, None
            if enc is not None:
                with contextlib.suppress(Exception):
                    enc[0].close()

    def _feed(self) -> None:
        if self._enc is None:
            import io

            c = av.open(io.BytesIO(), "w", format="mp4")  # the container makes the SPS/PPS global
            self._enc = [c, _add_x264_stream(c, *self.config), black_frame(*self.config[:2]), 0]
        c, vs, vf, fed = self._enc
        vf.pts, vf.time_base = fed, 1 / self.config[2]
        self._enc[3] = fed + 1
        for p in vs.encode(vf):
            if int(p.dts) < len(self._packets):  # re-encoding the start of the run
                continue
            if int(p.dts) != len(self._packets) or int(p.pts) != int(p.dts):
                raise RuntimeError(f"libx264 {self.config[4]!r} reorders frames: black packets cannot be reused")
            self._packets.append((bytes(p), int(p.pts), int(p.dts), int(p.duration or 0), bool(p.is_keyframe)))


class Mp4Writer:
    """libx264 (yuv420p) MP4 writer with an optional AAC track.

    With ``video_template`` (an input ``av.VideoStream``) nothing is encoded: the video stream takes
    that stream's codec parameters and gets already-encoded packets through :meth:`write_packet`
    (FM's stream copy, :func:`grid_packets`); timestamps, audio and container are as for an encode.

    ``width``/``height`` are the (even) encoded size.  Frames given to :meth:`write_rgb` may be one
    pixel larger (odd source): they are cropped with :func:`even_crop`.  Video pts are frame indices
    in a ``1/fps`` time base.  Audio is either int16 PCM ``(n, channels)`` at ``audio_rate``
    (:meth:`write_audio`, encoded here) or an :class:`AacTrack` (``audio_track``, muxed as it is
    along the video by :meth:`write_audio_until`).

    With ``queue_size > 0`` the RGB->YUV conversion, encoding and muxing run on a worker thread fed
    by a bounded queue of that many items (PyAV releases the GIL while encoding, so several writers
    encode in parallel); the caller must not modify arrays after handing them over.  Errors of the
    worker are re-raised by the next call.  ``queue_size=0`` encodes synchronously.
    """

    def __init__(self, path, width: int, height: int, *, fps=30, crf: int = 18, preset: str = "veryfast",
                 threads: int = 2, audio_rate: int | None = None, audio_channels: int = 1,
                 audio_track: AacTrack | None = None, queue_size: int = 0, matrix: str = "bt601",
                 video_template=None):
        self.path = Path(path)
        self.width, self.height = int(width), int(height)
        self.fps = Fraction(fps)
        self.c = av.open(str(self.path), "w", format="mp4")
        self._config = (self.width, self.height, self.fps, int(crf), str(preset), int(threads), matrix)
        self._copy = video_template is not None
        try:
            if self._copy:
                self.vs = self.c.add_stream_from_template(video_template)
                self.vs.time_base = 1 / self.fps
            else:
                self.vs = _add_x264_stream(self.c, *self._config)
            self.matrix = matrix
            self.audio = None
            self._track = None
            if audio_track is not None:
                self._track = audio_track.open()
                self.audio = self.c.add_stream_from_template(self._track[1])
                self._track_packets = self._track[0].demux(self._track[1])
                self._track_next = None
            elif audio_rate:
                layout = {1: "mono", 2: "stereo"}[audio_channels]
                self.audio = self.c.add_stream("aac", rate=int(audio_rate), layout=layout)
                self.audio_rate = int(audio_rate)
                self.audio_layout = layout
                self.audio_pts = 0
        except Exception:
            self.c.close()
            if self._track is not None:
                self._track[0].close()
            raise
        self.frames = 0
        self._black = False  # write_black used: the shared black run's encoder is released at the end
        self._black_frame = None  # write_black's picture with a preset other than "ultrafast"
        self._closed = False
        self._error: BaseException | None = None
        self._q = None
        self._thread = None
        if queue_size > 0:
            import queue

            self._q = queue.Queue(maxsize=int(queue_size))
            self._thread = threading.Thread(target=self._worker, name=f"mp4writer-{self.path.name}", daemon=True)
            self._thread.start()

    # -- worker -------------------------------------------------------------------------------
    def _worker(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._error is not None:
                continue  # drain after a failure so producers never block
            try:
                getattr(self, "_do_" + item[0])(*item[1:])
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = exc

    def _submit(self, *item):
        if self._error is not None:
            raise self._error
        if self._q is None:
            getattr(self, "_do_" + item[0])(*item[1:])
        else:
            self._q.put(item)

    def _mux(self, packets):
        for p in packets:
            self.c.mux(p)

    def _do_frame(self, vf, pts):
        vf.pts = pts
        # a decoded frame (FM's passthrough) carries the source's picture type, which libx264 would
        # obey (forced I/P/B): the encoder decides the frame types itself, as for every other output
        vf.pict_type = 0
        vf.time_base = self.vs.codec_context.time_base
        self._mux(self.vs.encode(vf))

    def _do_packet(self, data: bytes, pts: int, dts: int, duration: int, keyframe: bool):
        p = av.Packet(data)
        p.pts, p.dts, p.duration, p.is_keyframe = pts, dts, duration, keyframe
        p.time_base = 1 / self.fps
        p.stream = self.vs
        self.c.mux(p)

    def _do_black(self, pts: int):
        self._do_packet(*BlackVideo.shared(self._config).packet(pts))

    def _do_rgb(self, rgb, pts):
        self._do_frame(yuv420_frame(rgb, matrix=self.matrix), pts)

    def _do_audio(self, a, pts):
        af = av.AudioFrame.from_ndarray(a, format="s16", layout=self.audio_layout)
        af.sample_rate = self.audio_rate
        af.pts = pts
        af.time_base = Fraction(1, self.audio_rate)
        self._mux(self.audio.encode(af))

    def _do_track(self, until):
        """Mux the track's packets that start before ``until`` seconds (all of them: ``None``)."""
        tb = self._track[1].time_base
        while True:
            p = self._track_next
            if p is None:
                p = next(self._track_packets, None)
                if p is None:
                    return
                if p.dts is None and p.size == 0:  # the demuxer's final empty packet
                    continue
            if until is not None and p.pts is not None and p.pts * tb >= until:
                self._track_next = p
                return
            self._track_next = None
            p.stream = self.audio
            self.c.mux(p)

    def _do_flush(self):
        if not self._copy:
            self._mux(self.vs.encode(None))
        if self._track is not None:
            self._do_track(None)
        elif self.audio is not None:
            self._mux(self.audio.encode(None))

    # -- public -------------------------------------------------------------------------------
    def write_frame(self, vf, pts: int) -> None:
        """Encode a ready ``av.VideoFrame`` (rgb24 or yuv420p) with the given pts (frame index).
        The frame object is reused by nobody else while queued (its pts is set by the encoder)."""
        self._submit("frame", vf, int(pts))
        self.frames += 1

    def write_black(self, pts: int) -> None:
        """Frame ``pts`` (frame index; call with 0, 1, 2, ... in order) is black: with preset
        ``"ultrafast"`` the packet of :class:`BlackVideo` for this writer's configuration is muxed
        as it is (the bytes its encoder would write), else a black frame is encoded."""
        if self._config[4] != "ultrafast":
            if self._black_frame is None:  # one picture for every call (the encoder copies it)
                self._black_frame = black_frame(self.width, self.height)
            self.write_frame(self._black_frame, pts)
            return
        if pts != self.frames:
            raise ValueError(f"write_black: frame {pts} after {self.frames} frames (black runs start at 0, in order)")
        self._black = True
        self._submit("black", int(pts))
        self.frames += 1

    def write_packet(self, data: bytes, pts: int, dts: int, duration: int, keyframe: bool) -> None:
        """Mux one already-encoded video packet (times in ``1/fps``; a ``video_template`` writer)."""
        if not self._copy:
            raise ValueError("write_packet needs a writer made with video_template=")
        self._submit("packet", data, int(pts), int(dts), int(duration), bool(keyframe))
        self.frames += 1

    def write_rgb(self, rgb: np.ndarray, pts: int) -> None:
        rgb = even_crop(rgb)
        if not rgb.flags.c_contiguous:
            rgb = np.ascontiguousarray(rgb)
        self._submit("rgb", rgb, int(pts))
        self.frames += 1

    def write_audio_until(self, seconds) -> None:
        """Mux the :class:`AacTrack`'s packets that start before ``seconds`` (call it as the video
        advances, so audio and video interleave in the file; :meth:`close` muxes the rest)."""
        if self._track is not None:
            self._submit("track", Fraction(seconds))

    def write_audio(self, samples: np.ndarray) -> None:
        if self._track is not None:
            raise ValueError("this writer muxes an AacTrack: use write_audio_until")
        if self.audio is None or len(samples) == 0:
            return
        a = np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1)
        pts = self.audio_pts
        self.audio_pts += samples.shape[0]
        self._submit("audio", a, pts)

    def close(self) -> None:
        """Flush the encoders, wait for the worker and finish the file (raises any worker error)."""
        if self._closed:
            return
        self._submit("flush")
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
        self._closed = True
        self._close_sources()
        if self._error is not None:
            with contextlib.suppress(Exception):
                self.c.close()
            raise self._error
        self.c.close()

    def abort(self) -> None:
        """Stop without finishing the file (the caller deletes it)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._error = self._error or RuntimeError("aborted")
            self._q.put(None)
            self._thread.join()
        self._close_sources()
        with contextlib.suppress(Exception):
            self.c.close()

    def _close_sources(self) -> None:
        if self._track is not None:
            with contextlib.suppress(Exception):
                self._track[0].close()
        if self._black:
            BlackVideo.shared(self._config).release()


def black_frame(width: int, height: int):
    """A yuv420p ``av.VideoFrame`` that decodes to RGB (0, 0, 0) (limited range Y=16, U=V=128)."""
    vf = av.VideoFrame(width, height, "yuv420p")
    planes = vf.planes
    for plane, value in zip(planes, (16, 128, 128)):
        buf = np.frombuffer(plane, dtype=np.uint8)
        buf[:] = value
    return vf


def remux_video(src, dst) -> int:
    """Copy the first video stream of MP4 ``src`` into a new MP4 ``dst`` without re-encoding.

    Every other stream is dropped.  Returns the number of packets copied.
    """
    n = 0
    with contextlib.closing(av.open(str(src), "r")) as ic:
        ivs = ic.streams.video[0]
        with contextlib.closing(av.open(str(dst), "w", format="mp4")) as oc:
            ovs = oc.add_stream_from_template(ivs)
            for pkt in ic.demux(ivs):
                if pkt.dts is None and pkt.size == 0:
                    continue
                pkt.stream = ovs
                oc.mux(pkt)
                n += 1
    return n


@contextlib.contextmanager
def grid_packets(path, info: SourceInfo, fps) -> Iterator[tuple]:
    """``(stream, packets)`` of the source's video: ``stream`` for :class:`Mp4Writer`'s
    ``video_template``, ``packets`` an iterator of ``(data, pts, dts, duration, keyframe)`` in
    decoding order, ``data`` the source's bytes and the times in ``1/fps``: ``pts`` is the frame's
    rank in presentation order (output frame ``i`` is the ``i``-th source frame: call this only
    when the standardisation maps the source 1:1), ``dts`` the packet's rank in decoding order
    minus the stream's reordering delay (the fewest frames that keep ``dts <= pts``), ``duration`` 1.
    Demuxes the stream twice (decoding-order ranks first), decodes nothing."""
    rank = {t: i for i, t in enumerate(info.frame_times)}
    with contextlib.closing(_open(path)) as c:
        vs = c.streams[info.stream_index]
        order = [rank[Fraction(p.pts) * vs.time_base] for p in c.demux(vs) if p.size]
    delay = max([0] + [j - k for j, k in enumerate(order)])
    with contextlib.closing(_open(path)) as c:
        vs = c.streams[info.stream_index]
        packets = ((bytes(p), order[j], j - delay, 1, bool(p.is_keyframe))
                   for j, p in enumerate(p for p in c.demux(vs) if p.size))
        yield vs, packets


# ----------------------------------------------------------------------------------------- atomic outputs


class _Outputs:
    def __init__(self):
        self.pairs: list[tuple[Path, Path]] = []

    def temp_for(self, final) -> Path:
        """A temporary path beside ``final``: ``.<name>.tmp-<pid><suffix>`` (keeps the extension so
        FFmpeg picks the right muxer)."""
        final = Path(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.stem}.tmp-{os.getpid()}{final.suffix}")
        self.pairs.append((tmp, final))
        return tmp

    def commit(self) -> None:
        for tmp, final in self.pairs:
            os.replace(tmp, final)
        self.pairs.clear()

    def cleanup(self) -> None:
        for tmp, _ in self.pairs:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self.pairs.clear()


@contextlib.contextmanager
def atomic_outputs():
    """Context manager: ``outs.temp_for(final)`` gives a temp path; on normal exit (after the body
    called ``outs.commit()`` or not) remaining temps are renamed into place; on an exception every temp
    is removed and nothing is renamed."""
    outs = _Outputs()
    try:
        yield outs
    except BaseException:
        outs.cleanup()
        raise
    else:
        try:
            outs.commit()
        except BaseException:
            outs.cleanup()
            raise
