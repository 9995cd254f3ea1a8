"""Probing a clip (:mod:`mime_fast.media.source`) and the plain-words reasons of bad inputs
(:mod:`mime_fast.media.errors`)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mime_fast import media, samples
from mime_fast.media import ClipError

try:
    from video_fixtures import textured_frames, write_avi
except ImportError:  # tests/ imported as a package
    from .video_fixtures import textured_frames, write_avi


def test_probe_reports_size_rate_audio_and_duration(tmp_path):
    clip = samples.make_clip(tmp_path / "a.mp4", duration=1.0, fps=25, size=(320, 240))
    info = media.probe(clip.path)
    assert (info.width, info.height, info.rotation) == (320, 240, 0)
    assert info.video_frames == 25
    assert info.duration == Fraction(1)
    assert info.has_audio and info.audio_rate == 48000 and info.audio_channels == 2
    assert not info.is_vfr


def test_probe_flags_vfr(tmp_path):
    clip = samples.make_clip(tmp_path / "v.mp4", duration=1.0, fps=30, size=(160, 120), vfr=True, audio=False)
    info = media.probe(clip.path)
    assert info.is_vfr
    assert info.frame_times == [Fraction(round(t * 1000), 1000) for t in clip.times]


@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
@pytest.mark.parametrize("start,audio,audio_delay", [
    (0.6, False, 0.0),  # first frame at 0.6 s: Matroska's duration counts from time 0 (1.6 s)
    (0.0, True, 0.7),  # audio 0.7 s past the end of the video: the container lasts 1.72 s
    (0.48, True, -0.3),
])
def test_probe_times_a_late_first_frame_and_accepts_audio_that_outlasts_the_video(tmp_path, suffix, start, audio,
                                                                                  audio_delay):
    # Complete files, not truncated ones: the first frame's time is the start and the video lasts
    # its 25 frames of 40 ms.
    clip = samples.make_clip(tmp_path / f"s{suffix}", duration=1.0, fps=25, size=(160, 120), start=start,
                             audio=audio, audio_delay=audio_delay)
    info = media.probe(clip.path)
    assert info.start == Fraction(start).limit_denominator(1000) and info.duration == Fraction(1)
    assert info.video_frames == 25 and info.frame_times[0] == info.start and info.has_audio == audio


@pytest.mark.parametrize("kind", ["zero", "random", "truncated", "audio_only", "missing", "text", "cut_matroska",
                                  "jpeg_as_mp4", "png", "bmp", "one_frame_mjpeg_avi"])
def test_bad_inputs_raise_clip_error(tmp_path, kind):
    # each reason in plain words; FFmpeg's own message, when there is one, kept apart in .detail
    import cv2

    p = tmp_path / f"bad_{kind}.mp4"
    picture = np.random.default_rng(2).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    detail = None
    if kind == "zero":
        p.write_bytes(b"")
        reason = "empty"
    elif kind == "random":
        p.write_bytes(np.random.default_rng(1).integers(0, 256, 50_000, dtype=np.uint8).tobytes())
        reason, detail = "not a media file", "InvalidDataError"
    elif kind == "text":
        p = tmp_path / "notes.mp4"
        p.write_text("this is not a video\n" * 100)
        reason, detail = "not a media file", "InvalidDataError"
    elif kind == "truncated":
        good = samples.make_clip(tmp_path / "good.mp4", duration=1.0, fps=25, size=(160, 120))
        data = good.path.read_bytes()
        p.write_bytes(data[: len(data) // 2])  # moov atom (at the end) is lost
        reason, detail = "truncated: an MP4/MOV file without its index", "InvalidDataError"
    elif kind == "cut_matroska":
        good = samples.make_clip(tmp_path / "good.mkv", duration=1.0, fps=25, size=(160, 120))
        p = tmp_path / "cut.mkv"
        p.write_bytes(good.path.read_bytes()[:30])  # the EBML header, then nothing
        reason = "Matroska/WebM"
    elif kind == "audio_only":
        p = samples.make_audio_only(tmp_path / "a.m4a")
        reason = "no video stream"
    elif kind == "jpeg_as_mp4":  # a photo renamed .mp4 is no one-frame video
        ok, buf = cv2.imencode(".jpg", picture)
        p.write_bytes(buf.tobytes())
        reason = "a still image (mjpeg"
    elif kind in ("png", "bmp"):
        p = tmp_path / f"picture.{kind}"
        cv2.imwrite(str(p), picture)
        reason = f"a still image ({kind}"
    elif kind == "one_frame_mjpeg_avi":  # a real video container holding one JPEG picture
        import av

        p = tmp_path / "one.avi"
        with av.open(str(p), "w") as c:
            vs = c.add_stream("mjpeg", rate=25)
            vs.width, vs.height, vs.pix_fmt = 160, 120, "yuvj420p"
            f = av.VideoFrame.from_ndarray(picture, format="rgb24").reformat(format="yuvj420p")
            for pkt in vs.encode(f):
                c.mux(pkt)
            for pkt in vs.encode(None):
                c.mux(pkt)
        reason = "a still image (mjpeg in avi)"
    else:
        reason = "does not exist"
    with pytest.raises(ClipError) as ei:
        media.probe(p)
    assert reason in ei.value.reason
    assert str(p) not in ei.value.reason  # the clip is named once, by str(exc), not inside the reason
    if detail is None:
        assert ei.value.detail is None or "Error" in ei.value.detail
    else:
        assert ei.value.detail.startswith(detail) and str(p) not in ei.value.detail
    assert ei.value.path == p
    assert isinstance(ei.value, ValueError)
    assert str(ei.value).startswith(f"{p}: ")


def test_mjpeg_video_with_many_frames_is_a_video(tmp_path):
    # MJPEG is also a real video codec (camera AVIs): only a single picture is refused
    import av

    p = tmp_path / "cam.avi"
    rng = np.random.default_rng(3)
    with av.open(str(p), "w") as c:
        vs = c.add_stream("mjpeg", rate=25)
        vs.width, vs.height, vs.pix_fmt = 160, 120, "yuvj420p"
        for i in range(10):
            f = av.VideoFrame.from_ndarray(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8), format="rgb24")
            f = f.reformat(format="yuvj420p")
            f.pts = i
            for pkt in vs.encode(f):
                c.mux(pkt)
        for pkt in vs.encode(None):
            c.mux(pkt)
    info = media.probe(p)
    assert info.codec == "mjpeg" and info.video_frames == 10


def _faststart_copy(src, dst):
    """Remux ``src`` with the index (moov) at the front, as web/phone MP4s have it."""
    import av

    with av.open(str(src)) as ic, av.open(str(dst), "w", options={"movflags": "+faststart"}) as oc:
        m = {s.index: oc.add_stream_from_template(s) for s in ic.streams}
        for p in ic.demux():
            if p.dts is None:
                continue
            p.stream = m[p.stream.index]
            oc.mux(p)
    return dst


@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
def test_truncated_data_is_detected_even_with_a_readable_header(tmp_path, suffix):
    clip = samples.make_clip(tmp_path / f"c{suffix}", duration=2.0, fps=25, size=(160, 120))
    src = clip.path if suffix == ".mkv" else _faststart_copy(clip.path, tmp_path / "fs.mp4")
    assert media.probe(src).video_frames == 50
    data = src.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(ClipError, match="truncated"):
        media.probe(cut)


@pytest.mark.parametrize("drop,trailing", [((7, 8), 0), ((), 3), ((5,), 2)], ids=["gap", "at_the_end", "both"])
def test_avi_drop_frames_are_timestamp_gaps_not_truncation(tmp_path, drop, trailing):
    # An AVI stores a frame its writer dropped as a 0-byte chunk (XviD captures; FFmpeg's muxer for
    # a timestamp gap): the header counts it, FFmpeg skips it.  The clip is whole: its frames keep
    # their times, and drop frames after the last one extend the video as a gap would.
    n = 20
    p = write_avi(tmp_path / "d.avi", textured_frames(n), drop=drop, trailing_drops=trailing)
    kept = [i for i in range(n) if i not in drop]
    import av

    with av.open(str(p)) as c:
        assert c.streams.video[0].frames == n + trailing  # the header counts the drop frames
    info = media.probe(p)
    assert info.video_frames == len(kept)
    assert info.frame_times == [Fraction(i, 25) for i in kept]
    assert info.start == 0 and info.duration == Fraction(n + trailing, 25)
    assert [t for _, t, _ in media.iter_display_frames(p, info)] == info.frame_times


@pytest.mark.parametrize("drop,trailing", [((), 0), ((7, 8), 0), ((7, 8), 2)])
@pytest.mark.parametrize("keep", [0.6, 0.85])
def test_a_cut_avi_is_truncated_with_or_without_drop_frames(tmp_path, drop, trailing, keep):
    # real frames missing at the end are not drop frames: a cut file still fails as truncated
    p = write_avi(tmp_path / "d.avi", textured_frames(40), drop=drop, trailing_drops=trailing)
    data = p.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: int(len(data) * keep)])
    import av

    with av.open(str(cut)) as c:
        times = [pkt.pts for pkt in c.demux(c.streams.video[0]) if pkt.size]
    assert 0 < len(times) and max(times) < 39  # (frames are lost: the last one, 39, at least)
    with pytest.raises(ClipError, match="truncated: the index declares"):
        media.probe(cut)


def test_the_stream_read_is_the_one_players_show(tmp_path):
    """Of several video streams, the one FFmpeg picks as best (the default-marked one, as players and
    NVDEC's demuxer choose) is read, not merely the first: here a 320x180 preview comes first and
    the 640x480 picture is the default stream."""
    import av

    path = tmp_path / "two.mkv"
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as c:
        small, main = (c.add_stream("libx264", rate=30) for _ in range(2))
        for s, (w, h) in ((small, (320, 180)), (main, (640, 480))):
            s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        small.disposition, main.disposition = av.stream.Disposition(0), av.stream.Disposition.default
        for i in range(15):
            for s in (small, main):
                f = av.VideoFrame.from_ndarray(rng.integers(0, 255, (s.height, s.width, 3), np.uint8), format="rgb24")
                f.pts = i
                for p in s.encode(f):
                    c.mux(p)
        for s in (small, main):
            for p in s.encode(None):
                c.mux(p)
    info = media.probe(path)
    assert (info.stream_index, info.width, info.height, info.video_frames) == (1, 640, 480, 15)
    frames = list(media.iter_display_frames(path, info))
    assert len(frames) == 15 and frames[0][2].shape == (480, 640, 3)
