"""Whose face: the decision over the whole clip, made once pass 1 has seen every frame.

The forward tracker (:class:`mime_fast.subject.tracking.SubjectTracker`) decides frame by frame, and
where it cannot tell which face is the subject's it masks every face that could be his
(*undecided*: ``docs/subject-tracking.md``, 7. and 8.).  Nothing is
blurred before the whole clip has been seen (pass 2 starts after pass 1), so each of those faces
can be decided afterwards as a **face track** (:class:`~mime_fast.subject.face_tracks.TrackRecord`:
the detections of one face inside one shot), with the evidence of the whole clip: where the
subject was found for sure, his best views wherever they are (a close-up after the wide shot he
was selected in), the other people of the clip, the shots and their returns.
:func:`decide_tracks` gives each undecided track one :class:`TrackDecision` -- ``"subject"``,
``"other"`` or ``"undecided"``, with the rule that decided it and its evidence -- and only the
tracks that could still be his stay masked (:meth:`SubjectTracker.undecided_hulls
<mime_fast.subject.tracking.SubjectTracker.undecided_hulls>`).

The rules, in order (the first that applies decides):

1. **his own track** -- the tracker took this face track for him in other frames: ``"subject"``
   (it stays masked where it was undecided).
2. **beside him** -- the track was seen in a frame where the subject was found *for sure* (selected,
   read strongly as him, or followed geometrically from such a frame; not by track continuity, his
   followed head, a shot's return or a weak match): two faces of one frame are two people, so it
   is ``"other"`` -- unless its own embeddings read as him (a median cosine with his views of
   at least ``min_cos``, or one of ``strong_cos``): a face track is boxes linked by overlap, and
   one can pass from a face to the face beside it (on the real crowd, the boy walking into the
   picture was one track with the face he passed, read 0.48 as him): ``"undecided"``.
3. **identity: him** -- its embeddings read strongly as him against his views of the whole clip
   (:attr:`Evidence.best` ``>= strong_cos`` and the median :attr:`Evidence.cos` ``>= min_cos``):
   ``"subject"``.
4. **his place** -- in a shot where he was found, the track stands within ``PLACE_NEAR`` of his
   face size of where he was at the nearest frame he was found in (0.5 - 2x his size); or, in a
   shot that returns to one he was followed in (:attr:`~mime_fast.subject.shots.ShotDetector.returns_to`),
   within ``PLACE_NEAR`` of where the return puts him: it could be him, lost for a while:
   ``"undecided"`` -- unless its identity reads as another person (7., faces that can tell) and in
   each frame it was undecided he is masked on another face of his (taken for him there, or on
   both sides near enough for his mask to be interpolated across, or a track of his masked there
   by rule 1): ``"other"`` (on the real crowd, a face passing beside him while he was half hidden
   and followed by his own track read 0.17 as him).
5. **too small or too dark to tell** -- no embedding could be read (every detection under
   :data:`~mime_fast.subject.face_tracks.MIN_EMBED_SIZE` px), or none of its embeddings, or none of
   his views, is of a face with a contrast (:func:`~mime_fast.subject.face_tracks.face_contrast`) of
   at least :data:`MIN_CONTRAST` -- unless it is a **dim face read against his lit views** (7b.):
   ``"undecided"``.  (In the real hug graded to a night level his own face read 0.30 against his
   views there, as the strangers did: a dark face reads alike against a dark face, and a low score
   says nothing.)
6. **a shot taken weakly** -- in a shot where the tracker re-acquired him by a weak match only
   (it may have followed a stranger there, and he may be any other face), no track is cleared by
   identity: ``"undecided"``.
7. **identity: another** -- over the embeddings and views of faces that are not too dark (5.), the
   median of its embeddings' best cosines with his views is below
   ``min_cos`` (the embedder's weak-match threshold): ``"other"``; or below the middle of
   ``min_cos`` and ``strong_cos`` while it reads no better as him than as the clip's other people
   (its :attr:`Evidence.z` against the *cohort*, the other face tracks of the clip that are not
   his, below :data:`COHORT_Z` with at least :data:`COHORT_MIN` of them: a small or blurred face
   reads alike against everybody): ``"other"``.
7b. **identity: another, dim** -- a track with no embedding of :data:`MIN_CONTRAST`, some of at
   least :data:`DIM_CONTRAST` (8: a dim face, a stage's audience), in a shot not taken weakly (6.),
   where he has views of MIN_CONTRAST (he was seen lit somewhere in the clip): the median over
   those dim embeddings of the best cosine with his *lit* views is below ``min_cos``: ``"other"``
   (no cohort: the middle of the two thresholds is where his darkest faces read).  A dim face reads
   against a lit one: on the real hug and crowd his own faces graded to a night level read 0.57 -
   0.81 against his lit views from contrast 8 (0.43 below it), under stage light 0.61 - 0.82, and
   the other people's dim faces of contrast 8 - 16 0.36 at most; a contrast stretch before the
   embedder reads no better (``bench/dim_faces.py``; :data:`DIM_CONTRAST`).  A dim track reading
   ``min_cos`` or more, or one at his place (4.), stays undecided (``"too dark to tell"``,
   ``"his place"``).  On the real stage-like variant (``bench/edited_variants.py`` ``stage``: the
   lit hug, the crowd x 0.38 with faces of 40 - 120 px at luma 40 - 70, the hug again) every face
   of the audience's shot was masked as too dark to tell in each of its frames after the 2nd (48
   frames with a masked bystander); none now, and he is masked in every frame of his, lit or
   under the same light (``stage_dim``).
8. otherwise ``"undecided"`` (masked: the mask fails closed).

Then, once: an undecided track seen in a frame with a track decided his by identity (3.) is
``"other"`` (beside him), and two tracks of one frame both decided his by identity are both
``"undecided"`` again.

Measured on the real clips of ``../shared/media`` at 720p with SFace (``min_cos`` 0.38,
``strong_cos`` 0.55; every 2nd frame, faces from 24 px, his views every 14 frames at least 15
frames away): per face track, the median of the best cosines of his own tracks with his views is
0.65 - 0.81 (0.51 for the arm wrestler's track after the corrupt frames), and of the other
people's tracks, against his own clip's views or another clip's subject, 0.07 - 0.46; the
strangers above 0.38 are small faces (31 - 44 px) that read alike against everybody: their ``z``
against the other tracks of their clip is 0.3 - 1.1, his own tracks' 2.6 - 5.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .face_tracks import MIN_CONTRAST, TrackRecord
from .geometry import _centre, _size

__all__ = ["COHORT_MIN", "COHORT_Z", "DIM_CONTRAST", "MIN_CONTRAST", "PLACE_NEAR", "Evidence", "SubjectObservation", "TrackDecision",
           "decide_tracks"]

#: Rule 4: a track within this many of his face sizes of where he was (centre to centre) could be him.
PLACE_NEAR = 1.5
#: Rule 7: a track reading below the middle of the embedder's two thresholds is another person's
#: when its score as him stands less than COHORT_Z spreads above its scores as the clip's other
#: face tracks, of which there are at least COHORT_MIN.
COHORT_Z = 2.0
COHORT_MIN = 3
#: the least spread of the cohort's scores (a cohort of alike scores would make any difference large)
COHORT_SPREAD = 0.05
#: Rule 7b: the least contrast (:func:`~mime_fast.subject.face_tracks.face_contrast`) of a dim face
#: (under :data:`MIN_CONTRAST`) whose embedding is read against his *lit* views (of MIN_CONTRAST):
#: under ``min_cos`` it is another person's.  Measured by ``bench/dim_faces.py`` (the real hug and
#: crowd at 720p, every 6th frame, SFace; each face's best cosine with his lit views at least 15
#: frames away): his faces graded to a night level (``edited_variants.darken``) read 0.43 - 0.81
#: (contrast 4.9 - 24.6; 0.57 - 0.81 from contrast 8), under stage light (``edited_variants.dim``,
#: luma 32 - 64) 0.61 - 0.82; the other people's faces of contrast 8 - 16 0.36 at most, those of
#: 40 - 120 px 0.34 at most dim, 0.36 dark (under contrast 8: 0.41, the arm wrestler at 230 px, who
#: reads 0.38 lit too).  A contrast stretch of the crop before the embedder (to a lit face's mean and
#: std, or CLAHE on its luma) reads no better: his 0.42 - 0.81 and 0.48 - 0.79 night-graded, the
#: strangers up to 0.39 and 0.37.  What cannot be read is a dark face against dark views (the
#: night-graded cut sequence: his own tracks 0.40 - 0.46 against each other, the strangers up to
#: 0.46): with no lit view of him rule 5 keeps every dark face.
DIM_CONTRAST = 8.0


@dataclass(frozen=True)
class SubjectObservation:
    """One frame where the tracker took a face for the subject: its face track (``None`` on a
    tracked frame, where the detector did not run), whether he was found *for sure* there (rule 2),
    how (``"selected"``, ``"near"``, ``"identity"``, ``"weak"``, ``"views"``, ``"confirmed"``,
    ``"continued"``, ``"head"``, ``"returned"``, ``"tracked"``) and his face box."""

    ident: int | None
    sure: bool
    how: str
    box: np.ndarray


@dataclass
class Evidence:
    """What identity says of a face track: ``cos`` the median over its embeddings of the best
    cosine with his views, ``best`` the highest; ``z`` how far ``cos`` stands above its scores as
    the cohort's people (``None``: a cohort under :data:`COHORT_MIN`), ``cohort`` their number;
    ``views`` his views compared with, ``embeddings`` its own."""

    cos: float | None = None
    best: float | None = None
    z: float | None = None
    cohort: int = 0
    views: int = 0
    embeddings: int = 0

    def as_dict(self) -> dict:
        r = lambda v: None if v is None else round(float(v), 3)  # noqa: E731
        return {"cos": r(self.cos), "best": r(self.best), "z": r(self.z), "cohort": self.cohort,
                "views": self.views, "embeddings": self.embeddings}


@dataclass
class TrackDecision:
    """One undecided face track decided over the whole clip: ``decision`` (``"subject"``,
    ``"other"``, ``"undecided"``), the ``rule`` that decided it (module docstring), its
    ``evidence``, and ``at``: the frame the rule points to (the frame seen beside him, or where he
    stood), if any."""

    ident: int
    shot: int
    first: int
    last: int
    decision: str
    rule: str
    evidence: Evidence = field(default_factory=Evidence)
    at: int | None = None

    def as_dict(self) -> dict:
        return {"track": self.ident, "shot": self.shot, "frames": [self.first, self.last],
                "decision": self.decision, "rule": self.rule, "at": self.at, **self.evidence.as_dict()}


def _best(embs: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """Per row of ``embs``, its best cosine with the rows of ``refs``."""
    return (embs @ refs.T).max(axis=1)


def _embeddings(rec: TrackRecord, floor: float | None) -> np.ndarray | None:
    """The embeddings of ``rec`` (``floor``: only those of faces of at least that contrast), or ``None``."""
    e = [v for _, _, v, c in rec.embeddings if floor is None or c >= floor]
    return np.asarray(e, np.float32) if e else None


def _identity(embs: np.ndarray, views: np.ndarray, cohort: list[np.ndarray]) -> Evidence:
    c = _best(embs, views)
    cos = float(np.median(c))
    ev = Evidence(cos=cos, best=float(c.max()), views=len(views), embeddings=len(embs), cohort=len(cohort))
    if len(cohort) >= COHORT_MIN:
        scores = np.array([float(np.median(_best(embs, u))) for u in cohort])
        ev.z = (cos - float(np.median(scores))) / (float(scores.std()) + COHORT_SPREAD)
    return ev


def _his_place(rec: TrackRecord, frames: list[int], his: dict[int, SubjectObservation], shot_end: int,
               returning: np.ndarray | None) -> int | None:
    """A frame (of ``frames``, where the track was undecided) where it stood where he could be
    (rule 4), else ``None``."""
    mine = sorted(f for f in his if rec.shot <= f < shot_end)
    for f in frames:
        box = rec.box_at(f)
        if box is None:
            continue
        refs = []
        if mine:
            k = int(np.searchsorted(mine, f))
            near = [g for g in (mine[k - 1] if k > 0 else None, mine[k] if k < len(mine) else None) if g is not None]
            refs = [his[min(near, key=lambda g: abs(g - f))].box]
        if returning is not None and not mine:
            refs.append(returning)
        for ref in refs:
            s = _size(ref)
            if (np.linalg.norm(_centre(box) - _centre(ref)) <= PLACE_NEAR * s and 0.5 <= _size(box) / s <= 2.0):
                return f
    return None


def _masked_beside(f: int, ident: int, his: dict[int, SubjectObservation], own: dict[int, set[int]], shot: int,
                   end: int, hold: int) -> bool:
    """Whether, in frame ``f``, he is masked on a face of his own that is not track ``ident``'s: a
    face taken for him there, a track of his masked there while undecided (``own``: frame -> those
    tracks), or a face taken for him at each side within the shot close enough for
    :func:`~mime_fast.subject.gaps.fill_gaps` to interpolate his mask across ``f`` (rule 4)."""
    def his_face(g: int) -> bool:
        o = his.get(g)
        return o is not None and o.ident != ident and (o.ident is not None or o.how == "tracked")

    if his_face(f) or own.get(f, set()) - {ident}:
        return True
    before = next((f - g for g in range(f - 1, max(shot, f - 2 * hold) - 1, -1) if his_face(g)), None)
    after = next((g - f for g in range(f + 1, min(end, f + 2 * hold + 1)) if his_face(g)), None)
    return before is not None and after is not None and before + after <= 2 * hold


def decide_tracks(records: dict[int, TrackRecord], undecided: dict[int, list[int]],
                  his: dict[int, SubjectObservation], views: tuple[np.ndarray, np.ndarray] | None, *, min_cos: float,
                  strong_cos: float, shot_ends: dict[int, int], returning: dict[int, np.ndarray],
                  weak_shots: set[int], hold: int = 15) -> dict[int, TrackDecision]:
    """Decide each face track that was masked as undecided (module docstring).

    ``records``: every face track of pass 1 (stable id -> :class:`TrackRecord`); ``undecided``:
    track id -> the frames it was masked in as undecided; ``his``: frame -> the
    :class:`SubjectObservation` of the frames the tracker took a face for him in; ``views``: his
    embeddings over the whole clip (``(n, dim)``, unit rows) and the contrast of each one's face
    (``None``: no identity to read);
    ``min_cos`` / ``strong_cos``: the embedder's thresholds; ``shot_ends``: first frame of each
    shot -> its end (exclusive); ``returning``: first frame of a shot that returns to one he was
    followed in -> where the return puts him; ``weak_shots``: first frames of the shots where he was
    re-acquired by a weak match only; ``hold``: the frames a gap between two of his detections is
    bridged by (:func:`~mime_fast.subject.gaps.fill_gaps` interpolates across ``2 * hold``)."""
    his_tracks = {o.ident for o in his.values() if o.ident is not None}
    sure_at = {f: o.ident for f, o in his.items() if o.sure}
    own: dict[int, set[int]] = {}  # frame -> his tracks masked there while undecided (rule 1)
    for i in his_tracks & set(undecided):
        for f in undecided[i]:
            own.setdefault(f, set()).add(i)
    cohort_ids = [i for i, r in records.items() if i not in his_tracks and r.embeddings]
    every = {i: _embeddings(records[i], None) for i in cohort_ids}
    clear = {i: _embeddings(records[i], MIN_CONTRAST) for i in cohort_ids}
    dim = {i: _embeddings(records[i], DIM_CONTRAST) for i in cohort_ids}
    clear_ids = [i for i in cohort_ids if clear[i] is not None]
    all_views = clear_views = None
    if views is not None and len(views[0]):
        all_views = views[0]
        clear_views = views[0][views[1] >= MIN_CONTRAST] if np.any(views[1] >= MIN_CONTRAST) else None
    out: dict[int, TrackDecision] = {}
    for ident in sorted(undecided):
        rec = records.get(ident)
        if rec is None:  # (no record: it cannot be told apart from anything)
            continue
        d = TrackDecision(ident, rec.shot, rec.frames[0], rec.frames[-1], "undecided", "identity unsure")
        out[ident] = d
        if ident in his_tracks:
            d.decision, d.rule = "subject", "his own track"
            continue
        mine = every.get(ident)
        if mine is not None and all_views is not None:  # him: any face of his, any view
            d.evidence = _identity(mine, all_views, [])
        ev = d.evidence
        reads_him = ev.cos is not None and (ev.cos >= min_cos or ev.best >= strong_cos)
        beside = next((f for f in rec.frames if f in sure_at and sure_at[f] != ident), None)
        if beside is not None:
            d.at = beside
            if reads_him:
                d.rule = "beside him, reads as him"
            else:
                d.decision, d.rule = "other", "beside him"
            continue
        if ev.best is not None and ev.best >= strong_cos and ev.cos >= min_cos:
            d.decision, d.rule = "subject", "identity: him"
            continue
        if clear.get(ident) is not None and clear_views is not None:  # another: the faces that can tell
            d.evidence = _identity(clear[ident], clear_views, [clear[i] for i in clear_ids if i != ident])
        ev = d.evidence
        readable = clear.get(ident) is not None and clear_views is not None and rec.shot not in weak_shots
        another = readable and (ev.cos < min_cos or (ev.z is not None and ev.cos < 0.5 * (min_cos + strong_cos)
                                                      and ev.z < COHORT_Z))
        end = shot_ends.get(rec.shot, 1 << 62)
        place = _his_place(rec, undecided[ident], his, end, returning.get(rec.shot))
        if place is not None:
            d.rule, d.at = "his place", place
            if another and all(_masked_beside(f, ident, his, own, rec.shot, end, hold) for f in undecided[ident]):
                d.decision, d.rule = "other", "his place, he is masked beside it"
            continue
        if mine is None:
            d.rule = "too small to tell"
            continue
        if clear.get(ident) is None and dim.get(ident) is not None and clear_views is not None \
                and rec.shot not in weak_shots:  # 7b.: a dim face against his lit views
            d.evidence = _identity(dim[ident], clear_views, [])
            if d.evidence.cos < min_cos:
                d.decision, d.rule = "other", "identity: another, dim"
                continue
        if clear.get(ident) is None or clear_views is None:
            d.rule = "too dark to tell" if all_views is not None else "no views of him"
            continue
        if rec.shot in weak_shots:
            d.rule = "a shot taken weakly"
            continue
        if another:
            d.decision, d.rule = "other", "identity: another"
    # once: beside a track decided his by identity, and two such tracks in one frame
    by_identity = {i for i, d in out.items() if d.rule == "identity: him"}
    frames_of = {i: set(records[i].frames) for i in out}
    for i in sorted(by_identity):
        clash = next((j for j in sorted(by_identity) if j != i and frames_of[i] & frames_of[j]), None)
        if clash is not None:
            out[i].decision, out[i].rule = "undecided", "two read as him"
            out[i].at = min(frames_of[i] & frames_of[clash])
    for i, d in out.items():
        if d.decision != "undecided":
            continue
        ev = out[i].evidence  # (as rule 2: not a track that reads as him itself)
        if ev.cos is not None and ev.cos >= min_cos:
            continue
        for j in sorted(by_identity):
            if out[j].decision == "subject" and frames_of[i] & frames_of[j]:
                d.decision, d.rule, d.at = "other", "beside him", min(frames_of[i] & frames_of[j])
                break
    return out
