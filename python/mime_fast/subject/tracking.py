"""Follow the primary subject through a clip and turn it into per-frame hull points.

:class:`SubjectTracker` runs forward over decoded RGB frames; :meth:`SubjectTracker.update` reads as
the frame's steps, in order: *advance* (the next frame, the subject's phase:
:mod:`~mime_fast.subject.lifecycle`) -> *follow* his face mesh where it may be followed
(:mod:`~mime_fast.subject.mesh_follow`), else *observe* (the detector, around him, on the whole
frame or searching) -> *associate* (face tracks, :mod:`~mime_fast.subject.face_tracks`) -> *jump?*
-> *match* (selection, the geometric match, identity, and the rules where identity cannot decide:
:mod:`~mime_fast.subject.matching`) -> *head* (his head followed where his face was not matched).
What each step decides and why, with the measurements on the real clips, is
``docs/subject-tracking.md``, whose numbered sections the docstrings cite.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from ..detect.interface import Faces
from ..options import DETECT_DEFAULTS as _D, SCHEDULES, hold_frames as _hold_frames
from .appearance import (GALLERY_SIZE, best_cos, body_histogram, hist_corr, keep_spread, keep_view, read_views,
                         whole_clip_views)
from .decision import SubjectObservation, TrackDecision
from .face_tracks import MIN_EMBED_SIZE, REEMBED_S, SEARCH_UNSURE, TRACK_IOU, FaceTracks, detect_at, face_contrast, timed
from .gaps import TrackingStats, fill_gaps
from .geometry import FrameTrack, _box_ellipse, _centre, _iou, _size
from .head import HeadFlow
from .lifecycle import Phase, phase_of, recent
from .matching import (COMPETITOR_SCORE, GATE, MIN_COS, MIN_SCORE, NEAR, PARTIAL, STRONG_COS, UNDECIDED_RULES,
                       W_EMBED, W_HIST, Candidates, Context, shot_returned_to)
from .mesh_follow import MIN_MESH_QUALITY, TRACK_MAX_SPEED, follow_mesh
from .record import decide_record, mask_undecided, undecided_hulls
from .selection import select_primary_subject
from .shots import RETURN_SHOTS, ShotDetector
from .state import Follow, Identity, PassRecord, ShotState

__all__ = ["ROI_HALF", "ROI_MAX_AREA", "SEARCH_DETECT_SIZE", "SEARCH_SLOWDOWN", "Observation", "SubjectTracker", "track_clip"]

#: Detection near the subject: when he was matched on the previous frame, the detector sees only the
#: square of half-side ROI_HALF face sizes around where he is expected (at the full frame's scale),
#: unless that square covers more than ROI_MAX_AREA of the frame.  Matching only ever looks at faces
#: within NEAR (+ 0.75) face sizes of him, and at faces within NEAR of those (continuity): both lie
#: inside; a 200 x 200 crop costs RetinaFace about half of 384 x 216.
ROI_HALF = 4.0
ROI_MAX_AREA = 0.5
#: While the subject is searched for (:attr:`Phase.SEARCHING <mime_fast.subject.lifecycle.Phase>`),
#: the detector sees the frame at a longer side of at least this many px: at 384 a boy looking down
#: in the real crowd at 720p (37 - 55 px) was missed after a cut back to him, and in greyscale
#: footage the hug's subject was (21 frames each).
SEARCH_DETECT_SIZE = 640
#: The period schedule: while he is searched for in a shot where nothing of him was seen for longer
#: than the hold (a shot without him), the detector runs every SEARCH_SLOWDOWN x detect_every
#: frames (a face of his found then is held back over the frames between: fill_gaps, and the
#: undecided masks reach across; the hold is longer than that period at any rate the pipeline runs).
#: With ``detect_every`` 1 (every frame) it runs every frame.
SEARCH_SLOWDOWN = 2


class Observation(NamedTuple):
    """What the detector found on frame ``index`` (``faces``, frame pixels); ``roi``: the square
    around him it looked at (:meth:`SubjectTracker._roi`), ``None`` where it saw the whole frame."""

    index: int
    faces: Faces
    roi: tuple[int, int, int, int] | None

    @property
    def full(self) -> bool:
        """Whether the whole frame was seen (another tracker detecting at the same size may reuse
        these faces)."""
        return self.roi is None


class SubjectTracker:
    """Forward tracker of the primary subject (``docs/subject-tracking.md``).  ``update(frame)`` once
    per decoded frame, in order; returns a :class:`FrameTrack` (``kind`` "detected", "partial",
    "head" or "absent").

    ``stack``: an :class:`~mime_fast.detect.OfflineStack` (or any object with ``detector``,
    ``landmarks``, ``embedder`` and optionally ``persons``).  ``detect_size``: longer side of the
    frame given to the face detector (``None``: the detector's own setting).  ``detect_every``: run
    the detector at least every this many frames (1: every frame, no mesh following).  ``margin``:
    hull margin as a fraction of the face size.  ``hold_frames``: see :func:`fill_gaps`; how long a
    subject not matched is looked for where he was before he is searched for (>= 1).

    Between frames it knows :attr:`phase` (:class:`~mime_fast.subject.lifecycle.Phase`), the last
    :attr:`observation`, and four objects of :mod:`mime_fast.subject.state`: ``follow`` (where he
    is), ``identity`` (who he is), ``shot`` (the shot he is followed in and those a new one may
    return to) and ``record`` (what pass 1 keeps for the whole-clip decision; :attr:`his`,
    :attr:`undecided` and :attr:`decisions` read it).
    """

    def __init__(self, stack, *, detect_size: int | None = _D.detect_size, margin: float = _D.hull_margin_frac,
                 hold_frames: int = _hold_frames(_D.hold_s, 30), detect_every: int = _D.detect_every,
                 timers: dict | None = None, schedule: str = _D.schedule):
        if int(detect_every) < 1:
            raise ValueError("detect_every must be >= 1")
        if schedule not in SCHEDULES:
            raise ValueError(f'schedule must be "mesh" or "period", got {schedule!r}')
        if int(hold_frames) < 1:
            raise ValueError("hold_frames must be >= 1")
        self.stack = stack
        self.detect_size = detect_size
        self.detect_every = int(detect_every)
        self.margin = float(margin)
        self.hold_frames = int(hold_frames)
        #: when the detector runs (:data:`mime_fast.options.SCHEDULES`; :meth:`_between_runs`)
        self.schedule = schedule
        self.stats = TrackingStats(hold_frames=self.hold_frames)
        self.timers = timers if timers is not None else {}
        self._index = -1
        #: the subject's phase at the frame being decided (:mod:`~mime_fast.subject.lifecycle`)
        self.phase = Phase.UNSELECTED
        #: what the detector found on the frame just decided (``None``: it did not run there)
        self.observation: Observation | None = None
        emb = getattr(stack, "embedder", None)
        # (identity thresholds: the embedder's own -- cosines depend on the model --, else dlib's defaults)
        self.identity = Identity(min_cos=float(getattr(emb, "min_cos", MIN_COS)),
                                 strong_cos=float(getattr(emb, "strong_cos", STRONG_COS)),
                                 min_score=float(getattr(emb, "min_score", MIN_SCORE)),
                                 unread=deque(maxlen=GALLERY_SIZE - 1))
        self.follow = Follow()
        self.shot = ShotState()
        self.record = PassRecord(run_every=self.detect_every if schedule == "period" else 1)
        # hold_frames is half a second of frames: a track's embedding is refreshed every REEMBED_S.
        # Overlap with the last box only: near other faces this tracker detects every frame, and the
        # motion-predicted association of faces="all" gave his track to a crosser on the real crowd
        # (a half-hidden box's shifted centre is a false velocity): 83 frames lost
        self._faces = FaceTracks(max_gap=2 * self.detect_every, refresh=max(1, round(2 * REEMBED_S * self.hold_frames)),
                                 predict=False, by_distance=False, record=True)

    @property
    def index(self) -> int:
        """The frame being decided (the last given to :meth:`update`; -1 before the first)."""
        return self._index

    @property
    def his(self) -> dict[int, SubjectObservation]:
        """Frame -> the face taken for him there (:attr:`PassRecord.his <mime_fast.subject.state.PassRecord.his>`)."""
        return self.record.his

    @property
    def undecided(self) -> dict[int, list[np.ndarray]]:
        """Frame -> the grown hulls of the faces that could be his where none could be told to be
        (docs 7.): masked beside him (:meth:`undecided_hulls`)."""
        return self.record.undecided

    @property
    def decisions(self) -> dict[int, TrackDecision]:
        """Face track -> its decision over the whole clip (:meth:`decide`)."""
        return self.record.decisions

    # -- events from the shot detector ---------------------------------------------------------------

    def new_shot(self, returns_to: int | None = None, return_map: np.ndarray | None = None,
                 return_support: np.ndarray | None = None) -> None:
        """The next frame given to :meth:`update` starts a new camera shot (he enters
        ``SEARCHING``): where the subject was, how he moved and how large his face was are
        forgotten, and he is looked for again by identity among every face; a shot without him gets
        no match.  ``returns_to``, ``return_map``, ``return_support``: the earlier shot the new one
        returns to, as :meth:`returns` takes them (docs 6.)."""
        f, i, hold = self.follow, self._index, self.hold_frames
        if f.present_box is not None and recent(f.present_at, i, self.shot.shot_start, hold):
            # his last full detection where it is that recent too (a partial one's box is a part of
            # his face: on the real crowd it was 0.7 x his size, so he stood 2 sizes from it)
            full = f.box is not None and recent(f.last_seen, i, self.shot.shot_start, hold)
            self.shot.shot_boxes[self.shot.shot_start] = np.array(f.box if full else f.present_box, np.float64)
            while len(self.shot.shot_boxes) > RETURN_SHOTS:
                del self.shot.shot_boxes[next(iter(self.shot.shot_boxes))]
        self.shot.shot_start = i + 1
        self.shot.shot_starts.append(self.shot.shot_start)
        self.returns(returns_to, return_map, return_support)
        f.forget_motion()
        f.sure = False
        f.size_ref = None
        f.crowded_at = -(10**9)
        f.subject_track = None
        self._faces.new_shot(self.shot.shot_start)
        self.shot.unconfirmed = False

    def returns(self, returns_to: int | None, return_map: np.ndarray | None = None,
                return_support: np.ndarray | None = None) -> None:
        """The current shot returns to the shot that began at frame ``returns_to`` (``None``: to
        none), told from the next frame given to :meth:`update` on: at a cut, by :meth:`new_shot`;
        after a dissolve, once its frames are no longer blends
        (:attr:`mime_fast.subject.shots.ShotDetector.returned_late`).  ``return_map``: the transform
        from that shot's last frame to the new one (2 x 3, frame pixels; ``None``: the identity);
        ``return_support``: the points whose features support it (``None``: the whole pictures are
        alike).  Where he stood there may tell which face is his for ``hold_frames`` from then on,
        while he is not found in the shot otherwise (docs 6.)."""
        box = None if returns_to is None else self.shot.shot_boxes.get(int(returns_to))
        shot_returned_to(self.shot, box, return_map, return_support, self._index + 1)

    # -- the frame's steps ---------------------------------------------------------------------------

    def update(self, frame: np.ndarray) -> FrameTrack:
        """The subject in the next frame (``H x W x 3`` RGB, frames in order)."""
        self._advance()
        found = self._followed(frame)
        if found is None and self._between_runs():
            found = self._unlooked(frame)
        if found is None:
            searched, before = self.phase is Phase.SEARCHING, self.follow.last_detect
            faces = self._observe(frame, searched)
            tracks = self._associate(faces)
            found = self._jump_if(frame, faces, before)
            if found is None:
                found = self._match(frame, faces, tracks, searched)
        return self._head_if_missed(frame, found)

    def _advance(self) -> None:
        """The next frame: its index, and the subject's phase there (the one place it is decided)."""
        self._index += 1
        self.stats.frames += 1
        self.observation = None
        self.phase = phase_of(self.follow, self._index, self.shot.shot_start, self.hold_frames)

    def _can_follow(self) -> bool:
        """Whether his face is followed by its mesh on this frame instead of detected: he was
        followed on the frame before with a confident mesh, moves slowly, the detector ran within
        ``detect_every`` frames, and no other face came near him within the hold (nor, unconfirmed,
        was seen beside him)."""
        f = self.follow
        return (self.phase is Phase.FOLLOWED and f.last_points is not None and f.anchor is not None
                and f.vel_known and float(np.linalg.norm(f.vel)) <= TRACK_MAX_SPEED * _size(f.box)
                and self._index - f.last_detect < self.detect_every
                and not f.crowded(self._index, self.hold_frames)
                and not (self.shot.unconfirmed and self._index - self.shot.others_at <= self.hold_frames)
                and getattr(self.stack, "landmarks", None) is not None)

    def _between_runs(self) -> bool:
        """Whether the detector waits for its next run on this frame (the schedule, docs 2.): it
        runs every ``detect_every`` frames while he is followed (found at its last run, whole or in
        part, and followed since by his mesh or his head's motion) or searched for (every
        :data:`SEARCH_SLOWDOWN` x ``detect_every`` frames once nothing of him was seen in the shot
        for longer than the hold: a shot without him), every frame
        after a run that did not find him while he is missed or glimpsed (he may show again any
        frame: each run is a chance to find him), and at once on an
        event -- the subject not selected yet, a new shot's first frame, another face near him
        within the hold (people crossing: his track could swap), or, unconfirmed, other faces seen
        beside him."""
        f, i = self.follow, self._index
        period = self.detect_every
        if self.phase is Phase.SEARCHING and period > 1:  # (not seen in this shot for longer than the hold)
            seen = max(self.shot.shot_start, f.present_at, -1 if f.last_seen is None else f.last_seen)
            if i - seen > self.hold_frames:
                period = SEARCH_SLOWDOWN * self.detect_every
        if (self.schedule != "period" or self.phase is Phase.UNSELECTED or i - f.last_detect >= period
                or i == self.shot.shot_start or f.crowded(i, self.hold_frames)
                or (self.shot.unconfirmed and i - self.shot.others_at <= self.hold_frames)):
            return False
        # found at the detector's last run (whole or in part) and followed since
        followed = self.phase is Phase.FOLLOWED or max(f.last_seen, f.present_at) >= f.last_detect
        return followed or self.phase is Phase.SEARCHING

    def _unlooked(self, frame) -> FrameTrack | None:
        """A frame between detector runs: his head followed by its motion where it holds (docs 5.);
        lost, nothing (he is looked for at the next run; a face found then is held back over the
        frames between: :func:`fill_gaps`, :func:`~mime_fast.subject.record.undecided_hulls`);
        ``None`` where his head was not lost but its motion does not hold: the detector runs after
        all (an event)."""
        box = self._t("head", self._head_estimate, frame)
        if box is not None:
            self.stats.waited += 1
            return self._head_track(box)
        if self.phase.lost:
            self.stats.waited += 1
            return FrameTrack()
        return None

    def _followed(self, frame) -> FrameTrack | None:
        """His face followed by its mesh (:func:`~mime_fast.subject.mesh_follow.follow_mesh`), where it
        may be (:meth:`_can_follow`) and holds; else ``None`` (the frame is detected)."""
        if self._can_follow():
            got = follow_mesh(self._landmarks, frame, self.follow)
            if got is not None:
                return self._tracked(*got)
        return None

    def _observe(self, frame, searched: bool) -> Faces:
        """The detector on this frame: around him when he was followed on the frame before
        (:meth:`_roi`), the whole frame at :data:`SEARCH_DETECT_SIZE` when he is searched for, else
        the whole frame."""
        roi = self._roi(frame)  # (before this run is counted: it reads the last)
        self.follow.last_detect = self._index
        if self.schedule == "period":  # (the runs the undecided masks reach between: record.undecided_hulls)
            self.record.detector_frames.append(self._index)
        self.stats.detector_runs += 1
        if searched and self.detect_size is not None and self.detect_size < SEARCH_DETECT_SIZE:
            faces = self._t("detect", detect_at, self.stack.detector, frame, SEARCH_DETECT_SIZE, None)
        else:
            faces = self._t("detect", detect_at, self.stack.detector, frame, self.detect_size, roi)
        self.observation = Observation(self._index, faces, roi)
        return faces

    def _associate(self, faces: Faces) -> np.ndarray:
        """This frame's faces into face tracks; ``follow.frame_ids`` their stable ids."""
        tracks = self._faces.assign(faces.boxes, self._index) if len(faces) else np.zeros(0, np.int64)
        self.follow.frame_ids = [self._faces.ident(t) for t in tracks]
        return tracks

    def _jump_if(self, frame, faces: Faces, before: int) -> FrameTrack | None:
        """A jump (docs 3.): two faces or more in this run and the last (at frame ``before``), his
        among those, none continuing a track of the last run, none where he was in the previous
        frame, and his mesh, followed on the frame before, not holding him in this one: he enters
        ``SEARCHING``, where he stood and how he moved forgotten.  Where his mesh holds, the
        detector only missed him (runs several frames apart: the other faces moved on) and he is
        followed by it (returned)."""
        f = self.follow
        before_ids = f.detected_ids
        f.detected_ids = f.frame_ids
        if (len(faces) >= 2 and len(before_ids) >= 2 and f.subject_track in before_ids
                and self._index - before <= self._faces.max_gap and not set(f.frame_ids) & set(before_ids)
                and f.box is not None and f.last_seen == self._index - 1
                and float(_iou(faces.boxes, f.box).max()) < TRACK_IOU):
            held = self._mesh_holds(frame)
            if held is not None:
                self.stats.jumps_held += 1
                return held
            self._jumped()
        return None

    def _mesh_holds(self, frame) -> FrameTrack | None:
        """His face followed by its mesh into this frame where the mesh followed him, confident, on
        the frame before (:func:`~mime_fast.subject.mesh_follow.follow_mesh`); else ``None``."""
        f = self.follow
        if (f.last_points is None or f.anchor is None or f.last_seen != self._index - 1
                or getattr(self.stack, "landmarks", None) is None):
            return None
        got = follow_mesh(self._landmarks, frame, f)
        return None if got is None else self._tracked(*got)

    def _jumped(self) -> None:
        """The picture jumped: he is looked for again by identity, as after a loss, from this frame on."""
        self.stats.jumps += 1
        f = self.follow
        f.last_seen = f.present_at = self._index - self.hold_frames - 1
        f.subject_track = None
        f.forget_motion()
        self.phase = Phase.SEARCHING

    def _match(self, frame, faces: Faces, tracks: np.ndarray, searched: bool) -> FrameTrack:
        """Whose face of ``faces`` is his: confirming an unconfirmed subject, else :meth:`_decide`;
        unconfirmed, the other faces masked beside him."""
        if self.shot.unconfirmed and not searched and len(faces) >= 2:
            self.shot.others_at = self._index
            found = self._confirming(frame, faces, tracks)
            if found is not None:
                return found
        found = self._decide(frame, faces, tracks, searched)
        if self.shot.unconfirmed and len(faces):
            self._beside(faces)
        return found

    def _head_if_missed(self, frame, found: FrameTrack) -> FrameTrack:
        """``found``, or where his face was not matched, his head followed by its motion (docs 5.)."""
        if found.kind in ("detected", "partial"):
            self.follow.head, self.follow.seed = None, (self._index, frame, found.box)
            return found
        box = self._t("head", self._head_estimate, frame)
        if box is None:
            return found
        return self._head_track(box)

    def _head_track(self, box: np.ndarray) -> FrameTrack:
        """The frame's mask at his followed head: the ellipse of its box, grown by the margin."""
        return FrameTrack(_box_ellipse(box), box.astype(np.float32), "head", None, self.margin * _size(box))

    # -- the models, timed (bench/bench_detect.py reads .timers) -----------------------------------------

    def _t(self, name, fn, *a):
        return timed(self.timers, name, fn, *a)

    def _detect(self, frame, roi: tuple[int, int, int, int] | None = None) -> Faces:
        """The faces of ``frame`` in frame pixels (``roi``: only those inside it, :func:`detect_at`)."""
        return detect_at(self.stack.detector, frame, self.detect_size, roi)

    def _landmarks(self, frame, faces: Faces):
        self.stats.mesh_runs += len(faces)
        return self._t("landmarks", self.stack.landmarks.landmarks, frame, faces)

    def _embed(self, frame, faces: Faces) -> np.ndarray:
        self.stats.embeddings += len(faces)
        return self._t("embed", self.stack.embedder.embed, frame, faces)

    def _roi(self, frame) -> tuple[int, int, int, int] | None:
        """Where the detector looks for him this frame: the square of :data:`ROI_HALF` face sizes
        around where he is expected, when he was followed on the frame before -- by his face, or,
        missed only since the detector's last run, by his head's motion (the frames the schedule
        waited on) -- and is not unconfirmed (then every face of the frame is looked at), and the
        square is under :data:`ROI_MAX_AREA` of the frame; else ``None`` (the whole frame).  Always
        ``None`` for a stack whose ``crop_detection`` is false
        (:class:`~mime_fast.detect.batching.BrokeredStack`: whole frames of one size are batched
        across clips)."""
        f = self.follow
        if self.shot.unconfirmed or not getattr(self.stack, "crop_detection", True):
            return None
        if self.phase is Phase.FOLLOWED:
            c = _centre(f.box) + f.vel
        elif (self.schedule == "period" and self.phase is Phase.MISSED and f.head is not None
              and f.head.box is not None
              and max(f.last_seen, f.present_at) >= f.last_detect):
            c = _centre(f.head.box) + f.vel
        else:
            return None
        H, W = frame.shape[:2]
        half = ROI_HALF * _size(f.box)
        x0, y0 = max(0, int(np.floor(c[0] - half))), max(0, int(np.floor(c[1] - half)))
        x1, y1 = min(W, int(np.ceil(c[0] + half))), min(H, int(np.ceil(c[1] + half)))
        if x1 - x0 < 16 or y1 - y0 < 16 or (x1 - x0) * (y1 - y0) > ROI_MAX_AREA * H * W:
            return None
        return x0, y0, x1, y1

    # -- transitions: he is found ------------------------------------------------------------------------

    def _tracked(self, pts: np.ndarray, pbox: np.ndarray) -> FrameTrack:
        """His face followed by its mesh to ``pts`` (box ``pbox``): he stays ``FOLLOWED``."""
        f = self.follow
        f.vel = 0.5 * f.vel + 0.5 * (_centre(pbox) - _centre(f.box))
        f.box, f.last_seen, f.last_points = pbox, self._index, pts
        f.height = float(pts[:, 1].max() - pts[:, 1].min())
        self.his[self._index] = SubjectObservation(None, f.sure and not self.shot.unconfirmed, "tracked", pbox)
        self.stats.detected += 1
        self.stats.tracked += 1
        return FrameTrack(pts, pbox.astype(np.float32), "detected", f.height, self.margin * _size(pbox))

    def _hull(self, frame, faces: Faces, i: int, lmk=None) -> np.ndarray:
        if lmk is None:
            lmk = self._landmarks(frame, faces[i])
            pts, q = lmk.points[0], float(lmk.quality[0])
        else:
            pts, q = lmk.points[i], float(lmk.quality[i])
        self.follow.mesh_ok = q >= MIN_MESH_QUALITY
        if not self.follow.mesh_ok:
            self.stats.mesh_fallbacks += 1
            pts = _box_ellipse(faces.boxes[i])
        self.follow.height = float(pts[:, 1].max() - pts[:, 1].min())
        return np.asarray(pts, np.float32)

    def _accept(self, frame, faces: Faces, i: int, emb=None, lmk=None, partial: bool = False,
                how: str = "near") -> FrameTrack:
        """Face ``i`` of ``faces`` is his in this frame, taken ``how`` (:class:`SubjectObservation`):
        ``"selected"``, ``"identity"`` (a strong match), ``"views"`` and ``"confirmed"`` make him
        sure, ``"near"`` (the geometric match) keeps what he was, the others (``"weak"``,
        ``"ambiguous"``, ``"continued"``, ``"head"``, ``"returned"``) make him unsure.  A whole face
        makes him ``FOLLOWED`` on the next frame; a partial one (``partial``, or smaller than
        :data:`PARTIAL` of his recent size) only moves his ``present_at`` clock."""
        f = self.follow
        box = faces.boxes[i].astype(np.float64)
        f.taken = (self._index, i)
        ident = None
        if f.frame_ids is not None and i < len(f.frame_ids):
            f.subject_track = ident = f.frame_ids[i]
        if how in ("selected", "identity", "views", "confirmed"):
            f.sure = True
        elif how != "near":
            f.sure = False
        self.his[self._index] = SubjectObservation(ident, f.sure and not self.shot.unconfirmed, how, box)
        f.present_at, f.present_box = self._index, box
        if emb is not None:
            self.identity.last_emb = emb
            if how in ("identity", "views", "confirmed"):
                keep_spread(self.identity.his_embs, (np.asarray(emb, np.float32), face_contrast(frame, box)))
        wh = box[2:] - box[:2]
        small = f.size_ref is not None and np.any(wh < PARTIAL * f.wh_ref)
        if (partial or small) and f.size_ref is not None and f.partial_run < self.hold_frames:
            f.partial_run += 1
            pts = self._hull(frame, faces, i, lmk)
            f.last_points = None  # a partial face is not followed: detect the next frame
            self.stats.partial += 1
            self.stats.detected += 1
            return FrameTrack(pts, box.astype(np.float32), "partial", None, self.margin * f.size_ref)
        f.partial_run = 0
        f.wh_ref = wh if f.size_ref is None else 0.8 * f.wh_ref + 0.2 * wh
        f.size_ref = float(f.wh_ref.max())
        if f.box is not None and f.last_seen is not None and f.last_seen >= self.shot.shot_start:
            # (his velocity is measured inside the shot: where he stood before a cut says nothing)
            gap = self._index - f.last_seen
            v = (_centre(box) - _centre(f.box)) / max(gap, 1)
            f.vel = 0.5 * f.vel + 0.5 * v if (gap == 1 and f.vel_known) else v
            f.vel_known = True
        f.box, f.last_seen = box, self._index
        pts = self._hull(frame, faces, i, lmk)
        self.stats.detected += 1
        if f.mesh_ok:
            f.anchor = (box, faces.keypoints[i].astype(np.float64), pts.astype(np.float64))
            f.last_points = pts
            self._keep_view(frame, faces, i)
        else:
            f.anchor = f.last_points = None
        return FrameTrack(pts, box.astype(np.float32), "detected", f.height, self.margin * _size(box))

    def _keep_view(self, frame, faces: Faces, i: int) -> None:
        """A view of him on this full detection for the views kept of him (:data:`GALLERY_SIZE`):
        about twice a second, never near other faces (his track could have crossed to one)."""
        if (self.identity.ref_emb is None or getattr(self.stack, "embedder", None) is None or self.shot.unconfirmed
                or self._index - self.identity.gallery_at < self.hold_frames
                or self.follow.crowded(self._index, self.hold_frames)
                or _size(faces.boxes[i]) < MIN_EMBED_SIZE):
            return
        keep_view(self.identity, frame, faces, i, self._index, self.follow.sure)

    def views(self) -> list[np.ndarray]:
        """The views kept of him, those taken since the last call read first
        (:func:`~mime_fast.subject.appearance.read_views`)."""
        return read_views(self.identity, self._embed)

    # -- matching --------------------------------------------------------------------------------------

    def _select(self, frame, faces: Faces, tracks: np.ndarray) -> FrameTrack:
        """The first frame with faces: the subject selected among them (docs 1.)."""
        lmk = self._landmarks(frame, faces)
        persons = None
        if getattr(self.stack, "persons", None) is not None:
            persons = self._t("persons", self.stack.persons.detect, frame)
        sel = select_primary_subject(frame, faces, lmk, persons)
        i = sel.index
        self.stats.status = "ok"
        self.stats.selected_frame = self._index
        self.stats.selection = sel.breakdown()
        if self.stack.embedder is not None:
            self.identity.ref_emb = self._embed(frame, faces[i])[0]
            self.identity.ref_contrast = face_contrast(frame, faces.boxes[i])
            self._faces.remember(tracks[i], self.identity.ref_emb, _size(faces.boxes[i]), self._index, self.identity.ref_contrast)
        self.identity.ref_hist = body_histogram(frame, faces.boxes[i])
        return self._accept(frame, faces, i, lmk=lmk, how="selected")

    def _context(self) -> Context:
        return Context(self._index, self.hold_frames, self.follow, self.shot, self.identity.strong_cos, self.views)

    def _decide(self, frame, faces: Faces, tracks: np.ndarray, searched: bool) -> FrameTrack:
        """Selection, geometric match, identity, and the rules where identity cannot decide (docs
        1. - 7.).  ``searched``: the frame was detected while he was searched for."""
        if self.phase is Phase.UNSELECTED:
            return self._select(frame, faces, tracks) if len(faces) else FrameTrack()
        if not len(faces):
            return FrameTrack()
        f = self.follow
        k = self._index - f.last_seen - 1  # frames missed since the last match
        s = _size(f.box)
        cp = _centre(f.box) + f.vel * (k + 1)
        lost = self.phase.lost
        gk = min(k, 3)  # (a face several sizes away is not his because he was missed a while)
        if f.head is not None and f.head.box is not None:
            # his head, followed by its motion through the frames his face was missed, says where
            # he is now: the gates need not widen for those frames
            cp, gk = _centre(f.head.box), 0
        elif f.present_box is not None and f.present_at > f.last_seen and recent(
                f.present_at, self._index, self.shot.shot_start, self.hold_frames):
            # a part of his face found since his last whole match (runs frames apart: his whole
            # match that much older) says where he is better than that match moved by its motion
            k = self._index - f.present_at - 1
            cp, gk = _centre(f.present_box), min(k, 3)
        d = np.array([np.linalg.norm(_centre(b) - cp) / s for b in faces.boxes])
        ratio = np.array([_size(b) / s for b in faces.boxes])
        near = np.flatnonzero(d <= NEAR + 0.25 * gk)
        if len(near):
            # the closest face near the prediction, and its competitors: other near faces that are
            # confident, comparable in size (false positives on textures score 0.5 - 0.8)
            j = int(near[np.argmin(d[near])])
            strong = (faces.scores >= COMPETITOR_SCORE) & (ratio >= 0.5) & (ratio <= 2.0)
            near = np.array([i for i in near if i == j or strong[i]], np.int64)
            if len(near) >= 2:
                f.crowded_at = self._index
            crowded = f.crowded(self._index, self.hold_frames)
            if not lost and not crowded and len(near) == 1 and d[j] <= GATE + 0.25 * gk and 0.67 <= ratio[j] <= 1.5:
                return self._accept(frame, faces, j)
        cand = np.arange(len(faces)) if lost else near
        if not len(cand):
            return FrameTrack()
        sub = faces[cand]
        if self.identity.ref_emb is None:  # no identity to tell him by
            return self._undecided(sub, [f.frame_ids[c] for c in cand])
        # re-acquiring (lost, or a new shot): each face's identity about once per face track (up to
        # SEARCH_READS times while it reads unsure of him); telling him from faces next to him: now
        emb = self._faces.embeddings(frame, sub, tracks[cand], index=self._index, embed=self._embed,
                                     dim=len(self.identity.ref_emb), fresh=not lost, search=lost)
        refs = [e for e in (self.identity.ref_emb, self.identity.last_emb) if e is not None]
        cos = best_cos(emb, refs)
        if lost:  # (faces read unsure of him are read again while he is searched for)
            self._faces.unsure(tracks[cand], (cos >= SEARCH_UNSURE * self.identity.min_cos) & (cos < self.identity.strong_cos))
        corr = np.array([hist_corr(body_histogram(frame, b), self.identity.ref_hist) for b in sub.boxes])
        score = W_EMBED * cos + W_HIST * np.maximum(corr, 0.0)
        best = int(np.argmax(score))
        # re-acquiring among several faces: only a strong match is his (each stranger is one more
        # chance of a weak one: a bystander read 0.39 against the subject's 0.38 threshold)
        weak_ok = not (searched and len(cand) >= 2)
        if not (cos[best] >= self.identity.strong_cos
                or (weak_ok and cos[best] >= self.identity.min_cos and score[best] >= self.identity.min_score)):
            # identity cannot decide: its rules, in their order (docs 3., the last bullet but one)
            candidates, ctx = Candidates(faces, cand, sub, emb, cos, corr, score, searched), self._context()
            for rule in UNDECIDED_RULES:
                pick = rule(ctx, candidates)
                if pick is not None:
                    setattr(self.stats, pick.counter, getattr(self.stats, pick.counter) + 1)
                    if pick.how == "views":
                        self.shot.unconfirmed = False
                    return self._accept(frame, faces, int(cand[pick.j]), emb=pick.emb, partial=pick.partial,
                                        how=pick.how)
            return self._undecided(sub, [f.frame_ids[c] for c in cand])
        if lost:
            self.stats.reacquired += 1
        else:
            self.stats.ambiguous += 1
        strong = bool(cos[best] >= self.identity.strong_cos)
        if strong or lost:  # re-acquired by a weak match: he is followed unconfirmed (docs 8.)
            self.shot.unconfirmed = not strong
        # (an unconfirmed face's embedding is not his to compare with: it may be a stranger's)
        keep = strong or not self.shot.unconfirmed
        if self.shot.unconfirmed:
            self.shot.weak_shots.add(self.shot.shot_start)
        return self._accept(frame, faces, int(cand[best]), emb=emb[best] if keep else None,
                            how="identity" if strong else "weak" if lost else "ambiguous")

    def _confirming(self, frame, faces: Faces, tracks: np.ndarray) -> FrameTrack | None:
        """Followed unconfirmed (docs 8.) with other faces in the frame: the one face reading
        strongly as him (against the selection's embedding, the last one accepted while he was
        confirmed, and the views kept of him) is his, confirmed, whether or not it is the face
        followed; else ``None`` (:meth:`_decide` applies, and :meth:`_beside` masks the others)."""
        if self.identity.ref_emb is None or getattr(self.stack, "embedder", None) is None:
            return None
        emb = self._faces.embeddings(frame, faces, tracks, index=self._index, embed=self._embed,
                                     dim=len(self.identity.ref_emb))
        refs = [e for e in (self.identity.ref_emb, self.identity.last_emb) if e is not None] + list(self.views())
        cos = best_cos(emb, refs)
        strong = np.flatnonzero(cos >= self.identity.strong_cos)
        if len(strong) != 1:
            return None
        j = int(strong[0])
        f = self.follow
        if f.frame_ids[j] != f.subject_track:  # another face than the one followed: his, afresh
            f.forget_motion()
            f.last_seen = -(10**9)  # (no velocity from the stranger's place to his)
            f.size_ref = None
        self.shot.unconfirmed = False
        self.stats.ambiguous += 1
        return self._accept(frame, faces, j, emb=emb[j], how="confirmed")

    # -- faces that could be his: undecided, and the whole-clip decision -----------------------------------

    def _undecided(self, faces: Faces, idents: list) -> FrameTrack:
        """No face of ``faces`` (the candidates, of face tracks ``idents``) can be told to be his:
        each is masked (docs 7.); he is not matched in this frame."""
        self._mask_undecided(faces.boxes, idents)
        f, start = self.follow, self.shot.shot_start
        if (self.record.undecided_shot != start and self._index - start <= self.hold_frames
                and max(f.last_seen, f.present_at) < start):
            self.record.undecided_back[self._index] = (start, faces.boxes.copy(), list(idents))
        self.record.undecided_shot = start
        return FrameTrack()

    def _beside(self, faces: Faces) -> None:
        """Followed unconfirmed (docs 8.): every face of this frame's detections but the one taken
        for him (all of them where he was not matched) is masked as undecided."""
        at, i = self.follow.taken
        keep = [k for k in range(len(faces)) if not (at == self._index and k == i)]
        if not keep:
            return
        self.shot.others_at = self._index
        self._mask_undecided([faces.boxes[k] for k in keep], [self.follow.frame_ids[k] for k in keep])

    def _mask_undecided(self, boxes, idents) -> None:
        mask_undecided(self.record, self.stats, self._index, boxes, idents, self.margin)

    def undecided_hulls(self, frames: int, shots=None) -> list[list[np.ndarray]]:
        """Per frame (``frames`` of them), the masks of the faces that could be the subject where
        identity could not tell which is (:func:`~mime_fast.subject.record.undecided_hulls`);
        ``shots``: the :class:`~mime_fast.subject.shots.Shot` list (``None``: one shot)."""
        return undecided_hulls(self.record, frames, shots, self.margin)

    def decide(self, tracks: list[FrameTrack]) -> dict[int, TrackDecision]:
        """The whole-clip decision over this tracker's :meth:`update` results ``tracks``
        (:func:`~mime_fast.subject.record.decide_record`); :meth:`finish` calls it."""
        def views():
            if self.identity.ref_emb is None or getattr(self.stack, "embedder", None) is None:
                return None
            return whole_clip_views(self.identity, self._embed)

        return decide_record(self.record, tracks, self.stats, self._faces.records, self.shot, self.identity,
                             views, self.margin, self.hold_frames)

    def finish(self, tracks: list[FrameTrack], shots=None) -> tuple[list[FrameTrack], TrackingStats]:
        """Complete the clip: ``tracks`` are this tracker's :meth:`update` results, one per frame in
        order; after the whole-clip decision (:meth:`decide`), fills the gaps between detections
        inside each of the camera ``shots`` (:class:`mime_fast.subject.shots.Shot` list; ``None``:
        one shot; :func:`fill_gaps`, in place) and the statistics that need the whole clip."""
        self.decide(tracks)
        fill_gaps(tracks, self.hold_frames, self.stats, shots=shots)
        hs = [t.height for t in tracks if t.kind == "detected"]
        self.stats.face_height = float(np.median(hs)) if hs else None
        if self.stats.status == "no subject":
            self.stats.without_subject = len(tracks)
        return tracks, self.stats

    # -- his head, where his face is not matched (docs 5.) ----------------------------------------------

    def _head_estimate(self, frame: np.ndarray) -> np.ndarray | None:
        """His head box in this frame, followed by its motion from his last match in this shot
        (:class:`~mime_fast.subject.head.HeadFlow`); ``None`` when there is none or the flow lost
        it, or when another face lies where it says his head is."""
        f = self.follow
        if f.head is None:
            if f.seed is None or f.seed[0] != self._index - 1 or f.seed[0] < self.shot.shot_start:
                return None
            f.head = HeadFlow(f.seed[1], f.seed[2])
            f.seed = None
        box = f.head.step(frame)
        faces = self.observation.faces if self.observation is not None else None
        if box is not None and faces is not None and len(faces) and float(_iou(faces.boxes, box).max()) >= TRACK_IOU:
            box = None
        if box is None:
            f.head = None
        return box


def track_clip(frames, stack, *, hold_frames: int = _hold_frames(_D.hold_s, 30), fps: float = 30.0,
               **kw) -> tuple[list[FrameTrack], TrackingStats]:
    """Track the subject over an iterable of RGB frames, camera shots detected on the way
    (:class:`mime_fast.subject.shots.ShotDetector`, ``fps`` the frames' rate), then
    :func:`fill_gaps`.  Returns the per-frame tracks and the statistics."""
    tr = SubjectTracker(stack, hold_frames=hold_frames, **kw)
    shots = ShotDetector(fps)
    tracks = []
    for f in frames:
        if shots.feed(f):
            tr.new_shot(shots.returns_to, shots.return_map, shots.return_support)
        elif shots.returned_late:
            tr.returns(shots.returns_to, shots.return_map, shots.return_support)
        tracks.append(tr.update(f))
    return tr.finish(tracks, shots=shots.finish())
