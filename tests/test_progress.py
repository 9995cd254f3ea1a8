"""Progress: build_subsets' per-frame callback."""

from __future__ import annotations

from pathlib import Path

import pytest

from mime_fast import build_subsets, samples


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
                           subsets=["FM", "FDM", "VMM"], min_height=0, progress=calls.append)
    assert result.source_frames == 20 and calls == [1] * 20  # one pass: with landmarks


def test_build_subsets_reports_both_passes_with_detection(tmp_path: Path, stack) -> None:
    clip = samples.make_clip(tmp_path / "walker.mp4", duration=0.4, fps=25, size=(640, 360), seed=8, save_npz=False)
    calls: list[int] = []
    result = build_subsets(clip.path, tmp_path / "out", subsets=["FM", "FDM"], min_height=0, progress=calls.append)
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
        build_subsets(two_clips / "long.mp4", out, landmarks=two_clips / "long.npz", min_height=0, progress=progress)
    assert len(seen) == 5
    assert [p for p in out.rglob("*") if p.is_file()] == []  # no output, no temporary
