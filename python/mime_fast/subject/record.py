"""What pass 1 keeps of the faces it could not tell from the subject, and what becomes of them
over the whole clip (``docs/subject-tracking.md``, 7. and 8.): the undecided faces masked frame by
frame (:func:`mask_undecided`), the whole-clip decision applied to the tracks
(:func:`decide_record`, :mod:`mime_fast.subject.decision`) and the masks of the faces still
undecided after it (:func:`undecided_hulls`).  The state is the tracker's
:class:`~mime_fast.subject.state.PassRecord`."""

from __future__ import annotations

import bisect

import numpy as np

from .decision import TrackDecision, decide_tracks
from .gaps import HOLD_GROWTH
from .geometry import FrameTrack, _box_ellipse, _size, grow_hull

__all__ = ["decide_record", "mask_undecided", "undecided_hulls"]


def mask_undecided(record, stats, index: int, boxes, idents, margin: float) -> None:
    """Frame ``index``'s undecided masks are the faces at ``boxes``, of face tracks ``idents``: each
    its box ellipse grown by ``margin`` of its size (the frame counted once in ``stats.undecided``)."""
    if index not in record.undecided:
        stats.undecided += 1
    record.undecided[index] = [grow_hull(_box_ellipse(b), margin * _size(b)) for b in boxes]
    record.undecided_ids[index] = list(idents)


def undecided_hulls(record, frames: int, shots, margin: float) -> list[list[np.ndarray]]:
    """Per frame (``frames`` of them), the masks of the faces that could be the subject where
    identity could not tell which is, those of the frame before and the frame after in the same
    shot too (a face the detector misses for a frame stays masked); ``shots``: the
    :class:`~mime_fast.subject.shots.Shot` list (``None``: one shot).

    A shot's first undecided frame, when the subject was not found before it in the shot and it
    lies within the hold of the shot's first frame (``record.undecided_back``), is also held back to
    that frame, as :func:`~mime_fast.subject.gaps.fill_gaps` holds his own first detection: the
    detector often misses the first frames after a cut (motion blur, a face cut by the frame's edge:
    on the real arm wrestling clip his face showed for 2 frames after the cut before it was found).
    The held ellipses grow by ``HOLD_GROWTH`` of the face size per frame."""
    out: list[list[np.ndarray]] = [[] for _ in range(frames)]
    spans = [(0, frames)] if not shots else [(int(s.start), int(s.end)) for s in shots]

    def same_shot(i: int, k: int) -> bool:
        return 0 <= k < frames and any(s0 <= i < s1 and s0 <= k < s1 for s0, s1 in spans)

    def kept(ident, i: int | None = None) -> bool:
        # (a face track decided another's over the whole clip is not masked; nor, where it was
        # made his own mask there (decide_record), one decided his)
        d = record.decisions.get(ident) if ident is not None else None
        return (d is None or d.decision != "other") and (i, ident) not in record.identified

    runs = record.detector_frames
    for i, hulls in sorted(record.undecided.items()):
        hulls = [h for h, t in zip(hulls, record.undecided_ids.get(i, [None] * len(hulls))) if kept(t, i)]
        # the frame before and after, and every frame between it and the detector's runs before
        # and after it (the frames the schedule did not look at)
        at = bisect.bisect_left(runs, i)
        lo = min(i - 1, runs[at - 1] + 1) if at > 0 else i - 1
        # (after the last run: to where the next would have been)
        hi = max(i + 1, runs[at + 1] - 1) if at + 1 < len(runs) else max(i + 1, i + record.run_every - 1)
        for k in range(lo, hi + 1):
            if hulls and same_shot(i, k):
                out[k].extend(hulls)
    for i, (start, boxes, idents) in sorted(record.undecided_back.items()):
        boxes = [b for b, t in zip(boxes, idents) if kept(t)]
        for k in range(start, i - 1):
            if same_shot(i, k):
                out[k].extend(grow_hull(_box_ellipse(b), (margin + HOLD_GROWTH * (i - k)) * _size(b))
                              for b in boxes)
    return out


def decide_record(record, tracks: list[FrameTrack], stats, face_records, shot, identity, views, margin: float,
                  hold: int) -> dict[int, TrackDecision]:
    """The whole-clip decision (:func:`~mime_fast.subject.decision.decide_tracks`) over what pass 1
    kept (``record``): each face track that was masked as undecided is decided his, another's or
    still undecided, with the evidence of the whole clip (``face_records``: the face tracks'
    :class:`~mime_fast.subject.face_tracks.TrackRecord`; ``shot``, ``identity``: the tracker's
    :class:`~mime_fast.subject.state.ShotState` and :class:`~mime_fast.subject.state.Identity`;
    ``views()``: his embeddings over the whole clip, or ``None``).  ``tracks``: pass 1's results, one
    per frame: where a track decided his by identity was undecided and he was not found, the frame
    becomes his detection (its box's ellipse, as a detection without a confident mesh;
    ``stats.identified``).  Sets ``record.decisions``, ``stats.undecided``,
    ``stats.undecided_pass1`` and ``stats.tracks``."""
    frames = len(tracks)
    undecided: dict[int, list[int]] = {}
    for i, idents in sorted(record.undecided_ids.items()):
        for t in idents:
            if t is not None:
                undecided.setdefault(t, []).append(i)
    stats.undecided_pass1 = len(record.undecided)
    if not undecided or not face_records:
        record.decisions = {}
        return record.decisions
    starts = sorted(set(shot.shot_starts))
    ends = {a: (starts[k + 1] if k + 1 < len(starts) else frames) for k, a in enumerate(starts)}
    record.decisions = decide_tracks(face_records, undecided, record.his, views(), min_cos=identity.min_cos,
                                     strong_cos=identity.strong_cos, shot_ends=ends, returning=shot.returning_at,
                                     weak_shots=shot.weak_shots, hold=hold)
    for t, d in sorted(record.decisions.items()):
        if d.rule != "identity: him":
            continue
        for i in undecided[t]:
            box = face_records[t].box_at(i)
            if box is None or tracks[i].kind != "absent":
                continue
            pts = _box_ellipse(box)
            tracks[i] = FrameTrack(pts, box.astype(np.float32), "detected", float(np.ptp(pts[:, 1])), margin * _size(box))
            record.identified.add((i, t))
            stats.detected += 1
            stats.identified += 1
    other = {t for t, d in record.decisions.items() if d.decision == "other"}
    stats.undecided = sum(
        any((t is None or t not in other) and (i, t) not in record.identified for t in record.undecided_ids.get(i, [None]))
        for i in record.undecided)
    stats.tracks = [d.as_dict() for _, d in sorted(record.decisions.items())]
    return record.decisions
