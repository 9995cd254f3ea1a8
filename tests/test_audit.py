"""mime-fast audit (issues 14, 39): an independent detector (CenterFace) and two recognisers (dlib,
SFace) find planted leaks -- a clip whose FSM has a few unmasked frames, one whose mask is shifted
off the face, one whose FDM's mask is shifted off the face for 10 frames, an FSM replaced by FM, an
FSM with the mask but no blur -- and pass a correct build; the subject is re-identified against a
gallery of his clear faces from other moments and impostors (the distractor set shipped in wheels)."""

from __future__ import annotations

import json
from pathlib import Path

import mime_fast
import numpy as np
import pytest
from conftest import models_unavailable
from mime_fast.cli import main
from mime_fast.samples import make_clip

REPO = Path(__file__).resolve().parents[1]
GAP = range(6, 24)  # source frames left unmasked in the planted leak
SHIFTED = range(6, 16)  # source frames whose FDM mask is shifted off the face (10 frames)
EVERY = 4  # the audit's frame step in these tests: 18 of the 72 output frames (2.4 s at 30 fps)
AUDITED = list(range(0, 72, EVERY))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """out/: 2.4 s clips of the sample face (long enough for a gallery of his faces 1 s away): 'ok'
    built correctly (FSM kernel 55), 'k35' the same with the FSM kernel the default rule picks for
    this 144 px face (35), 'gap' with source frames 6..23 unmasked, 'shifted' with the mask moved
    off the face (to the frame's left edge, where there is no face), 'shift10' whose FDM's mask is
    off the face for source frames 6..15, 'leak' whose FSM is its FM, 'noblur' whose FSM has the
    face subsets' mask and no blur (kernel 1)."""
    import shutil

    try:
        from mime_fast.audit.clip import load_models

        load_models(640)
    except ImportError as exc:
        models_unavailable(exc)
    base = tmp_path_factory.mktemp("audit")
    out = base / "out"
    for name in ("ok", "k35", "gap", "shifted", "shift10", "noblur"):
        clip = make_clip(base / "src" / f"{name}.mp4", duration=2.4, fps=25, size=(640, 480), seed=4)
        pts = np.load(clip.npz)["landmarks"].copy()
        if name == "gap":
            pts[list(GAP)] = np.nan
        elif name == "shifted":
            pts[..., 0] -= pts[..., 0].min(axis=1, keepdims=True) - 2  # hull starts 2 px from the left edge
        kernel = 55 if name in ("ok", "shift10", "noblur") else "auto"
        if name == "shift10":  # FDM only: its own build, frames 6..15 with the hull at the left edge
            off = pts.copy()
            off[list(SHIFTED), :, 0] -= off[list(SHIFTED), :, 0].min(axis=1, keepdims=True) - 2
            mime_fast.build_subsets(clip.path, base / "shift10", landmarks=off, min_height=0, subsets=["FDM"])
        r = mime_fast.build_subsets(clip.path, out, landmarks=pts, min_height=0, fsm_kernel=kernel,
                                    fdm_kernel=1 if name == "noblur" else 15)
        assert r.fsm_kernel == (55 if kernel == 55 else 35)
    shutil.copy(base / "shift10" / "FDM" / "shift10.mp4", out / "FDM" / "shift10.mp4")
    (out / "FDAM" / "shift10.mp4").unlink()  # (its old video)
    shutil.copy(out / "FDM" / "noblur.mp4", out / "FSM" / "noblur.mp4")  # the mask, blurred with k=1
    (out / "FSAM" / "noblur.mp4").unlink()
    for s in ("FM", "FDM", "FDAM"):
        shutil.copy(out / s / "ok.mp4", out / s / "leak.mp4")
    shutil.copy(out / "FM" / "ok.mp4", out / "FSM" / "leak.mp4")  # FSM replaced by FM
    return out


def _cut_clip(clip, path: Path, shift: int) -> None:
    """``clip``'s frames, then the same frames again rolled ``shift`` px to the right (a cut to
    another framing: the face jumps farther than the audit follows a face)."""
    import av

    with av.open(str(clip.path)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt, s.options = frames[0].shape[1], frames[0].shape[0], "yuv420p", {"crf": "16"}
        for im in frames + [np.roll(f, shift, axis=1) for f in frames]:
            for pkt in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(im), format="rgb24")):
                c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)


@pytest.fixture(scope="module")
def cut_corpus(tmp_path_factory, corpus: Path) -> Path:
    """out/: 'cut', the 'ok' clip followed by a cut to the same frames moved 60 px: masked in the
    first shot, left clear in the second (as an engine that lost him at a cut would)."""
    base = tmp_path_factory.mktemp("audit_cut")
    clip = make_clip(base / "src.mp4", duration=0.8, fps=25, size=(640, 480), seed=4)
    _cut_clip(clip, base / "cut.mp4", 60)
    pts = np.load(clip.npz)["landmarks"]
    n = len(pts)
    both = np.concatenate([pts, np.full_like(pts, np.nan)])
    mime_fast.build_subsets(base / "cut.mp4", base / "out", landmarks=both, min_height=0, fsm_kernel=55,
                            subsets=["FM", "FDM", "FSM"])
    assert n == 20
    return base / "out"


@pytest.fixture(scope="module")
def report(corpus: Path):
    return mime_fast.audit(corpus, every=EVERY)


def rows(report, clip: str) -> dict[str, dict]:
    return {r["subset"]: r for r in report.rows if r["clip_id"] == clip}


@pytest.mark.slow
def test_a_correct_build_passes(report) -> None:
    """The heavy blur (k=55) hides him from both recognisers: no FSM probe is ranked first among the
    gallery's identities nor verified, where his clear faces (FM, the baseline) all are; the light
    blur (FDM) does not hide him, which MIME allows (reported, no problem)."""
    from mime_fast.audit import REID_MARGIN

    ok = rows(report, "ok")
    for s in ("FDM", "FSM", "FDAM", "FSAM"):
        r = ok[s]
        assert r["status"] == "ok" and r["frames_audited"] == 18 and r["subject_frames"] == 18, r
        assert r["probes"] == 18 and r["gallery_identities"] > 100, r  # the distractor set shipped in wheels
        assert r["chance_rank1"] == pytest.approx(1 / r["gallery_identities"])
        assert r["unmasked_frames"] == 0, r
        assert r["detail_ratio"] < 0.2, r
        for x in ("dlib", "sface"):
            assert r[f"baseline_rank1_{x}"] == 1.0 and r[f"baseline_tar_{x}"] == 1.0, r  # FM: re-identified
    for x in ("dlib", "sface"):
        assert ok["FSM"][f"rank1_{x}"] < ok["FSM"]["chance_rank1"] + REID_MARGIN, ok["FSM"]
        assert ok["FSM"][f"tar_{x}"] < 0.1, ok["FSM"]
        assert ok["FDM"][f"rank1_{x}"] > ok["FSM"][f"rank1_{x}"]  # the light blur hides less
    assert ok["FSM"]["reidentified"] is False and ok["FSM"]["reidentified_at"] == []
    assert ok["FDM"]["reidentified"] is True  # reported: MIME's light blur is not meant to hide identity
    assert ok["FSM"]["detail_ratio"] < ok["FDM"]["detail_ratio"]  # the heavy blur removes more
    assert ok["FDAM"]["same_video_as"] == "FDM" and ok["FSAM"]["same_video_as"] == "FSM"
    assert not [p for p in report.problems if p.startswith("ok ")]


@pytest.mark.slow
def test_the_verdict_needs_both_recognisers(report) -> None:
    """On this 144 px face, k=35 (what fsm_kernel="auto" picks for faces under 160 px) leaves him
    ranked first by dlib's ResNet for most probes, but neither recogniser both ranks him first and
    verifies him above the margin: the figures are reported, the verdict (both figures, both
    recognisers) does not count FSM re-identified; k=55 hides him from both."""
    from mime_fast.audit import REID_MARGIN

    k35, ok = rows(report, "k35")["FSM"], rows(report, "ok")["FSM"]
    bar = {"rank1": k35["chance_rank1"] + REID_MARGIN, "tar": k35["fmr"] + REID_MARGIN}
    assert k35["unmasked_frames"] == 0
    assert k35["rank1_dlib"] > bar["rank1"] > ok["rank1_dlib"], k35
    assert not all(k35[f"{c}_{x}"] >= bar[c] for c in bar for x in ("dlib", "sface")), k35
    assert k35["reidentified"] is False
    assert len(k35["reidentified_at"]) == k35["reidentified_frames"] < REID_MARGIN * k35["probes"]
    assert not any(p.startswith("k35 FSM:") for p in report.problems), report.problems


@pytest.mark.slow
def test_planted_leaks_are_re_identified(report) -> None:
    """FSM replaced by FM, and an FSM with the face subsets' mask but no blur: every probe is ranked
    first by both recognisers (the FM baseline's rate), and --strict's problems say so, naming the
    frames; the unblurred face is unmasked too."""
    for clip in ("leak", "noblur"):
        r = rows(report, clip)["FSM"]
        assert r["reidentified"] is True, r
        assert r["rank1_dlib"] == r["rank1_sface"] == r["baseline_rank1_dlib"] == 1.0, r
        assert r["reidentified_at"] == AUDITED and r["unmasked_frames"] == 18, r
        assert any(p.startswith(f"{clip} FSM: the subject is re-identified (rank-1/TAR dlib 1.00/1.00, sface "
                                "1.00/1.00 against ")
                   and p.endswith("18 of 18 probes ranked first and verified by both) at frames 0, 4, 8, 12, 16, 20, "
                                  "24, 28, ...")
                   for p in report.problems), report.problems
    assert rows(report, "leak")["FDM"]["unmasked_frames"] == 0  # only its FSM was replaced


@pytest.mark.slow
def test_unmasked_frames_are_caught(report) -> None:
    """Source frames 6..23 (output frames 7..28 on the 30 fps grid) are clear in FDM and FSM: the
    subject, followed there by box overlap, is reported unmasked in the audited frames among them."""
    gap = rows(report, "gap")
    # the audited output frames that show a source frame of the gap (frame k shows source frame
    # floor(k * 25 / 30) on the 30 fps grid)
    shown = [k for k in AUDITED if k * 25 // 30 in GAP]
    assert len(shown) == 6
    for s in ("FDM", "FSM", "FDAM", "FSAM"):
        assert gap[s]["unmasked_frames"] == 6, gap[s]
        assert gap[s]["unmasked_at"] == shown, gap[s]
        assert gap[s]["subject_frames"] == 18
    assert set(gap["FSM"]["reidentified_at"]) >= set(shown)  # an unmasked face is re-identified
    named = ", ".join(map(str, shown))
    assert any(p.startswith("gap FSM:") and p.endswith(f"unmasked in 6 of 18 frames at frames {named}")
               for p in report.problems), report.problems


@pytest.mark.slow
def test_fdm_mask_shifted_off_the_face_for_10_frames_is_caught(report) -> None:
    """FDM's mask off the face for source frames 6..15 (FSM correct): FDM's unmasked frames are
    exactly the audited frames showing them, FSM has none."""
    r = rows(report, "shift10")
    shown = [k for k in AUDITED if k * 25 // 30 in SHIFTED]
    assert len(shown) == 3
    assert r["FDM"]["unmasked_at"] == shown and r["FDM"]["same_video_as"] is None, r["FDM"]
    assert r["FDAM"]["status"] == "skipped"
    assert r["FSM"]["unmasked_frames"] == 0 and r["FSM"]["reidentified"] is False
    assert any(p.startswith("shift10 FDM: the subject is visible but unmasked in 3 of 18") for p in report.problems)


@pytest.mark.slow
def test_the_subject_left_clear_after_a_cut_is_caught_by_identity(cut_corpus: Path, report) -> None:
    """Rules 1 - 3 follow the subject by position: after a cut to another framing (his face 130 px
    away) where the engine left him clear, nothing leads there.  His identity does: the clear face
    of the second shot is re-identified as his reference (the first shot's masked face) by both
    recognisers against the impostors, and every audited frame of that shot is counted; a correct
    build counts none."""
    got = mime_fast.audit(cut_corpus, every=2, write=False)
    r = {x["subset"]: x for x in got.rows}
    for s in ("FDM", "FSM"):
        assert r[s]["status"] == "ok"
        assert r[s]["unmasked_frames"] == 0, r[s]  # the blind spot of the rules by position
        assert r[s]["identity_frames"] == 12, r[s]  # the second shot: 24 of the 48 output frames, every 2nd
        assert r[s]["identity_at"] == list(range(24, 48, 2)), r[s]
        assert r[s]["unmasked_at"] == [], r[s]
    assert any("cut FSM:" in p and "identity" in p for p in got.problems), got.problems
    assert all(x["identity_frames"] == 0 for x in report.rows if x["clip_id"] == "ok" and x["status"] == "ok")


@pytest.mark.slow
def test_a_mask_shifted_off_the_face_is_caught(report) -> None:
    shifted = rows(report, "shifted")
    for s in ("FDM", "FSM"):
        assert shifted[s]["unmasked_frames"] == shifted[s]["subject_frames"] == 18, shifted[s]
        assert shifted[s]["reidentified"] is True and shifted[s]["reidentified_at"] == AUDITED
        assert shifted[s]["unmasked_at"] == AUDITED
        assert shifted[s]["detail_ratio"] > 0.7
    assert not report.ok
    # a problem names its first frames (8 of the 18) and says there are more
    assert any(p.startswith("shifted FSM: the subject is visible but unmasked in 18 of 18")
               and p.endswith("at frames 0, 4, 8, 12, 16, 20, 24, 28, ...") for p in report.problems), report.problems


@pytest.mark.slow
def test_audit_parquet_and_strict_exit_status(corpus: Path, report, capsys) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(corpus / "audit.parquet").to_pylist()
    assert len(table) == 7 * 4 and set(table[0]) == set(mime_fast.audit.COLUMNS)
    by = {(r["clip_id"], r["subset"]): r for r in table}
    assert by[("gap", "FSM")]["unmasked_at"] == rows(report, "gap")["FSM"]["unmasked_at"] != []
    assert by[("ok", "FSM")]["reidentified_at"] == [] and by[("ok", "FSM")]["unmasked_at"] == []
    assert by[("leak", "FSM")]["reidentified_at"] == AUDITED
    every = ["--every", str(EVERY), "-q"]
    assert main(["audit", str(corpus), *every, "--clips", "ok", "--strict"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("FM: ") and "baseline" in out.splitlines()[0]
    assert "FSM: identity removed" in out
    for bad in ("gap", "leak", "noblur", "shift10", "shifted"):
        assert main(["audit", str(corpus), *every, "--clips", f"ok,{bad}", "--strict"]) == 1, bad
    assert main(["audit", str(corpus), *every, "--clips", "k35", "--strict"]) == 0  # dlib alone: no verdict
    assert main(["audit", str(corpus), *every, "--clips", "gap"]) == 0  # reported, not an error
    capsys.readouterr()


@pytest.mark.slow
def test_a_clip_that_cannot_be_read_fails_alone(corpus: Path, tmp_path: Path, capsys) -> None:
    """A truncated FSM and an empty FM: those clips get failed rows naming the file and the reason,
    the other clips are audited, audit.parquet is written and the exit status is 1."""
    import shutil

    import pyarrow.parquet as pq

    out = tmp_path / "out"
    shutil.copytree(corpus, out)
    (out / "audit.parquet").unlink(missing_ok=True)
    fsm = out / "FSM" / "gap.mp4"
    fsm.write_bytes(fsm.read_bytes()[:20000])
    (out / "FM" / "shifted.mp4").write_bytes(b"")
    assert main(["audit", str(out), "--every", "12", "-q"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    table = pq.read_table(out / "audit.parquet").to_pylist()
    status = {(r["clip_id"], r["subset"]): (r["status"], r["reason"]) for r in table}
    assert len(table) == 7 * 4
    assert all(status[c, s][0] == "ok" for c in ("ok", "k35") for s in ("FDM", "FSM"))
    assert status["gap", "FSM"][0] == "failed" and status["gap", "FSM"][1].startswith("FSM/gap.mp4: truncated")
    assert status["shifted", "FDM"] == ("failed", "FM/shifted.mp4: empty file (0 bytes)")
    assert f"failed gap: {status['gap', 'FSM'][1]}" in captured.out
    assert "failed shifted: FM/shifted.mp4: empty file (0 bytes)" in captured.out


@pytest.mark.slow
def test_the_manifest_is_read_once_per_audit(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    """Each clip's kernels come from one read of the manifest, not one per clip (quadratic in a
    large corpus)."""
    import importlib
    import shutil

    from mime_fast.manifest import ManifestWriter

    audit_module = importlib.import_module("mime_fast.audit.clip")  # where each clip's kernels are read
    out = tmp_path / "out"
    shutil.copytree(corpus, out)
    with ManifestWriter(out) as w:
        for clip, k in (("ok", 55), ("k35", 35), ("gap", 35)):
            w.append({"clip_id": clip, "subset": s, "kernel": kk, "status": "ok", "run": "r1"}
                     for s, kk in (("FM", None), ("FDM", 15), ("FSM", k)))
    calls = []
    real = audit_module.read_rows
    monkeypatch.setattr(audit_module, "read_rows", lambda d: calls.append(d) or real(d))
    report = mime_fast.audit(out, clips=["ok", "k35", "gap"], every=24, write=False)
    assert len(calls) == 1
    kernels = {(r["clip_id"], r["subset"]): r["kernel"] for r in report.rows}
    assert kernels["ok", "FSM"] == 55 and kernels["k35", "FSM"] == 35 and kernels["gap", "FDM"] == 15


def test_usage_errors(tmp_path: Path, capsys) -> None:
    assert main(["audit", str(tmp_path / "nope")]) == 2
    assert main(["audit", str(tmp_path)]) == 2
    assert "no FM folder" in capsys.readouterr().err
    (tmp_path / "FM").mkdir()
    assert main(["audit", str(tmp_path), "--every", "0"]) == 2
    assert main(["audit", str(tmp_path), "--clips", "x"]) == 2
    for size in ("-1", "16"):
        assert main(["audit", str(tmp_path), "--detect-size", size]) == 2
        assert "--detect-size must be 0 (native size) or >= 32 px" in capsys.readouterr().err


def test_detect_size_0_is_the_native_size(tmp_path: Path, monkeypatch, capsys) -> None:
    import mime_fast.cli.audit as cli_audit

    (tmp_path / "FM").mkdir()
    seen = {}

    def fake_audit(out_dir, **kw):
        seen.update(kw)
        return mime_fast.audit.AuditReport([])

    monkeypatch.setattr(cli_audit, "audit", fake_audit)
    assert main(["audit", str(tmp_path), "--detect-size", "0", "-q"]) == 0
    assert seen["detect_size"] is None
    assert main(["audit", str(tmp_path), "-q"]) == 0 and seen["detect_size"] == 640
    capsys.readouterr()


def test_audit_parquet_is_never_left_half_written(tmp_path: Path) -> None:
    from mime_fast.audit.report import write_audit_parquet

    (tmp_path / "audit.parquet").mkdir()  # the rename fails
    with pytest.raises(OSError):
        write_audit_parquet(tmp_path / "audit.parquet", [{"clip_id": "a", "subset": "FDM"}])
    assert [p.name for p in tmp_path.iterdir()] == ["audit.parquet"]


@pytest.mark.parametrize(("chance", "fmr"), [(1 / 8, 1e-3), (1 / 2, 0.05)])
def test_re_identified_a_hundredth_past_the_margin_and_not_a_hundredth_short_of_it(chance: float, fmr: float) -> None:
    """The verdict on a subset's figures: re-identified when every recogniser ranks him first for a
    share of the probes at least 0.25 (REID_MARGIN) above chance and verifies him for a share at
    least 0.25 above the false-match rate.  Figures at each bar and 0.01 either side of it, one
    recogniser at a time (the audit's clips, planted leaks and correct builds, test the verdict
    only far from its bars; its one caller, audit_clip, needs the recognisers); no verdict without
    probes."""
    from mime_fast.audit import FMR, REID_MARGIN
    from mime_fast.audit.verdicts import reidentified as verdict_on

    assert (REID_MARGIN, FMR) == (0.25, 1e-3)
    names = ["dlib", "sface"]

    def verdict(**figures: float | None) -> bool | None:
        got = {f"{c}_{n}": 1.0 for n in names for c in ("rank1", "tar")} | figures
        return verdict_on(got, names, chance, fmr)

    assert verdict() is True
    for n in names:
        assert verdict(**{f"rank1_{n}": chance + 0.26, f"tar_{n}": fmr + 0.26}) is True, n
        assert verdict(**{f"rank1_{n}": chance + 0.24}) is False, n
        assert verdict(**{f"tar_{n}": fmr + 0.24}) is False, n
        assert verdict(**{f"rank1_{n}": None, f"tar_{n}": None}) is None, n
    for above, reidentified in ((0.26, True), (0.25, True), (0.24, False)):
        both = {f"{c}_{n}": v + above for n in names for c, v in (("rank1", chance), ("tar", fmr))}
        assert verdict(**both) is reidentified, above


def test_threshold_is_the_committed_calibration() -> None:
    from mime_fast.audit import RECOGNISABLE_COS, similarity
    from mime_fast.audit.protocol import CALIBRATION

    bench = json.loads((REPO / "bench" / "results" / "audit_calibration-cpu.json").read_text())
    assert RECOGNISABLE_COS == bench["threshold"] == CALIBRATION["threshold"]
    assert bench["different_person"]["p99"] == pytest.approx(RECOGNISABLE_COS, abs=1e-3)
    assert len(CALIBRATION["mean"]) == 128
    rng = np.random.default_rng(0)
    a = rng.normal(size=128)
    assert similarity(a, a) == pytest.approx(1.0)
    assert similarity(a, -a, np.zeros(128)) == pytest.approx(-1.0)


def test_link_tracks_follows_boxes() -> None:
    from mime_fast.audit import link_tracks

    boxes = [np.array([[0, 0, 10, 10], [50, 50, 60, 60]], np.float32),
             np.array([[51, 51, 61, 61], [1, 1, 11, 11]], np.float32),
             np.array([[200, 200, 210, 210]], np.float32)]
    ids = link_tracks(boxes)
    assert list(ids[0]) == [0, 1] and list(ids[1]) == [1, 0] and list(ids[2]) == [2]


def test_identity_references_come_from_tracks_the_engine_masks() -> None:
    """The greyscale hug, as a build whose mask of the subject reached half the other man's face
    while the audit's detector missed the subject (frames 6-8): rule 1 takes the other man there.
    His track is clear in most frames, so those frames are no identity reference (they would make
    his clear face read as the subject's); where no reference frame lies on a mostly masked track,
    all of rule 1's frames are kept."""
    from mime_fast.audit import link_tracks
    from mime_fast.audit.detection import reference_frames, subject_per_frame

    him, other = np.array([100, 100, 160, 180], np.float32), np.array([300, 100, 360, 180], np.float32)
    boxes = [np.stack([him, other])] * 6 + [other[None]] * 3 + [np.stack([him, other])] * 3
    masked = [np.array([True, False])] * 6 + [np.array([True])] * 3 + [np.array([True, False])] * 3
    subject = subject_per_frame(boxes, masked)
    tracks = link_tracks(boxes)
    assert [int(t[j]) for t, j in zip(tracks, subject)][6:9] == [1, 1, 1]  # rule 1 takes the other man
    assert reference_frames(subject, masked, tracks) == [0, 1, 2, 3, 4, 5, 9, 10, 11]
    # no rule-1 frame on a mostly masked track (a face masked in 3 of its 9 frames): all are kept
    boxes = [other[None]] * 3 + [np.stack([him, other])] * 6
    masked = [np.array([True])] * 3 + [np.array([False, False])] * 6
    subject = subject_per_frame(boxes, masked)
    assert reference_frames(subject, masked, link_tracks(boxes)) == [0, 1, 2]


def test_a_face_smooth_in_fm_still_counts_as_masked_when_blurred(astronaut) -> None:
    """A face already smooth in FM (motion blur) keeps its detail ratio near 1 under MIME's blur,
    but not its pixels: looks_clear tells it from a face left clear (the arm-wrestling clip's
    hand-held frames)."""
    import cv2
    from mime_fast.audit import detail_ratio, looks_clear

    box = np.array([190, 40, 310, 210], np.float32)
    gray = cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY).astype(np.float32)
    noise = np.random.default_rng(0).normal(0, 1.0, gray.shape).astype(np.float32)
    assert looks_clear(gray, gray + noise, box, 15)  # left clear: encoding noise only
    assert not looks_clear(gray, cv2.GaussianBlur(gray, (15, 15), 0), box, 15)
    smooth = cv2.blur(gray, (9, 9))  # FM itself smooth: a motion-blurred face
    heavy = cv2.GaussianBlur(smooth, (35, 35), 0)
    assert not looks_clear(smooth, heavy, box, 35)
    assert looks_clear(smooth, smooth + noise, box, 35)
    assert detail_ratio(gray, cv2.GaussianBlur(gray, (35, 35), 0), box) < 0.1


# ------------------------------------------------------------------ at corpus scale: resume and sample


def _fake_folder(tmp_path: Path, n: int) -> Path:
    out = tmp_path / "out"
    for s in ("FM", "FDM", "FSM"):
        (out / s).mkdir(parents=True)
        for i in range(n):
            (out / s / f"c{i:02d}.mp4").write_bytes(b"x" * (i + 1))
    return out


@pytest.fixture
def fake_audit(monkeypatch):
    """audit() with its models and per-clip work faked: ``calls`` lists the clips audited; a clip
    in ``fail`` raises a ClipError, ``stop_at`` a KeyboardInterrupt (Ctrl-C)."""
    import importlib
    from types import SimpleNamespace

    from mime_fast.audit import AUDITED, COLUMNS
    from mime_fast.audit.clip import Models
    from mime_fast.media import ClipError

    mod = importlib.import_module("mime_fast.audit.run")  # where audit() finds its models and audit_clip
    state = SimpleNamespace(calls=[], fail=set(), stop_at=None)

    def audit_clip(out_dir, cid, models, *, every=1, fmr=0.0, kernels=None, on_frames=None):
        if cid == state.stop_at:
            raise KeyboardInterrupt
        state.calls.append(cid)
        if cid in state.fail:
            raise ClipError(out_dir / "FSM" / f"{cid}.mp4", "corrupt or truncated")
        return [{**{c: None for c in COLUMNS}, "clip_id": cid, "subset": s, "status": "ok", "subject_frames": 3,
                 "reidentified": False, "unmasked_frames": 0, "identity_frames": 0, "mean_similarity": 0.25}
                for s in AUDITED]

    monkeypatch.setattr(mod, "audit_clip", audit_clip)
    monkeypatch.setattr(mod, "load_models", lambda size, **kw: Models(None, [], "fake"))
    return state


def test_a_rerun_reuses_the_clips_audited_and_unchanged(tmp_path: Path, fake_audit) -> None:
    """Each clip audited is journalled (audit.jsonl) as it ends: an interrupted audit resumes where
    it stopped, an unchanged clip is not audited again, a rebuilt one (its file's time or size
    changed), a failed one or other audit settings are; --fresh audits all."""
    import os

    import pyarrow.parquet as pq

    out = _fake_folder(tmp_path, 6)
    fake_audit.stop_at = "c03"
    with pytest.raises(KeyboardInterrupt):
        mime_fast.audit(out, every=5)
    assert fake_audit.calls == ["c00", "c01", "c02"] and not (out / "audit.parquet").exists()
    with open(out / "audit.jsonl", "a") as f:
        f.write('{"clip_id": "c04", "key"')  # a line torn by a kill is ignored
    fake_audit.stop_at, fake_audit.calls = None, []
    fake_audit.fail = {"c05"}
    r = mime_fast.audit(out, every=5)
    assert fake_audit.calls == ["c03", "c04", "c05"] and r.reused == 3 and set(r.failed) == {"c05"}
    assert len(pq.read_table(out / "audit.parquet")) == 6 * 4
    fake_audit.calls, fake_audit.fail = [], set()
    st = (out / "FSM" / "c01.mp4").stat()
    os.utime(out / "FSM" / "c01.mp4", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rebuilt
    r = mime_fast.audit(out, every=5)
    assert fake_audit.calls == ["c01", "c05"] and r.reused == 4 and r.ok  # the failed clip again, too
    assert [r_["clip_id"] for r_ in r.rows[::4]] == [f"c{i:02d}" for i in range(6)]
    assert len((out / "audit.jsonl").read_text().splitlines()) == 6  # compacted: one entry per clip
    fake_audit.calls = []
    assert mime_fast.audit(out, every=5).reused == 6 and fake_audit.calls == []
    assert mime_fast.audit(out, every=10).reused == 0 and len(fake_audit.calls) == 6  # other settings
    fake_audit.calls = []
    assert main(["audit", str(out), "--every", "10", "--fresh", "-q"]) == 0 and len(fake_audit.calls) == 6
    fake_audit.calls = []
    assert mime_fast.audit(out, every=10, write=False).reused == 0 and len(fake_audit.calls) == 6


def test_sample_audits_the_same_spread_clips_every_time(tmp_path: Path, fake_audit, capsys) -> None:
    from mime_fast.audit import sample_clips

    out = _fake_folder(tmp_path, 20)
    r = mime_fast.audit(out, sample=5, write=False)
    first = sorted(fake_audit.calls)
    assert len(first) == 5 and first == sorted({row["clip_id"] for row in r.rows})
    assert first != [f"c{i:02d}" for i in range(5)]  # spread, not the first five
    assert sample_clips([f"c{i:02d}" for i in reversed(range(20))], 5) == first  # whatever the order
    assert set(sample_clips([f"c{i:02d}" for i in range(21)], 5)) & set(first)  # mostly the same as it grows
    fake_audit.calls = []
    assert main(["audit", str(out), "--sample", "5", "-q"]) == 0 and sorted(fake_audit.calls) == first
    assert main(["audit", str(out), "--sample", "5", "-q"]) == 0 and "5 clip(s) unchanged" in capsys.readouterr().out
    assert main(["audit", str(out), "--sample", "0"]) == 2


def test_the_audited_subsets_and_their_kernels_come_from_spec() -> None:
    """The audit reads what each subset is from mime_fast.spec (which are face subsets, which video a
    remux carries, blur level) and the kernels from the options, instead of restating them."""
    import inspect
    import re
    from typing import get_args

    from mime_fast.audit import protocol as audit_module
    from mime_fast.cli.tools import FACE_CODES
    from mime_fast.options import FsmKernel, MaskOptions
    from mime_fast.spec import CODES, SUBSETS, face_codes

    assert list(audit_module.AUDITED) == face_codes(CODES) and set(audit_module.AUDITED) == FACE_CODES
    for code, base in audit_module.AUDITED.items():
        s = SUBSETS[code]
        assert base == (None if s.encoded else str(s.remux_of))
        lightest = MaskOptions().fdm_kernel if s.kernel == "fdm" else min(k for k in get_args(FsmKernel) if k != "auto")
        assert audit_module.MIME_KERNEL[code] == lightest
        assert audit_module.INTENT[code] == (audit_module.INTENT_OF_LEVEL[s.blur_level] if base is None
                                            else f"as {base} (same video)")
    package = Path(audit_module.__file__).parent
    source = "".join(p.read_text() for p in sorted(package.glob("*.py")))  # every module of the audit package
    source += inspect.getsource(importlib_module("mime_fast.cli.tools"))
    assert not re.search(r'"F[DS]A?M"\s*:', source)  # no subset table spelled out
    assert not re.search(r'\(\s*"F[DS]A?M"\s*,\s*"F[DS]A?M"', source)


def importlib_module(name: str):
    import importlib

    return importlib.import_module(name)


# ------------------------------------------------------------------ issue 52: workers, seeded sample, table, progress


@pytest.mark.slow
def test_workers_give_the_rows_of_one_worker(corpus: Path) -> None:
    """Clips audited in two worker processes (spawned, each with its own models, the distractor
    gallery handed over): the same rows, in the same order, as in this process."""
    clips = ["shifted", "ok", "gap"]
    one = mime_fast.audit(corpus, clips=clips, every=12, write=False)
    two = mime_fast.audit(corpus, clips=clips, every=12, write=False, workers=2)
    assert [r["clip_id"] for r in two.rows[::4]] == clips
    assert two.rows == one.rows and two.problems == one.problems
    with pytest.raises(ValueError, match="workers"):
        mime_fast.audit(corpus, workers=0)


def test_a_seeded_sample_is_the_same_for_the_same_seed(tmp_path: Path, fake_audit, capsys) -> None:
    from mime_fast.audit import sample_clips

    ids = [f"c{i:02d}" for i in range(40)]
    assert sample_clips(ids, 5, seed=7) == sample_clips(list(reversed(ids)), 5, seed=7)  # whatever the order
    assert sample_clips(ids, 5, seed=7) != sample_clips(ids, 5, seed=8)  # another seed, another sample
    assert sample_clips(ids, 5, seed=7) != sample_clips(ids, 5)  # and not the unseeded one
    out = _fake_folder(tmp_path, 20)
    assert main(["audit", str(out), "--sample", "4", "--seed", "3", "-q"]) == 0
    first = sorted(fake_audit.calls)
    assert first == sample_clips([f"c{i:02d}" for i in range(20)], 4, seed=3)
    fake_audit.calls = []
    assert main(["audit", str(out), "--sample", "4", "--seed", "3", "--fresh", "-q"]) == 0
    assert sorted(fake_audit.calls) == first
    assert main(["audit", str(out), "--seed", "3"]) == 2  # a seed without a sample
    assert main(["audit", str(out), "--workers", "0"]) == 2
    capsys.readouterr()


def test_progress_names_each_clip_its_result_and_the_time_left(tmp_path: Path, fake_audit, capsys) -> None:
    """mime-fast audit prints on stderr the models loading, each clip as it starts and as it ends
    (its place in the run, its seconds, what each subset gave) and the time left; nothing with -q."""
    out = _fake_folder(tmp_path, 3)
    assert main(["audit", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any("loading the audit's models" in line for line in err)
    assert "auditing 3 clip(s)" in err[1]
    for i, c in enumerate(("c00", "c01", "c02"), 1):
        assert f"[{i}/3] {c}: pass 1 of 2 (faces and masks)" in err
        done = next(line for line in err if line.startswith(f"[{i}/3] {c}: ") and " s, " in line)
        assert "FDM not re-identified, FSM not re-identified" in done
        assert done.endswith("left") == (i < 3), done
    assert main(["audit", str(out), "--fresh", "-q"]) == 0 and capsys.readouterr().err == ""


def _figures_row(clip: str, subset: str, dlib: tuple[float, float], sface: tuple[float, float]) -> dict:
    from mime_fast.audit import COLUMNS
    from mime_fast.audit.verdicts import reidentified

    r = {c: None for c in COLUMNS} | {
        "clip_id": clip, "subset": subset, "status": "ok", "probes": 18, "chance_rank1": 1 / 221, "fmr": 1e-3,
        "detail_ratio": 0.05, "unmasked_frames": 0, "identity_frames": 0, "rank1_dlib": dlib[0], "tar_dlib": dlib[1],
        "rank1_sface": sface[0], "tar_sface": sface[1], "baseline_rank1_dlib": 1.0, "baseline_tar_dlib": 1.0,
        "baseline_rank1_sface": 1.0, "baseline_tar_sface": 1.0}
    r["reidentified"] = reidentified(r, ["dlib", "sface"], r["chance_rank1"], r["fmr"])
    return r


def _block(table: str, subset: str) -> list[str]:
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{subset}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


@pytest.mark.slow
def test_the_table_is_narrow_and_says_what_each_recogniser_found(report) -> None:
    """Issue 52: the table fits in 100 columns, its legend in short lines; each subset has a line per
    recogniser saying what it found and a verdict line saying why: SFace alone re-identifying him in
    FSM (rank-1 0.616 against chance 0.0045, as on the real clips) does not make FSM re-identified,
    and the table says dlib held it back."""
    from mime_fast.audit import AUDITED, AuditReport
    from mime_fast.audit.report import TABLE_WIDTH

    rows = [_figures_row("a", "FDM", (1.0, 1.0), (1.0, 1.0)), _figures_row("a", "FSM", (0.0, 0.0), (0.616, 0.4))]
    table = AuditReport(rows).table()
    assert TABLE_WIDTH == 100 and max(map(len, table.splitlines())) <= TABLE_WIDTH, table
    fsm = _block(table, "FSM")
    assert any(line.split()[:1] == ["dlib"] and "does not re-identify him: rank-1 < bar 0.255, TAR < bar 0.251"
               in line for line in fsm), fsm
    assert any(line.split()[:1] == ["sface"] and "rank-1 0.616" in line and "re-identifies him: rank-1 >= bar"
               in line for line in fsm), fsm
    assert fsm[-1] == "  re-id 0 of 1 clip: re-identified only where every recogniser is; dlib does not (1 clip)"
    assert _block(table, "FDM")[-1] == "  re-id 1 of 1 clip: every recogniser re-identifies him"
    # the real audit: every subset explained, the verdict line's count is the rows' verdicts
    table = report.table()
    assert max(map(len, table.splitlines())) <= TABLE_WIDTH, table
    for s in ("FM", *AUDITED):
        block = _block(table, s)
        assert [line.split()[0] for line in block if line.split()[0] in ("dlib", "sface")] == ["dlib", "sface"], block
        if s != "FM":
            rs = [r for r in report.rows if r["subset"] == s and r["reidentified"] is not None]
            assert block[-1].startswith(f"  re-id {sum(bool(r['reidentified']) for r in rs)} of {len(rs)} clip"), block
