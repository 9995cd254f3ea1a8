"""Follow the primary subject through a clip and turn it into per-frame hull points.

:class:`SubjectTracker` runs forward over decoded RGB frames (any order-preserving source):

1. **Selection** -- on the first frame where the detector finds a face, every face gets dense
   landmarks and the person detector runs once; :func:`~mime_fast.detect.select_primary_subject`
   picks the subject.  Its reference face embedding and body HSV histogram are stored.
2. **Detection, and tracking between detections** -- the face detector runs on the frame downscaled
   so that its longer side is at most ``detect_size`` px (default 384; boxes are mapped back to full
   resolution) on every ``detect_every``-th frame (default 3).  On the frames between, when the
   subject was found in the previous frame with a confident mesh, moves slowly (its measured
   velocity at most ``TRACK_MAX_SPEED = 0.15`` of its face size per frame) and no other face came
   near it during the last ``hold_frames`` frames, the detector is skipped and the subject is **tracked**:
   the face region is predicted from the previous frame's landmarks (the detector box and keypoints
   of the last detection moved by the least-squares similarity transform -- translation, rotation,
   scale -- that takes that detection's landmarks onto the previous frame's, plus the subject's
   velocity) and the landmark model runs on that crop alone, as MediaPipe's face mesh tracks; when
   the landmarks found lie off the crop's centre by more than ``TRACK_RECENTRE = 0.08`` of the face
   size (fast motion), it runs once more on the crop re-centred on them, and when they are off again,
   or their shape differs from the last detection's (RMS residual of the best similarity fit above
   ``TRACK_MAX_SHAPE_CHANGE = 0.04`` of the face height: a mesh fitted to part of a face, or to
   another face), or its size changed by more than ``TRACK_MAX_SCALE_CHANGE = 0.08`` since the
   previous frame, the frame is detected instead.  A tracked frame whose mesh confidence
   falls below ``MIN_MESH_QUALITY`` is detected at once instead.  Frames near another face, or
   before the subject is selected, or after it was missed, are detected every frame.
3. **Matching** -- with ``s`` the subject's last face size (``max(w, h)``), ``k`` the frames since it
   was last matched, ``c_p`` its last box centre moved by its per-frame velocity times ``k + 1``,
   and ``d_j = |c_j - c_p| / s`` for each detected face ``j``:

   * *geometric match* (no embedding): exactly one face has ``d_j <= NEAR = 1.5`` (+0.25 per missed
     frame, for at most 3 frames: a face far away is not his because he was missed a while; while
     his head is followed, 5., ``c_p`` is its centre and there is no widening), it has ``d_j <= GATE
     = 1.0`` (+0.25 likewise) and a size ratio in
     ``[0.67, 1.5]``, the subject was matched at most ``hold_frames`` ago, and no other face came
     within NEAR of the subject during the last ``hold_frames`` frames (after two faces met, a
     single face near the prediction may be the other person: people crossing).  Besides the face
     closest to the prediction, a face within NEAR counts (as a competitor) only with a detector
     score >= ``COMPETITOR_SCORE = 0.9`` and 0.5 - 2 x the subject's size (RetinaFace's false
     positives on textured backgrounds score 0.5 - 0.8);
   * otherwise the match is *ambiguous* or a *re-acquisition* (lost for more than
     ``hold_frames``): the candidates (faces within NEAR, or every face when re-acquiring) are
     embedded and scored ``score_j = W_EMBED * cos_j + W_HIST * max(corr_j, 0)`` with
     ``W_EMBED = 0.7``, ``W_HIST = 0.3``; ``cos_j`` is the cosine similarity of the face embedding to
     the subject's (the higher of the reference from selection and the last embedding accepted),
     ``corr_j`` the correlation (``cv2.compareHist(..., HISTCMP_CORREL)``, in [-1, 1]) of the HSV
     histogram (H 30 x S 32 bins) of the body region below the face (``cx +- 1.5 w``,
     ``y1 .. y1 + 2 h``) with the subject's.  The best-scoring candidate is accepted when
     ``cos_j >= STRONG_COS = 0.93``, or ``cos_j >= MIN_COS = 0.85`` and ``score_j >= MIN_SCORE =
     0.80`` (face and body agree); else the subject is not matched this frame.  (dlib's unit
     descriptors of *different* people reach cosines of 0.83 - 0.94 on insightface's t1.jpg; the
     same face under crops, brightness and scale changes stays >= 0.97.)  These are dlib's
     thresholds; an embedder that scores otherwise carries its own ``min_cos``, ``strong_cos`` and
     ``min_score`` (:class:`mime_fast.detect.SFaceEmbedder`, the offline stack's: 0.38, 0.55, 0.45)
   * when no candidate passes, the face that continues the subject's own face track
     (:class:`FaceTracks`, his last full or partial detection within ``hold_frames``, in this shot)
     and either overlaps his last box by ``CONTINUITY_IOU = 0.5`` or has no other face within
     ``NEAR`` of it (nobody its track could have been swapped with) is his (**continued**, masked
     as a partial detection), unless another candidate has ``cos >= STRONG_COS``; so is, failing
     that, the one face that overlaps his head estimate (5.) by ``TRACK_IOU``.  Measured on the
     real crowd clip at 720p: SFace reads the subject (a boy looking down at his phone) at 0.1 -
     0.35 against his first-frame reference, so identity never confirms him after people cross
     him, and his face track carries him to the end (59 unmasked frames before these rules).  Measured on the real
     hug clip (``../shared/media/two_people_hug_1080p.mp4``): once the subject turns his head to
     profile, dlib reads his own face at 0.85 - 0.89 against his reference and the other man's at
     0.84 - 0.90 (body histograms 0.3 - 0.4 vs 0.2 - 0.3): identity cannot decide, the track can;
   * a matched face whose box width or height is below ``PARTIAL = 0.9`` x the subject's recent
     width or height (running means over full detections) is **partial** (half hidden behind something): its hull is used but it
     does not move the track, and :func:`fill_gaps` adds the hull interpolated from the full
     detections around it.  After ``hold_frames`` partial frames in a row the size is taken as the
     new normal (the person moved away, or a cut).
4. **Landmarks** on the subject's face only: MediaPipe's 468-point mesh on the face crop.  The hull
   is the convex hull of all 468 points, which is the hull of the mesh's face-oval contour (36 points
   from the forehead at the hairline over the temples and jaw to the chin): the whole face including
   the forehead.  When the mesh's face-presence confidence is below ``MIN_MESH_QUALITY = 0.5``
   (extreme head pose, heavy motion blur) the hull is an ellipse inscribed in the detector box grown
   by 20 % on each side, so a detected subject is always masked.
   The hull is further grown by ``margin`` (default ``0.12 * s`` px) everywhere, so that the mask
   also covers the corners of the face box (>= 95 % of it, tests/test_tracking.py).

5. **Head estimate** -- in a frame of the shot where his face is not matched (turned away, looking
   down, covered, or missed by the detector), his head is followed by its motion from his last
   match (:class:`mime_fast.detect.head.HeadFlow`: optical flow of corners of his face and hair)
   for as long as the flow holds, not for a fixed time: the frame is **head** (its hull the ellipse
   of the followed box, grown by the margin; :func:`fill_gaps` adds the interpolated or held hull
   where there is one: the flow can stick to something that moved in front of his face, and the
   detections around still say where he is).  It ends when the flow loses the points, the box leaves the frame, or
   another face is detected where it says his head is.

6. **Shots** -- the caller feeds every frame to a :class:`mime_fast.detect.shots.ShotDetector` too
   and calls :meth:`SubjectTracker.new_shot` where a new camera shot starts: the subject's position
   and motion are forgotten and he is re-acquired by identity, never by where he stood.

Frames where the subject is not matched are filled by :func:`fill_gaps` (see there), inside each
shot: interpolated between two detections up to ``2 * hold_frames`` apart, held back to the shot's
first frame before its first detection, held (with a margin that grows with the distance to the
nearest detection) up to ``hold_frames`` after a detection, otherwise absent.

:class:`TrackingStats` counts the frames per kind and is what a manifest carries.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..options import DETECT_DEFAULTS as _D, hold_frames as _hold_frames
from .head import HeadFlow
from .models import Faces, _downscale
from .selection import select_primary_subject

__all__ = [
    "GATE",
    "NEAR",
    "W_EMBED",
    "W_HIST",
    "MIN_COS",
    "STRONG_COS",
    "MIN_SCORE",
    "PARTIAL",
    "COMPETITOR_SCORE",
    "MIN_MESH_QUALITY",
    "HOLD_GROWTH",
    "TRACK_RECENTRE",
    "TRACK_MAX_SHAPE_CHANGE",
    "TRACK_MAX_SPEED",
    "TRACK_MAX_SCALE_CHANGE",
    "TRACK_IOU",
    "CONTINUITY_IOU",
    "REEMBED_GROWTH",
    "REEMBED_S",
    "MIN_EMBED_SIZE",
    "ALL_FACES_MESH_MIN_SIZE",
    "ALL_FACES_MAX_MESHES",
    "ALL_FACES_DETECT_SIZE",
    "AllFaceTracker",
    "FaceTracks",
    "SubjectTracker",
    "TrackingStats",
    "FrameTrack",
    "body_histogram",
    "fill_gaps",
    "grow_hull",
    "track_clip",
]

GATE = 1.0
NEAR = 1.5
W_EMBED = 0.7
W_HIST = 0.3
MIN_COS = 0.85
STRONG_COS = 0.93
MIN_SCORE = 0.80
#: Faces near the subject count as competitors (ambiguity) only with at least this detector score.
COMPETITOR_SCORE = 0.9
#: A detection smaller than this fraction of the subject's recent face size is "partial".
PARTIAL = 0.9
MIN_MESH_QUALITY = 0.5
#: Tracked frames: re-run the landmarks on a re-centred crop when they lie off the crop's centre by
#: more than this fraction of the face size.
TRACK_RECENTRE = 0.08
#: Tracked frames: largest RMS residual of the similarity fit of the anchor's landmarks onto the
#: tracked ones, as a fraction of the face height (same face, same pose: under 0.01).
TRACK_MAX_SHAPE_CHANGE = 0.04
#: Tracking runs only while the subject moves at most this fraction of its face size per frame,
#: and a tracked face may change size by at most TRACK_MAX_SCALE_CHANGE from the previous frame.
TRACK_MAX_SPEED = 0.15
TRACK_MAX_SCALE_CHANGE = 0.08
#: Margin added per held/interpolated frame, as a fraction of the face size ``s``.
HOLD_GROWTH = 0.05
#: Face tracks (:class:`FaceTracks`): a detection continues a track when its box overlaps the
#: track's last box by at least this IoU; a track's embedding is reused until the face grew by
#: REEMBED_GROWTH or REEMBED_S seconds of frames passed; faces smaller than MIN_EMBED_SIZE px are
#: never embedded (no identity can be read from them).
TRACK_IOU = 0.3
#: Track continuity: when identity cannot tell the subject from a face next to him (a head turned
#: away reads as anybody to a face embedding), the face that continues his own face track and
#: overlaps his last box by at least this IoU is his, unless another face is strongly him.
CONTINUITY_IOU = 0.5
REEMBED_GROWTH = 1.3
REEMBED_S = 1.0
MIN_EMBED_SIZE = 24.0


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
    by its motion while his face was not matched (:class:`mime_fast.detect.head.HeadFlow`);
    ``continued``: frames matched by track
    continuity where identity could not decide (:data:`CONTINUITY_IOU`); ``mesh_fallbacks``: detected frames masked by
    the box ellipse; ``face_height``: median subject hull height (px) over detected frames.
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
    #: camera shots (:mod:`mime_fast.detect.shots`), and ``[frames, frames with the subject masked]``
    #: of each, in order
    shots: int = 1
    shot_frames: list = field(default_factory=list)
    continued: int = 0
    head: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class FrameTrack:
    """Subject in one frame: ``points (P, 2)`` of the hull (``None`` where not detected), ``box``."""

    points: np.ndarray | None = None
    box: np.ndarray | None = None
    kind: str = "absent"  # detected | partial | head | interpolated | held | absent
    height: float | None = None  # height of the landmarks before any margin (detected frames)
    margin: float = 0.0  # px to grow the hull of ``points`` by (:meth:`hull`)

    def hull(self) -> np.ndarray | None:
        """The mask polygon: convex hull of ``points`` grown by ``margin`` (``None`` if absent)."""
        return None if self.points is None else grow_hull(self.points, self.margin)


def body_histogram(frame: np.ndarray, box) -> np.ndarray | None:
    """Normalised 2-D HSV histogram (H 30 x S 32 bins) of the body region below a face box
    (``cx +- 1.5 w``, ``y1 .. y1 + 2 h``, clipped; sampled every 2nd pixel), ``None`` if empty."""
    import cv2

    H, W = frame.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in box)
    w, h = x1 - x0, y1 - y0
    cx = (x0 + x1) / 2
    bx0, bx1 = int(max(0, cx - 1.5 * w)), int(min(W, cx + 1.5 * w))
    by0, by1 = int(max(0, y1)), int(min(H, y1 + 2 * h))
    if bx1 - bx0 < 4 or by1 - by0 < 4:
        return None
    roi = np.ascontiguousarray(frame[by0:by1:2, bx0:bx1:2])
    hsv = cv2.cvtColor(roi, cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1], None, [30, 32], [0, 180, 0, 256])
    cv2.normalize(hist, hist, 1.0, 0.0, cv2.NORM_L1)
    return hist


def _hist_corr(a, b) -> float:
    import cv2

    if a is None or b is None:
        return 0.0
    return float(cv2.compareHist(a, b, cv2.HISTCMP_CORREL))


def grow_hull(points: np.ndarray, margin: float, n_dir: int = 16) -> np.ndarray:
    """Convex hull vertices of ``points`` grown by ``margin`` px (Minkowski sum with a 16-gon
    circumscribing the disc of radius ``margin``); the hull itself when ``margin <= 0``."""
    import cv2

    hull = cv2.convexHull(np.asarray(points, np.float32).reshape(-1, 1, 2)).reshape(-1, 2)
    if margin <= 0:
        return hull.astype(np.float32)
    th = np.arange(n_dir) * (2 * np.pi / n_dir)
    r = margin / math.cos(math.pi / n_dir)  # polygon circumscribes the disc
    ring = np.stack([np.cos(th), np.sin(th)], 1) * r
    pts = (hull[:, None, :] + ring[None]).reshape(-1, 2).astype(np.float32)
    return cv2.convexHull(pts.reshape(-1, 1, 2)).reshape(-1, 2).astype(np.float32)


def _box_ellipse(box, grow: float = 0.2, n: int = 48) -> np.ndarray:
    x0, y0, x1, y1 = (float(v) for v in box)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    ax, ay = (x1 - x0) * (0.5 + grow), (y1 - y0) * (0.5 + grow)
    th = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([cx + ax * np.cos(th), cy + ay * np.sin(th)], 1).astype(np.float32)


def _centre(box) -> np.ndarray:
    b = np.asarray(box, np.float64)
    return np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2])


def _size(box) -> float:
    b = np.asarray(box, np.float64)
    return float(max(b[2] - b[0], b[3] - b[1], 1.0))


def _detect_at(detector, frame: np.ndarray, size: int | None) -> Faces:
    """``detector`` on ``frame`` downscaled so that its longer side is at most ``size`` px (``None``:
    as it is), boxes and keypoints mapped back to ``frame``'s pixels."""
    if size is None:
        return detector.detect(frame)
    small, s = _downscale(frame, size)
    f = detector.detect(small)
    return f if s == 1.0 or not len(f) else Faces(f.boxes / s, f.scores, f.keypoints / s)


def _alone(boxes: np.ndarray, i: int) -> bool:
    """Whether face ``i`` of ``boxes`` has no other face within ``NEAR`` of its own size (centre to
    centre): nobody its face track could have been swapped with."""
    c, s = _centre(boxes[i]), _size(boxes[i])
    return all(np.linalg.norm(_centre(b) - c) > NEAR * s for j, b in enumerate(boxes) if j != i)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of each box of ``a (N, 4)`` with each of ``b (M, 4)``: ``(N, M)``."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


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


class SubjectTracker:
    """Forward tracker of the primary subject (module docstring).  ``update(frame)`` once per
    decoded frame, in order; returns a :class:`FrameTrack` (``kind`` "detected" or "absent").

    ``stack``: an :class:`~mime_fast.detect.OfflineStack` (or any object with ``detector``,
    ``landmarks``, ``embedder`` and optionally ``persons``).  ``detect_size``: longer side of the
    frame given to the face detector (``None``: the detector's own setting).  ``detect_every``:
    run the detector at least every this many frames (1: every frame, no tracking).  ``margin``: hull
    margin as a fraction of the face size.  ``hold_frames``: see :func:`fill_gaps`; used here to
    decide when a lost subject must be re-acquired by appearance.
    """

    def __init__(self, stack, *, detect_size: int | None = _D.detect_size, margin: float = _D.hull_margin_frac,
                 hold_frames: int = _hold_frames(_D.hold_s, 30), detect_every: int = _D.detect_every,
                 timers: dict | None = None):
        if int(detect_every) < 1:
            raise ValueError("detect_every must be >= 1")
        self.stack = stack
        self.detect_size = detect_size
        self.detect_every = int(detect_every)
        self.margin = float(margin)
        self.hold_frames = int(hold_frames)
        self.stats = TrackingStats(hold_frames=self.hold_frames)
        self.timers = timers if timers is not None else {}
        self._index = -1
        self._box = None  # last matched face box
        self._vel = np.zeros(2)
        self._last_seen = None
        self._ref_emb = None
        self._last_emb = None
        self._ref_hist = None
        self._size_ref = None
        self._crowded_at = -(10**9)
        self._partial_run = 0
        self._last_detect = -(10**9)  # index of the last frame the detector ran on
        self._anchor = None  # (box, keypoints, landmarks) of the subject's last full detection
        self._last_points = None  # the subject's landmarks in the previous frame (confident mesh)
        # identity thresholds: the embedder's own (cosines depend on the model), else dlib's defaults
        emb = getattr(stack, "embedder", None)
        self._min_cos = float(getattr(emb, "min_cos", MIN_COS))
        self._strong_cos = float(getattr(emb, "strong_cos", STRONG_COS))
        self._min_score = float(getattr(emb, "min_score", MIN_SCORE))
        self._vel_known = False  # the velocity has been measured (two matches)
        self._shot_start = 0  # first frame of the current camera shot
        self._faces = None  # FaceTracks, made on the first detection (needs the frame rate via hold_frames)
        self._subject_track = None  # stable id of the face track of the subject's last detection
        self._present_at, self._present_box = -(10**9), None  # his last detection, full or partial
        self._frame_ids = None  # stable face-track ids of this frame's detections
        self.last_faces = None  # (frame index, Faces) of the last frame the detector ran on
        self._head = None  # HeadFlow following his head since his last match (module docstring, 5.)
        self._seed = None  # (index, frame, box) of his last match: where a head estimate starts

    def new_shot(self) -> None:
        """The next frame given to :meth:`update` starts a new camera shot: where the subject was,
        how he moved and how large his face was are forgotten, and he is looked for again by
        identity (face embedding and body histogram) among every face, as after a loss; a shot
        without him gets no match."""
        self._shot_start = self._index + 1
        self._vel, self._vel_known = np.zeros(2), False
        self._anchor = self._last_points = None
        self._size_ref = None
        self._partial_run = 0
        self._crowded_at = -(10**9)
        if self._faces is not None:
            self._faces.new_shot()
        self._subject_track = None
        self._head = self._seed = None

    # -- timing helper (bench/bench_detect.py reads .timers)
    def _t(self, name, fn, *a):
        import time

        t = time.perf_counter()
        out = fn(*a)
        self.timers[name] = self.timers.get(name, 0.0) + time.perf_counter() - t
        return out

    def _detect(self, frame) -> Faces:
        return _detect_at(self.stack.detector, frame, self.detect_size)

    def _embed(self, frame, faces: Faces) -> np.ndarray:
        self.stats.embeddings += len(faces)
        return self._t("embed", self.stack.embedder.embed, frame, faces)

    def _hull(self, frame, faces: Faces, i: int, lmk=None) -> np.ndarray:
        if lmk is None:
            lmk = self._t("landmarks", self.stack.landmarks.landmarks, frame, faces[i])
            pts, q = lmk.points[0], float(lmk.quality[0])
        else:
            pts, q = lmk.points[i], float(lmk.quality[i])
        self._mesh_ok = q >= MIN_MESH_QUALITY
        if not self._mesh_ok:
            self.stats.mesh_fallbacks += 1
            pts = _box_ellipse(faces.boxes[i])
        self._height = float(pts[:, 1].max() - pts[:, 1].min())
        return np.asarray(pts, np.float32)

    def _accept(self, frame, faces: Faces, i: int, emb=None, lmk=None, partial: bool = False) -> FrameTrack:
        box = faces.boxes[i].astype(np.float64)
        if self._frame_ids is not None and i < len(self._frame_ids):
            self._subject_track = self._frame_ids[i]
        self._present_at, self._present_box = self._index, box
        if emb is not None:
            self._last_emb = emb
        wh = box[2:] - box[:2]
        small = self._size_ref is not None and np.any(wh < PARTIAL * self._wh_ref)
        if (partial or small) and self._size_ref is not None and self._partial_run < self.hold_frames:
            self._partial_run += 1
            pts = self._hull(frame, faces, i, lmk)
            self._last_points = None  # a partial face is not tracked: detect the next frame
            self.stats.partial += 1
            self.stats.detected += 1
            return FrameTrack(pts, box.astype(np.float32), "partial", None, self.margin * self._size_ref)
        self._partial_run = 0
        self._wh_ref = wh if self._size_ref is None else 0.8 * self._wh_ref + 0.2 * wh
        self._size_ref = float(self._wh_ref.max())
        if self._box is not None and self._last_seen is not None:
            gap = self._index - self._last_seen
            v = (_centre(box) - _centre(self._box)) / max(gap, 1)
            self._vel = 0.5 * self._vel + 0.5 * v if (gap == 1 and self._vel_known) else v
            self._vel_known = True
        self._box, self._last_seen = box, self._index
        pts = self._hull(frame, faces, i, lmk)
        self.stats.detected += 1
        if self._mesh_ok:
            self._anchor = (box, faces.keypoints[i].astype(np.float64), pts.astype(np.float64))
            self._last_points = pts
        else:
            self._anchor = self._last_points = None
        return FrameTrack(pts, box.astype(np.float32), "detected", self._height, self.margin * _size(box))

    def _can_track(self) -> bool:
        return (self._last_points is not None and self._anchor is not None and self._last_seen == self._index - 1
                and self._vel_known and float(np.linalg.norm(self._vel)) <= TRACK_MAX_SPEED * _size(self._box)
                and self._index - self._last_detect < self.detect_every
                and self._index - self._crowded_at > self.hold_frames
                and getattr(self.stack, "landmarks", None) is not None)

    def _region(self, points: np.ndarray, shift=(0.0, 0.0)) -> Faces:
        """Detector-like box and keypoints of the subject for landmarks ``points``: the last full
        detection's box and keypoints moved by the similarity taking its landmarks onto ``points``,
        then by ``shift`` px."""
        box, kps, ref = self._anchor
        k, m0, m1 = _similarity(ref, points)
        m1 = m1 + np.asarray(shift, np.float64)

        def move(p):
            z = k * ((p[..., 0] - m0[0]) + 1j * (p[..., 1] - m0[1]))
            return np.stack([z.real + m1[0], z.imag + m1[1]], -1)

        c = move(_centre(box))
        half = abs(k) * (np.asarray(box[2:]) - np.asarray(box[:2])) / 2
        return Faces(np.concatenate([c - half, c + half])[None], np.ones(1), move(kps)[None])

    def _track(self, frame) -> FrameTrack | None:
        """Landmarks on the face region predicted from the previous frame's landmarks and the
        subject's velocity (no detector); ``None`` when the mesh is not confident there.  When the
        landmarks found lie off the crop's centre by more than ``TRACK_RECENTRE`` of the face size
        (fast motion), the landmark model runs once more on the crop re-centred on them; if they are
        still off, or their shape differs from the last detection's by more than
        ``TRACK_MAX_SHAPE_CHANGE`` (:func:`_shape_change`), the frame is detected instead
        (``None``)."""
        region = self._region(self._last_points, self._vel)
        for attempt in range(2):
            lmk = self._t("landmarks", self.stack.landmarks.landmarks, frame, region)
            if float(lmk.quality[0]) < MIN_MESH_QUALITY:
                return None
            pts = np.asarray(lmk.points[0], np.float32)
            found = self._region(pts.astype(np.float64))
            off = np.linalg.norm(_centre(found.boxes[0]) - _centre(region.boxes[0])) / _size(region.boxes[0])
            if off <= TRACK_RECENTRE:
                break
            region = found
        else:  # the landmarks do not settle on a crop centred on them: detect instead
            return None
        if _shape_change(self._anchor[2], pts) > TRACK_MAX_SHAPE_CHANGE:
            return None  # not the face the detector last saw (or a mesh fitted to part of it)
        if abs(_size(found.boxes[0]) / _size(self._box) - 1.0) > TRACK_MAX_SCALE_CHANGE:
            return None  # faces do not grow or shrink this fast between two frames
        pbox = found.boxes[0].astype(np.float64)
        v = _centre(pbox) - _centre(self._box)
        self._vel = 0.5 * self._vel + 0.5 * v
        self._box, self._last_seen, self._last_points = pbox, self._index, pts
        self._height = float(pts[:, 1].max() - pts[:, 1].min())
        self.stats.detected += 1
        self.stats.tracked += 1
        return FrameTrack(pts, pbox.astype(np.float32), "detected", self._height, self.margin * _size(pbox))

    def finish(self, tracks: list[FrameTrack], shots=None) -> tuple[list[FrameTrack], TrackingStats]:
        """Complete the clip: ``tracks`` are this tracker's :meth:`update` results, one per frame in
        order; fills the gaps between detections inside each of the camera ``shots``
        (:class:`mime_fast.detect.shots.Shot` list; ``None``: one shot; :func:`fill_gaps`, in
        place) and the statistics that need the whole clip (median face height, frames without the
        subject, shots)."""
        fill_gaps(tracks, self.hold_frames, self.stats, shots=shots)
        hs = [t.height for t in tracks if t.kind == "detected"]
        self.stats.face_height = float(np.median(hs)) if hs else None
        if self.stats.status == "no subject":
            self.stats.without_subject = len(tracks)
        return tracks, self.stats

    def update(self, frame: np.ndarray) -> FrameTrack:
        """The subject in the next frame (``H x W x 3`` RGB, frames in order)."""
        found = self._match(frame)
        if found.kind in ("detected", "partial"):
            self._head, self._seed = None, (self._index, frame, found.box)
            return found
        box = self._t("head", self._head_estimate, frame)
        if box is None:
            return found
        return FrameTrack(_box_ellipse(box), box.astype(np.float32), "head", None, self.margin * _size(box))

    def _head_estimate(self, frame: np.ndarray) -> np.ndarray | None:
        """His head box in this frame, where his face was not matched: followed by its motion from his
        last match in this shot (:class:`~mime_fast.detect.head.HeadFlow`), ``None`` when there is
        none or the flow lost it, or when another face lies where it says his head is (someone
        stepped in front of him, or the estimate slid onto another person)."""
        if self._head is None:
            if self._seed is None or self._seed[0] != self._index - 1 or self._seed[0] < self._shot_start:
                return None
            self._head = HeadFlow(self._seed[1], self._seed[2])
            self._seed = None
        box = self._head.step(frame)
        faces = self.last_faces[1] if self.last_faces is not None and self.last_faces[0] == self._index else None
        if box is not None and faces is not None and len(faces) and float(_iou(faces.boxes, box).max()) >= TRACK_IOU:
            box = None
        if box is None:
            self._head = None
        return box

    def _match(self, frame: np.ndarray) -> FrameTrack:
        self._index += 1
        self.stats.frames += 1
        if self._can_track():
            tracked = self._track(frame)
            if tracked is not None:
                return tracked
        self._last_points = None
        self._last_detect = self._index
        self.stats.detector_runs += 1
        faces = self._t("detect", self._detect, frame)
        self.last_faces = (self._index, faces)  # what the detector found here (AllFaceTracker reuses it)
        if self._faces is None:  # hold_frames is half a second of frames: refresh every REEMBED_S
            self._faces = FaceTracks(max_gap=2 * self.detect_every, refresh=max(1, round(2 * REEMBED_S * self.hold_frames)))
        face_tracks = self._faces.assign(faces.boxes, self._index) if len(faces) else np.zeros(0, np.int64)
        self._frame_ids = [self._faces.ident(t) for t in face_tracks]
        if self._box is None:  # no subject selected yet
            if not len(faces):
                return FrameTrack()
            lmk = self._t("landmarks", self.stack.landmarks.landmarks, frame, faces)
            persons = None
            if getattr(self.stack, "persons", None) is not None:
                persons = self._t("persons", self.stack.persons.detect, frame)
            sel = select_primary_subject(frame, faces, lmk, persons)
            i = sel.index
            self.stats.status = "ok"
            self.stats.selected_frame = self._index
            self.stats.selection = sel.breakdown()
            if self.stack.embedder is not None:
                self._ref_emb = self._embed(frame, faces[i])[0]
                self._faces.remember(face_tracks[i], self._ref_emb, _size(faces.boxes[i]), self._index)
            self._ref_hist = body_histogram(frame, faces.boxes[i])
            return self._accept(frame, faces, i, lmk=lmk)
        if not len(faces):
            return FrameTrack()
        k = self._index - self._last_seen - 1  # frames missed since the last match
        s = _size(self._box)
        cp = _centre(self._box) + self._vel * (k + 1)
        # his head, followed by its motion through the frames his face was missed, says where he
        # is now: the gates need not widen for those frames
        lost = k >= self.hold_frames or self._last_seen < self._shot_start  # lost, or a new shot
        gk = min(k, 3)  # (a face several sizes away is not his because he was missed a while)
        if self._head is not None and self._head.box is not None:
            cp, gk = _centre(self._head.box), 0
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
                self._crowded_at = self._index
            crowded = self._index - self._crowded_at <= self.hold_frames
            if not lost and not crowded and len(near) == 1 and d[j] <= GATE + 0.25 * gk and 0.67 <= ratio[j] <= 1.5:
                return self._accept(frame, faces, j)
        cand = np.arange(len(faces)) if lost else near
        if not len(cand) or self._ref_emb is None:
            return FrameTrack()
        sub = faces[cand]
        # re-acquiring (lost, or a new shot): each face's identity about once per face track;
        # telling the subject from faces next to him: read now
        emb = self._faces.embeddings(self, frame, sub, face_tracks[cand], fresh=not lost)
        refs = [e for e in (self._ref_emb, self._last_emb) if e is not None]
        cos = np.nan_to_num(np.max(np.stack([emb @ r for r in refs]), axis=0), nan=-1.0)
        corr = np.array([_hist_corr(body_histogram(frame, b), self._ref_hist) for b in sub.boxes])
        score = W_EMBED * cos + W_HIST * np.maximum(corr, 0.0)
        best = int(np.argmax(score))
        if not (cos[best] >= self._strong_cos or (cos[best] >= self._min_cos and score[best] >= self._min_score)):
            # identity cannot decide: the face that continues his own face track (seen within the
            # hold, in this shot, overlapping where he just was) is his
            recent = self._present_at >= self._shot_start and self._index - self._present_at <= self.hold_frames
            if recent and self._present_box is not None:
                own = [j for j in range(len(cand)) if self._frame_ids[cand[j]] == self._subject_track
                       and (float(_iou(sub.boxes[j], self._present_box)[0, 0]) >= CONTINUITY_IOU
                            or _alone(faces.boxes, int(cand[j])))]
                if len(own) == 1 and not any(cos[j] >= self._strong_cos for j in range(len(cand)) if j != own[0]):
                    self.stats.continued += 1  # unconfirmed: masked as partial (with the hull around it)
                    return self._accept(frame, faces, int(cand[own[0]]), partial=True)
            if self._head is not None:  # his head, followed since he was last matched: a face there is his
                own = [j for j in range(len(cand)) if float(_iou(sub.boxes[j], self._head.box)[0, 0]) >= TRACK_IOU]
                if len(own) == 1 and not any(cos[j] >= self._strong_cos for j in range(len(cand)) if j != own[0]):
                    self.stats.continued += 1
                    return self._accept(frame, faces, int(cand[own[0]]), partial=True)
            return FrameTrack()
        if lost:
            self.stats.reacquired += 1
        else:
            self.stats.ambiguous += 1
        return self._accept(frame, faces, int(cand[best]), emb=emb[best])


def _similarity(src: np.ndarray, dst: np.ndarray) -> tuple[complex, np.ndarray, np.ndarray]:
    """Least-squares similarity ``p -> k (p - m0) + m1`` (``k`` complex: scale and rotation) taking
    the points ``src`` onto ``dst`` (same count and order)."""
    m0, m1 = src.mean(0), dst.mean(0)
    a = (src[:, 0] - m0[0]) + 1j * (src[:, 1] - m0[1])
    b = (dst[:, 0] - m1[0]) + 1j * (dst[:, 1] - m1[1])
    den = float(np.real(np.vdot(a, a)))
    k = complex(np.vdot(a, b) / den) if den > 0 else 1.0 + 0j
    return k, m0, m1


def _shape_change(ref: np.ndarray, pts: np.ndarray) -> float:
    """RMS distance between ``pts`` and the best similarity transform of ``ref`` onto them, over the
    height of ``pts`` (0: the same shape moved, turned or scaled)."""
    ref = np.asarray(ref, np.float64)
    pts = np.asarray(pts, np.float64)
    k, m0, m1 = _similarity(ref, pts)
    z = k * ((ref[:, 0] - m0[0]) + 1j * (ref[:, 1] - m0[1]))
    d2 = (z.real + m1[0] - pts[:, 0]) ** 2 + (z.imag + m1[1] - pts[:, 1]) ** 2
    return float(np.sqrt(d2.mean()) / max(float(np.ptp(pts[:, 1])), 1.0))


def fill_gaps(tracks: list[FrameTrack], hold_frames: int, stats: TrackingStats | None = None,
              shots=None) -> list[FrameTrack]:
    """Mask the frames between full detections, inside each camera shot (in place; returns
    ``tracks``).  ``shots``: :class:`mime_fast.detect.shots.Shot` list (``None``: the whole clip is
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
    for i in range(n):
        t = tracks[i]
        if t.kind == "detected":
            continue
        p, q = prev[i], nxt[i]
        a = i - p if p >= 0 else None
        b = q - i if q >= 0 else None
        near = min(x for x in (a, b) if x is not None)
        grow = min(near, hold_frames)
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
            m = (1 - w) * A.margin + w * B.margin + HOLD_GROWTH * s * grow
            fill = FrameTrack(pts.astype(np.float32), box, "interpolated", None, m)
        elif a is None or near <= hold_frames:  # before the shot's first detection: back to its start
            src = tracks[p] if (a is not None and a == near) else tracks[q]
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
    return out


def track_clip(frames, stack, *, hold_frames: int = _hold_frames(_D.hold_s, 30), fps: float = 30.0,
               **kw) -> tuple[list[FrameTrack], TrackingStats]:
    """Track the subject over an iterable of RGB frames, camera shots detected on the way
    (:class:`mime_fast.detect.shots.ShotDetector`, ``fps`` the frames' rate), then
    :func:`fill_gaps`.  Returns the per-frame tracks and the statistics."""
    from .shots import ShotDetector

    tr = SubjectTracker(stack, hold_frames=hold_frames, **kw)
    shots = ShotDetector(fps)
    tracks = []
    for f in frames:
        if shots.feed(f):
            tr.new_shot()
        tracks.append(tr.update(f))
    return tr.finish(tracks, shots=shots.finish())


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
    """Every face of the clip, for ``faces="all"`` (:class:`mime_fast.landmarks.SubjectDetection`
    runs it beside the :class:`SubjectTracker`, frame by frame).

    The face detector runs every ``detect_every`` frames on the frame downscaled to a longer side of
    ``detect_size`` (default :data:`ALL_FACES_DETECT_SIZE`, 640: larger than the subject's 384, so
    that bystanders' small faces are found); with ``detect_size`` equal to the subject tracker's
    (or ``None``), the subject tracker's detections are reused wherever it ran on the frame and
    the detector runs on the frames between.  The faces are associated into tracks by box overlap
    (:class:`FaceTracks`: greedy IoU >= ``TRACK_IOU``; a track unseen for ``max(2 * detect_every,
    hold_frames)`` frames ends, and every track ends at a camera cut, :meth:`new_shot`).  On each
    detection a face's hull is the landmark model's points (the mesh, as for the subject: the box
    ellipse where it is not confident), grown by ``margin`` x its size; faces smaller than
    :data:`ALL_FACES_MESH_MIN_SIZE` and those beyond the :data:`ALL_FACES_MAX_MESHES` largest of a
    frame get the box ellipse without the model.  The subject's own face reuses his landmarks from
    the subject tracker when the tracker detected him on that frame (same box).

    :meth:`finish` fills each track's gaps inside its shots exactly as the subject's
    (:func:`fill_gaps`: interpolated between detections up to ``2 * hold_frames`` apart, held
    ``hold_frames`` after the last, back to the shot's start before the first; never across a cut)
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
        import time

        t = time.perf_counter()
        out = fn(*a)
        self.timers[name] = self.timers.get(name, 0.0) + time.perf_counter() - t
        return out

    def _detect(self, frame) -> Faces:
        return _detect_at(self.stack.detector, frame, self.detect_size)

    def update(self, frame: np.ndarray, subject: SubjectTracker, found: FrameTrack) -> None:
        """The next frame (the one ``subject`` just tracked, with result ``found``)."""
        self._index += 1
        i = self._index
        own = self.detect_size is not None and self.detect_size != subject.detect_size
        if not own and subject.last_faces is not None and subject.last_faces[0] == subject._index:
            faces = subject.last_faces[1]  # the subject tracker's detection: the same size
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
        gaps filled inside its shots (:func:`fill_gaps`; ``shots``: the
        :class:`mime_fast.detect.shots.Shot` list, ``None``: one shot)."""
        from .shots import Shot

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
