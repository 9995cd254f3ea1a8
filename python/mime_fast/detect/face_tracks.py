"""Every face of a shot, followed from one detector run to the next: :func:`_detect_at` (the face
detector on a frame downscaled to a given size, boxes mapped back) and :class:`FaceTracks` (faces
associated into tracks by box overlap, so that each is embedded about once per track).  Used by
the subject tracker (:class:`mime_fast.detect.tracking.SubjectTracker`) and by ``faces="all"``
(:class:`mime_fast.detect.all_faces.AllFaceTracker`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from .geometry import _iou, _size
from .interface import Faces, _downscale

if TYPE_CHECKING:  # for an annotation only: tracking imports this module
    from .tracking import SubjectTracker

__all__ = ["MIN_EMBED_SIZE", "REEMBED_GROWTH", "REEMBED_S", "TRACK_IOU", "FaceTracks"]

#: Face tracks (:class:`FaceTracks`): a detection continues a track when its box overlaps the
#: track's last box by at least this IoU; a track's embedding is reused until the face grew by
#: REEMBED_GROWTH or REEMBED_S seconds of frames passed; faces smaller than MIN_EMBED_SIZE px are
#: never embedded (no identity can be read from them).
TRACK_IOU = 0.3
REEMBED_GROWTH = 1.3
REEMBED_S = 1.0
MIN_EMBED_SIZE = 24.0


def _timed(timers: dict, name: str, fn, *a):
    """``fn(*a)``, its wall time added to ``timers[name]`` (bench/bench_detect.py reads the trackers'
    ``timers``)."""
    t = time.perf_counter()
    out = fn(*a)
    timers[name] = timers.get(name, 0.0) + time.perf_counter() - t
    return out


def _detect_at(detector, frame: np.ndarray, size: int | None) -> Faces:
    """``detector`` on ``frame`` downscaled so that its longer side is at most ``size`` px (``None``:
    as it is), boxes and keypoints mapped back to ``frame``'s pixels."""
    if size is None:
        return detector.detect(frame)
    small, s = _downscale(frame, size)
    f = detector.detect(small)
    return f if s == 1.0 or not len(f) else Faces(f.boxes / s, f.scores, f.keypoints / s)


class FaceTracks:
    """Every detected face of the current shot followed from one detector run to the next by box
    overlap (greedy, highest IoU first, at least ``TRACK_IOU``; a track unseen for ``max_gap``
    frames ends), so that a face is embedded about once per track instead of at every detector run:
    :meth:`embeddings` returns each face's embedding, computing only those of new tracks, of faces
    that grew by ``REEMBED_GROWTH`` since their embedding (a clearer view) or whose embedding is
    older than ``refresh`` frames (a head that turned back), batched in one embedder call.
    :meth:`new_shot` forgets every track."""

    def __init__(self, max_gap: int, refresh: int):
        self.max_gap = int(max_gap)
        self.refresh = int(refresh)
        self._boxes = np.zeros((0, 4))
        self._last = np.zeros(0, np.int64)
        self._emb: list = []  # per track: (embedding, face size, frame) or None
        self._ids = np.zeros(0, np.int64)
        self.count = 0  # tracks started

    def new_shot(self) -> None:
        self._boxes, self._last, self._emb, self._ids = np.zeros((0, 4)), np.zeros(0, np.int64), [], np.zeros(0, np.int64)

    def assign(self, boxes: np.ndarray, index: int) -> np.ndarray:
        """The track (position in this object's tables) of each face detected in frame ``index``."""
        alive = index - self._last <= self.max_gap
        self._boxes, self._last = self._boxes[alive], self._last[alive]
        self._emb = [e for e, k in zip(self._emb, alive) if k]
        self._ids = self._ids[alive]
        n = len(boxes)
        out = np.full(n, -1, np.int64)
        if n and len(self._boxes):
            iou = _iou(boxes, self._boxes)
            while True:
                j, t = np.unravel_index(int(np.argmax(iou)), iou.shape)
                if iou[j, t] < TRACK_IOU:
                    break
                out[j] = t
                iou[j, :] = -1
                iou[:, t] = -1
        for j in range(n):
            if out[j] < 0:
                out[j] = len(self._boxes)
                self._boxes = np.concatenate([self._boxes, np.asarray(boxes[j], np.float64)[None]])
                self._last = np.append(self._last, index)
                self._emb.append(None)
                self._ids = np.append(self._ids, self.count)
                self.count += 1
        self._boxes[out] = np.asarray(boxes, np.float64)
        self._last[out] = index
        return out

    def ident(self, track: int) -> int:
        """The stable id of the track at position ``track`` (positions change as tracks end)."""
        return int(self._ids[track])

    def remember(self, track: int, embedding: np.ndarray, size: float, index: int) -> None:
        """Keep an embedding computed elsewhere as track ``track``'s."""
        self._emb[track] = (embedding, float(size), int(index))

    def embeddings(self, tracker: "SubjectTracker", frame, faces: Faces, tracks: np.ndarray,
                   fresh: bool = False) -> np.ndarray:
        """``(len(faces), dim)`` embeddings of ``faces`` (the faces of tracks ``tracks`` in this
        frame), NaN rows for faces too small to embed; ``fresh``: compute every one (a face next to
        the subject, possibly half hidden: its identity is read now, not taken from its track)."""
        index = tracker._index
        sizes = np.array([_size(b) for b in faces.boxes])
        # faces that overlap another face of this frame: overlapping boxes can swap tracks, so
        # their identity is read again, never taken from a track
        every = self._boxes[np.flatnonzero(self._last == index)] if len(self._boxes) else np.zeros((0, 4))
        crowded = (_iou(faces.boxes, every) > 0).sum(axis=1) > 1 if len(every) else np.zeros(len(faces), bool)
        need = []
        for j, t in enumerate(tracks):
            if sizes[j] < MIN_EMBED_SIZE:
                continue
            e = self._emb[t]
            if fresh or e is None or crowded[j] or sizes[j] >= REEMBED_GROWTH * e[1] or index - e[2] >= self.refresh:
                need.append(j)
        if need:
            new = tracker._embed(frame, faces[np.array(need)])
            for j, v in zip(need, new):
                self._emb[tracks[j]] = (v, sizes[j], index)
        out = np.full((len(faces), len(tracker._ref_emb)), np.nan, np.float32)
        for j, t in enumerate(tracks):
            if self._emb[t] is not None:
                out[j] = self._emb[t][0]
        return out
