"""Progress: build_subsets' per-frame callback, and the frame-counted bars of corpus runs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mime_fast import build_subsets, samples
from mime_fast.corpus import ClipSpec, discover, run_corpus
from mime_fast.corpus.progress import TqdmMonitor, estimate_frames


@pytest.fixture(scope="module")
def two_clips(tmp_path_factory) -> Path:
    """short.mp4: 10 source frames, long.mp4: 20 (25 fps), landmarks beside them."""
    root = tmp_path_factory.mktemp("progress") / "in"
    samples.make_clip(root / "long.mp4", duration=0.8, fps=25, size=(320, 240), seed=5)
    samples.make_clip(root / "short.mp4", duration=0.4, fps=25, size=(320, 240), seed=6)
    return root


def test_build_subsets_reports_each_source_frame(two_clips: Path, tmp_path: Path) -> None:
    calls: list[int] = []
    result = build_subsets(two_clips / "long.mp4", tmp_path, landmarks=two_clips / "long.npz",
                           subsets=["FM", "FDM", "VMM"], min_height=0, min_duration=0, progress=calls.append)
    assert result.source_frames == 20 and calls == [1] * 20  # one pass: with landmarks


def test_build_subsets_reports_both_passes_with_detection(tmp_path: Path, stack) -> None:
    clip = samples.make_clip(tmp_path / "walker.mp4", duration=0.4, fps=25, size=(640, 360), seed=8, save_npz=False)
    calls: list[int] = []
    result = build_subsets(clip.path, tmp_path / "out", subsets=["FM", "FDM"], min_height=0, min_duration=0,
                           progress=calls.append)
    assert result.tracking.status == "ok"
    assert sum(calls) == 2 * result.source_frames == 20  # detection + FM pass, then FDM pass


def test_an_exception_from_progress_stops_the_clip_and_leaves_no_file(two_clips: Path, tmp_path: Path) -> None:
    seen = []

    def progress(n: int) -> None:
        seen.append(n)
        if len(seen) == 5:
            raise KeyboardInterrupt

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        build_subsets(two_clips / "long.mp4", out, landmarks=two_clips / "long.npz", min_height=0, min_duration=0,
                      progress=progress)
    assert len(seen) == 5
    assert [p for p in out.rglob("*") if p.is_file()] == []  # no output, no temporary


def test_estimate_frames_reads_the_container(two_clips: Path, tmp_path: Path) -> None:
    assert estimate_frames(two_clips / "long.mp4") == 20
    assert estimate_frames(two_clips / "short.mp4") == 10
    (tmp_path / "junk.mp4").write_bytes(b"\0" * 100)
    assert estimate_frames(tmp_path / "junk.mp4") is None
    assert estimate_frames(tmp_path / "missing.mp4") is None


def test_the_run_bar_counts_frames_and_its_total_comes_from_the_clips(two_clips: Path, tmp_path: Path) -> None:
    # Driven by hand: the run's total is the clips' frames times their passes (the ETA is frames
    # left over frames per second), a clip not estimated counts as the mean, finished clips count
    # what they did.
    m = TqdmMonitor(file=io.StringIO())
    specs = [ClipSpec("long", two_clips / "long.mp4"), ClipSpec("short", two_clips / "short.mp4"),
             ClipSpec("odd", tmp_path / "unreadable.mp4")]
    m.start(specs, [1, 2, 1])
    m._estimator.join(timeout=60)
    assert m.overall.total == 20 * 1 + 10 * 2 + 15 * 1  # "odd": the mean of 20 and 10
    m.frames("long", 8)
    m.frames("long", 12)
    assert (m.overall.n, m.overall.total) == (20, 55)
    m.clip_done("long", None, 20)
    m.frames("short", 10)  # its first pass
    assert (m.overall.n, m.overall.total) == (30, 55)
    m.clip_done("short", None, 10)  # no subject: one pass of the two counted
    assert (m.overall.n, m.overall.total) == (30, 45)
    m.clip_done("odd", "corrupt", 0)
    assert (m.overall.n, m.overall.total) == (30, 30)
    m.close()
    text = m.file.getvalue()
    assert "[1/3] long: ok" in text and "[3/3] odd: failed: corrupt" in text and "clips 3/3" in text
    # a clip built again from its start (its worker process died) counts its frames once
    m = TqdmMonitor(file=io.StringIO())
    m.start(specs[:1], [1])
    m._estimator.join(timeout=60)
    m.frames("long", 15)
    m.clip_restarted("long")
    assert m.overall.n == 0 and m._bars["long"].n == 0
    m.frames("long", 20)
    m.clip_done("long", None, 20)
    assert (m.overall.n, m.overall.total) == (20, 20)
    m.close()


def test_a_large_run_reads_a_bounded_sample_then_each_clip_as_it_starts(monkeypatch) -> None:
    # 40,000 clips must not mean 40,000 container opens beside the workers: ESTIMATE_SAMPLE of
    # them spread over the list for the run's total (the others at their mean), then each clip
    # when its first frame comes, for its own bar
    from mime_fast.corpus import progress

    read: list[str] = []

    def frames_of(clip: str) -> int:
        return 10 + int(clip[1:]) % 2 * 20  # even clips 10 frames, odd ones 30

    def fake(path: Path) -> int | None:
        read.append(path.stem)
        return frames_of(path.stem)

    def settle(m: TqdmMonitor) -> None:
        while m._estimator is not None and m._estimator.is_alive():
            m._estimator.join(timeout=60)

    monkeypatch.setattr(progress, "estimate_frames", fake)
    specs = [ClipSpec(f"c{i}", Path(f"/nowhere/c{i}.mp4")) for i in range(1000)]
    m = TqdmMonitor(file=io.StringIO())
    m.start(specs, [1] * 999 + [0])  # the last one fails as listed: not read
    settle(m)
    assert len(read) == progress.ESTIMATE_SAMPLE == 64 and len(set(read)) == 64
    spread = [int(c[1:]) for c in read]
    assert spread == sorted(spread) and spread[0] == 0 and spread[-1] > 900  # over the list, in order
    mean = sum(frames_of(c) for c in read) / 64
    assert m.overall.total == round(sum(frames_of(c) for c in read) + mean * (999 - 64))
    # a clip not in the sample is read when it starts (its bar gets its total), once
    clip = next(f"c{i}" for i in range(1, 999) if f"c{i}" not in read)
    m.frames(clip, 1)
    settle(m)
    m.frames(clip, 1)
    assert read[64:] == [clip] and m._bars[clip].total == frames_of(clip)
    m.frames(read[1], 1)  # one of the sample: known already
    settle(m)
    assert len(read) == 65 and m._bars[read[1]].total == frames_of(read[1])
    m.close()
    # a small run reads every clip, as before
    read.clear()
    m = TqdmMonitor(file=io.StringIO())
    m.start(specs[:10], [1] * 10)
    settle(m)
    assert read == [f"c{i}" for i in range(10)] and m.overall.total == 5 * 10 + 5 * 30
    m.close()


def test_a_rerun_names_a_few_complete_clips_and_counts_the_others_in_one_line() -> None:
    # a rerun over 40,000 complete clips prints SKIPPED_SHOWN names and one count, not 40,000 lines
    from mime_fast.corpus.progress import SKIPPED_SHOWN, LineMonitor

    lines: list[str] = []
    m = LineMonitor(lines.append)
    for i in range(40_000):
        m.skipped(f"c{i}")
    assert SKIPPED_SHOWN == 5 and lines == [f"c{i}: already complete, skipped" for i in range(5)]
    m.start([ClipSpec("new", Path("new.mp4"))], [1])
    m.clip_done("new", None, 10)
    m.close()
    assert lines[5] == "… and 39,995 more clips already complete, skipped"
    assert lines[6].startswith("[1/1] new: ok") and len(lines) == 7
    # a run with nothing left to build (start is still called), one more than shown, a few, quiet
    for count, said in ((6, ["… and 1 more clip already complete, skipped"]), (5, []), (0, [])):
        lines.clear()
        m = LineMonitor(lines.append)
        for i in range(count):
            m.skipped(f"c{i}")
        m.start([], [])
        m.close()
        assert lines == [f"c{i}: already complete, skipped" for i in range(min(count, 5))] + said
    lines.clear()
    m = LineMonitor(lines.append, errors_only=True)
    for i in range(10):
        m.skipped(f"c{i}")
    m.start([], [])
    m.close()
    assert lines == []
    # closed without starting (the run stopped before): the count is still told, once
    m = LineMonitor(lines.append)
    for i in range(8):
        m.skipped(f"c{i}")
    m.close()
    m.close()
    assert lines[5:] == ["… and 3 more clips already complete, skipped"]
    # the bars print the same lines above them
    m = TqdmMonitor(file=io.StringIO())
    for i in range(8):
        m.skipped(f"c{i}")
    m.start([], [])
    m.close()
    text = m.file.getvalue()
    assert text.count("already complete") == 6 and "c4: already complete" in text and "c5:" not in text
    assert "… and 3 more clips already complete, skipped" in text


class Recorder(TqdmMonitor):
    """Records, at each frame event, the clip and the run bar's count."""

    def __init__(self) -> None:
        super().__init__(file=io.StringIO())
        self.events: list[tuple[str, int]] = []

    def frames(self, clip_id: str, n: int) -> None:
        super().frames(clip_id, n)
        self.events.append((clip_id, self.overall.n))


@pytest.mark.parametrize("workers", [1, 2])
def test_corpus_run_moves_frame_by_frame(two_clips: Path, tmp_path: Path, workers: int) -> None:
    m = Recorder()
    summary = run_corpus(discover(two_clips), tmp_path / "out", subsets=["FM", "FDM"], monitor=m, workers=workers,
                         min_height=0, min_duration=0)
    assert sorted(summary.done) == ["long", "short"]
    assert m.overall.n == m.overall.total == 30  # every frame of both clips, counted as processed
    counts = [n for _, n in m.events]
    assert counts == sorted(counts) and counts[-1] == 30
    assert {c for c, _ in m.events} == {"long", "short"}
    if workers == 1:  # in this process every frame is reported as it is done
        assert counts == list(range(1, 31))
    assert "loading detection models" not in m.file.getvalue()  # landmarks given: no model needed


def test_detection_models_loading_is_shown(tmp_path: Path, stack) -> None:
    root = tmp_path / "in"
    samples.make_clip(root / "walker.mp4", duration=0.2, fps=25, size=(640, 360), seed=8, save_npz=False)
    m = TqdmMonitor(file=io.StringIO())
    summary = run_corpus(discover(root), tmp_path / "out", subsets=["FM", "FDM"], monitor=m, min_height=0,
                         min_duration=0)
    assert summary.done == ["walker"]
    text = m.file.getvalue()
    assert "loading detection models…" in text
    assert text.index("loading detection models…") < text.index("walker")

