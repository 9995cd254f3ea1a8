"""Every face of a shot, followed from one detector run to the next: :func:`detect_at` (the face
detector on a frame downscaled to a given size, boxes mapped back) and :class:`FaceTracks` (faces
associated into tracks by box overlap where each track is expected now, so that each is embedded
about once per track and a face's mask is one track, not one per detector run).  Used by
the subject tracker (:class:`mime_fast.subject.tracking.SubjectTracker`) and by ``faces="all"``
(:class:`mime_fast.subject.all_faces.AllFaceTracker`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from .geometry import _centre, _iou, _size
from ..detect.interface import Faces, _downscale

__all__ = ["MIN_CONTRAST", "MIN_EMBED_SIZE", "REEMBED_GROWTH", "REEMBED_S", "ROI_GRID", "SEARCH_GAP", "SEARCH_READS", "SEARCH_UNSURE", "TRACK_GATE", "TRACK_IOU", "FaceTracks",
           "TrackRecord", "detect_at", "face_contrast", "timed"]

#: Face tracks (:class:`FaceTracks`): a detection continues a track when its box overlaps the
#: track's last box by at least this IoU; a track's embedding is reused until the face grew by
#: REEMBED_GROWTH or REEMBED_S seconds of frames passed; faces smaller than MIN_EMBED_SIZE px are
#: never embedded (no identity can be read from them).
TRACK_IOU = 0.3
#: Face tracks: a detection left over by the overlap rule continues a track left over too when its
#: centre is within this many face sizes of where the track is expected, its size within 0.67 - 1.5x,
#: and each is the other's only such partner (a face that moved faster than its box overlaps: on the
#: real crowd clip at 720p, a 90 px face crossing at 26 px a frame overlaps its box of 3 frames
#: before by IoU 0: it started a new track at every detector run, 9 in a second).
TRACK_GATE = 1.0
#: :func:`detect_at` with a region: the largest stride of the face detector's anchors (RetinaFace:
#: 8, 16, 32); the region's corners lie on multiples of it in the frame the detector sees.
ROI_GRID = 32
REEMBED_GROWTH = 1.3
REEMBED_S = 1.0
#: While the subject is searched for (lost, or a new shot before he is found in it), a face track
#: whose identity read unsure of him (at least SEARCH_UNSURE of the embedder's weak threshold, short
#: of the strong one: a face turned away reads low whoever it is) is read again every SEARCH_GAP
#: frames until it was read SEARCH_READS times, then as any other.  On the real arm-wrestling clip
#: the subject, back in profile after the corrupt stretch, read 0.33 against SFace's 0.38 on his
#: first frame and was decided another's (his face left clear for 8 frames); his 4th read, 6 frames
#: later, re-acquired him.  Most strangers read under the floor (SFace: 0.08 +- 0.09) and are read
#: once, as before.
SEARCH_READS = 4
SEARCH_GAP = 2
SEARCH_UNSURE = 0.5
MIN_EMBED_SIZE = 24.0
#: The least contrast (:func:`face_contrast`, 0..255) of a face whose embedding can tell people apart
#: (:mod:`mime_fast.subject.decision`, rules 5 and 7).  Measured on faces from 24 px: the real clips
#: at 720p 26 - 44 (10th - 90th percentile), greyscale 29 - 42; graded to a night level (contrast
#: 35 %, gamma 2.5) 6 - 22, the hug's two men 6 - 9; underexposed x 0.35 11 - 18.  A contrast stretch
#: of the face chip before SFace does not bring identity back (the night-graded cut sequence: his
#: own tracks read 0.40 - 0.42 against each other stretched, 0.46 as they are; the strangers 0.12 -
#: 0.41 and 0.11 - 0.46): the grade and the encoder took it.  Against his *lit* views a dim face
#: reads (rule 7b, :data:`~mime_fast.subject.decision.DIM_CONTRAST`).  A track whose embedding was read at a
#: lower contrast is embedded again once its face shows this much (the end of a fade, a light
#: turned on): :meth:`FaceTracks.embeddings`.
MIN_CONTRAST = 16.0


@dataclass
class TrackRecord:
    """What pass 1 saw of one face track (:attr:`FaceTracks.records`): the first frame of its shot,
    the detector frames it was found in and its box in each, and the embeddings read of it
    (``(frame, face size, embedding, contrast)``: :func:`face_contrast`), for the whole-clip decision
    (:func:`mime_fast.subject.decision.decide_tracks`)."""

    ident: int
    shot: int
    frames: list[int] = field(default_factory=list)
    boxes: list[np.ndarray] = field(default_factory=list)
    embeddings: list[tuple[int, float, np.ndarray, float]] = field(default_factory=list)

    def box_at(self, frame: int) -> np.ndarray | None:
        """Its box in ``frame`` (a detector frame it was found in), else ``None``."""
        import bisect

        k = bisect.bisect_left(self.frames, frame)
        return self.boxes[k] if k < len(self.frames) and self.frames[k] == frame else None


def face_contrast(frame, box) -> float:
    """The standard deviation (0..255) of the green channel over the centre 80 % of a face box,
    sampled to at most 32 px a side: how much a face embedding has to read (a face in the dark, or
    under a flat grade, reads alike against everybody).  ``frame``: RGB, a numpy array or a frame
    kept on a device (sliced there)."""
    H, W = int(frame.shape[0]), int(frame.shape[1])
    x0, y0, x1, y1 = (float(v) for v in box)
    w, h = x1 - x0, y1 - y0
    a0, b0 = max(0, int(x0 + 0.1 * w)), max(0, int(y0 + 0.1 * h))
    a1, b1 = min(W, int(np.ceil(x1 - 0.1 * w))), min(H, int(np.ceil(y1 - 0.1 * h)))
    if a1 - a0 < 2 or b1 - b0 < 2:
        return 0.0
    k = max(1, max(a1 - a0, b1 - b0) // 32)
    g = np.asarray(frame[b0:b1:k, a0:a1:k, 1], np.float32)
    return float(g.std())


def timed(timers: dict, name: str, fn, *a):
    """``fn(*a)``, its wall time added to ``timers[name]`` (bench/bench_detect.py reads the trackers'
    ``timers``)."""
    t = time.perf_counter()
    out = fn(*a)
    timers[name] = timers.get(name, 0.0) + time.perf_counter() - t
    return out


def detect_at(detector, frame: np.ndarray, size: int | None, roi: tuple[int, int, int, int] | None = None) -> Faces:
    """``detector`` on ``frame`` downscaled so that its longer side is at most ``size`` px (``None``:
    as it is), boxes and keypoints mapped back to ``frame``'s pixels.  ``roi`` (``x0, y0, x1, y1``
    in frame pixels): only the faces there -- the region is cut from the downscaled frame, its corners
    moved out to multiples of ``ROI_GRID`` px there (the detector's coarsest anchor stride), so that
    the faces inside are seen on the same pixels and anchors as in a whole-frame run."""
    if roi is None:
        if size is None:
            return detector.detect(frame)
        small, s = _downscale(frame, size)
        f = detector.detect(small)
        return f if s == 1.0 or not len(f) else Faces(f.boxes / s, f.scores, f.keypoints / s)
    small, s = _downscale(frame, size)
    h, w = small.shape[:2]
    g = ROI_GRID
    x0, y0 = int(roi[0] * s) // g * g, int(roi[1] * s) // g * g
    x1, y1 = min(w, -(-int(np.ceil(roi[2] * s)) // g) * g), min(h, -(-int(np.ceil(roi[3] * s)) // g) * g)
    f = detector.detect(small[y0:y1, x0:x1])
    if not len(f):
        return f
    return Faces((f.boxes + np.array([x0, y0, x0, y0], np.float64)) / s, f.scores,
                 (f.keypoints + np.array([x0, y0], np.float64)) / s)


class _Read(NamedTuple):
    """A face track's last identity read (:class:`FaceTracks`): the embedding, the face's size and
    frame, its contrast (:func:`face_contrast`), how many reads the track had, and whether this one
    was unsure of the subject (:meth:`FaceTracks.unsure`)."""

    embedding: np.ndarray
    size: float
    frame: int
    contrast: float
    reads: int
    unsure: bool


class FaceTracks:
    """Every detected face of the current shot followed from one detector run to the next (a track
    unseen for ``max_gap`` frames ends).  Each track is expected where its last box moved at its
    velocity (the motion between its last two detections, per frame); detections continue tracks
    by overlap with that box (greedy, highest IoU first, at least ``TRACK_IOU``), then the ones left
    by distance (:data:`TRACK_GATE`, one-to-one only).  So a face is embedded about once per track
    instead of at every detector run (``predict=False`` / ``by_distance=False``: overlap with the last
    box only, the subject tracker's association):
    :meth:`embeddings` returns each face's embedding, computing only those of new tracks, of faces
    that grew by ``REEMBED_GROWTH`` since their embedding (a clearer view), whose embedding is
    older than ``refresh`` frames (a head that turned back) or was read on a face too dark to tell
    people apart that now shows :data:`MIN_CONTRAST` (the end of a fade in or of a cross-fade), or,
    while the subject is searched for, that read unsure of him (:meth:`unsure`, :data:`SEARCH_READS`),
    batched in one embedder call.
    :meth:`new_shot` forgets every track.  ``record``: keep a :class:`TrackRecord` of every track
    (:attr:`records`, by stable id: frames, boxes, the embeddings read), for a decision over the
    whole clip."""

    def __init__(self, max_gap: int, refresh: int, *, predict: bool = True, by_distance: bool = True,
                 record: bool = False):
        self.predict, self.by_distance = predict, by_distance
        #: stable id -> :class:`TrackRecord` (with ``record``), else ``None``
        self.records: dict[int, TrackRecord] | None = {} if record else None
        self.shot = 0  # the first frame of the current shot (:meth:`new_shot`)
        self.max_gap = int(max_gap)
        self.refresh = int(refresh)
        self._boxes = np.zeros((0, 4))
        self._last = np.zeros(0, np.int64)
        self._vel = np.zeros((0, 2))  # per track: centre motion per frame between its last two detections
        self._emb: list[_Read | None] = []  # per track: its last read, or None
        self._ids = np.zeros(0, np.int64)
        self.count = 0  # tracks started

    def new_shot(self, start: int = 0) -> None:
        """Every track ends: the shot that begins at frame ``start`` starts afresh."""
        self.shot = int(start)
        self._boxes, self._last, self._emb, self._ids = np.zeros((0, 4)), np.zeros(0, np.int64), [], np.zeros(0, np.int64)
        self._vel = np.zeros((0, 2))

    def assign(self, boxes: np.ndarray, index: int) -> np.ndarray:
        """The track (position in this object's tables) of each face detected in frame ``index``."""
        alive = index - self._last <= self.max_gap
        self._boxes, self._last, self._vel = self._boxes[alive], self._last[alive], self._vel[alive]
        self._emb = [e for e, k in zip(self._emb, alive) if k]
        self._ids = self._ids[alive]
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        n = len(boxes)
        out = np.full(n, -1, np.int64)
        if n and len(self._boxes):
            gap = (index - self._last).astype(np.float64)[:, None]
            shift = self._vel * gap * float(self.predict)
            expected = self._boxes + np.concatenate([shift, shift], axis=1)
            iou = _iou(boxes, expected)
            while True:
                j, t = np.unravel_index(int(np.argmax(iou)), iou.shape)
                if iou[j, t] < TRACK_IOU:
                    break
                out[j] = t
                iou[j, :] = -1
                iou[:, t] = -1
            if self.by_distance:
                self._by_distance(boxes, expected, out)
        prev = self._boxes.copy()
        for j in range(n):
            if out[j] < 0:
                out[j] = len(self._boxes)
                self._boxes = np.concatenate([self._boxes, boxes[j][None]])
                self._last = np.append(self._last, index)
                self._vel = np.concatenate([self._vel, np.zeros((1, 2))])
                self._emb.append(None)
                self._ids = np.append(self._ids, self.count)
                self.count += 1
        for j, t in enumerate(out):
            if t < len(prev):  # a continued track: its velocity from this detection and the last
                self._vel[t] = (_centre(boxes[j]) - _centre(prev[t])) / max(1, index - int(self._last[t]))
        self._boxes[out] = boxes
        self._last[out] = index
        if self.records is not None:
            for j, t in enumerate(out):
                rec = self.records.setdefault(int(self._ids[t]), TrackRecord(int(self._ids[t]), self.shot))
                rec.frames.append(int(index))
                rec.boxes.append(boxes[j].copy())
        return out

    @staticmethod
    def _by_distance(boxes: np.ndarray, expected: np.ndarray, out: np.ndarray) -> None:
        """Detections ``out`` leaves unassigned (-1) continue the unassigned tracks whose expected box
        is within :data:`TRACK_GATE` face sizes of them with a size within 0.67 - 1.5x, where
        detection and track are each other's only such partner (in place)."""
        free_d = np.flatnonzero(out < 0)
        free_t = np.setdiff1d(np.arange(len(expected)), out[out >= 0])
        if not len(free_d) or not len(free_t):
            return
        ok = np.zeros((len(free_d), len(free_t)), bool)
        for a, j in enumerate(free_d):
            s = _size(boxes[j])
            for b, t in enumerate(free_t):
                st = _size(expected[t])
                ok[a, b] = (np.linalg.norm(_centre(boxes[j]) - _centre(expected[t])) <= TRACK_GATE * max(s, st)
                            and 0.67 <= s / st <= 1.5)
        for a, b in zip(*np.nonzero(ok)):
            if ok[a].sum() == 1 and ok[:, b].sum() == 1:
                out[free_d[a]] = free_t[b]

    def ident(self, track: int) -> int:
        """The stable id of the track at position ``track`` (positions change as tracks end)."""
        return int(self._ids[track])

    def remember(self, track: int, embedding: np.ndarray, size: float, index: int, contrast: float = 0.0) -> None:
        """Keep an embedding computed elsewhere as track ``track``'s (``contrast``: its face's,
        :func:`face_contrast`)."""
        self._emb[track] = _Read(embedding, float(size), int(index), float(contrast), 1, False)
        if self.records is not None and np.all(np.isfinite(embedding)):
            self.records[int(self._ids[track])].embeddings.append((int(index), float(size), embedding, float(contrast)))

    def unsure(self, tracks: np.ndarray, which: np.ndarray) -> None:
        """Mark the tracks ``tracks[which]`` as read unsure of him (:meth:`embeddings`, ``search``)."""
        for t, u in zip(tracks, which):
            e = self._emb[int(t)]
            if e is not None and bool(u):
                self._emb[int(t)] = e._replace(unsure=True)

    def embeddings(self, frame, faces: Faces, tracks: np.ndarray, *, index: int,
                   embed: Callable[[np.ndarray, Faces], np.ndarray], dim: int, fresh: bool = False,
                   search: bool = False) -> np.ndarray:
        """``(len(faces), dim)`` embeddings of ``faces`` (the faces of tracks ``tracks`` in frame
        ``index``), NaN rows for faces too small to embed, those to compute by ``embed(frame,
        faces)`` (the embedder, counted by its caller) in one call; ``fresh``: compute every one (a face next to
        the subject, possibly half hidden: its identity is read now, not taken from its track);
        ``search``: he is searched for -- a track whose last read was unsure of him (:meth:`unsure`)
        and that was read fewer than :data:`SEARCH_READS` times is read again once :data:`SEARCH_GAP`
        frames passed since its last read."""
        sizes = np.array([_size(b) for b in faces.boxes])
        # faces that overlap another face of this frame: overlapping boxes can swap tracks, so
        # their identity is read again, never taken from a track
        every = self._boxes[np.flatnonzero(self._last == index)] if len(self._boxes) else np.zeros((0, 4))
        crowded = (_iou(faces.boxes, every) > 0).sum(axis=1) > 1 if len(every) else np.zeros(len(faces), bool)
        need, contrast = [], {}
        for j, t in enumerate(tracks):
            if sizes[j] < MIN_EMBED_SIZE:
                continue
            e = self._emb[t]
            if (fresh or e is None or crowded[j] or sizes[j] >= REEMBED_GROWTH * e.size or index - e.frame >= self.refresh
                    or (search and e.unsure and e.reads < SEARCH_READS and index - e.frame >= SEARCH_GAP)):
                need.append(j)
            elif e.contrast < MIN_CONTRAST:  # read in the dark: again once the face can be told apart
                contrast[j] = face_contrast(frame, faces.boxes[j])
                if contrast[j] >= MIN_CONTRAST:
                    need.append(j)
        if need:
            new = embed(frame, faces[np.array(need)])
            for j, v in zip(need, new):
                c = contrast[j] if j in contrast else face_contrast(frame, faces.boxes[j])
                e = self._emb[tracks[j]]
                self._emb[tracks[j]] = _Read(v, sizes[j], index, c, 1 if e is None else e.reads + 1, False)
                if self.records is not None and np.all(np.isfinite(v)):
                    self.records[int(self._ids[tracks[j]])].embeddings.append((int(index), float(sizes[j]), v, c))
        out = np.full((len(faces), int(dim)), np.nan, np.float32)
        for j, t in enumerate(tracks):
            if self._emb[t] is not None:
                out[j] = self._emb[t].embedding
        return out
