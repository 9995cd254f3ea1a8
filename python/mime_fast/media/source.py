"""What a clip is, before anything is decoded for real: :func:`probe` opens it, checks it is a
decodable video (not a still image, not truncated), reads its video packet timestamps (demux only,
no decoding) to get the exact video duration, and decodes the first frame to read the display
rotation and the facts FM's stream copy needs.  Anything wrong with the input raises
:class:`~mime_fast.media.errors.ClipError`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from ..frames import frame_matrix
from .errors import ClipError, ffmpeg_detail, interrupted, open_input

__all__ = ["ColorTags", "SourceInfo", "StreamFacts", "main_video_stream", "probe", "video_streams"]


#: Colour tags ``(colorspace, color_range, color_primaries, color_trc)`` as FFmpeg numbers them
#: (AVColorSpace, AVColorRange, AVColorPrimaries, AVColorTransferCharacteristic); 2 / 0 = unspecified.
ColorTags = tuple[int, int, int, int]


@dataclass(frozen=True)
class StreamFacts:
    """What the stream copy of FM (:func:`mime_fast.fm_copy.fm_copy_reason`) needs to know about the
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

    @property
    def output_sar(self) -> Fraction | None:
        """The sample aspect ratio of the frames as displayed, which the outputs are made of:
        the stream's (anamorphic footage, DVDs), inverted when the display turns the frame by a
        quarter turn; ``None`` for square pixels or none set.  The outputs carry it, so they show
        the picture as the source does; the pixels themselves are not resampled."""
        s = self.facts.sample_aspect_ratio
        if not s or s == 1:
            return None
        return 1 / s if self.display_transform[0] == 0 else s


def video_streams(c):
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


def main_video_stream(c):
    """The video stream of container ``c`` that the pipeline reads, ``None`` when it has no real one
    (:func:`video_streams`): the one FFmpeg picks as best (``av_find_best_stream``: a stream marked
    default, then the most pixels and frames, as players and NVDEC's demuxer choose), else the
    first.  A clip whose first stream is a small preview is read at its main picture."""
    videos = video_streams(c)
    if not videos:
        return None
    try:
        best = c.streams.best("video")
    except Exception:  # noqa: BLE001 - an older PyAV: the first real stream
        best = None
    return next((v for v in videos if best is not None and v.index == best.index), videos[0])


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


def _riff_complete(path: Path, size: int) -> bool:
    """Whether the AVI file at ``path`` (``size`` bytes) is whole: a ``RIFF AVI `` chunk, then
    only ``RIFF`` chunks (OpenDML's ``AVIX``), each within the file, the last ending at its end (a
    pad byte allowed).  A file cut short, or one whose writer never set the sizes (a capture that
    crashed), is not."""
    pos, n = 0, 0
    with open(path, "rb") as f:
        while pos + 8 <= size and n < 10_000:
            f.seek(pos)
            head = f.read(12)
            length = int.from_bytes(head[4:8], "little")
            if head[:4] != b"RIFF" or length < 4 or (n == 0 and head[8:12] != b"AVI "):
                return False
            pos += 8 + length + (length & 1)
            n += 1
    return n > 0 and size <= pos <= size + 1


def _avi_chunks(path: Path, size: int, dts_list: list, declared: int) -> tuple[int, int]:
    """``(chunks, trailing)`` of an AVI's video stream whose header declares ``declared`` frames,
    more than it has packets (``dts_list``, one per non-empty chunk, in file order).

    An AVI stores a frame its writer dropped (a capture that fell behind; FFmpeg's muxer for a
    timestamp gap) as a chunk of 0 bytes: the header counts it, FFmpeg's demuxer skips it but
    counts it in the timestamps, which number the video chunks (a decoding time of one tick per
    chunk).  ``chunks`` is the chunks from the first to the last packet, drop frames between them
    included: the standardisation shows the frame before a drop over it, as over any timestamp
    gap.  Drop frames after the last packet leave no gap to see; they are counted only in a whole
    file (:func:`_riff_complete`), where nothing can be missing: ``trailing`` of them (those the
    first packet's decoding time does not put before it), and the ``chunks`` then are
    ``declared``.  Cut files keep the packets they have, so real frames missing at the end still
    fall short of ``declared``.  Timestamps that do not number chunks (a stream of another kind)
    leave the count of packets: ``(len(dts_list), 0)``."""
    if any(d is None for d in dts_list):
        return len(dts_list), 0
    ticks = sorted(dts_list)
    steps = sorted(b - a for a, b in zip(ticks, ticks[1:]))
    if (steps and (steps[0] < 1 or steps[len(steps) // 2] != 1)) or ticks[0] < 0:
        return len(dts_list), 0
    chunks = ticks[-1] - ticks[0] + 1
    if chunks < declared and _riff_complete(path, size):
        return declared, max(0, declared - chunks - ticks[0])
    return chunks, 0


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
    with contextlib.closing(open_input(path)) as c:
        vs = main_video_stream(c)
        if vs is None:
            kind = "audio-only file" if c.streams.audio else "no audio or video streams"
            raise ClipError(path, f"no video stream ({kind})")
        stream_index = vs.index
        tb = vs.time_base or Fraction(1, 90000)
        codec = vs.codec_context.name
        cw, ch = vs.codec_context.width, vs.codec_context.height
        avg = vs.average_rate or vs.guessed_rate
        avg_rate = float(avg) if avg else None
        audio = c.streams.audio[0] if c.streams.audio else None
        pts_list: list = []
        durations: list[int] = []
        dts_list: list = []
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
                dts_list.append(pkt.dts)
                missing_pts += pkt.pts is None
                discarded += bool(pkt.is_discard)
                if first_pkt is None:
                    first_pkt = (bytes(pkt), pkt.pts, bool(pkt.is_keyframe))
                durations.append(int(pkt.duration or 0))
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, f"corrupt or truncated: the video stream breaks off after {len(pts_list)} packets",
                            ffmpeg_detail(exc)) from exc
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
        readable, trailing = len(spts), 0
        if declared_frames > readable and fmt == "avi":
            readable, trailing = _avi_chunks(path, size, dts_list, declared_frames)
            end += trailing  # the last frame is shown over the drop frames after it (one tick each)
        start_pts = spts[0]
        start = Fraction(start_pts) * tb
        duration = Fraction(end - start_pts) * tb
        if declared_frames and readable < declared_frames:
            raise ClipError(path, f"truncated: the index declares {declared_frames} video frames, "
                                  f"only {readable} are readable")
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
    with contextlib.closing(open_input(path)) as c:
        vs = c.streams[stream_index]
        try:
            first = next(iter(c.decode(vs)), None)
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, "corrupt video stream: its first frame does not decode", ffmpeg_detail(exc)) from exc
        if first is None:
            raise ClipError(path, "video stream decodes to no frames")
        transform = _display_transform(first)
        cw, ch = first.width, first.height
        matrix = frame_matrix(first)
        passthrough = (first.format.name == "yuv420p" and int(first.color_range) != 2 and transform == (1, 0, 0, 1)
                       and cw % 2 == 0 and ch % 2 == 0)
        extradata = vs.codec_context.extradata
        sar = getattr(vs, "sample_aspect_ratio", None) or vs.codec_context.sample_aspect_ratio  # (container's, else H.264's)
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

