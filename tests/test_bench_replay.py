"""bench/_replay.py, the recorded model stack bench_host_overhead.py times the host with: a replayed
clip tracks exactly as the recorded one, and a replay that asks something else says so."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mime_fast import samples
from mime_fast.subject import detect_subject
from mime_fast.media import probe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _replay import ROLES, ReplayDiverged, recording, replaying, unanswered  # noqa: E402


def _points(provider) -> list:
    return [provider.points(i) for i in range(provider.num_frames)]


def test_a_replay_tracks_as_the_recording_without_running_the_models(stack, tmp_path: Path) -> None:
    clip = samples.make_clip(tmp_path / "c.mp4", duration=1.2, fps=25, size=(320, 240), seed=4)
    info = probe(clip.path)
    rec, log = recording(stack)
    recorded = detect_subject(clip.path, info, stack=rec)
    assert log.calls > 0 and log.seconds > 0

    class Guard:  # a model whose methods must not run during the replay
        def __init__(self, model):
            self.model = model

        def __getattr__(self, name):
            value = getattr(self.model, name)
            if not callable(value):
                return value

            def ran(*a, **k):
                raise AssertionError(f"a model ran during the replay ({name})")
            return ran

    guarded = SimpleNamespace(**{r: Guard(getattr(stack, r)) for r in ROLES}, name=stack.name)
    for _ in range(2):  # each replay answers from fresh copies of the record
        st, queues = replaying(guarded, log)
        replayed = detect_subject(clip.path, info, stack=st)
        assert unanswered(queues) == {}
        a, b = _points(recorded), _points(replayed)
        assert len(a) == len(b) and all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b))
        assert vars(replayed.stats) == vars(recorded.stats)


def test_a_replay_that_asks_something_else_says_so(stack, tmp_path: Path) -> None:
    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.6, fps=25, size=(320, 240), seed=5)
    other = samples.make_clip(tmp_path / "d.mp4", duration=0.6, fps=25, size=(352, 288), seed=5)
    rec, log = recording(stack)
    detect_subject(clip.path, probe(clip.path), stack=rec)
    st, _ = replaying(stack, log)
    with pytest.raises(ReplayDiverged, match="recorded"):  # another frame size: another input
        detect_subject(other.path, probe(other.path), stack=st)
