"""Tests of mime_fast.video (probe, standardisation, audio, encode, remux) and mime_fast.samples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mime_fast import samples, video
from mime_fast.video import ClipError, FrameStandardiser, output_frame_count

try:
    from video_fixtures import (decode_audio, decode_video, dominant_freqs, psnr, sha256, source_display_frames,
                                video_packets)
except ImportError:  # tests/ imported as a package
    from .video_fixtures import (decode_audio, decode_video, dominant_freqs, psnr, sha256, source_display_frames,
                                 video_packets)


# ------------------------------------------------------------------ standardisation arithmetic


def _run_std(times, n_out, fps=30):
    std = FrameStandardiser(times[0], fps, n_out)
    got = []
    for j, t in enumerate(times):
        got.extend(i_item for i_item in std.push(t, j))
    got.extend(std.finish())
    assert [i for i, _ in got] == list(range(n_out))
    return [j for _, j in got]


def test_standardiser_25fps_duplicates_by_timestamp():
    times = [Fraction(k, 25) for k in range(50)]  # 2 s
    n = output_frame_count(Fraction(50, 25), 30)
    assert n == 60
    assert _run_std(times, n) == [(i * 25) // 30 for i in range(60)]


def test_standardiser_2997_drops_without_drift_on_long_clip():
    # one hour at 29.97 fps: 107892 frames, pts in the usual 1001/30000 grid
    k = 107892
    times = [Fraction(1001 * j, 30000) for j in range(k)]
    dur = Fraction(1001 * k, 30000)
    n = output_frame_count(dur, 30)
    assert n == 108000  # 3600.0036 s -> 108000 frames (no drift)
    got = _run_std(times, n)
    # latest j with 1001 j / 30000 <= i / 30 + 1 ms  <=>  1001 j <= 1000 i + 30
    exp = [min(k - 1, (1000 * i + 30) // 1001) for i in range(n)]
    assert got == exp
    assert set(got) == set(range(k))  # 29.97 -> 30 only duplicates, never drops


def test_standardiser_tolerates_millisecond_rounded_pts():
    # 30 fps source stored with a 1 ms time base (33, 67, 100 ms ...): every frame used exactly once
    times = [Fraction(round(j * 1000 / 30), 1000) for j in range(300)]
    assert _run_std(times, 300) == list(range(300))


def test_standardiser_vfr_picks_latest_frame_not_after_t():
    times = [Fraction(0), Fraction(10, 1000), Fraction(90, 1000), Fraction(95, 1000), Fraction(200, 1000)]
    # grid 0, 33.3, 66.7, 100, 133, 167 ms
    assert _run_std(times, 6) == [0, 1, 1, 3, 3, 3]


def test_output_frame_count_rounds_half_up():
    assert output_frame_count(Fraction(1), 30) == 30
    assert output_frame_count(Fraction(1, 60), 30) == 1  # 0.5 frame -> 1
    assert output_frame_count(Fraction(1, 61), 30) == 1  # never 0
    assert output_frame_count(Fraction(101, 60), 30) == 51  # 50.5 -> 51


# ------------------------------------------------------------------ probe and bad inputs


def test_probe_reports_size_rate_audio_and_duration(tmp_path):
    clip = samples.make_clip(tmp_path / "a.mp4", duration=1.0, fps=25, size=(320, 240))
    info = video.probe(clip.path)
    assert (info.width, info.height, info.rotation) == (320, 240, 0)
    assert info.video_frames == 25
    assert info.duration == Fraction(1)
    assert info.has_audio and info.audio_rate == 48000 and info.audio_channels == 2
    assert not info.is_vfr


def test_probe_flags_vfr(tmp_path):
    clip = samples.make_clip(tmp_path / "v.mp4", duration=1.0, fps=30, size=(160, 120), vfr=True, audio=False)
    info = video.probe(clip.path)
    assert info.is_vfr
    assert info.frame_times == [Fraction(round(t * 1000), 1000) for t in clip.times]


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
        video.probe(p)
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
    info = video.probe(p)
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
    assert video.probe(src).video_frames == 50
    data = src.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(ClipError, match="truncated"):
        video.probe(cut)


# ------------------------------------------------------------------ decoding, rotation


def test_display_transform_matches_quarter_turns():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    # FFmpeg av_display_rotation_set(m, theta): a = cos, b = -sin, c = sin, d = cos (counter-clockwise)
    for k, t in ((1, (0, -1, 1, 0)), (2, (-1, 0, 0, -1)), (3, (0, 1, -1, 0))):
        assert np.array_equal(video.apply_display_transform(img, t), np.rot90(img, k)), k
    assert np.array_equal(video.apply_display_transform(img, (-1, 0, 0, 1)), img[:, ::-1])


@pytest.mark.parametrize("rotation,hflip", [(90, False), (270, False), (180, False), (0, True), (90, True)])
def test_rotation_metadata_is_applied(tmp_path, rotation, hflip):
    up = samples.make_clip(tmp_path / "up.mp4", duration=0.2, fps=25, size=(320, 240), audio=False, seed=3)
    rot = samples.make_clip(tmp_path / "rot.mp4", duration=0.2, fps=25, size=(320, 240), audio=False, seed=3,
                            rotation=rotation, hflip=hflip)
    info = video.probe(rot.path)
    assert info.rotation == rotation and info.mirrored == hflip
    assert (info.width, info.height) == (320, 240)
    if rotation % 180:
        assert (info.coded_width, info.coded_height) == (240, 320)
    _, _, a = source_display_frames(up.path)
    _, _, b = source_display_frames(rot.path)
    assert len(a) == len(b) == 5
    for fa, fb in zip(a, b):
        assert fb.shape == (240, 320, 3)
        assert psnr(fa, fb) > 30  # same picture up to chroma siting of the rotated storage
    # and a wrong orientation would not match
    assert psnr(a[0], np.ascontiguousarray(np.rot90(np.rot90(b[0])))) < 20


def test_decode_yields_all_frames_with_times(tmp_path):
    clip = samples.make_clip(tmp_path / "d.mp4", duration=0.5, fps=Fraction(30000, 1001), size=(160, 120),
                             audio=False)
    info, times, frames = source_display_frames(clip.path)
    assert len(frames) == clip.frames == 15
    assert times == [Fraction(1001 * j, 30000) for j in range(15)]
    assert all(f.flags.c_contiguous and f.dtype == np.uint8 for f in frames)


# ------------------------------------------------------------------ audio


def test_extract_audio_resamples_to_16k_mono_aligned_and_exact_length(tmp_path):
    clip = samples.make_clip(tmp_path / "s.mp4", duration=1.0, fps=25, size=(160, 120), audio_rate=44100)
    info = video.probe(clip.path)
    wav = tmp_path / "s.wav"
    n = 16000  # 1.0 s
    real = video.extract_audio_wav(clip.path, info, wav, n_samples=n, rate=16000, channels=1)
    data, rate = video.read_wav(wav)
    assert rate == 16000 and data.shape == (n, 1)
    assert real > 0.95 * n
    freqs = dominant_freqs(data[2000:14000, 0].astype(np.float64), 16000)
    assert abs(freqs[0] - samples.FACE_TONES_HZ[0]) < 5 and abs(freqs[1] - samples.FACE_TONES_HZ[1]) < 5
    # mono = mean of both channels: both tones at ~half amplitude each
    rms = float(np.sqrt(np.mean((data[2000:14000, 0] / 32768.0) ** 2)))
    assert 0.10 < rms < 0.20  # two 0.125-amplitude sines: rms ~0.125


def test_extract_audio_pads_to_requested_length(tmp_path):
    clip = samples.make_clip(tmp_path / "s.mp4", duration=0.5, fps=25, size=(160, 120))
    info = video.probe(clip.path)
    wav = tmp_path / "s.wav"
    real = video.extract_audio_wav(clip.path, info, wav, n_samples=16000, rate=16000, channels=1)
    data, _ = video.read_wav(wav)
    assert len(data) == 16000
    assert 7900 <= real <= 8400  # 0.5 s of source audio (+ the AAC encoder's last-frame padding)
    assert np.all(data[8400:] == 0)  # silence after the source audio ends
    assert np.abs(data[1000:7000]).max() > 1000


# ------------------------------------------------------------------ encode, remux, determinism


def _write(path, frames, **kw):
    h, w = frames[0].shape[:2]
    wr = video.Mp4Writer(path, w - w % 2, h - h % 2, **kw)
    for i, f in enumerate(frames):
        wr.write_rgb(f, i)
    if kw.get("audio_rate"):
        wr.write_audio((np.sin(np.arange(8000) / 5) * 8000).astype(np.int16)[:, None])
    wr.close()
    return path


def _frames(n=12, h=120, w=160, seed=0):
    import cv2

    rng = np.random.default_rng(seed)
    # luminance texture with a smooth colour tint (yuv420p keeps luma detail, halves chroma)
    lum = cv2.resize(rng.integers(0, 255, (h // 8, w // 8), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
    tint = cv2.resize(rng.integers(-40, 40, (3, 4, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)
    base = np.clip(lum[..., None].astype(np.float32) * 0.7 + 40 + tint, 0, 255).astype(np.uint8)
    return [np.ascontiguousarray(np.roll(base, 3 * i, axis=1)) for i in range(n)]


def test_mp4_writer_is_deterministic_and_30fps(tmp_path):
    fr = _frames()
    a = _write(tmp_path / "a.mp4", fr, audio_rate=16000)
    b = _write(tmp_path / "b.mp4", fr, audio_rate=16000)
    assert sha256(a) == sha256(b)
    dec, times, info = decode_video(a)
    assert info["average_rate"] == 30 and info["pix_fmt"] == "yuv420p" and info["codec"] == "h264"
    assert times == [Fraction(i, 30) for i in range(12)]
    assert min(psnr(x, y) for x, y in zip(dec, fr)) > 35
    assert info["audio"] == [("aac", 16000, "mono")]


def test_mp4_writer_crops_odd_sizes(tmp_path):
    fr = _frames(4, h=121, w=161)
    a = _write(tmp_path / "odd.mp4", fr)
    dec, _, info = decode_video(a)
    assert (info["width"], info["height"]) == (160, 120)
    assert psnr(dec[0], fr[0][:120, :160]) > 35


def test_black_frame_decodes_to_black(tmp_path):
    wr = video.Mp4Writer(tmp_path / "k.mp4", 64, 48)
    vf = video.black_frame(64, 48)
    for i in range(3):
        wr.write_frame(vf, i)
    wr.close()
    dec, _, _ = decode_video(tmp_path / "k.mp4")
    assert len(dec) == 3 and max(int(d.max()) for d in dec) <= 2


def test_remux_copies_video_packets_byte_identical_and_drops_audio(tmp_path):
    a = _write(tmp_path / "a.mp4", _frames(), audio_rate=16000)
    b = tmp_path / "b.mp4"
    n = video.remux_video(a, b)
    assert n == 12
    assert video_packets(a) == video_packets(b)
    _, times, info = decode_video(b)
    assert info["audio"] == [] and info["n_streams"] == 1
    assert times == [Fraction(i, 30) for i in range(12)]


def test_atomic_outputs_remove_temporaries_on_error(tmp_path):
    final = tmp_path / "x" / "clip.mp4"
    with pytest.raises(RuntimeError):
        with video.atomic_outputs() as outs:
            t = outs.temp_for(final)
            assert t.parent == final.parent and t.name.startswith(".clip.tmp-") and t.suffix == ".mp4"
            t.write_bytes(b"partial")
            raise RuntimeError("boom")
    assert list((tmp_path / "x").iterdir()) == []
    with video.atomic_outputs() as outs:
        outs.temp_for(final).write_bytes(b"done")
    assert final.read_bytes() == b"done" and list((tmp_path / "x").iterdir()) == [final]


# ------------------------------------------------------------------ samples


def test_sample_ground_truth_matches_the_face_in_the_frames(tmp_path):
    clip = samples.make_clip(tmp_path / "g.mp4", duration=0.4, fps=25, size=(640, 480), audio=False)
    assert clip.landmarks.shape == (10, 106, 2) and clip.boxes.shape == (10, 4)
    z = np.load(clip.npz)
    assert np.array_equal(z["landmarks"], clip.landmarks)
    assert not np.allclose(clip.boxes[0], clip.boxes[-1])  # the face moves
    _, _, frames = source_display_frames(clip.path)
    sprite, alpha, pts = samples.face_sprite(0.3 * 480 / (2 * 58.0))
    for i in (0, 9):
        x, y = np.round(clip.landmarks[i].min(0) - pts.min(0)).astype(int)  # sprite top-left
        h, w = sprite.shape[:2]
        inner = alpha > 0.99
        got = frames[i][y:y + h, x:x + w][inner]
        assert psnr(got, sprite[inner]) > 30


def test_extract_audio_aligns_a_late_audio_track_to_the_first_video_frame(tmp_path):
    clip = samples.make_clip(tmp_path / "late.mp4", duration=1.0, fps=25, size=(160, 120), audio_delay=0.25)
    info = video.probe(clip.path)
    wav = tmp_path / "late.wav"
    video.extract_audio_wav(clip.path, info, wav, n_samples=16000)
    data, _ = video.read_wav(wav)
    assert len(data) == 16000
    audible = np.nonzero(np.abs(data[:, 0].astype(int)) > 200)[0]
    assert abs(audible[0] / 16000 - 0.25) < 0.015  # leading silence inserted, tone starts at 0.25 s
    assert np.abs(data[: int(0.22 * 16000)]).max() < 50


def test_prefetch_propagates_errors_and_stops_early():
    def gen(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ClipError("x.mp4", "boom")
            yield i

    assert list(video.prefetch(gen(50), 3)) == list(range(50))
    assert list(video.prefetch(gen(5), 0)) == list(range(5))
    with pytest.raises(ClipError, match="boom"):
        list(video.prefetch(gen(50, fail_at=20), 3))
    produced = []

    def tracked():
        for i in range(10_000):
            produced.append(i)
            yield i

    it = video.prefetch(tracked(), 2)
    assert next(it) == 0
    it.close()  # consumer stops: the producer thread must stop too, bounded by the queue
    assert len(produced) <= 5


def test_threaded_writer_matches_synchronous_and_reports_worker_errors(tmp_path):
    fr = _frames()
    a = _write(tmp_path / "sync.mp4", fr, audio_rate=16000)
    b = _write(tmp_path / "thr.mp4", fr, audio_rate=16000, queue_size=2)
    assert sha256(a) == sha256(b)
    wr = video.Mp4Writer(tmp_path / "bad.mp4", 160, 120, queue_size=2)
    wr.write_rgb(fr[0], 0)
    wr.write_rgb(np.zeros((120, 160), np.uint8), 1)  # not RGB: fails on the worker thread
    with pytest.raises(ValueError):  # PyAV's from_ndarray rejects the 2-D array, re-raised here
        for i in range(2, 50):
            wr.write_rgb(fr[0], i)
        wr.close()
    wr.abort()


@pytest.mark.parametrize("rotation", [90, 270])
def test_rotation_agrees_with_opencv_autorotation(tmp_path, rotation):
    """Independent reference: OpenCV's FFmpeg backend rotates frames by the display matrix too."""
    cv2 = pytest.importorskip("cv2")
    clip = samples.make_clip(tmp_path / "r.mp4", duration=0.2, fps=25, size=(320, 240), audio=False,
                             rotation=rotation)
    cap = cv2.VideoCapture(str(clip.path))
    if cap.get(cv2.CAP_PROP_ORIENTATION_AUTO) != 1:
        pytest.skip("this OpenCV build does not auto-rotate")
    ok, ref = cap.read()
    cap.release()
    assert ok
    _, _, ours = source_display_frames(clip.path)
    assert ours[0].shape == ref.shape == (240, 320, 3)
    assert psnr(ours[0], cv2.cvtColor(ref, cv2.COLOR_BGR2RGB)) > 45


def test_samples_cli_writes_clip_and_ground_truth(tmp_path):
    out = tmp_path / "cli.mp4"
    assert samples.main([str(out), "--duration", "0.2", "--fps", "30000/1001", "--size", "160x120", "--no-audio"]) == 0
    info = video.probe(out)
    assert (info.width, info.height, info.video_frames, info.has_audio) == (160, 120, 6, False)
    assert np.load(out.with_suffix(".npz"))["landmarks"].shape == (6, 106, 2)


def test_extract_audio_drops_audio_before_the_first_video_frame(tmp_path):
    import dataclasses

    # 1 s clip whose audio is 0.5 s of silence then a 440 Hz tone; pretend the video starts at 0.3 s
    fr = _frames(30)
    wr = video.Mp4Writer(tmp_path / "av.mp4", 160, 120, audio_rate=16000)
    for i, f in enumerate(fr):
        wr.write_rgb(f, i)
    t = np.arange(16000) / 16000
    pcm = np.where(t >= 0.5, 0.3 * np.sin(2 * np.pi * 440 * t), 0.0)
    wr.write_audio((pcm * 32767).astype(np.int16)[:, None])
    wr.close()
    info = dataclasses.replace(video.probe(tmp_path / "av.mp4"), start=Fraction(3, 10))
    wav = tmp_path / "av.wav"
    video.extract_audio_wav(tmp_path / "av.mp4", info, wav, n_samples=8000)
    data, _ = video.read_wav(wav)
    audible = np.nonzero(np.abs(data[:, 0].astype(int)) > 300)[0]
    assert len(data) == 8000 and abs(audible[0] / 16000 - 0.2) < 0.01


@pytest.mark.parametrize("queue_size", [0, 2])
def test_shared_aac_track_gives_each_writer_the_audio_it_would_encode(tmp_path, queue_size):
    # the pipeline encodes the WAV once (AacTrack) and muxes the packets into every subset: the
    # audio decodes to exactly what a writer encoding the same PCM itself gives, with the same
    # duration, and audio and video packets interleave through the file
    import av

    fr = _frames(30)
    pcm = (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16)[:, None]
    video.write_wav(tmp_path / "a.wav", pcm, 16000)
    own = tmp_path / "own.mp4"
    wr = video.Mp4Writer(own, 160, 120, audio_rate=16000)
    for i, f in enumerate(fr):
        wr.write_rgb(f, i)
    wr.write_audio(pcm)
    wr.close()
    track = video.AacTrack(tmp_path / "a.wav")
    assert (track.rate, track.channels, track.samples) == (16000, 1, 16000)
    paths = []
    for k in range(2):
        paths.append(tmp_path / f"shared{k}.mp4")
        wr = video.Mp4Writer(paths[-1], 160, 120, audio_track=track, queue_size=queue_size)
        for i, f in enumerate(fr):
            wr.write_rgb(f, i)
            wr.write_audio_until(Fraction(i + 1, 30))
        with pytest.raises(ValueError, match="write_audio_until"):
            wr.write_audio(pcm)
        wr.close()
    ref, rate, ch = decode_audio(own)
    for p in paths:
        got, grate, gch = decode_audio(p)
        assert (grate, gch) == (rate, ch) == (16000, 1)
        assert np.array_equal(got, ref)
        with av.open(str(p)) as c:
            kinds = [pk.stream.type for pk in c.demux() if pk.size]
            a = c.streams.audio[0]
            assert float(a.duration * a.time_base) == pytest.approx(1.0, abs=0.07)
        first_audio, last_video = kinds.index("audio"), len(kinds) - 1 - kinds[::-1].index("video")
        assert first_audio < last_video  # interleaved, not all audio at the end
    assert sha256(paths[0]) == sha256(paths[1])


@pytest.mark.parametrize("queue_size", [0, 2])
def test_black_video_packets_are_the_bytes_of_a_direct_encode(tmp_path, queue_size):
    # VMM's black frames come from BlackVideo, encoded once per configuration and reused: every
    # length, shorter or longer than what was encoded before (longer: the run is re-encoded from
    # the start, as each writer releases the encoder when it closes), even over a key frame (every
    # 250), for several sizes in turn, gives the same file as a writer encoding black frames
    # itself, audio included, and decodes to black
    video.BlackVideo.reset()
    pcm = (np.sin(np.arange(48000) / 7) * 6000).astype(np.int16)[:, None]
    video.write_wav(tmp_path / "a.wav", pcm, 16000)
    track = video.AacTrack(tmp_path / "a.wav")
    runs = [(64, 48, 1), (64, 48, 70), (64, 48, 3), (32, 32, 20), (48, 32, 5), (64, 48, 251), (64, 48, 64)]
    for k, (w, h, n) in enumerate(runs):
        direct, cached = tmp_path / f"direct{k}.mp4", tmp_path / f"cached{k}.mp4"
        for path, black in ((direct, False), (cached, True)):
            wr = video.Mp4Writer(path, w, h, preset="ultrafast", audio_track=track, queue_size=queue_size)
            vf = video.black_frame(w, h)
            for i in range(n):
                if black:
                    wr.write_black(i)
                else:
                    wr.write_frame(vf, i)
                wr.write_audio_until(Fraction(i + 1, 30))
            wr.close()
        assert sha256(cached) == sha256(direct), (w, h, n)
    assert len(video.BlackVideo._instances) == 3
    assert all(b._enc is None for b in video.BlackVideo._instances.values())  # no encoder held after the writers
    assert len(video.BlackVideo.shared((64, 48, Fraction(30), 18, "ultrafast", 2, "bt601"))._packets) == 251
    dec, times, _ = decode_video(tmp_path / "cached5.mp4")
    assert len(dec) == 251 and times[-1] == Fraction(250, 30) and max(int(d.max()) for d in dec) <= 2
    # out of order is refused; another preset encodes black frames itself
    wr = video.Mp4Writer(tmp_path / "x.mp4", 64, 48, preset="ultrafast")
    with pytest.raises(ValueError, match="in order"):
        wr.write_black(1)
    wr.abort()
    wr = video.Mp4Writer(tmp_path / "vf.mp4", 64, 48, preset="veryfast")
    for i in range(3):
        wr.write_black(i)
    wr.close()
    dec, _, _ = decode_video(tmp_path / "vf.mp4")
    assert len(dec) == 3 and max(int(d.max()) for d in dec) <= 2
    video.BlackVideo.reset()
    assert video.BlackVideo._instances == {}
