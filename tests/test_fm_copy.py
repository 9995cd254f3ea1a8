"""FM as a stream copy of a source that already meets its standard (issue 12, "Encode less").

A conforming source (H.264, 8-bit yuv420p, tagged with the matrix FM writes, frames on the 30 fps
grid) gives an FM whose video packets are the source's own bytes, retimed onto the grid and muxed
with the clip's AAC track; anything else, or ``fm_copy=False``, is encoded as before, with the
reason recorded.  The other subsets do not change.
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import numpy as np
import pytest

import av
from mime_fast import fm_copy as fm_copy_mod
from mime_fast import media, samples
from mime_fast import subsets as subsets_mod
from mime_fast.cli import main
from mime_fast.manifest import read_rows
from mime_fast.subsets import Settings, build_subsets, fm_copy_reason

from video_fixtures import capture_encoder_frames, decode_video, sha256, source_yuv_planes, video_packets

SMALL = dict(min_height=0, min_duration=0)


def _clip(path, **kw):
    """A short 320x240 30 fps clip tagged BT.709 (conforming unless ``kw`` says otherwise)."""
    args = dict(duration=0.5, fps=30, size=(320, 240), color="bt709", seed=21)
    args.update(kw)
    return samples.make_clip(path, **args)


def _packet_times(path) -> list[tuple[int, int]]:
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        return [(int(p.pts), int(p.dts)) for p in c.demux(vs) if p.size]


def _stream_layout(path) -> dict:
    with av.open(str(path)) as c:
        return {s.type: (s.time_base, s.start_time, s.duration) for s in c.streams}


# ------------------------------------------------------------------------------ conforming sources


@pytest.mark.parametrize("bframes", [0, 3], ids=["ip", "bframes"])
def test_conforming_clip_gives_fm_as_a_copy_of_the_source(tmp_path, bframes):
    clip = _clip(tmp_path / "src" / "c.mp4", bframes=bframes, color="bt709" if bframes == 0 else "bt601")
    times = _packet_times(clip.path)
    assert (any(p != d for p, d in times)) == bool(bframes)  # B-frames: packets out of presentation order
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, **SMALL)
    assert res.fm_video == "copy" and res.fm_video_reason == ""
    fm, amm = res.outputs["FM"], res.outputs["AMM"]
    # the source's packet bytes, in the same (decoding) order; AMM carries the same packets
    assert video_packets(fm) == video_packets(clip.path) == video_packets(amm)
    # decoded: the source's frames exactly, on the 30 fps grid from 0, as many as FM reports
    src_planes, fm_planes = source_yuv_planes(clip.path), source_yuv_planes(fm)
    assert len(fm_planes) == len(src_planes) == res.frames == res.source_frames == 15
    assert all(all(np.array_equal(a, b) for a, b in zip(x, y)) for x, y in zip(fm_planes, src_planes))
    frames, ftimes, info = decode_video(fm)
    assert ftimes == [Fraction(i, 30) for i in range(15)] and info["average_rate"] == 30
    assert info["audio"] == [("aac", 16000, "mono")] and res.status["FM"].has_audio
    assert res.status["FM"].frames == 15 and res.status["FM"].duration == pytest.approx(0.5)
    # container as an encoding writer makes it: video in 1/15360 from 0, audio in 1/16000, both 0.5 s
    with av.open(str(fm)) as c:
        assert abs(c.duration / 1e6 - 0.5) <= 1 / 30
        for s in c.streams:
            assert s.start_time == 0 and abs(float(s.duration * s.time_base) - 0.5) <= 1 / 30, s.type
        cc = c.streams.video[0].codec_context
        assert (int(cc.colorspace), int(cc.color_range)) == ((1 if bframes == 0 else 6), 1)
    # the same audio the encoded subsets carry
    with av.open(str(fm)) as a, av.open(str(res.outputs["FDM"])) as b:
        assert [bytes(p) for p in a.demux(audio=0) if p.size] == [bytes(p) for p in b.demux(audio=0) if p.size]


def test_other_subsets_are_unchanged_and_fm_copy_off_encodes(tmp_path):
    clip = _clip(tmp_path / "src" / "c.mp4", bframes=2)
    on = build_subsets(clip.path, tmp_path / "on", landmarks=clip.landmarks, **SMALL)
    off = build_subsets(clip.path, tmp_path / "off", landmarks=clip.landmarks, fm_copy=False, **SMALL)
    assert on.fm_video == "copy" and (off.fm_video, off.fm_video_reason) == ("encode", "fm_copy is off")
    for c in ("FDM", "FSM", "VMM", "FDAM", "FSAM"):
        assert sha256(on.outputs[c]) == sha256(off.outputs[c]), c
    assert sha256(on.audio) == sha256(off.audio)
    assert video_packets(off.outputs["FM"]) != video_packets(clip.path)  # encoded
    assert video_packets(off.outputs["AMM"]) == video_packets(off.outputs["FM"])
    assert (on.frames, on.duration, on.source_frames) == (off.frames, off.duration, off.source_frames)
    for c in on.status:
        assert dataclasses.replace(on.status[c], path=None) == dataclasses.replace(off.status[c], path=None), c
    # the copy shows the same frames as the encode does (CRF 18: close, not equal)
    a, _, _ = decode_video(on.outputs["FM"])
    b, _, _ = decode_video(off.outputs["FM"])
    assert len(a) == len(b) and all(np.abs(x.astype(int) - y).mean() < 3 for x, y in zip(a, b))


def test_copy_is_deterministic_whatever_the_threads_and_pipeline(tmp_path):
    clip = _clip(tmp_path / "src" / "c.mp4", bframes=3, duration=0.4)
    hashes = set()
    for i, (threads, q) in enumerate(((1, 0), (3, 4), (2, 1))):
        res = build_subsets(clip.path, tmp_path / str(i), landmarks=clip.landmarks, subsets=["FM", "AMM"],
                            threads=threads, queue_size=q, **SMALL)
        assert res.fm_video == "copy"
        hashes.add((sha256(res.outputs["FM"]), sha256(res.outputs["AMM"])))
    assert len(hashes) == 1


@pytest.mark.parametrize("case", ["start", "audio_late", "audio_early", "no_audio", "matroska"])
def test_copies_rebased_onto_the_grid(tmp_path, case):
    # A late first frame (timestamps shifted), audio starting after or before the video (the track
    # is aligned, padded and trimmed as for the encode), no audio at all (FM without audio, as today),
    # and Matroska's 1 ms timestamps (33, 67, 100 ms: within the standardiser's tolerance).
    kw = {"start": dict(start=0.5), "audio_late": dict(audio_delay=0.15), "audio_early": dict(start=0.3, audio_delay=-0.2),
          "no_audio": dict(audio=False), "matroska": dict(bframes=2)}[case]
    suffix = ".mkv" if case == "matroska" else ".mp4"
    clip = _clip(tmp_path / "src" / f"c{suffix}", **kw)
    info = media.probe(clip.path)
    if case == "matroska":
        assert any(t.denominator % 3 for t in info.frame_times) and info.frame_times != [Fraction(i, 30) for i in range(15)]
    ref = build_subsets(clip.path, tmp_path / "enc", landmarks=clip.landmarks, subsets=["FM"], fm_copy=False, **SMALL)
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "AMM"], **SMALL)
    assert res.fm_video == "copy", res.fm_video_reason
    assert video_packets(res.outputs["FM"]) == video_packets(clip.path)
    assert [t for t, _ in sorted(_packet_times(res.outputs["FM"]))][:3] == [0, 512, 1024]
    assert (res.frames, res.duration) == (ref.frames, ref.duration) == (15, pytest.approx(0.5))
    assert _stream_layout(res.outputs["FM"]) == _stream_layout(ref.outputs["FM"])
    if case == "no_audio":
        assert "audio" not in _stream_layout(res.outputs["FM"]) and not res.status["FM"].has_audio
    else:  # the encoded FM's audio packets exactly
        with av.open(str(res.outputs["FM"])) as a, av.open(str(ref.outputs["FM"])) as b:
            assert [bytes(p) for p in a.demux(audio=0) if p.size] == [bytes(p) for p in b.demux(audio=0) if p.size]


# -------------------------------------------------------------------------- non-conforming sources


def _ten_bit(path):
    clip = _clip(path.with_name("eight.mp4"))
    with av.open(str(clip.path)) as cin, av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=30)
        s.width, s.height, s.pix_fmt = 320, 240, "yuv420p10le"
        s.codec_context.colorspace, s.codec_context.color_range = 1, 1
        for i, f in enumerate(cin.decode(video=0)):
            g = f.reformat(format="yuv420p10le")
            g.pts, g.time_base, g.pict_type = i, Fraction(1, 30), 0
            for p in s.encode(g):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return dataclasses.replace(clip, path=path)


NON_CONFORMING = {
    "25fps": (dict(fps=25), "frames make"),
    "29.97fps": (dict(fps=Fraction(30000, 1001), duration=2.0), "off the 1/30 s grid"),
    "vfr": (dict(vfr=True), "off the 1/30 s grid"),
    "untagged": (dict(color=None), "colour matrix tagged unspecified"),
    "odd_yuv444p": (dict(size=(321, 241)), "pixel format yuv444p"),
    "rotated": (dict(rotation=90, size=(240, 320)), "rotated"),
    "mpeg4": (dict(codec="mpeg4", color=None), "codec mpeg4, not H.264"),
    "ten_bit": (None, "pixel format yuv420p10le"),
    "off": (dict(), "fm_copy is off"),
}


@pytest.mark.parametrize("case", list(NON_CONFORMING))
def test_non_conforming_sources_are_encoded_with_the_reason(tmp_path, case):
    kw, reason = NON_CONFORMING[case]
    clip = _ten_bit(tmp_path / "src" / "c10.mp4") if kw is None else _clip(tmp_path / "src" / "c.mp4", **kw)
    extra = dict(fm_copy=False) if case == "off" else {}
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "AMM"], **extra,
                        **SMALL)
    assert res.fm_video == "encode" and reason in res.fm_video_reason, res.fm_video_reason
    assert video_packets(res.outputs["FM"]) != video_packets(clip.path)
    assert video_packets(res.outputs["AMM"]) == video_packets(res.outputs["FM"])


def test_the_rule_condition_by_condition(tmp_path):
    # What generated clips cannot show, on a conforming clip's SourceInfo changed one fact at a time.
    clip = _clip(tmp_path / "c.mp4", audio=False)
    info, st = media.probe(clip.path), Settings()
    assert fm_copy_reason(info, st) == (True, "")
    assert fm_copy_reason(info, Settings(fm_copy=False)) == (False, "fm_copy is off")
    assert not fm_copy_reason(info, Settings(fps=25))[0]  # the grid is the output rate's
    f = info.facts
    cases = {
        "Annex B": dict(avcc=False),
        "not an IDR picture shown first": dict(first_idr=False),
        "without a presentation time": dict(missing_pts=3),
        "discarded by an edit list": dict(discarded=2),
        "interlaced": dict(interlaced=True),
        "full-range": dict(color=(1, 2, 2, 2)),
        "colour matrix tagged bt470bg, FM's encode tags bt709": dict(color=(5, 1, 2, 2)),
        "colour primaries bt2020 / transfer smpte2084": dict(color=(1, 1, 9, 16)),
    }
    for reason, change in cases.items():
        ok, why = fm_copy_reason(dataclasses.replace(info, facts=dataclasses.replace(f, **change)), st)
        assert not ok and reason in why, (reason, why)
    # tags FM's encode would write, or leaves out and players assume: still a copy
    for color in ((1, 0, 2, 2), (1, 1, 1, 1), (1, 1, 1, 6)):
        assert fm_copy_reason(dataclasses.replace(info, facts=dataclasses.replace(f, color=color)), st)[0], color
    for sar in (Fraction(1), Fraction(4, 3), Fraction(8, 9)):  # non-square pixels: carried (test below)
        assert fm_copy_reason(dataclasses.replace(info, facts=dataclasses.replace(f, sample_aspect_ratio=sar)), st)[0]
    # a frame 2 ms off its slot: off the grid; 0.9 ms (a container's rounding): on it
    for shift, ok in ((Fraction(2, 1000), False), (Fraction(9, 10000), True)):
        times = list(info.frame_times)
        times[7] += shift
        assert fm_copy_reason(dataclasses.replace(info, frame_times=times), st)[0] is ok, shift
    # a last frame lasting two slots: FM's encode repeats it (16 frames from 15)
    longer = dataclasses.replace(info, duration=info.duration + Fraction(1, 30))
    assert "15 source frames make 16" in fm_copy_reason(longer, st)[1]


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_anamorphic_source_is_copied_with_its_aspect_ratio(tmp_path, container):
    # Non-square pixels (4:3 samples, shown 16:9): the copy carries the sample aspect ratio in the
    # H.264 stream and the MP4's pasp box, as the encoded subsets do, so FM shows what they show.
    clip = _clip(tmp_path / "src" / f"c.{container}", sar=Fraction(4, 3))
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM", "FDM", "AMM"], **SMALL)
    assert res.fm_video == "copy", res.fm_video_reason
    assert video_packets(res.outputs["FM"]) == video_packets(clip.path)
    for name in ("FM", "FDM", "AMM"):
        with av.open(str(res.outputs[name])) as c:
            s = c.streams.video[0]
            assert s.sample_aspect_ratio == s.codec_context.sample_aspect_ratio == Fraction(4, 3), name
            assert s.display_aspect_ratio == Fraction(16, 9), name


def test_stream_starting_without_a_keyframe_is_never_copied(tmp_path):
    # A stream cut after its first keyframe (its first packets reference frames that are not there)
    clip = _clip(tmp_path / "c.mp4", audio=False, duration=0.6)
    gop = tmp_path / "gop.mp4"
    with av.open(str(clip.path)) as cin, av.open(str(gop), "w") as out:
        s = out.add_stream("libx264", rate=30)
        s.width, s.height, s.pix_fmt = 320, 240, "yuv420p"
        s.codec_context.colorspace, s.codec_context.color_range = 1, 1
        s.options = {"preset": "ultrafast", "g": "5"}
        for i, f in enumerate(cin.decode(video=0)):
            f.pts, f.time_base, f.pict_type = i, Fraction(1, 30), 0
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    cut = tmp_path / "cut.mp4"
    with av.open(str(gop)) as cin, av.open(str(cut), "w") as out:
        ovs = out.add_stream_from_template(cin.streams.video[0])
        for i, p in enumerate(p for p in cin.demux(video=0) if p.size):
            if i >= 2:
                p.stream = ovs
                out.mux(p)
    info = media.probe(cut)
    assert not info.facts.first_idr and media.probe(gop).facts.first_idr
    ok, why = fm_copy_reason(info, Settings())
    assert not ok and "not an IDR picture" in why


def test_colour_tags_only_in_the_container_are_carried(tmp_path, monkeypatch):
    # An untagged H.264 stream whose MP4 'colr' box says BT.709 (primaries, transfer, matrix, limited
    # range): its frames decode tagged BT.709, and the copy carries the box, so it shows the same.
    clip = _clip(tmp_path / "c.mp4", color=None, audio=False)
    src = tmp_path / "colr.mp4"
    with av.open(str(clip.path)) as cin, av.open(str(src), "w", options={"movflags": "write_colr"}) as out:
        ovs = out.add_stream_from_template(cin.streams.video[0])
        cc = ovs.codec_context
        cc.colorspace, cc.color_range, cc.color_primaries, cc.color_trc = 1, 1, 1, 1
        for p in cin.demux(video=0):
            if p.size:
                p.stream = ovs
                out.mux(p)
    info = media.probe(src)
    assert media.probe(clip.path).facts.color == (2, 0, 2, 2) and info.facts.color == (1, 1, 1, 1)
    res = build_subsets(src, tmp_path / "out", landmarks=clip.landmarks, subsets=["FM"], **SMALL)
    assert res.fm_video == "copy" and media.probe(res.outputs["FM"]).facts.color == (1, 1, 1, 1)
    # and a copy that would decode otherwise than its source (tags lost on the way) is replaced by the encode
    real_probe = fm_copy_mod.probe

    def lossy(path):
        got = real_probe(path)
        if ".tmp-" in str(path):  # the copy, probed back before it is renamed into place
            got = dataclasses.replace(got, facts=dataclasses.replace(got.facts, color=(2, 0, 2, 2)))
        return got

    monkeypatch.setattr(fm_copy_mod, "probe", lossy)
    res = build_subsets(src, tmp_path / "out2", landmarks=clip.landmarks, subsets=["FM", "AMM"], **SMALL)
    assert res.fm_video == "encode" and "would not show what the source shows" in res.fm_video_reason
    assert video_packets(res.outputs["FM"]) != video_packets(src)
    assert video_packets(res.outputs["AMM"]) == video_packets(res.outputs["FM"])


@pytest.mark.parametrize("caught_by", ["probe_back", "decode_pass"])
def test_a_copy_breaking_the_rule_falls_back_to_the_encode(tmp_path, monkeypatch, caught_by):
    # The rule is decided on the first frame and the packet timestamps; the copy is probed back and
    # the decode pass checks every frame.  Forced past the rule, a 25 fps clip is caught by either
    # and FM is encoded after all: every output the same bytes as with fm_copy=False.
    clip = _clip(tmp_path / "c.mp4", fps=25)
    ref = build_subsets(clip.path, tmp_path / "ref", landmarks=clip.landmarks, fm_copy=False, **SMALL)
    monkeypatch.setattr(subsets_mod, "fm_copy_reason", lambda info, st: (True, ""))
    if caught_by == "decode_pass":
        copy_fm = subsets_mod.write_fm_copy
        monkeypatch.setattr(subsets_mod, "write_fm_copy", lambda *a: copy_fm(*a) and "")
    res = build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, **SMALL)
    expected = {"probe_back": "the copy holds 12 frames over 0.400 s, FM 14",
                "decode_pass": "output frame 1 would show source frame 0 (frames dropped or duplicated)"}[caught_by]
    assert (res.fm_video, res.fm_video_reason) == ("encode", expected)
    for c in subsets_mod.ALL_SUBSETS:
        assert sha256(res.outputs[c]) == sha256(ref.outputs[c]), c
    assert sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file()) == sorted(
        p.name for p in (tmp_path / "ref").rglob("*") if p.is_file())  # no scratch or temporary left


def test_detection_pass_decodes_but_does_not_encode_fm(tmp_path, stack, monkeypatch):
    # Without landmarks the first pass detects and writes VMM; FM, copied, is not encoded on it.
    clip = _clip(tmp_path / "c.mp4", size=(640, 480), duration=0.4)
    captured = capture_encoder_frames(monkeypatch)
    fed = []
    from mime_fast.subject import SubjectDetection

    feed = SubjectDetection.feed
    monkeypatch.setattr(SubjectDetection, "feed", lambda self, rgb, *a: (fed.append(1), feed(self, rgb, *a))[1])
    res = build_subsets(clip.path, tmp_path / "out", **SMALL)
    assert res.fm_video == "copy" and len(fed) == res.source_frames == 12
    assert res.tracking is not None and res.tracking.detected > 0
    assert "FM" not in captured and {"FDM", "FSM"} <= set(captured)
    assert video_packets(res.outputs["FM"]) == video_packets(clip.path)


def test_a_copy_refused_by_the_detection_pass_is_encoded_on_the_face_pass(tmp_path, stack, monkeypatch):
    # Detected automatically, a clip takes two passes; a frame that breaks the copy rule on the
    # first leaves FM to the second (the face pass), from the frames kept: still one decode, and
    # the bytes of fm_copy=False.
    clip = _clip(tmp_path / "c.mp4", fps=25, size=(640, 480), duration=0.6)
    ref = build_subsets(clip.path, tmp_path / "ref", fm_copy=False, **SMALL)
    monkeypatch.setattr(subsets_mod, "fm_copy_reason", lambda info, st: (True, ""))
    copy_fm = subsets_mod.write_fm_copy
    monkeypatch.setattr(subsets_mod, "write_fm_copy", lambda *a: copy_fm(*a) and "")
    res = build_subsets(clip.path, tmp_path / "out", **SMALL)
    assert (res.fm_video, res.fm_video_reason) == (
        "encode", "output frame 1 would show source frame 0 (frames dropped or duplicated)")
    assert res.decodes == 1 and res.tracking.detected > 0
    for c in subsets_mod.ALL_SUBSETS:
        assert sha256(res.outputs[c]) == sha256(ref.outputs[c]), c
    # frames not kept (keep_frames_mb=0): the face pass decodes again and encodes FM, no third pass
    twice = build_subsets(clip.path, tmp_path / "twice", keep_frames_mb=0, **SMALL)
    assert twice.decodes == 2 and sha256(twice.outputs["FM"]) == sha256(ref.outputs["FM"])


# ------------------------------------------------------------------------------ manifest and CLI


def test_manifest_records_the_decision_and_cli_turns_it_off(tmp_path):
    root = tmp_path / "in"
    _clip(root / "copy.mp4")
    _clip(root / "enc.mp4", fps=25)
    args = ["--min-height", "0", "--min-duration", "0", "-q"]
    assert main(["build", str(root), "--out", str(tmp_path / "a"), *args]) == 0
    assert main(["build", str(root), "--out", str(tmp_path / "b"), "--no-fm-copy", *args]) == 0
    rows = {(r["clip_id"], r["subset"]): r for r in read_rows(tmp_path / "a")}
    assert (rows["copy", "FM"]["fm_video"], rows["copy", "FM"]["fm_video_reason"]) == ("copy", None)
    assert rows["copy", "AMM"]["fm_video"] == "copy"
    assert rows["enc", "FM"]["fm_video"] == "encode" and "frames make" in rows["enc", "FM"]["fm_video_reason"]
    assert all(r["fm_video"] is None for (c, s), r in rows.items() if s not in ("FM", "AMM"))
    off = {(r["clip_id"], r["subset"]): r for r in read_rows(tmp_path / "b")}
    assert off["copy", "FM"]["fm_video_reason"] == "fm_copy is off"
    # the same frame counts and durations either way
    for key, r in rows.items():
        assert (r["frames"], r["duration_s"]) == (off[key]["frames"], off[key]["duration_s"]), key
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "a" / "manifest.parquet")
    assert set(table.column("fm_video").to_pylist()) == {"copy", "encode", None}


def test_manifest_rows_from_before_the_column_read_back(tmp_path):
    old = {"clip_id": "x", "subset": "FM", "path": "FM/x.mp4", "status": "ok", "run": "r1", "frames": 30}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(old) + "\n")
    (row,) = read_rows(tmp_path)
    assert row["fm_video"] is None and row["fm_video_reason"] is None and row["frames"] == 30
