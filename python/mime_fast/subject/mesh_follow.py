"""His face followed from one frame to the next without the detector: the face mesh run on the
region predicted from his last landmarks (``docs/subject-tracking.md``, 2.), as MediaPipe's face
mesh tracks.  The subject tracker (:class:`~mime_fast.subject.tracking.SubjectTracker`) decides
when to follow (:func:`can_follow`) and records what :func:`follow_mesh` found."""

from __future__ import annotations

import numpy as np

from ..detect.interface import Faces
from .geometry import _centre, _shape_change, _similarity, _size

__all__ = ["MIN_MESH_QUALITY", "TRACK_MAX_SCALE_CHANGE", "TRACK_MAX_SHAPE_CHANGE", "TRACK_MAX_SPEED",
           "TRACK_RECENTRE", "follow_mesh", "region"]

#: The face mesh's face-presence confidence below which its points are not used (extreme pose,
#: heavy motion blur): a detected face is then masked by its box's ellipse, a followed one detected.
MIN_MESH_QUALITY = 0.5
#: Followed frames: re-run the landmarks on a re-centred crop when they lie off the crop's centre
#: by more than this fraction of the face size.
TRACK_RECENTRE = 0.08
#: Followed frames: largest RMS residual of the similarity fit of the anchor's landmarks onto the
#: followed ones, as a fraction of the face height (same face, same pose: under 0.01).
TRACK_MAX_SHAPE_CHANGE = 0.04
#: Following runs only while the subject moves at most this fraction of its face size per frame,
#: and a followed face may change size by at most TRACK_MAX_SCALE_CHANGE from the previous frame.
TRACK_MAX_SPEED = 0.15
TRACK_MAX_SCALE_CHANGE = 0.08


def region(anchor: tuple, points: np.ndarray, shift=(0.0, 0.0)) -> Faces:
    """Detector-like box and keypoints of the subject for landmarks ``points``: the box and
    keypoints of ``anchor`` (his last full detection: ``(box, keypoints, landmarks)``) moved by the
    similarity taking its landmarks onto ``points``, then by ``shift`` px."""
    box, kps, ref = anchor
    k, m0, m1 = _similarity(ref, points)
    m1 = m1 + np.asarray(shift, np.float64)

    def move(p):
        z = k * ((p[..., 0] - m0[0]) + 1j * (p[..., 1] - m0[1]))
        return np.stack([z.real + m1[0], z.imag + m1[1]], -1)

    c = move(_centre(box))
    half = abs(k) * (np.asarray(box[2:]) - np.asarray(box[:2])) / 2
    return Faces(np.concatenate([c - half, c + half])[None], np.ones(1), move(kps)[None])


def follow_mesh(landmarks, frame, follow) -> tuple[np.ndarray, np.ndarray] | None:
    """His landmarks and box in ``frame``, the face mesh (``landmarks(frame, faces)``) run on the
    face region predicted from ``follow``'s (:class:`~mime_fast.subject.state.Follow`) last
    landmarks and velocity; ``None`` when the mesh is not confident there.  When the landmarks
    found lie off the crop's centre by more than ``TRACK_RECENTRE`` of the face size (fast motion),
    the mesh runs once more on the crop re-centred on them; if they are still off, or their shape
    differs from the last detection's by more than ``TRACK_MAX_SHAPE_CHANGE`` (:func:`_shape_change`),
    or the face's size changed by more than ``TRACK_MAX_SCALE_CHANGE``, ``None`` (the frame is
    detected instead)."""
    reg = region(follow.anchor, follow.last_points, follow.vel)
    for _ in range(2):
        lmk = landmarks(frame, reg)
        if float(lmk.quality[0]) < MIN_MESH_QUALITY:
            return None
        pts = np.asarray(lmk.points[0], np.float32)
        found = region(follow.anchor, pts.astype(np.float64))
        off = np.linalg.norm(_centre(found.boxes[0]) - _centre(reg.boxes[0])) / _size(reg.boxes[0])
        if off <= TRACK_RECENTRE:
            break
        reg = found
    else:  # the landmarks do not settle on a crop centred on them: detect instead
        return None
    if _shape_change(follow.anchor[2], pts) > TRACK_MAX_SHAPE_CHANGE:
        return None  # not the face the detector last saw (or a mesh fitted to part of it)
    if abs(_size(found.boxes[0]) / _size(follow.box) - 1.0) > TRACK_MAX_SCALE_CHANGE:
        return None  # faces do not grow or shrink this fast between two frames
    return pts, found.boxes[0].astype(np.float64)
