"""The audit's identity rule on a real cut sequence (issue 39): the hug clip's subject, a cut to the
real crowd clip (strangers, none of them him, left clear by the engine), and a cut back to the hug.
A correct default build counts no identity frame (the rule by one dlib similarity took crowd strangers
for him: 37 frames on the hug cut to the crowd); the same build with his second shot left clear in FSM
(FM's frames copied there: the subject lost after a cut, where the rules by position cannot follow)
is flagged, in that shot's frames only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import models_unavailable

import mime_fast

FPS_OUT = 30  # the build's output frame rate
SHOTS = ((0, 36), (0, 40), (36, 36))  # hug 0-35, crowd 0-39, hug 36-71 (source frames at 25 fps)
EVERY = 2


def _second_hug_shot(seq) -> int:
    """The first output frame (at FPS_OUT) of the cut back to the hug."""
    return int(np.ceil(seq.starts[2] / float(seq.fps) * FPS_OUT))


def _clear_from(fm: Path, fsm: Path, out: Path, first: int) -> None:
    """``out``: ``fsm``'s frames before output frame ``first``, ``fm``'s from it on (libx264)."""
    import av

    from mime_fast.media import iter_display_frames, probe

    info = probe(fm)
    clear = [f for _, _, f in iter_display_frames(fm, info)]
    blurred = [f for _, _, f in iter_display_frames(fsm, probe(fsm))]
    with av.open(str(out), "w") as c:
        s = c.add_stream("libx264", rate=round(info.average_rate))
        s.width, s.height, s.pix_fmt, s.options = clear[0].shape[1], clear[0].shape[0], "yuv420p", {"crf": "16"}
        for i, (a, b) in enumerate(zip(clear, blurred)):
            for pkt in s.encode(av.VideoFrame.from_ndarray(a if i >= first else b, format="rgb24")):
                c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)


@pytest.fixture(scope="module")
def cut_build(shared_media, tmp_path_factory):
    """out/: 'aba' built with default settings (FM, FDM, FSM), 'aba_clear' the same with FSM's
    second hug shot replaced by FM's frames; and the cut sequence."""
    from mime_fast.samples import make_cut_sequence

    try:
        from mime_fast.audit.clip import load_models

        load_models(640)
    except ImportError as exc:
        models_unavailable(exc)
    base = tmp_path_factory.mktemp("audit_cuts")
    hug, crowd = shared_media / "two_people_hug_1080p.mp4", shared_media / "crowd_1080p.mp4"
    seq = make_cut_sequence(base / "aba.mp4", [(hug, *SHOTS[0]), (crowd, *SHOTS[1]), (hug, *SHOTS[2])],
                            size=(960, 540), fps=25)
    out = base / "out"
    mime_fast.build_subsets(seq.path, out, clip_id="aba", subsets=["FM", "FDM", "FSM"])
    for s in ("FM", "FDM"):
        (out / s / "aba_clear.mp4").write_bytes((out / s / "aba.mp4").read_bytes())
    _clear_from(out / "FM" / "aba.mp4", out / "FSM" / "aba.mp4", out / "FSM" / "aba_clear.mp4", _second_hug_shot(seq))
    return out, seq


@pytest.mark.slow
def test_strangers_left_clear_are_not_the_subject_and_his_clear_shot_is(cut_build) -> None:
    out, seq = cut_build
    report = mime_fast.audit(out, every=EVERY, write=False)
    rows = {(r["clip_id"], r["subset"]): r for r in report.rows}
    first = _second_hug_shot(seq)
    # the correct build: the crowd's strangers are clear and none is re-identified as him
    for s in ("FDM", "FSM"):
        r = rows["aba", s]
        assert r["status"] == "ok" and r["identity_frames"] == 0 and r["identity_at"] == [], r
        assert r["unmasked_frames"] == 0, r
        assert r["subject_frames"] > 30  # both hug shots: he is masked in each
    assert not [p for p in report.problems if p.startswith("aba ")], report.problems
    # his second shot left clear in FSM: its frames, and only those, are his clear face
    r = rows["aba_clear", "FSM"]
    shot = list(range(first, seq.frames * FPS_OUT // 25, EVERY))
    assert set(r["identity_at"]) <= set(shot), r["identity_at"]
    assert r["identity_frames"] >= 0.8 * len(shot), (r["identity_at"], shot)
    assert rows["aba_clear", "FDM"]["identity_frames"] == 0  # masked there
    assert any(p.startswith("aba_clear FSM: a clear face re-identified as the subject (identity)")
               for p in report.problems), report.problems


@pytest.fixture(scope="module")
def abab_build(shared_media, hog_stack, tmp_path_factory):
    """out/: 'cut_abab' built with default settings (FM, FDM, FSM): the real ``cut_abab`` variant of
    bench/edited_variants.py (the hug and the crowd at 720p cut together every 12 frames, six times
    each; libx264 CRF 18), its subject the hug's man on the right (selected with HOG's bodies,
    ``hog_stack``: the man a crowd stranger reads as)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from edited_variants import var

    try:
        from mime_fast.audit.clip import load_models

        load_models(640)
    except ImportError as exc:
        models_unavailable(exc)
    base = tmp_path_factory.mktemp("audit_abab")
    src = var("cut_abab", base, shared_media)
    out = base / "out"
    from mime_fast.subject import detect_subject

    mime_fast.build_subsets(src, out, clip_id="cut_abab", subsets=["FM", "FDM", "FSM"],
                            landmarks=detect_subject(src, stack=hog_stack))
    return out


@pytest.mark.slow
def test_a_stranger_one_recogniser_reads_as_him_is_not_him(abab_build, monkeypatch) -> None:
    """On the hug clip dlib cannot re-identify the subject (it abstains) and SFace decides the
    identity rule alone; SFace reads a stranger of the crowd as the hug's man, above its margins.
    dlib, too weak to re-identify him, still ranks him far from the top for that face: the rule
    needs the abstaining recogniser's support (IDENTITY_SUPPORT), and the correct build passes.
    Without that support (the share set to 1) the same build fails on that stranger."""
    import mime_fast.audit.clip as audit  # where the identity rule reads IDENTITY_SUPPORT

    report = mime_fast.audit(abab_build, every=EVERY, write=False)
    for r in report.rows:
        if r["subset"] in ("FDM", "FSM"):
            assert r["status"] == "ok" and r["identity_frames"] == 0 and r["unmasked_frames"] == 0, r
    assert report.problems == [], report.problems
    monkeypatch.setattr(audit, "IDENTITY_SUPPORT", 1.0)
    unsupported = mime_fast.audit(abab_build, every=EVERY, write=False)
    assert any("identity" in p for p in unsupported.problems), unsupported.rows
