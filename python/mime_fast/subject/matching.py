"""Which detected face is the subject's: the gates of the geometric match, identity's thresholds,
and the rules asked where identity cannot decide (``docs/subject-tracking.md``, 3., 5. and 6.), as
plain functions of one frame's :class:`Candidates` and what the tracker knows (:class:`Context`).
The subject tracker (:class:`~mime_fast.subject.tracking.SubjectTracker`) calls them; none
changes its state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..detect.interface import Faces
from .appearance import best_cos
from .face_tracks import TRACK_IOU
from .geometry import _centre, _iou, _size
from .lifecycle import recent
from .state import Follow, ShotState

__all__ = ["COMPETITOR_SCORE", "CONTINUITY_IOU", "GATE", "MIN_COS", "MIN_SCORE", "NEAR", "PARTIAL",
           "REFRAME_GATE", "REFRAME_LOCAL", "REFRAME_MIN_LOCAL", "RETURN_MIN_CORR", "STRONG_COS", "UNDECIDED_RULES",
           "W_EMBED", "W_HIST", "Candidates", "Context", "Pick", "alone", "another_strong", "by_views",
           "continued_track", "followed_head", "kept_views", "mapped_box", "returned", "shot_return", "shot_returned_to"]

#: The geometric match: the one face within NEAR face sizes of where he is expected, within GATE.
GATE = 1.0
NEAR = 1.5
#: Identity's score: ``W_EMBED * cos + W_HIST * max(corr, 0)`` (face embedding, body colours).
W_EMBED = 0.7
W_HIST = 0.3
#: dlib's thresholds (an embedder that scores otherwise carries its own ``min_cos``, ``strong_cos``
#: and ``min_score``; SFace, the offline stack's: 0.38, 0.55, 0.45).
MIN_COS = 0.85
STRONG_COS = 0.93
MIN_SCORE = 0.80
#: Faces near the subject count as competitors (ambiguity) only with at least this detector score.
COMPETITOR_SCORE = 0.9
#: A detection smaller than this fraction of the subject's recent face size is "partial".
PARTIAL = 0.9
#: Track continuity: when identity cannot tell the subject from a face next to him (a head turned
#: away reads as anybody to a face embedding), the face that continues his own face track and
#: overlaps his last box by at least this IoU is his, unless another face is strongly him.
CONTINUITY_IOU = 0.5
#: A return to a shot: the least correlation of the body histogram below the face found where he
#: stood with his (HSV, :func:`~mime_fast.subject.appearance.body_histogram`).
RETURN_MIN_CORR = 0.5
#: A re-framed return (a cut to a closer or wider framing of a shot he was followed in,
#: :attr:`mime_fast.subject.shots.ShotDetector.return_map`) maps where he stood only where at least
#: REFRAME_MIN_LOCAL of the features that found the re-framing lie within REFRAME_LOCAL face sizes
#: of his face (the square around it): the scene around him is the one matched.
REFRAME_LOCAL = 2.0
REFRAME_MIN_LOCAL = 8
#: ... and the face found there must lie within REFRAME_GATE of his size of where it put him, the
#: only face within GATE of it (the alike return's NEAR-alone rule would refuse a re-framed crowd:
#: in the real crowd's 1.6x closer framing his neighbours stand 1.5 - 1.9 of his size from him).
REFRAME_GATE = 0.5


@dataclass(frozen=True)
class Candidates:
    """One frame's faces that could be his, read against his identity: what the rules of
    :data:`UNDECIDED_RULES` decide from.  ``cand``: their indices in ``faces`` (the frame's
    detections); ``sub``: ``faces[cand]``; ``emb``, ``cos``, ``corr``, ``score``: per candidate, the
    embedding, the best cosine against his, the body-colour correlation and the weighted score;
    ``searching``: the frame was searched (he was searched for when it was detected)."""

    faces: Faces
    cand: np.ndarray
    sub: Faces
    emb: np.ndarray
    cos: np.ndarray
    corr: np.ndarray
    score: np.ndarray
    searching: bool


@dataclass(frozen=True)
class Context:
    """What the rules read of the tracker at frame ``index``: ``follow`` and ``shot``
    (:mod:`~mime_fast.subject.state`), the hold, identity's strong threshold, and ``views()``, the
    views kept of him (read on demand: :func:`~mime_fast.subject.appearance.read_views`)."""

    index: int
    hold: int
    follow: Follow
    shot: ShotState
    strong_cos: float
    views: Callable[[], list]


@dataclass(frozen=True)
class Pick:
    """A rule's answer: candidate ``j`` (index in ``cand``) is his, taken ``how``
    (:class:`~mime_fast.subject.decision.SubjectObservation`), counted in
    :class:`~mime_fast.subject.gaps.TrackingStats`'s ``counter``; ``partial``: masked as a partial
    detection (unconfirmed); ``emb``: his embedding now (a confirming match)."""

    j: int
    how: str
    counter: str
    partial: bool = False
    emb: np.ndarray | None = None


def alone(boxes: np.ndarray, i: int) -> bool:
    """Whether face ``i`` of ``boxes`` has no other face within ``NEAR`` of its own size (centre to
    centre): nobody its face track could have been swapped with."""
    c, s = _centre(boxes[i]), _size(boxes[i])
    return all(np.linalg.norm(_centre(b) - c) > NEAR * s for j, b in enumerate(boxes) if j != i)


def another_strong(cos: np.ndarray, j: int, strong_cos: float) -> bool:
    """Whether a candidate other than ``j`` reads strongly as him (``cos >= strong_cos``)."""
    return bool(np.any(np.delete(cos, j) >= strong_cos))


def mapped_box(box: np.ndarray, m: np.ndarray | None, support: np.ndarray | None) -> np.ndarray | None:
    """``box`` carried by the similarity ``m`` (2 x 3; ``None``: the identity) -- its centre mapped,
    its sides scaled -- where ``support`` (the points the transform was found on; ``None``: the
    whole picture) holds at least :data:`REFRAME_MIN_LOCAL` within :data:`REFRAME_LOCAL` face sizes
    of the box (the scene around him matched, not only a logo or the far side of the frame); else
    ``None``."""
    box = np.asarray(box, np.float64)
    if m is None:
        return box
    c, s = _centre(box), _size(box)
    if support is not None:
        near = np.abs(np.asarray(support, np.float64) - c).max(axis=1) <= REFRAME_LOCAL * s
        if int(near.sum()) < REFRAME_MIN_LOCAL:
            return None
    m = np.asarray(m, np.float64)
    c2, k = m[:, :2] @ c + m[:, 2], float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    half = k * (box[2:] - box[:2]) / 2
    return np.concatenate([c2 - half, c2 + half])


def shot_returned_to(shot: ShotState, box, return_map, return_support, index: int) -> None:
    """The shot ``shot`` returns, from frame ``index`` on, to one where he stood at ``box`` (``None``:
    to none he was followed in): where he stands now, carried by ``return_map`` where
    ``return_support`` places him (:func:`mapped_box`), and whether that is a re-framing."""
    shot.returning = None if box is None else mapped_box(box, return_map, return_support)
    # re-framed: found on features, and he moved with the framing (a change of scale or a shift
    # of half his size); the same framing found on features gets the alike return's gates (the
    # people in it may have moved since)
    shot.reframed = shot.returning is not None and return_support is not None and (
        abs(_size(shot.returning) / _size(box) - 1.0) >= 0.1
        or float(np.linalg.norm(_centre(shot.returning) - _centre(box))) >= 0.5 * _size(box))
    shot.return_from = index
    if shot.returning is not None:
        shot.returning_at[shot.shot_start] = shot.returning.copy()


def by_views(ctx: Context, emb: np.ndarray, cos: np.ndarray) -> int | None:
    """The one candidate (index in ``emb``, the candidates' embeddings) reading strongly
    (``cos >= strong_cos``) as a view of him kept while he was followed
    (:data:`~mime_fast.subject.appearance.GALLERY_SIZE`), no other reading strongly as him
    (``cos``: against the selection's and the last embedding), or ``None``."""
    gallery = ctx.views()
    if not gallery:
        return None
    views = best_cos(emb, gallery)
    strong = np.flatnonzero((views >= ctx.strong_cos) | (cos >= ctx.strong_cos))
    return int(strong[0]) if len(strong) == 1 and views[strong[0]] >= ctx.strong_cos else None


def returned(ctx: Context, c: Candidates) -> int | None:
    """In a shot that returns to one he was followed in, before he is found in it and within the
    hold of its start (of the frame the return was told at, after a dissolve): the index (in
    ``c.cand``) of the one face where he stood there, or ``None``."""
    shot = ctx.shot
    if (shot.returning is None or ctx.follow.present_at >= shot.shot_start
            or ctx.index - shot.return_from >= ctx.hold):
        return None
    faces, cand = c.faces, c.cand
    c0, s0 = _centre(shot.returning), _size(shot.returning)
    d = np.array([np.linalg.norm(_centre(b) - c0) / s0 for b in faces.boxes])
    gate = REFRAME_GATE if shot.reframed else GATE
    own = [j for j, i in enumerate(cand) if d[i] <= gate and 0.67 <= _size(faces.boxes[i]) / s0 <= 1.5]
    if len(own) != 1:
        return None
    j = own[0]
    # nobody else where he stood: no face near his (the same picture, people may have moved
    # since), or none within GATE of where the re-framing put him (its features place him)
    clear = (np.count_nonzero(d <= GATE) == 1) if shot.reframed else alone(faces.boxes, int(cand[j]))
    if (not clear or c.corr[j] < RETURN_MIN_CORR or c.score[j] < c.score.max()
            or another_strong(c.cos, j, ctx.strong_cos)):
        return None
    return j


# -- where identity cannot decide: the rules, in order (UNDECIDED_RULES) -----------------------------

def continued_track(ctx: Context, c: Candidates) -> Pick | None:
    """The face that continues his own face track (seen within the hold, in this shot,
    overlapping where he just was, or alone there) is his, unless another reads strongly as him:
    unconfirmed, masked as partial (with the hull around it)."""
    f = ctx.follow
    if not recent(f.present_at, ctx.index, ctx.shot.shot_start, ctx.hold) or f.present_box is None:
        return None
    # where he just was: his last detection, or where his mesh followed him since
    # (the schedule's runs lie frames apart: the detection's box may be that old)
    last = f.box if f.box is not None and f.last_seen is not None and f.last_seen > f.present_at else f.present_box
    own = [j for j in range(len(c.cand)) if f.frame_ids[c.cand[j]] == f.subject_track
           and (float(_iou(c.sub.boxes[j], last)[0, 0]) >= CONTINUITY_IOU
                or alone(c.faces.boxes, int(c.cand[j])))]
    ok = len(own) == 1 and not another_strong(c.cos, own[0], ctx.strong_cos)
    return Pick(own[0], "continued", "continued", partial=True) if ok else None


def followed_head(ctx: Context, c: Candidates) -> Pick | None:
    """His head, followed since he was last matched (:class:`~mime_fast.subject.head.HeadFlow`):
    the one face there is his."""
    head = ctx.follow.head
    if head is None:
        return None
    own = [j for j in range(len(c.cand)) if float(_iou(c.sub.boxes[j], head.box)[0, 0]) >= TRACK_IOU]
    ok = len(own) == 1 and not another_strong(c.cos, own[0], ctx.strong_cos)
    return Pick(own[0], "head", "continued", partial=True) if ok else None


def kept_views(ctx: Context, c: Candidates) -> Pick | None:
    """Searched for: the one face reading strongly as a view of him kept while he was followed
    (:func:`by_views`) is his, and confirms him."""
    j = by_views(ctx, c.emb, c.cos) if c.searching else None
    return None if j is None else Pick(j, "views", "reacquired", emb=c.emb[j])


def shot_return(ctx: Context, c: Candidates) -> Pick | None:
    """Back in a shot he was followed in: the face where he stood is his (:func:`returned`)."""
    j = returned(ctx, c)
    return None if j is None else Pick(j, "returned", "returned", partial=True)


#: Where identity cannot decide among a frame's candidates, these rules are asked in this order;
#: the first to pick a face makes it his (its ``how`` recorded, its counter of
#: :class:`~mime_fast.subject.gaps.TrackingStats` counted); when none does, the candidates are
#: undecided (masked until the whole-clip decision, :mod:`mime_fast.subject.decision`, tells whose
#: they are).
UNDECIDED_RULES: tuple[Callable[[Context, Candidates], Pick | None], ...] = (
    continued_track, followed_head, kept_views, shot_return)
