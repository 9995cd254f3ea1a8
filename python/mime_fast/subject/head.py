"""Where the subject's head is while the face detector cannot see his face: head turned away,
looking down, a hand or hair in front, motion blur.

:class:`HeadFlow` follows the head by its motion.  It is seeded on the last frame where the
subject's face was matched: up to ``HEAD_POINTS`` corners (``cv2.goodFeaturesToTrack``) inside his
face box grown by ``HEAD_GROW`` of its size on each side (face, hair, ears).  Each following frame,
pyramidal Lucas-Kanade flow (``cv2.calcOpticalFlowPyrLK``) carries the points forward and back
again; a point counts only where the round trip returns within ``HEAD_FB_ERR`` px (a point that
was hidden, or slid onto something moving otherwise, does not).  The head box moves by the median
displacement of the points and scales by the median change of their distances to their centroid
(at most ``HEAD_MAX_SCALE_STEP`` per frame).  When fewer than half the seeded points are left, it
is seeded again inside the current box.  It stops (``step`` returns ``None``) when fewer than
``HEAD_MIN_POINTS`` points survive (the head left the picture, or something covered it), when the
box's centre leaves the frame, or when a head that was moving (at least ``HEAD_MOVING`` of its
size per frame over its first ``HEAD_STILL`` frames) stops dead for ``HEAD_STILL`` frames (under a
quarter of that speed): people do not stop in a frame, but points that slid onto a still thing in
front of the face do (measured on the occlusion clip of tests/test_tracking.py: the box then
stayed on the panel).

The flow runs on the luma of the frame subsampled by 2 when its shorter side is at least 720 px
(about 1 ms a frame at 1080p), in one thread: the same points on every machine and under any
load.  :class:`mime_fast.subject.SubjectTracker` uses it for the frames after the subject's last
match in a shot, for as long as it holds, and re-acquires a face found inside the head box as his.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HEAD_FB_ERR", "HEAD_GROW", "HEAD_MAX_SCALE_STEP", "HEAD_MIN_POINTS", "HEAD_MOVING", "HEAD_POINTS",
           "HEAD_STILL", "HeadFlow"]

#: Seed region: the face box grown by this fraction of its size on each side.
HEAD_GROW = 0.25
#: Corners seeded in the head region, and the fewest that must survive a frame.
HEAD_POINTS = 60
HEAD_MIN_POINTS = 8
#: Forward-backward round-trip error (px at the flow's scale) above which a point is dropped.
HEAD_FB_ERR = 1.0
#: Largest change of the head box's size from one frame to the next (people do not grow fast).
HEAD_MAX_SCALE_STEP = 0.05
#: A sudden stop: moving at least HEAD_MOVING of the box size per frame over the first HEAD_STILL
#: frames, then under a quarter of that for HEAD_STILL frames in a row.
HEAD_MOVING = 0.02
HEAD_STILL = 8

_LK = dict(winSize=(15, 15), maxLevel=3)


def _luma(frame: np.ndarray) -> tuple[np.ndarray, int]:
    import cv2

    f = 2 if min(frame.shape[:2]) >= 720 else 1
    return cv2.cvtColor(np.ascontiguousarray(frame[::f, ::f]), cv2.COLOR_RGB2GRAY), f


class HeadFlow:
    """The head of a subject followed by optical flow from ``box`` (``x0 y0 x1 y1``, his face box
    in ``frame``, RGB): :meth:`step` with each following frame of the shot, in order."""

    def __init__(self, frame: np.ndarray, box):
        self.box = np.asarray(box, np.float64)
        self._gray, self._f = _luma(frame)
        self._pts = self._seed()
        self._seeded = len(self._pts)
        self._speeds: list[float] = []  # per step, the box centre's move as a fraction of its size

    def _seed(self) -> np.ndarray:
        import cv2

        h, w = self._gray.shape
        x0, y0, x1, y1 = self.box / self._f
        g = HEAD_GROW * max(x1 - x0, y1 - y0)
        mask = np.zeros((h, w), np.uint8)
        mask[int(max(0, y0 - g)):int(min(h, y1 + g)), int(max(0, x0 - g)):int(min(w, x1 + g))] = 255
        pts = cv2.goodFeaturesToTrack(self._gray, HEAD_POINTS, 0.01, 3, mask=mask, blockSize=5)
        return np.zeros((0, 1, 2), np.float32) if pts is None else pts.astype(np.float32)

    def step(self, frame: np.ndarray) -> np.ndarray | None:
        """The head box in ``frame`` (the next frame), or ``None`` once the head is lost."""
        import cv2

        if len(self._pts) < HEAD_MIN_POINTS:
            return None
        gray, _ = _luma(frame)
        fwd, st1, _ = cv2.calcOpticalFlowPyrLK(self._gray, gray, self._pts, None, **_LK)
        back, st2, _ = cv2.calcOpticalFlowPyrLK(gray, self._gray, fwd, None, **_LK)
        err = np.linalg.norm((back - self._pts).reshape(-1, 2), axis=1)
        ok = (st1.ravel() == 1) & (st2.ravel() == 1) & (err <= HEAD_FB_ERR)
        if int(ok.sum()) < HEAD_MIN_POINTS:
            return None
        a, b = self._pts.reshape(-1, 2)[ok].astype(np.float64), fwd.reshape(-1, 2)[ok].astype(np.float64)
        shift = np.median(b - a, axis=0)
        da, db = np.linalg.norm(a - a.mean(0), axis=1), np.linalg.norm(b - b.mean(0), axis=1)
        scale = float(np.median(db[da > 1.0] / da[da > 1.0])) if np.any(da > 1.0) else 1.0
        scale = min(max(scale, 1.0 - HEAD_MAX_SCALE_STEP), 1.0 + HEAD_MAX_SCALE_STEP)
        c = (self.box[:2] + self.box[2:]) / 2 + shift * self._f
        half = (self.box[2:] - self.box[:2]) / 2 * scale
        self._speeds.append(float(np.linalg.norm(shift)) * self._f / max(2.0 * float(half.max()), 1.0))
        self.box = np.concatenate([c - half, c + half])
        H, W = frame.shape[:2]
        if not (0 <= c[0] < W and 0 <= c[1] < H) or self._stopped_dead():
            return None
        self._gray, self._pts = gray, fwd[ok].reshape(-1, 1, 2)
        if len(self._pts) < self._seeded / 2:
            self._pts = self._seed()
            self._seeded = len(self._pts)
        return self.box.copy()

    def _stopped_dead(self) -> bool:
        v = self._speeds
        if len(v) < 2 * HEAD_STILL:
            return False
        moving = float(np.mean(v[:HEAD_STILL]))
        return moving >= HEAD_MOVING and max(v[-HEAD_STILL:]) < 0.25 * moving
