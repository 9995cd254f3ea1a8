"""mime-fast curate's rules one by one: the static-overlay detector (a large semi-transparent text
excluded, a small corner logo kept and reported, a static camera and the real clips of
../shared/media not watermarks), the video hash, the balanced draw (counts, strata, shortfalls,
the seed), the duration gate, and a selected list that mime-fast build builds."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openpyxl")
pytest.importorskip("cv2")
pytest.importorskip("matplotlib")

from conftest import sitecustomize_path
from curate_fixtures import (
    background,
    letterboxed,
    resized,
    static_scene,
    with_corner_logo,
    with_text,
    write_clip,
)
from mime_fast import samples
from mime_fast.cli import main
from mime_fast.curate import (
    CurateOptions,
    balance,
    curate,
    dedup,
    probe,
    resolve_roots,
    watermark,
)

OPTS = CurateOptions(min_height=48, progress=False)
MEDIA = Path(__file__).resolve().parents[1].parent / "shared" / "media"


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text("utf-8"), newline="")))


def folder_corpus(root: Path, clips: dict[str, list]) -> Path:
    """``<Emotion>/<name>.mp4`` clips: ``clips`` maps ``"Emotion/name"`` to frames."""
    for name, frames in clips.items():
        write_clip(root / f"{name}.mp4", frames)
    return root


@pytest.fixture(scope="module")
def watermarked(tmp_path_factory):
    base = tmp_path_factory.mktemp("wm")
    root = folder_corpus(base / "social", {
        "Happy/text": with_text(background(51)),  # large semi-transparent text across the middle
        "Happy/logo": with_corner_logo(background(52)),  # a small opaque logo in a corner
        "Sad/plain": background(53),
        "Sad/static": static_scene(54),  # a static camera: a still room, a figure walking across
    })
    return root, base


def test_watermark_rule(watermarked) -> None:
    root, base = watermarked
    out = base / "drop"
    result = curate(resolve_roots([], [("social", root)]), out, OPTS)
    excluded = {r["path"]: r["reason"] for r in read_csv(out / "excluded.csv")}
    assert list(excluded) == [str(root / "Happy" / "text.mp4")]
    reason = excluded[str(root / "Happy" / "text.mp4")]
    assert reason.startswith("severe watermark: a static semi-transparent overlay over ")
    assert {c.clip_id for c in result.selected} == {"social_Happy_logo", "social_Sad_plain", "social_Sad_static"}
    # the logo: found, measured, reported, kept
    logo = result.overlays["social_Happy_logo"]
    assert [b["position"] for b in logo] == ["corner"] and logo[0]["opacity"] > 0.85 and logo[0]["area"] < 0.05
    report = (out / "report.md").read_text("utf-8")
    assert "| social_Happy_logo | social | corner " in report and "kept (not severe)" in report
    assert "| social_Happy_text | social | centre " in report and "| excluded |" in report
    assert "social_Sad_static" not in result.overlays and "social_Sad_plain" not in result.overlays


def test_watermarks_report_keeps_the_clip(watermarked) -> None:
    root, base = watermarked
    out = base / "report"
    result = curate(resolve_roots([], [("social", root)]), out,
                    CurateOptions(min_height=48, progress=False, watermarks="report"))
    assert "social_Happy_text" in {c.clip_id for c in result.selected}
    assert "severe, kept (--watermarks report)" in (out / "report.md").read_text("utf-8")


def test_opacity_is_measured() -> None:
    frames = background(55, n=14, h=96, w=160)
    def grey(fr):
        return np.stack([f.mean(axis=2).astype(np.uint8) for f in fr])

    faint, strong = (watermark.measure(grey(with_text(frames, alpha=a))) for a in (0.25, 0.6))
    assert faint and strong
    assert 0.2 < faint[0]["opacity"] < strong[0]["opacity"] < 0.85
    assert watermark.measure(grey(frames)) == []


@pytest.mark.skipif(not MEDIA.is_dir(), reason=f"{MEDIA} is absent (the real clips of ../shared/media)")
@pytest.mark.parametrize("name", ["crowd_1080p.mp4", "two_people_hug_1080p.mp4", "arm_wrestling_340x256.mp4"])
def test_real_clips(name) -> None:
    """Real footage with no overlay is not watermarked (crowd: a static camera, people walking
    across; hug: a static camera, one man standing still while the other moves around him; arm
    wrestling: hand-held); the same frames under a large semi-transparent text are, under a small
    corner logo are not."""
    import cv2

    found = probe.probe_clip(str(MEDIA / name))
    assert "error" not in found
    assert watermark.judge(found["overlays"]) is None, found["overlays"]
    _, frames = probe.sample_frames(MEDIA / name)
    h, w = frames.shape[1:]
    layer = np.zeros((h, w), np.uint8)
    cv2.putText(layer, "SAMPLE WATERMARK", (int(w * 0.05), int(h * 0.55)), cv2.FONT_HERSHEY_SIMPLEX, w / 300, 255,
                max(2, int(w / 150)), cv2.LINE_AA)
    for alpha in (0.3, 0.5):
        a = layer.astype(np.float32) / 255 * alpha
        text = np.clip(frames * (1 - a) + 255 * a, 0, 255).astype(np.uint8)
        assert watermark.judge(watermark.measure(text)) is not None, alpha
    logo = frames.copy()
    s = int(h * 0.1)
    logo[:, int(h * 0.04):int(h * 0.04) + s, int(w * 0.9) - s:int(w * 0.9)] = 235
    assert watermark.judge(watermark.measure(logo)) is None


def test_a_static_camera_is_not_a_watermark() -> None:
    frames = np.stack([f.mean(axis=2).astype(np.uint8) for f in static_scene(56)])
    assert watermark.measure(frames) == []


def test_video_hash_across_reencode_size_and_letterbox(tmp_path) -> None:
    frames = background(61, h=72, w=96)
    clips = {
        "a": write_clip(tmp_path / "a.mp4", frames, crf=18),
        "small": write_clip(tmp_path / "small.mp4", resized(frames, 64, 48), crf=36),
        "big": write_clip(tmp_path / "big.mp4", resized(frames, 160, 120), crf=28),
        "box": write_clip(tmp_path / "box.mp4", letterboxed(frames, 128, 128), crf=30),
        "other": write_clip(tmp_path / "other.mp4", background(62), crf=18),
    }
    found = {k: probe.probe_clip(str(p)) for k, p in clips.items()}
    items = [(k, f["duration"], bytes.fromhex(f["hash"]), f["flat"]) for k, f in found.items()]
    assert dedup.duplicate_groups(items) == [["a", "small", "big", "box"]]
    assert found["box"]["content"] == [128, 96]  # the picture without its bars

    def distance(x, y):
        return dedup.video_hash_distance(bytes.fromhex(found[x]["hash"]), found[x]["flat"],
                                         bytes.fromhex(found[y]["hash"]), found[y]["flat"])

    assert max(distance("a", k) for k in ("small", "big", "box")) <= dedup.THRESHOLD
    assert distance("a", "other") > 3 * dedup.THRESHOLD


def test_copies_of_other_durations_are_not_compared() -> None:
    h = bytes(8 * 12)
    flat = [False] * 12
    assert dedup.duplicate_groups([("a", 2.0, h, flat), ("b", 2.2, h, flat), ("c", 3.0, h, flat)]) == [["a", "b"]]


def test_allocation_is_proportional() -> None:
    assert balance.allocate({"A": 60, "B": 30}, 30) == {"A": 20, "B": 10}
    assert balance.allocate({"A": 60, "B": 2}, 30) == {"A": 29, "B": 1}
    assert balance.allocate({"A": 10, "B": 2}, 10) == {"A": 8, "B": 2}  # the largest remainder
    assert balance.allocate({"A": 5, "B": 2}, 30) == {"A": 5, "B": 2}  # fewer than the places: all
    assert sum(balance.allocate({"A": 7, "B": 5, "C": 3}, 10).values()) == 10


def test_draw_counts_shortfall_and_seed() -> None:
    pool = {"Happy": {"A": [f"A{i:03d}" for i in range(60)], "B": [f"B{i:03d}" for i in range(30)]},
            "Sad": {"A": ["A900", "A901"]}, "Fear": {}}
    chosen, short = balance.draw(pool, 30, seed=7)
    assert sum(1 for c in chosen if c.startswith("A0")) == 20 and sum(1 for c in chosen if c.startswith("B")) == 10
    assert {"A900", "A901"} <= chosen
    assert short == {"Sad": 28, "Fear": 30}
    again, _ = balance.draw({e: {d: list(reversed(ids)) for d, ids in c.items()} for e, c in pool.items()}, 30, 7)
    assert again == chosen  # the same seed, the clips found in another order: the same draw
    assert balance.draw(pool, 30, seed=8)[0] != chosen
    assert balance.draw(pool, None, seed=7) == ({c for e in pool.values() for ids in e.values() for c in ids}, {})


def test_balance_outputs_and_seed_stability(tmp_path) -> None:
    root = folder_corpus(tmp_path / "pool", {
        **{f"Happy/h{i}": background(70 + i) for i in range(5)}, "Sad/s0": background(80)})
    roots = resolve_roots([], [("pool", root)])
    opts = CurateOptions(min_height=48, progress=False, per_class=2, seed=3)
    first = curate(roots, tmp_path / "one", opts)
    assert sorted(c.emotion for c in first.selected) == ["Happy", "Happy", "Sad"]
    assert first.shortfall == {"Sad": 1, **{e: 2 for e in ("Anger", "Disgust", "Fear", "Neutral", "Surprise")}}
    not_drawn = [r for r in read_csv(tmp_path / "one" / "excluded.csv")]
    assert len(not_drawn) == 3 and all(r["reason"].startswith("not drawn: 2 Happy clips drawn") for r in not_drawn)
    report = (tmp_path / "one" / "report.md").read_text("utf-8")
    assert "- Sad: 1 short of 2 (1 available)" in report and "| Happy | 5 -> 2 | 5 -> 2 |" in report
    curate(roots, tmp_path / "two", opts)
    for name in ("selected.csv", "excluded.csv", "report.md", "balance.png"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    draws = {tuple(sorted(c.clip_id for c in curate(roots, tmp_path / "one", CurateOptions(
        min_height=48, progress=False, per_class=2, seed=s)).selected)) for s in range(6)}  # (probes cached)
    assert len(draws) > 1  # the seed draws


def test_too_short_for_build_is_excluded(tmp_path) -> None:
    root = folder_corpus(tmp_path / "c", {"Happy/short": background(90, n=8), "Happy/long": background(91)})
    result = curate(resolve_roots([], [("c", root)]), tmp_path / "out", OPTS)
    assert [c.clip_id for c in result.selected] == ["c_Happy_long"]
    assert read_csv(tmp_path / "out" / "excluded.csv")[0]["reason"] == (
        "too short: 0.32 s of video, below --min-duration 0.5 (mime-fast build's gate)")


def test_selected_list_builds(tmp_path, capsys) -> None:
    root = folder_corpus(tmp_path / "c", {"Surprise/one": background(95)})
    assert main(["curate", "--dataset", f"mine={root}", "--out", str(tmp_path / "cur"), "--min-height", "48",
                 "-q"]) == 0
    assert main(["build", str(tmp_path / "cur" / "selected.csv"), "--out", str(tmp_path / "built"),
                 "--subsets", "FM", "--min-height", "48", "-q"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "built" / "manifest.jsonl").read_text().splitlines()]
    assert {(r["clip_id"], r["label"], r["dataset"], r["status"]) for r in rows if r["subset"] == "FM"} == {
        ("mine_Surprise_one", "Surprise", "mine", "ok")}
    assert (tmp_path / "built" / "FM" / "mine_Surprise_one.mp4").is_file()


@pytest.mark.parametrize("rotation", [90, 270])
def test_probe_reads_the_displayed_picture(tmp_path, rotation) -> None:

    up = samples.make_clip(tmp_path / "up.mp4", duration=0.6, fps=25, size=(160, 96), audio=False, seed=3)
    turned = samples.make_clip(tmp_path / "turned.mp4", duration=0.6, fps=25, size=(160, 96), audio=False, seed=3,
                               rotation=rotation)  # stored 96x160, displayed 160x96
    (facts_up, frames_up), (facts, frames) = probe.sample_frames(up.path), probe.sample_frames(turned.path)
    assert facts == facts_up == {"width": 160, "height": 96, "duration": 0.6}
    assert frames.shape == frames_up.shape == (probe.FRAMES, 144, 240)
    assert np.abs(frames.astype(int) - frames_up.astype(int)).mean() < 3  # upright, as displayed


def test_long_clips_are_sampled_by_seeking(tmp_path, monkeypatch) -> None:
    clip = write_clip(tmp_path / "long.mp4", background(97, n=60), fps=25)
    facts, decoded = probe.sample_frames(clip)
    monkeypatch.setattr(probe, "SEEK_FROM", 1.0)  # 2.4 s: seek to each sample
    sought_facts, sought = probe.sample_frames(clip)
    assert sought_facts == facts
    assert np.array_equal(sought, decoded)


def test_a_probe_that_crashes_its_process_costs_only_its_clip(tmp_path, monkeypatch) -> None:
    root = folder_corpus(tmp_path / "c", {"Happy/a": background(101), "Happy/crash": background(102),
                                          "Sad/b": background(103), "Sad/c": background(104)})
    # in the worker processes (started from now on), opening crash.mp4 kills the process, as a
    # crash in a decoder would
    monkeypatch.setenv("PYTHONPATH", sitecustomize_path(tmp_path, (
        "import os, av\n"
        "_open = av.open\n"
        "def _crash(path, *a, **k):\n"
        "    if str(path).endswith('crash.mp4'):\n"
        "        os._exit(70)\n"
        "    return _open(path, *a, **k)\n"
        "av.open = _crash\n")))
    result = curate(resolve_roots([], [("c", root)]), tmp_path / "out",
                    CurateOptions(min_height=48, progress=False, workers=2))
    assert sorted(c.clip_id for c in result.selected) == ["c_Happy_a", "c_Sad_b", "c_Sad_c"]
    assert read_csv(tmp_path / "out" / "excluded.csv") == [{
        "path": str(root / "Happy" / "crash.mp4"), "dataset": "c",
        "reason": "unreadable: the process probing it died (a crash while decoding)"}]


def test_copies_found_among_many_clips() -> None:
    # 5,000 clips of random hashes, 20 of them copied with 5 of each frame's 63 bits flipped (8 %):
    # the band index finds every copy, and no other pair
    rng = np.random.default_rng(5)
    hashes = rng.integers(0, 256, (5000, 12 * 8), dtype=np.uint8)
    items = [(f"c{i}", float(rng.uniform(1, 5)), hashes[i].tobytes(), [False] * 12) for i in range(5000)]
    for n, src in enumerate(rng.choice(5000, 20, replace=False)):
        bits = np.unpackbits(hashes[src]).reshape(12, 64)
        for frame in bits:
            frame[rng.choice(63, 5, replace=False)] ^= 1
        items.append((f"copy{n}", items[src][1] + 0.04, np.packbits(bits).tobytes(), [False] * 12))
    groups = dedup.duplicate_groups(items)
    assert len(groups) == 20 and all(len(g) == 2 and g[1].startswith("copy") for g in groups)
