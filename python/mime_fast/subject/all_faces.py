"""``faces="all"``: every face of the clip masked, not only the primary subject's
(:class:`AllFaceTracker`, run beside the :class:`~mime_fast.subject.tracking.SubjectTracker` by
:class:`mime_fast.subject.SubjectDetection`).
"""

from __future__ import annotations

import numpy as np

from ..options import DETECT_DEFAULTS as _D, hold_frames as _hold_frames
from .face_tracks import FaceTracks, detect_at, timed
from .gaps import fill_gaps
from .geometry import FrameTrack, _box_ellipse, _iou, _size
from ..detect.interface import Faces
from .shots import Shot
from .mesh_follow import MIN_MESH_QUALITY

__all__ = ["ALL_FACES_DETECT_SIZE", "ALL_FACES_MAX_MESHES", "ALL_FACES_MESH_MIN_SIZE", "AllFaceTracker"]

#: ``faces="all"``: a face whose detector box is smaller than this (longer side, source px) is masked
#: by the ellipse of its box grown by 20 % on each side (as a face whose mesh is not confident),
#: without running the landmark model on it: bystanders far away cost no mesh, and are still masked.
ALL_FACES_MESH_MIN_SIZE = 40.0
#: ``faces="all"``: at most this many faces of one frame (the largest) get the landmark model; the
#: others are masked by their box ellipse.  With the detector's own cost, this bounds the work per
#: frame in a crowd.
ALL_FACES_MAX_MESHES = 16
#: ``faces="all"``: longer side (px) of the frame the face detector sees when it looks for every
#: face.  The subject's 384 misses bystanders: on a real crowd at 720p the faces of 24 - 45 px that
#: an independent detector (CenterFace, native size) finds went unmasked (detected at 384: 3 faces
#: a frame; at 640: 6).
ALL_FACES_DETECT_SIZE = 640


class AllFaceTracker:
    """Every face of the clip, for ``faces="all"`` (:class:`mime_fast.subject.SubjectDetection`
    runs it beside the :class:`~mime_fast.subject.tracking.SubjectTracker`, frame by frame).

    The face detector runs every ``detect_every`` frames on the frame downscaled to a longer side of
    ``detect_size`` (default :data:`ALL_FACES_DETECT_SIZE`, 640: larger than the subject's 384, so
    that bystanders' small faces are found); with ``detect_size`` equal to the subject tracker's
    (or ``None``), the subject tracker's detections are reused wherever it ran on the frame and
    the detector runs on the frames between.  The faces are associated into tracks by box overlap
    where each track is expected from its motion, then by distance
    (:class:`~mime_fast.subject.face_tracks.FaceTracks`: a fast face is one track, not one per
    detector run, so its first hull is not held back to the shot's start at every run); a track unseen
    for ``max(2 * detect_every, hold_frames)`` frames ends, and every track ends at a camera cut,
    :meth:`new_shot`).  On each detection a face's hull is the landmark model's points (the mesh, as
    for the subject: the box ellipse where it is not confident), grown by ``margin`` x its size; faces
    smaller than :data:`ALL_FACES_MESH_MIN_SIZE` and those beyond the :data:`ALL_FACES_MAX_MESHES`
    largest of a frame get the box ellipse without the model.  The subject's own face reuses his landmarks from
    the subject tracker when the tracker detected him on that frame (same box).

    :meth:`finish` fills each track's gaps inside its shots exactly as the subject's
    (:func:`~mime_fast.subject.gaps.fill_gaps`: interpolated between detections up to
    ``2 * hold_frames`` apart, held ``hold_frames`` after the last, back to the shot's start before
    the first; never across a cut)
    and returns, per frame, the hull polygons of every track there."""

    def __init__(self, stack, *, hold_frames: int = _hold_frames(_D.hold_s, 30), detect_every: int = _D.detect_every,
                 margin: float = _D.hull_margin_frac, timers: dict | None = None,
                 detect_size: int | None = ALL_FACES_DETECT_SIZE):
        self.stack = stack
        self.detect_size = detect_size
        self.hold_frames = int(hold_frames)
        self.detect_every = int(detect_every)
        self.margin = float(margin)
        self.timers = timers if timers is not None else {}
        self._faces = FaceTracks(max_gap=max(2 * self.detect_every, self.hold_frames), refresh=1)
        self._dets: dict[int, dict[int, FrameTrack]] = {}  # track id -> {frame: detection}
        self._index = -1
        self._last_detect = -(10**9)
        self.detector_runs = 0  # runs of its own (beyond the subject tracker's)
        self.meshes = 0  # faces given to the landmark model
        self.ellipses = 0  # faces masked by their box ellipse (small, beyond the cap, or no confident mesh)

    def new_shot(self) -> None:
        """The next frame starts a new camera shot: every face track ends."""
        self._faces.new_shot()

    def _t(self, name, fn, *a):
        return timed(self.timers, name, fn, *a)

    def _detect(self, frame) -> Faces:
        return detect_at(self.stack.detector, frame, self.detect_size)

    def update(self, frame: np.ndarray, subject, found: FrameTrack) -> None:
        """The next frame (the one ``subject``, the :class:`~mime_fast.subject.tracking.SubjectTracker`,
        just decided, with result ``found``)."""
        self._index += 1
        i = self._index
        own = self.detect_size is not None and self.detect_size != subject.detect_size
        seen = subject.observation  # what its detector found on this frame, if it ran
        if not own and seen is not None and seen.index == subject.index and seen.full:
            faces = seen.faces  # the subject tracker's detection: the same size
        elif i - self._last_detect >= self.detect_every:
            faces = self._t("all_faces_detect", self._detect, frame)
            self.detector_runs += 1
        else:
            return
        self._last_detect = i
        if not len(faces):
            return
        ids = [self._faces.ident(t) for t in self._faces.assign(faces.boxes, i)]
        sizes = np.array([_size(b) for b in faces.boxes])
        pts: list = [None] * len(faces)
        if found.kind in ("detected", "partial") and found.points is not None and found.box is not None:
            iou = _iou(faces.boxes, found.box)[:, 0]
            j = int(np.argmax(iou))
            if iou[j] >= 0.9:  # the subject tracker's own detection of this face: its landmarks
                pts[j] = np.asarray(found.points, np.float32)
        order = [j for j in np.argsort(-sizes, kind="stable") if pts[j] is None]
        mesh = [j for j in order if sizes[j] >= ALL_FACES_MESH_MIN_SIZE][:ALL_FACES_MAX_MESHES]
        if mesh and getattr(self.stack, "landmarks", None) is not None:
            lmk = self._t("all_faces_landmarks", self.stack.landmarks.landmarks, frame, faces[np.array(mesh)])
            self.meshes += len(mesh)
            for j, p, q in zip(mesh, lmk.points, lmk.quality):
                if float(q) >= MIN_MESH_QUALITY:
                    pts[j] = np.asarray(p, np.float32)
        for j in range(len(faces)):
            if pts[j] is None:
                pts[j] = _box_ellipse(faces.boxes[j])
                self.ellipses += 1
            p = pts[j]
            h = float(p[:, 1].max() - p[:, 1].min())
            self._dets.setdefault(ids[j], {})[i] = FrameTrack(
                p, faces.boxes[j].astype(np.float32), "detected", h, self.margin * sizes[j])

    @property
    def count(self) -> int:
        """Face tracks started so far."""
        return len(self._dets)

    def finish(self, frames: int, shots=None) -> list[list[np.ndarray]]:
        """Per frame (``frames`` of them), the mask polygons of every face track there: each track's
        gaps filled inside its shots (:func:`~mime_fast.subject.gaps.fill_gaps`; ``shots``: the
        :class:`mime_fast.subject.shots.Shot` list, ``None``: one shot)."""
        spans = [(0, frames)] if not shots else [(int(s.start), int(s.end)) for s in shots]
        out: list[list[np.ndarray]] = [[] for _ in range(frames)]
        for dets in self._dets.values():
            first, last = min(dets), max(dets)
            lo = min([s0 for s0, s1 in spans if s0 <= first < s1], default=first)
            hi = max([s1 for s0, s1 in spans if s0 <= last < s1], default=last + 1)
            seq = [dets.get(k, FrameTrack()) for k in range(lo, hi)]
            rel = [Shot(max(s0, lo) - lo, min(s1, hi) - lo) for s0, s1 in spans if s0 < hi and s1 > lo]
            fill_gaps(seq, self.hold_frames, shots=rel)
            for k, t in enumerate(seq, lo):
                if t.points is not None:
                    out[k].append(t.hull())
        return out
