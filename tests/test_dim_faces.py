"""Dim faces in a shot he is not in (issue 50, item 4; ``docs/subject-tracking.md``, the decision's
rule 7b): the real ``stage`` variants of bench/edited_variants.py -- he is lit (the hug), a cut to
the audience under stage light (the crowd x 0.38: faces 40 - 120 px at luma 40 - 70, their
contrast mostly under MIN_CONTRAST), back to him lit (``stage``) or under the same light
(``stage_dim``: his own dim faces, the counter-case)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

#: the audience's shot in the stage variants (frames of the variant)
AUDIENCE = range(30, 80)


@pytest.fixture(scope="module")
def hug_original(shared_media, stack):
    from mime_fast.subject import detect_subject

    return detect_subject(shared_media / "two_people_hug_1080p.mp4", stack=stack)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stage", "stage_dim"])
def test_real_stage_audience_clear_and_him_masked(name, shared_media, stack, hug_original, tmp_path, monkeypatch):
    """No face of the dim audience's shot is masked after its 2nd frame (CenterFace, not the
    engine's detector, sees them there: nothing of the engine covers them), the decision says
    which were read dim against his lit views; every frame of his is masked on his face (the
    original hug's subject, through the frame map).  Without rule 7b (DIM_CONTRAST raised to
    MIN_CONTRAST) the dim faces stay masked as too dark to tell."""
    import mime_fast.subject.decision as decision
    from mime_fast.detect import CenterFaceDetector
    from mime_fast.landmarks import faces_list
    from mime_fast.subject import detect_subject

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from edited_variants import var
    from video_fixtures import rgb_frames

    video = var(name, tmp_path, shared_media)
    fmap = json.loads(video.with_suffix(".map.json").read_text())["frames"]
    det = detect_subject(video, stack=stack)
    assert [n for n, _ in det.stats.shot_frames] == [30, 50, 42], det.stats.shot_frames

    def his_centre(i):  # his face's centre in variant frame i: the original's through the frame map
        _, k, (a, b, c, d), _ = fmap[i][0]
        p = hug_original.points(k)
        return None if p is None else (a * (p[:, 0].min() + p[:, 0].max()) / 2 + b,
                                       c * (p[:, 1].min() + p[:, 1].max()) / 2 + d)

    def covered(points, x, y):
        return any(p[:, 0].min() <= x <= p[:, 0].max() and p[:, 1].min() <= y <= p[:, 1].max() for p in points)

    his = [i for i in range(len(fmap)) if i not in AUDIENCE and his_centre(i) is not None]
    assert len(his) >= 60
    assert [i for i in his if not covered(faces_list(det, i), *his_centre(i))] == []
    frames = rgb_frames(video)
    cf = CenterFaceDetector()
    seen = 0
    for i in AUDIENCE:
        if i - AUDIENCE[0] < 2:
            continue
        masks = faces_list(det, i)
        for b in cf.detect(frames[i]).boxes:
            seen += 1
            assert not covered(masks, (b[0] + b[2]) / 2, (b[1] + b[3]) / 2), (i, b)
        assert not masks, (i, len(masks))
    assert seen >= 100, seen
    audience = [t for t in det.stats.tracks if t["shot"] == AUDIENCE[0]]
    assert all(t["decision"] == "other" for t in audience), audience
    assert sum(t["rule"] == "identity: another, dim" for t in audience) >= 3, audience
    if name == "stage":  # without the rule: the dim faces masked as too dark to tell
        monkeypatch.setattr(decision, "DIM_CONTRAST", decision.MIN_CONTRAST)
        without = detect_subject(video, stack=stack)
        dark = [t for t in without.stats.tracks if t["shot"] == AUDIENCE[0] and t["decision"] != "other"]
        assert dark and all(t["rule"] == "too dark to tell" for t in dark), dark
        assert sum(bool(faces_list(without, i)) for i in AUDIENCE[2:]) >= 40
