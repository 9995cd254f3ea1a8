"""The subject's frames between detections: :func:`fill_gaps` masks them inside each camera shot
(interpolated between two detections, held after one, or absent), and :class:`TrackingStats`, the
per-clip counts of the frames of each kind that a manifest carries (:class:`SubjectTracker
<mime_fast.subject.tracking.SubjectTracker>` counts the detections, :func:`fill_gaps` the rest).
``faces="all"`` fills each face track's gaps the same way
(:class:`mime_fast.subject.all_faces.AllFaceTracker`).
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field

import numpy as np

from .geometry import FrameTrack, _iou, _size, grow_hull

__all__ = ["HOLD_GROWTH", "PIN_GAP", "PIN_IOU", "TrackingStats", "fill_gaps"]

#: Margin added per held/interpolated frame, as a fraction of the face size ``s``.
HOLD_GROWTH = 0.05
#: A fill's margin grows from his partial matches instead of his whole detections where parts of
#: his face were found on both sides of the frame within PIN_GAP frames (the period schedule's
#: runs), their boxes overlapping by PIN_IOU (he stays where he is; on the real arm wrestling clip
#: at 720p his head moves between partial matches 5 frames apart, overlapping by 0.55: not pinned).
PIN_GAP = 3
PIN_IOU = 0.6


@dataclass
class TrackingStats:
    """Per-clip tracking outcome (source frames).

    ``tracked``: frames where the subject's landmarks were found by tracking from the previous
    frame, without running the face detector (counted in ``detected`` too); ``detector_runs``:
    frames where the face detector ran.

    ``status``: ``"ok"`` or ``"no subject"`` (no face in any frame).  ``detected``: frames where the
    subject was matched by detection; ``interpolated`` / ``held``: frames masked from neighbouring
    detections (:func:`fill_gaps`); ``without_subject``: frames left unmasked (no subject yet, or
    lost longer than the hold).  ``selected_frame``: source index of the selection;
    ``selection``: its per-term breakdown; ``shots`` / ``shot_frames``: the camera shots and, per
    shot, its frames and those masked; ``partial``: frames where only part of the face was
    detected (counted in ``detected`` too; the mask adds the interpolated hull); ``embeddings``: faces embedded (only for ambiguous
    matches and re-acquisitions); ``ambiguous``: frames matched by appearance; ``reacquired``:
    re-acquisitions after a loss longer than the hold; ``head``: frames masked at his head followed
    by its motion while his face was not matched (:class:`mime_fast.subject.head.HeadFlow`);
    ``continued``: frames matched by track
    continuity where identity could not decide (:data:`~mime_fast.subject.matching.CONTINUITY_IOU`);
    ``returned``: frames where he was found where he stood in the shot a new one returns to
    (:class:`~mime_fast.subject.SubjectTracker`, ``docs/subject-tracking.md`` 6.);
    ``undecided``: frames where a face that could be the subject's is masked beside him because
    nothing could tell whether it is his (:meth:`~mime_fast.subject.SubjectTracker.undecided_hulls`,
    after the decision over the whole clip: :mod:`mime_fast.subject.decision`); ``undecided_pass1``:
    the frames where the forward pass could not tell which face is his (before that decision);
    ``identified``: frames where the subject was found by that decision only (a face track the
    forward pass left undecided read as his: his detection there, counted in ``detected`` too);
    ``tracks``: each face track the forward pass left undecided, as decided over the whole clip
    (:meth:`mime_fast.subject.decision.TrackDecision.as_dict`: decision, rule, evidence);
    ``mesh_fallbacks``: detected frames masked by the box ellipse; ``face_height``: median subject hull height (px) over detected frames.
    ``jumps``: detections where every face of the frame began a new face track, his among those
    before (a cut the shot detector did not see, a whip pan): he was looked for again by identity;
    ``jumps_held``: such runs where his mesh, followed on the frame before, still held him (no jump:
    the detector missed him while the faces around moved on).
    ``waited``: frames where the detector waited for its next run (the schedule: his head followed
    by its motion, or, lost, nothing until the next run); ``mesh_runs``: faces given to the face
    mesh (detections, followed frames and the selection).
    """

    status: str = "no subject"
    frames: int = 0
    detected: int = 0
    partial: int = 0
    interpolated: int = 0
    held: int = 0
    without_subject: int = 0
    selected_frame: int | None = None
    selection: dict = field(default_factory=dict)
    embeddings: int = 0
    ambiguous: int = 0
    reacquired: int = 0
    mesh_fallbacks: int = 0
    hold_frames: int = 0
    face_height: float | None = None
    tracked: int = 0
    detector_runs: int = 0
    #: camera shots (:mod:`mime_fast.subject.shots`), and ``[frames, frames with the subject masked]``
    #: of each, in order
    shots: int = 1
    shot_frames: list = field(default_factory=list)
    continued: int = 0
    returned: int = 0
    head: int = 0
    undecided: int = 0
    undecided_pass1: int = 0
    identified: int = 0
    tracks: list = field(default_factory=list)
    jumps: int = 0
    jumps_held: int = 0
    waited: int = 0
    mesh_runs: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def fill_gaps(tracks: list[FrameTrack], hold_frames: int, stats: TrackingStats | None = None,
              shots=None) -> list[FrameTrack]:
    """Mask the frames between full detections, inside each camera shot (in place; returns
    ``tracks``).  ``shots``: :class:`mime_fast.subject.shots.Shot` list (``None``: the whole clip is
    one shot); holds and interpolations never cross a shot boundary, so a cut to a shot without
    the subject leaves that shot unmasked.

    For a frame without a full detection, at distance ``a`` after the shot's previous full
    detection (hull ``A``, face size ``s_A``) and ``b`` before its next one (hull ``B``):

    * both exist and ``a + b <= 2 * hold_frames``: **interpolated** -- ``t = a / (a + b)``; if ``A``
      and ``B`` have the same number of points (both meshes) the points are ``(1 - t) A + t B``,
      otherwise the hull of ``A`` and ``B`` together (which contains every in-between position of a
      straight move);
    * else, before the shot's first detection: **held** from it, back to the shot's first frame (a
      shot with the subject is masked from its start, however late he is first detected);
    * else, if ``min(a, b) <= hold_frames``: **held** -- the nearer detection's hull;
    * else **absent** (no mask): lost for longer than the hold.

    Interpolated and held hulls are grown by ``HOLD_GROWTH * s * min(a, b, hold_frames)`` px (5 %
    of the face size per frame away from a detection, at most ``hold_frames`` frames' worth) on top
    of the detection margin, so a subject that moves or turns while undetected stays inside the
    mask.  A *partial* detection keeps its own hull and adds the interpolated / held one; a *head*
    frame (his head followed by its motion) keeps its own hull and margin and adds the interpolated
    / held hull with its own.  Where
    two shots overlap (a dissolve), a frame gets the masks of both.
    """
    n = len(tracks)
    spans = [(0, n)] if not shots else [(int(sh.start), int(sh.end)) for sh in shots]
    filled: list[FrameTrack | None] = [None] * n
    for s0, s1 in spans:
        part = _fill_span(tracks[s0:s1], hold_frames)
        for i, t in enumerate(part, s0):
            filled[i] = t if filled[i] is None else _union(filled[i], t)
    for i in range(n):
        if filled[i] is not None:
            tracks[i] = filled[i]
    if stats is not None:
        stats.interpolated = sum(t.kind == "interpolated" for t in tracks)
        stats.held = sum(t.kind == "held" for t in tracks)
        stats.head = sum(t.kind == "head" for t in tracks)
        stats.without_subject = sum(t.kind == "absent" for t in tracks)
        stats.shots = len(spans)
        stats.shot_frames = [[s1 - s0, sum(tracks[i].kind != "absent" for i in range(s0, s1))] for s0, s1 in spans]
    return tracks


_KIND_RANK = {"detected": 5, "partial": 4, "head": 3, "interpolated": 2, "held": 1, "absent": 0}


def _union(x: FrameTrack, y: FrameTrack) -> FrameTrack:
    """One frame's masks from two overlapping shots: both hulls."""
    if y.points is None:
        return x
    if x.points is None:
        return y
    keep = x if _KIND_RANK[x.kind] >= _KIND_RANK[y.kind] else y
    pts = np.concatenate([grow_hull(x.points, x.margin), grow_hull(y.points, y.margin)]).astype(np.float32)
    return FrameTrack(pts, keep.box, keep.kind, keep.height, 0.0)


def _fill_span(tracks: list[FrameTrack], hold_frames: int) -> list[FrameTrack]:
    """:func:`fill_gaps` inside one shot: a new list (the detected tracks are the same objects)."""
    n = len(tracks)
    out = list(tracks)
    det = [i for i, t in enumerate(tracks) if t.kind == "detected"]
    if not det:
        _between_glimpses(out, hold_frames)
        return out
    prev = [-1] * n
    nxt = [-1] * n
    last = -1
    for i in range(n):
        if tracks[i].kind == "detected":
            last = i
        prev[i] = last
    last = -1
    for i in range(n - 1, -1, -1):
        if tracks[i].kind == "detected":
            last = i
        nxt[i] = last
    parts = [i for i, t in enumerate(tracks) if t.kind == "partial"]
    for i in range(n):
        t = tracks[i]
        if t.kind == "detected":
            continue
        p, q = prev[i], nxt[i]
        a = i - p if p >= 0 else None
        b = q - i if q >= 0 else None
        near = min(x for x in (a, b) if x is not None)
        fill = None
        if a is not None and b is not None and a + b <= 2 * hold_frames:
            A, B = tracks[p], tracks[q]
            s = max(_size(A.box), _size(B.box))
            w = a / (a + b)
            if A.points.shape == B.points.shape:
                pts = (1 - w) * A.points + w * B.points
            else:
                pts = np.concatenate([A.points, B.points])
            box = ((1 - w) * A.box + w * B.box).astype(np.float32)
            grow = min(near, _pinned(tracks, parts, i, box), hold_frames)
            m = (1 - w) * A.margin + w * B.margin + HOLD_GROWTH * s * grow
            fill = FrameTrack(pts.astype(np.float32), box, "interpolated", None, m)
        elif a is None or near <= hold_frames:  # before the shot's first detection: back to its start
            src = tracks[p] if (a is not None and a == near) else tracks[q]
            grow = min(near, _pinned(tracks, parts, i, src.box), hold_frames)
            m = src.margin + HOLD_GROWTH * _size(src.box) * grow
            fill = FrameTrack(src.points, src.box, "held", None, m)
        if fill is None:
            continue
        if t.kind == "partial":
            out[i] = FrameTrack(np.concatenate([t.points, fill.points]).astype(np.float32), t.box, "partial",
                                None, max(t.margin, fill.margin))
        elif t.kind == "head":  # his followed head, and where the detections around put him, each
            # with its own margin (a hold's growing margin is not the followed head's)
            out[i] = FrameTrack(np.concatenate([grow_hull(t.points, t.margin), grow_hull(fill.points, fill.margin)])
                                .astype(np.float32), t.box, "head", None, 0.0)
        else:
            out[i] = fill
    _between_glimpses(out, hold_frames)
    return out


def _pinned(tracks: list[FrameTrack], parts: list[int], i: int, box) -> int:
    """Frames from frame ``i`` to the farther of his partial matches around it (``parts``: their
    frames, in order) where a part of his face was found on both sides within :data:`PIN_GAP`
    frames, at the same place (boxes overlapping by :data:`PIN_IOU`), inside ``box`` (where the
    whole detections around put him): he has not moved off, so a fill's margin grows from those
    matches, not from the whole detections (under the period schedule, whole detections may lie
    many frames away while his half-hidden face is found at every run: on the real hug, the mask
    otherwise grew onto the face he hugs).  ``1 << 30`` where there are no such matches."""
    k = bisect.bisect_left(parts, i)
    j0 = parts[k - 1] if k > 0 else None
    after = k + 1 if k < len(parts) and parts[k] == i else k  # (the partial frame itself: its neighbours)
    j1 = parts[after] if after < len(parts) else None
    if j0 is None or j1 is None or i - j0 > PIN_GAP or j1 - i > PIN_GAP:
        return 1 << 30
    b0, b1 = tracks[j0].box, tracks[j1].box
    if float(_iou(b0, b1)[0, 0]) < PIN_IOU:
        return 1 << 30
    x0, y0, x1, y1 = (float(v) for v in box)
    for b in (b0, b1):
        cx, cy = (float(b[0]) + float(b[2])) / 2, (float(b[1]) + float(b[3])) / 2
        if not (x0 <= cx <= x1 and y0 <= cy <= y1):
            return 1 << 30
    return max(i - j0, j1 - i)


def _between_glimpses(out: list[FrameTrack], hold_frames: int) -> None:
    """Frames still without a mask between two of his matches, partial ones included (his face
    half hidden, and between the schedule's runs nothing followed him: on the real arm wrestling
    clip at 720p his head's motion drifted off him between two partial matches three frames
    apart), ``a + b <= 2 * hold_frames`` apart: the hull of both, grown as an interpolation (in
    place)."""
    seen = [i for i, t in enumerate(out) if t.kind in ("detected", "partial")]
    for p, q in zip(seen, seen[1:]):
        if q - p < 2 or q - p > 2 * hold_frames or "partial" not in (out[p].kind, out[q].kind):
            continue
        A, B = out[p], out[q]
        s = max(_size(A.box), _size(B.box))
        pts = np.concatenate([A.points, B.points]).astype(np.float32)
        for i in range(p + 1, q):
            if out[i].kind != "absent":
                continue
            w = (i - p) / (q - p)
            box = ((1 - w) * A.box + w * B.box).astype(np.float32)
            m = max(A.margin, B.margin) + HOLD_GROWTH * s * min(i - p, q - i, hold_frames)
            out[i] = FrameTrack(pts, box, "interpolated", None, m)
