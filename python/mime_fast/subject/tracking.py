"""Follow the primary subject through a clip and turn it into per-frame hull points.

(Over 400 lines on purpose: :class:`SubjectTracker` is one state machine -- selection, detection and
tracking, matching, landmarks, head estimate, shots --, and its rules are documented once, here,
beside the constants they name.  What is not its state lives next door: box and hull geometry in
:mod:`mime_fast.subject.geometry`, face tracks in :mod:`mime_fast.subject.face_tracks`, gap filling
and the statistics in :mod:`mime_fast.subject.gaps`, ``faces="all"`` in
:mod:`mime_fast.subject.all_faces`.)

:class:`SubjectTracker` runs forward over decoded RGB frames (any order-preserving source):

1. **Selection** -- on the first frame where the detector finds a face, every face gets dense
   landmarks and the person detector runs once; :func:`~mime_fast.subject.select_primary_subject`
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
   before the subject is selected, or after it was missed, are detected every frame.  A detected
   frame right after one where he was matched is detected only around him (``ROI_HALF = 4`` face
   sizes each way from where he is expected, at the whole frame's scale): the faces matching looks
   at all lie there (on the real crowd at 720p: 71 % of the detector's pixels over the clip).
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
     that, the one face that overlaps his head estimate (5.) by ``TRACK_IOU``; failing that, while
     he is searched for, the one face reading strongly as a view of him kept while he was followed
     (:data:`GALLERY_SIZE`; **re-acquired**); and failing that, in a shot returning to one he was
     followed in, the face where he stood there (6.).  These four are
     :attr:`SubjectTracker.UNDECIDED_RULES`, asked in that order.  Measured on the
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
     new normal (the person moved away, or a cut);
   * a **jump**: where the detector finds two faces or more, every one beginning a new face track
     (:class:`~mime_fast.subject.face_tracks.FaceTracks`: none overlaps a face of its last run,
     which found two or more too, his among them) and none overlapping his box of the previous
     frame by ``TRACK_IOU``, the picture jumped -- a cut the shot detector cannot see (a
     cut to the mirror image of the scene keeps its colours and most of its structure), a whip
     pan: where he stood says nothing, and another face may stand there now.  He is looked for
     again by identity, as after a loss (``TrackingStats.jumps``).  On the real hug cut to its
     mirror image, without this the other man, a size away from where he stood, was followed
     for 5 frames and he was left unmasked.
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
   match (:class:`mime_fast.subject.head.HeadFlow`: optical flow of corners of his face and hair)
   for as long as the flow holds, not for a fixed time: the frame is **head** (its hull the ellipse
   of the followed box, grown by the margin; :func:`fill_gaps` adds the interpolated or held hull
   where there is one: the flow can stick to something that moved in front of his face, and the
   detections around still say where he is).  It ends when the flow loses the points, the box leaves the frame, or
   another face is detected where it says his head is.

6. **Shots** -- the caller feeds every frame to a :class:`mime_fast.subject.shots.ShotDetector` too
   and calls :meth:`SubjectTracker.new_shot` where a new camera shot starts: the subject's position
   and motion are forgotten and he is re-acquired by identity, not by where he stood.  One
   exception, a **return** to a shot he was followed in up to its end (shot / reverse shot, a
   cutaway and back: the new shot's first frame is like that shot's last,
   :attr:`~mime_fast.subject.shots.ShotDetector.returns_to`): where identity cannot decide (7.)
   within ``hold_frames`` of the cut, the one face within ``GATE`` of where he stood there, of
   0.67 - 1.5 x his size there, with no other face within ``NEAR`` of it, a body histogram
   correlating at least ``RETURN_MIN_CORR = 0.5`` with his, and no other face scoring higher as him
   (face and body, 4.) is his (**returned**, counted in ``TrackingStats.returned``).  Measured on
   the real crowd cut away to the hug and back (``bench/privacy_variants.py``): SFace reads the boy at 0.1 - 0.35 after the
   cut back, so every face of the crowd was masked for the rest of the clip (about 70 frames).
   A **re-framed** return (a cut to a closer or wider framing of that shot,
   :attr:`~mime_fast.subject.shots.ShotDetector.return_map`) carries where he stood through the
   re-framing, where at least ``REFRAME_MIN_LOCAL`` of the features that found it lie within
   ``REFRAME_LOCAL`` face sizes of him; the face there must then lie within ``REFRAME_GATE`` of his
   carried size from it, the only face within ``GATE`` (the features place him: a crowd re-framed
   stands too close for the NEAR rule), with the same body and score gates.  Where the features
   find the same framing (his place moved less than half his size, his size less than 10 %: the
   picture changed otherwise, people moved), the return alike's gates apply.  Measured on the real
   crowd cut to a 1.6x closer framing: he read 0.33 there, and every face of the crowd was masked
   to the end (55 frames).  After a dissolve the return is told once its frames are no longer
   blends (:attr:`~mime_fast.subject.shots.ShotDetector.returned_late`, :meth:`SubjectTracker.returns`),
   and ``hold_frames`` count from there: on the real crowd cross-faded to the hug and back, every
   face of the crowd was masked to the end (41 frames after the blends).

7. **Searching, and faces nobody can tell apart** -- while he is searched for (a new shot before he
   is found in it, or lost for longer than ``hold_frames``) the detector sees the whole frame at a
   longer side of at least ``SEARCH_DETECT_SIZE = 640`` px (small and greyscale faces), and among
   two or more faces only a strong match (``cos >= strong_cos``) re-acquires him: each stranger is
   one more chance of a weak one (in the real crowd cut away and back, a bystander read 0.39
   against SFace's 0.38 and was taken for him).  A face whose identity reads unsure of him (from
   ``SEARCH_UNSURE`` of the weak threshold up to the strong one: a face turned away reads low
   whoever it is) is read again every ``SEARCH_GAP`` frames, up to ``SEARCH_READS`` reads
   (:mod:`~mime_fast.subject.face_tracks`): the real arm wrestler, back in profile after a corrupt
   stretch, read 0.33 on his first frame there and was strongly him on his 4th read.  Where no rule above finds him in a frame with
   candidates (every face while searching, the faces near where he is expected otherwise), every
   candidate is masked (**undecided**: the ellipse of its box grown by 20 %, plus the margin; on the
   frame before and the frame after too, inside the shot, and back to the shot's first frame when
   they are a new shot's first faces, found within the hold: :meth:`SubjectTracker.undecided_hulls`):
   the mask fails closed.  Measured with ``bench/privacy_variants.py`` on the real clips cut away
   and back, cross-faded away and back and zoom-cut: 70, 49 and 45 frames showed his face, and
   20 of the greyscale hug; none now.  The cost is bystanders masked until identity decides (frames counted in
   ``TrackingStats.undecided``).

8. **Unconfirmed** -- a re-acquisition by a weak identity match (the one face of a new shot, above
   ``min_cos``, below ``strong_cos``) may be a stranger, and once he is taken for the subject the
   faces away from him are not looked at: the subject walking in later would be shown.  So a face
   re-acquired weakly is followed *unconfirmed* until the end of the shot or a strong match: the
   detector sees the whole frame (no square around him, no tracking while other faces are about),
   every other face of a detected frame is masked beside him (undecided, with the frames before
   and after: :meth:`SubjectTracker.undecided_hulls`), and the one face reading strongly as him
   (the selection's embedding, the last accepted while he was confirmed, the views kept) is his,
   confirmed, whichever face it is (:meth:`SubjectTracker._confirming`).  A weak match's embedding
   is never kept as his (it would read the stranger strongly ever after), nor a view of him taken.
   The cost is the other faces of such a shot masked while SFace cannot confirm him; a shot where
   he stays alone costs nothing.

Frames where the subject is not matched are filled by :func:`fill_gaps` (see there), inside each
shot: interpolated between two detections up to ``2 * hold_frames`` apart, held back to the shot's
first frame before its first detection, held (with a margin that grows with the distance to the
nearest detection) up to ``hold_frames`` after a detection, otherwise absent.

:class:`TrackingStats` counts the frames per kind and is what a manifest carries.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..options import DETECT_DEFAULTS as _D, hold_frames as _hold_frames
from ..detect.align import arcface_transform
from .decision import SubjectObservation, TrackDecision, decide_tracks
from .face_tracks import MIN_EMBED_SIZE, REEMBED_S, SEARCH_UNSURE, TRACK_IOU, FaceTracks, _detect_at, _timed, face_contrast
from .gaps import HOLD_GROWTH, TrackingStats, fill_gaps
from .geometry import FrameTrack, _box_ellipse, _centre, _iou, _shape_change, _similarity, _size, grow_hull
from .head import HeadFlow
from .state import Follow, Identity, PassRecord, ShotState
from ..detect.interface import Faces
from .selection import select_primary_subject
from .shots import RETURN_SHOTS, ShotDetector

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
    "TRACK_RECENTRE",
    "TRACK_MAX_SHAPE_CHANGE",
    "TRACK_MAX_SPEED",
    "TRACK_MAX_SCALE_CHANGE",
    "CONTINUITY_IOU",
    "ROI_HALF",
    "ROI_MAX_AREA",
    "SEARCH_DETECT_SIZE",
    "GALLERY_SIZE",
    "REFRAME_GATE",
    "REFRAME_LOCAL",
    "REFRAME_MIN_LOCAL",
    "SubjectTracker",
    "body_histogram",
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
#: Detection near the subject: when he was matched on the previous frame, the detector sees only the
#: square of half-side ROI_HALF face sizes around where he is expected (at the full frame's scale),
#: unless that square covers more than ROI_MAX_AREA of the frame.  Matching only ever looks at faces
#: within NEAR (+ 0.75) face sizes of him, and at faces within NEAR of those (continuity): both lie
#: inside; a 200 x 200 crop costs RetinaFace about half of 384 x 216.
ROI_HALF = 4.0
ROI_MAX_AREA = 0.5
#: While the subject is searched for (a new shot before he is found in it, or lost for longer than
#: the hold), the detector sees the frame at a longer side of at least this many px: at 384 a boy
#: looking down in the real crowd at 720p (37 - 55 px) was missed after a cut back to him, and in
#: greyscale footage the hug's subject was (21 frames each).
SEARCH_DETECT_SIZE = 640
#: While he is searched for and no other rule decides (the frame's faces would all be masked as
#: undecided), the one face reading strongly as one of up to this many views of him taken while he
#: was followed is his (one view per ``hold_frames``, about half a second, on a full detection, not
#: in a crowd, each reading strongly as a view already kept; embedded only when a search first needs
#: them, which most clips never do: a view is kept as the part of the frame its embedding reads,
#: :func:`_view_crop`, and at most this many - 1 wait to be read): after a boy crossed in front of an
#: older man in the real crowd (a tight crop, where he is the subject), his face read 0.39 - 0.46
#: against the 60 px selection alone, never strong among three faces; against these views 0.57 -
#: 0.65 (the strangers 0.18 at most).  Only then: read before the rules of continuity and of his
#: followed head, they turned two of the greyscale hug's head-continued frames into full matches, and
#: the head frames between were interpolated into masks over half the other man's face.
GALLERY_SIZE = 8
#: The whole-clip decision (:mod:`mime_fast.subject.decision`) reads his views of the whole clip: the
#: views taken while he was followed (as above, about twice a second), at most this many, spread
#: over the clip (when more are taken, every other one is let go), and the embeddings of his strong
#: matches, as many.  They are embedded only where a decision needs them.
CLIP_VIEWS = 16
#: A return to a shot (module docstring, 6.): the least correlation of the body histogram below the
#: face found where he stood with his (HSV, :func:`body_histogram`).
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
#: Track continuity: when identity cannot tell the subject from a face next to him (a head turned
#: away reads as anybody to a face embedding), the face that continues his own face track and
#: overlaps his last box by at least this IoU is his, unless another face is strongly him.
CONTINUITY_IOU = 0.5


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


def _mapped_box(box: np.ndarray, m: np.ndarray | None, support: np.ndarray | None) -> np.ndarray | None:
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


def _view_crop(frame, faces: Faces, i: int) -> tuple[np.ndarray, Faces]:
    """The part of ``frame`` an embedding of face ``i`` of ``faces`` reads, copied, and that face
    moved into it: the source of its 112 px ArcFace chip (SFace's, :func:`arcface_transform`) and
    its box grown by half its size on each side (where dlib's ResNet aligns), clipped to the frame.
    A view taken this way (a few hundred kB) can be embedded frames later; SFace reads it as on
    the whole frame (cosine >= 0.9999, ``tests/test_shots.py``)."""
    H, W = frame.shape[:2]
    box = faces.boxes[i].astype(np.float64)
    g = 0.5 * _size(box)
    x0, y0, x1, y1 = box[0] - g, box[1] - g, box[2] + g, box[3] + g
    m = arcface_transform(faces.keypoints[i], 112)
    if np.all(np.isfinite(m)):  # the chip's corners in the frame
        a = np.vstack([m, [0.0, 0.0, 1.0]])
        q = (np.linalg.inv(a)[:2] @ np.array([[0, 112, 0, 112], [0, 0, 112, 112], [1, 1, 1, 1]], np.float64)).T
        x0, y0 = min(x0, q[:, 0].min()), min(y0, q[:, 1].min())
        x1, y1 = max(x1, q[:, 0].max()), max(y1, q[:, 1].max())
    # (+ 2 px: the bilinear taps of the chip's edge)
    cx0, cy0 = max(0, int(np.floor(x0)) - 2), max(0, int(np.floor(y0)) - 2)
    cx1, cy1 = min(W, int(np.ceil(x1)) + 3), min(H, int(np.ceil(y1)) + 3)
    if cx1 <= cx0 or cy1 <= cy0:  # (a box outside the frame: the whole frame)
        cx0, cy0, cx1, cy1 = 0, 0, W, H
    crop = np.array(frame[cy0:cy1, cx0:cx1], dtype=np.uint8, copy=True)
    off = np.array([cx0, cy0], np.float32)
    face = Faces(faces.boxes[i:i + 1] - np.tile(off, 2), faces.scores[i:i + 1], faces.keypoints[i:i + 1] - off)
    return crop, face


def _keep_spread(kept: list, item) -> None:
    """Append ``item`` to ``kept``; past :data:`CLIP_VIEWS` items, every other one is let go (what
    is kept stays spread over the clip, the same whatever the clip's length)."""
    kept.append(item)
    if len(kept) > CLIP_VIEWS:
        del kept[1::2]


def _best_cos(emb: np.ndarray, refs) -> np.ndarray:
    """Per row of ``emb``, its highest cosine with the embeddings ``refs`` (-1 for a face too small
    to embed: a NaN row)."""
    return np.nan_to_num(np.max(np.stack([emb @ r for r in refs]), axis=0), nan=-1.0)


def _hist_corr(a, b) -> float:
    import cv2

    if a is None or b is None:
        return 0.0
    return float(cv2.compareHist(a, b, cv2.HISTCMP_CORREL))


def _alone(boxes: np.ndarray, i: int) -> bool:
    """Whether face ``i`` of ``boxes`` has no other face within ``NEAR`` of its own size (centre to
    centre): nobody its face track could have been swapped with."""
    c, s = _centre(boxes[i]), _size(boxes[i])
    return all(np.linalg.norm(_centre(b) - c) > NEAR * s for j, b in enumerate(boxes) if j != i)


@dataclass(frozen=True)
class _Candidates:
    """One frame's faces that could be his, read against his identity: what the rules of
    :attr:`SubjectTracker.UNDECIDED_RULES` decide from.  ``cand``: their indices in ``faces`` (the
    frame's detections); ``sub``: ``faces[cand]``; ``emb``, ``cos``, ``corr``, ``score``: per
    candidate, the embedding, the best cosine against his, the body-colour correlation and the
    weighted score; ``searching``: he is searched for (lost, not even partly detected within the hold)."""

    faces: Faces
    cand: np.ndarray
    sub: Faces
    emb: np.ndarray
    cos: np.ndarray
    corr: np.ndarray
    score: np.ndarray
    searching: bool


@dataclass(frozen=True)
class _Pick:
    """A rule's answer: candidate ``j`` (index in ``cand``) is his, taken ``how``
    (:class:`SubjectObservation`), counted in :class:`TrackingStats`'s ``counter``; ``partial``:
    masked as a partial detection (unconfirmed); ``emb``: his embedding now (a confirming match)."""

    j: int
    how: str
    counter: str
    partial: bool = False
    emb: np.ndarray | None = None


class SubjectTracker:
    """Forward tracker of the primary subject (module docstring).  ``update(frame)`` once per
    decoded frame, in order; returns a :class:`FrameTrack` (``kind`` "detected" or "absent").

    ``stack``: an :class:`~mime_fast.detect.OfflineStack` (or any object with ``detector``,
    ``landmarks``, ``embedder`` and optionally ``persons``).  ``detect_size``: longer side of the
    frame given to the face detector (``None``: the detector's own setting).  ``detect_every``:
    run the detector at least every this many frames (1: every frame, no tracking).  ``margin``: hull
    margin as a fraction of the face size.  ``hold_frames``: see :func:`fill_gaps`; used here to
    decide when a lost subject must be re-acquired by appearance.

    What it knows between frames is four objects of :mod:`mime_fast.subject.state`: ``follow``
    (where he is), ``identity`` (who he is), ``shot`` (the shot he is followed in and those a new
    one may return to) and ``record`` (what pass 1 keeps for the decision over the whole clip;
    :attr:`his`, :attr:`undecided` and :attr:`decisions` read it).
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
        emb = getattr(stack, "embedder", None)
        # (identity thresholds: the embedder's own -- cosines depend on the model --, else dlib's defaults)
        self.identity = Identity(min_cos=float(getattr(emb, "min_cos", MIN_COS)),
                                 strong_cos=float(getattr(emb, "strong_cos", STRONG_COS)),
                                 min_score=float(getattr(emb, "min_score", MIN_SCORE)),
                                 unread=deque(maxlen=GALLERY_SIZE - 1))
        self.follow = Follow()
        self.shot = ShotState()
        self.record = PassRecord()
        self._faces = None  # FaceTracks, made on the first detection (needs the frame rate via hold_frames)
        self.last_faces = None  # (frame index, Faces) of the last frame the detector ran on
        self.last_faces_full = True  # whether it ran on the whole frame (else on the square around him)

    @property
    def his(self) -> dict[int, SubjectObservation]:
        """Frame -> the face taken for him there (:attr:`PassRecord.his <mime_fast.subject.state.PassRecord.his>`)."""
        return self.record.his

    @property
    def undecided(self) -> dict[int, list[np.ndarray]]:
        """Frame -> the grown hulls of the faces that could be his where none could be told to be
        (module docstring, 7.): masked beside him (:meth:`undecided_hulls`)."""
        return self.record.undecided

    @property
    def decisions(self) -> dict[int, TrackDecision]:
        """Face track -> its decision over the whole clip (:meth:`decide`)."""
        return self.record.decisions

    def new_shot(self, returns_to: int | None = None, return_map: np.ndarray | None = None,
                 return_support: np.ndarray | None = None) -> None:
        """The next frame given to :meth:`update` starts a new camera shot: where the subject was,
        how he moved and how large his face was are forgotten, and he is looked for again by
        identity (face embedding and body histogram) among every face, as after a loss; a shot
        without him gets no match.  ``returns_to``: the first frame of an earlier shot the new one
        returns to (:attr:`mime_fast.subject.shots.ShotDetector.returns_to`): where he stood at its
        end, if he was followed up to it, may tell which face is his (module docstring, 6.);
        ``return_map``: the transform from that shot's last frame to the new one (2 x 3, frame
        pixels; ``None``: the identity), ``return_support``: the points of that frame whose
        features support it (``None``: the whole pictures are alike), of which
        :data:`REFRAME_MIN_LOCAL` must lie around where he stood."""
        if (self.follow.present_box is not None and self.follow.present_at >= self.shot.shot_start
                and self._index - self.follow.present_at <= self.hold_frames):
            # his last full detection where it is that recent too (a partial one's box is a part of
            # his face: on the real crowd it was 0.7 x his size, so he stood 2 sizes from it)
            full = (self.follow.box is not None and self.follow.last_seen >= self.shot.shot_start
                    and self._index - self.follow.last_seen <= self.hold_frames)
            self.shot.shot_boxes[self.shot.shot_start] = np.array(self.follow.box if full else self.follow.present_box, np.float64)
            while len(self.shot.shot_boxes) > RETURN_SHOTS:
                del self.shot.shot_boxes[next(iter(self.shot.shot_boxes))]
        self.shot.shot_start = self._index + 1
        self.shot.shot_starts.append(self.shot.shot_start)
        self.follow.sure = False
        self.returns(returns_to, return_map, return_support)
        self.follow.vel, self.follow.vel_known = np.zeros(2), False
        self.follow.anchor = self.follow.last_points = None
        self.follow.size_ref = None
        self.follow.partial_run = 0
        self.follow.crowded_at = -(10**9)
        if self._faces is not None:
            self._faces.new_shot(self.shot.shot_start)
        self.follow.subject_track = None
        self.follow.head = self.follow.seed = None
        self.shot.unconfirmed = False

    def returns(self, returns_to: int | None, return_map: np.ndarray | None = None,
                return_support: np.ndarray | None = None) -> None:
        """The current shot returns to the shot that began at frame ``returns_to`` (``None``: to
        none), with ``return_map`` and ``return_support`` as :meth:`new_shot` takes them, told from
        the next frame given to :meth:`update` on: at a cut, by :meth:`new_shot`; after a dissolve,
        once its frames are no longer blends (:attr:`mime_fast.subject.shots.ShotDetector.returned_late`).
        Where he stood there may tell which face is his for ``hold_frames`` from then on, while he
        is not found in the shot otherwise (module docstring, 6.)."""
        box = None if returns_to is None else self.shot.shot_boxes.get(int(returns_to))
        self.shot.returning = None if box is None else _mapped_box(box, return_map, return_support)
        # re-framed: found on features, and he moved with the framing (a change of scale or a shift
        # of half his size); the same framing found on features gets the alike return's gates (the
        # people in it may have moved since)
        self.shot.reframed = self.shot.returning is not None and return_support is not None and (
            abs(_size(self.shot.returning) / _size(box) - 1.0) >= 0.1
            or float(np.linalg.norm(_centre(self.shot.returning) - _centre(box))) >= 0.5 * _size(box))
        self.shot.return_from = self._index + 1
        if self.shot.returning is not None:
            self.shot.returning_at[self.shot.shot_start] = self.shot.returning.copy()

    # -- timing helper (bench/bench_detect.py reads .timers)
    def _t(self, name, fn, *a):
        return _timed(self.timers, name, fn, *a)

    def _detect(self, frame, roi: tuple[int, int, int, int] | None = None) -> Faces:
        """The faces of ``frame`` in frame pixels (``roi``: only those inside it, :func:`_detect_at`)."""
        return _detect_at(self.stack.detector, frame, self.detect_size, roi)

    def _roi(self, frame) -> tuple[int, int, int, int] | None:
        """Where the detector looks for him this frame: the square of :data:`ROI_HALF` face sizes
        around where he is expected, when he was matched on the previous frame of this shot and the
        square is under :data:`ROI_MAX_AREA` of the frame; else ``None`` (the whole frame).  Always
        ``None`` for a stack whose ``crop_detection`` is false (:class:`~mime_fast.detect.batching.BrokeredStack`:
        crops of every size would each be a forward of their own, where whole frames of one size
        are batched across clips)."""
        if (self.follow.box is None or self.follow.last_seen != self._index - 1 or self.follow.last_seen < self.shot.shot_start
                or self.shot.unconfirmed):  # (unconfirmed: every face of the frame is looked at)
            return None
        if not getattr(self.stack, "crop_detection", True):  # a stack batched across clips wants one input shape
            return None
        H, W = frame.shape[:2]
        c, half = _centre(self.follow.box) + self.follow.vel, ROI_HALF * _size(self.follow.box)
        x0, y0 = max(0, int(np.floor(c[0] - half))), max(0, int(np.floor(c[1] - half)))
        x1, y1 = min(W, int(np.ceil(c[0] + half))), min(H, int(np.ceil(c[1] + half)))
        if x1 - x0 < 16 or y1 - y0 < 16 or (x1 - x0) * (y1 - y0) > ROI_MAX_AREA * H * W:
            return None
        return x0, y0, x1, y1

    def _embed(self, frame, faces: Faces) -> np.ndarray:
        self.stats.embeddings += len(faces)
        return self._t("embed", self.stack.embedder.embed, frame, faces)

    def _hull(self, frame, faces: Faces, i: int, lmk=None) -> np.ndarray:
        if lmk is None:
            lmk = self._t("landmarks", self.stack.landmarks.landmarks, frame, faces[i])
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
        ``"ambiguous"``, ``"continued"``, ``"head"``, ``"returned"``) make him unsure."""
        box = faces.boxes[i].astype(np.float64)
        self.follow.taken = (self._index, i)
        ident = None
        if self.follow.frame_ids is not None and i < len(self.follow.frame_ids):
            self.follow.subject_track = ident = self.follow.frame_ids[i]
        if how in ("selected", "identity", "views", "confirmed"):
            self.follow.sure = True
        elif how != "near":
            self.follow.sure = False
        self.his[self._index] = SubjectObservation(ident, self.follow.sure and not self.shot.unconfirmed, how, box)
        self.follow.present_at, self.follow.present_box = self._index, box
        if emb is not None:
            self.identity.last_emb = emb
            if how in ("identity", "views", "confirmed"):
                _keep_spread(self.identity.his_embs, (np.asarray(emb, np.float32), face_contrast(frame, box)))
        wh = box[2:] - box[:2]
        small = self.follow.size_ref is not None and np.any(wh < PARTIAL * self.follow.wh_ref)
        if (partial or small) and self.follow.size_ref is not None and self.follow.partial_run < self.hold_frames:
            self.follow.partial_run += 1
            pts = self._hull(frame, faces, i, lmk)
            self.follow.last_points = None  # a partial face is not tracked: detect the next frame
            self.stats.partial += 1
            self.stats.detected += 1
            return FrameTrack(pts, box.astype(np.float32), "partial", None, self.margin * self.follow.size_ref)
        self.follow.partial_run = 0
        self.follow.wh_ref = wh if self.follow.size_ref is None else 0.8 * self.follow.wh_ref + 0.2 * wh
        self.follow.size_ref = float(self.follow.wh_ref.max())
        if self.follow.box is not None and self.follow.last_seen is not None and self.follow.last_seen >= self.shot.shot_start:
            # (his velocity is measured inside the shot: where he stood before a cut says nothing)
            gap = self._index - self.follow.last_seen
            v = (_centre(box) - _centre(self.follow.box)) / max(gap, 1)
            self.follow.vel = 0.5 * self.follow.vel + 0.5 * v if (gap == 1 and self.follow.vel_known) else v
            self.follow.vel_known = True
        self.follow.box, self.follow.last_seen = box, self._index
        pts = self._hull(frame, faces, i, lmk)
        self.stats.detected += 1
        if self.follow.mesh_ok:
            self.follow.anchor = (box, faces.keypoints[i].astype(np.float64), pts.astype(np.float64))
            self.follow.last_points = pts
            self._keep_view(frame, faces, i)
        else:
            self.follow.anchor = self.follow.last_points = None
        return FrameTrack(pts, box.astype(np.float32), "detected", self.follow.height, self.margin * _size(box))

    def _keep_view(self, frame, faces: Faces, i: int) -> None:
        """Take a view of him on this full detection for the views kept of him (:data:`GALLERY_SIZE`):
        about twice a second, never near other faces (his track could have crossed to one).  Only
        the part of the frame his embedding reads is kept (:func:`_view_crop`); it is embedded when
        a search needs the views (:meth:`views`), which most clips never do."""
        if (self.identity.ref_emb is None or getattr(self.stack, "embedder", None) is None or self.shot.unconfirmed
                or self._index - self.identity.gallery_at < self.hold_frames
                or self._index - self.follow.crowded_at <= self.hold_frames
                or _size(faces.boxes[i]) < MIN_EMBED_SIZE):
            return
        self.identity.gallery_at = self._index
        # [crop, face, embedding, found for sure, contrast]
        view = [*_view_crop(frame, faces, i), None, self.follow.sure, face_contrast(frame, faces.boxes[i])]
        self.identity.unread.append(view)
        _keep_spread(self.identity.clip_views, view)

    def views(self) -> list[np.ndarray]:
        """The views kept of him (:data:`GALLERY_SIZE` - 1 besides the selection's embedding), the
        views taken since the last call read first, in the order they were taken: each is kept only
        when it reads strongly as a view already kept (the selection's first), so the views follow
        his pose and size without drifting to another person."""
        while self.identity.unread:
            view = self.identity.unread.popleft()
            e = view[2] = np.asarray(self._embed(view[0], view[1])[0], np.float32)
            if not np.all(np.isfinite(e)):
                continue
            if max(float(e @ g) for g in (self.identity.ref_emb, *self.identity.gallery)) >= self.identity.strong_cos:
                self.identity.gallery.append(e)
                if len(self.identity.gallery) > GALLERY_SIZE - 1:  # (the selection's embedding is the first view)
                    self.identity.gallery.pop(0)
        return self.identity.gallery

    def _undecided(self, faces: Faces, idents: list) -> FrameTrack:
        """No face of ``faces`` (the candidates: every face that could be his; of face tracks
        ``idents``) can be told to be his: each is masked by its box ellipse, grown by the margin
        (module docstring, 7.); the subject himself is not matched in this frame."""
        self._mask_undecided(faces.boxes, idents)
        if (self.record.undecided_shot != self.shot.shot_start and self._index - self.shot.shot_start <= self.hold_frames
                and max(self.follow.last_seen, self.follow.present_at) < self.shot.shot_start):
            self.record.undecided_back[self._index] = (self.shot.shot_start, faces.boxes.copy(), list(idents))
        self.record.undecided_shot = self.shot.shot_start
        return FrameTrack()

    def undecided_hulls(self, frames: int, shots=None) -> list[list[np.ndarray]]:
        """Per frame (``frames`` of them), the masks of the faces that could be the subject where
        identity could not tell which is (:meth:`_undecided`), those of the frame before and the
        frame after in the same shot too (a face the detector misses for a frame stays masked);
        ``shots``: the :class:`~mime_fast.subject.shots.Shot` list (``None``: one shot).

        A shot's first undecided frame, when the subject was not found before it in the shot and
        it lies within ``hold_frames`` of the shot's first frame, is also held back to that frame,
        as :func:`~mime_fast.subject.gaps.fill_gaps` holds his own first detection: the detector
        often misses the first frames after a cut (motion blur, a face cut by the frame's edge: on
        the real arm wrestling clip his face showed for 2 frames after the cut before it was
        found).  The held ellipses grow by ``HOLD_GROWTH`` of the face size per frame."""
        out: list[list[np.ndarray]] = [[] for _ in range(frames)]
        spans = [(0, frames)] if not shots else [(int(s.start), int(s.end)) for s in shots]

        def same_shot(i: int, k: int) -> bool:
            return 0 <= k < frames and any(s0 <= i < s1 and s0 <= k < s1 for s0, s1 in spans)

        def kept(ident, i: int | None = None) -> bool:
            # (a face track decided another's over the whole clip is not masked; nor, where it was
            # made his own mask there (:meth:`decide`), one decided his)
            d = self.decisions.get(ident) if ident is not None else None
            return (d is None or d.decision != "other") and (i, ident) not in self.record.identified

        for i, hulls in sorted(self.undecided.items()):
            hulls = [h for h, t in zip(hulls, self.record.undecided_ids.get(i, [None] * len(hulls))) if kept(t, i)]
            for k in (i - 1, i, i + 1):
                if hulls and same_shot(i, k):
                    out[k].extend(hulls)
        for i, (start, boxes, idents) in sorted(self.record.undecided_back.items()):
            boxes = [b for b, t in zip(boxes, idents) if kept(t)]
            for k in range(start, i - 1):
                if same_shot(i, k):
                    out[k].extend(grow_hull(_box_ellipse(b), (self.margin + HOLD_GROWTH * (i - k)) * _size(b))
                                  for b in boxes)
        return out

    def decide(self, tracks: list[FrameTrack]) -> dict[int, TrackDecision]:
        """The whole-clip decision (:mod:`mime_fast.subject.decision`): each face track that was
        masked as undecided is decided his, another's or still undecided, with the evidence of the
        whole clip; :meth:`undecided_hulls` then masks only those that could be his.  ``tracks``:
        this tracker's :meth:`update` results, one per frame: where a track decided his by
        identity was undecided and he was not found, the frame becomes his detection (its box's
        ellipse, as a detection without a confident mesh; ``stats.identified``), so that his
        gaps are filled around it (:func:`fill_gaps`) and his shot counts him.  Sets
        :attr:`decisions`, ``stats.undecided`` (the frames where a face stays masked as undecided;
        ``stats.undecided_pass1``: where pass 1 could not tell) and ``stats.tracks`` (each decision
        with its evidence).  :meth:`finish` calls it."""
        frames = len(tracks)
        undecided: dict[int, list[int]] = {}
        for i, idents in sorted(self.record.undecided_ids.items()):
            for t in idents:
                if t is not None:
                    undecided.setdefault(t, []).append(i)
        self.stats.undecided_pass1 = len(self.undecided)
        records = self._faces.records if self._faces is not None else None
        if not undecided or not records:
            self.record.decisions = {}
            return self.decisions
        starts = sorted(set(self.shot.shot_starts))
        ends = {a: (starts[k + 1] if k + 1 < len(starts) else frames) for k, a in enumerate(starts)}
        views = None
        if self.identity.ref_emb is not None and getattr(self.stack, "embedder", None) is not None:
            views = self._whole_clip_views()
        self.record.decisions = decide_tracks(records, undecided, self.his, views, min_cos=self.identity.min_cos,
                                       strong_cos=self.identity.strong_cos, shot_ends=ends, returning=self.shot.returning_at,
                                       weak_shots=self.shot.weak_shots, hold=self.hold_frames)
        for t, d in sorted(self.decisions.items()):
            if d.rule != "identity: him":
                continue
            for i in undecided[t]:
                box = records[t].box_at(i)
                if box is None or tracks[i].kind != "absent":
                    continue
                pts = _box_ellipse(box)
                tracks[i] = FrameTrack(pts, box.astype(np.float32), "detected", float(np.ptp(pts[:, 1])),
                                       self.margin * _size(box))
                self.record.identified.add((i, t))
                self.stats.detected += 1
                self.stats.identified += 1
        other = {t for t, d in self.decisions.items() if d.decision == "other"}
        self.stats.undecided = sum(
            any((t is None or t not in other) and (i, t) not in self.record.identified for t in self.record.undecided_ids.get(i, [None]))
            for i in self.undecided)
        self.stats.tracks = [d.as_dict() for _, d in sorted(self.decisions.items())]
        return self.decisions

    def _whole_clip_views(self) -> tuple[np.ndarray, np.ndarray] | None:
        """His embeddings over the whole clip for :meth:`decide`, and their faces' contrasts
        (:func:`~mime_fast.subject.face_tracks.face_contrast`): the selection's, his strong matches'
        and the views taken of him while he was found for sure (:data:`CLIP_VIEWS`), those not read
        yet embedded now."""
        out = [(np.asarray(self.identity.ref_emb, np.float32), self.identity.ref_contrast), *self.identity.his_embs]
        for view in self.identity.clip_views:
            if not view[3]:
                continue
            if view[2] is None:
                view[2] = np.asarray(self._embed(view[0], view[1])[0], np.float32)
            out.append((view[2], view[4]))
        out = [(e, c) for e, c in out if np.all(np.isfinite(e))]
        if not out:
            return None
        return np.stack([e for e, _ in out]), np.array([c for _, c in out], np.float64)

    def _can_track(self) -> bool:
        return (self.follow.last_points is not None and self.follow.anchor is not None and self.follow.last_seen == self._index - 1
                and self.follow.vel_known and float(np.linalg.norm(self.follow.vel)) <= TRACK_MAX_SPEED * _size(self.follow.box)
                and self._index - self.follow.last_detect < self.detect_every
                and self._index - self.follow.crowded_at > self.hold_frames
                and not (self.shot.unconfirmed and self._index - self.shot.others_at <= self.hold_frames)
                and getattr(self.stack, "landmarks", None) is not None)

    def _region(self, points: np.ndarray, shift=(0.0, 0.0)) -> Faces:
        """Detector-like box and keypoints of the subject for landmarks ``points``: the last full
        detection's box and keypoints moved by the similarity taking its landmarks onto ``points``,
        then by ``shift`` px."""
        box, kps, ref = self.follow.anchor
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
        region = self._region(self.follow.last_points, self.follow.vel)
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
        if _shape_change(self.follow.anchor[2], pts) > TRACK_MAX_SHAPE_CHANGE:
            return None  # not the face the detector last saw (or a mesh fitted to part of it)
        if abs(_size(found.boxes[0]) / _size(self.follow.box) - 1.0) > TRACK_MAX_SCALE_CHANGE:
            return None  # faces do not grow or shrink this fast between two frames
        pbox = found.boxes[0].astype(np.float64)
        v = _centre(pbox) - _centre(self.follow.box)
        self.follow.vel = 0.5 * self.follow.vel + 0.5 * v
        self.follow.box, self.follow.last_seen, self.follow.last_points = pbox, self._index, pts
        self.follow.height = float(pts[:, 1].max() - pts[:, 1].min())
        self.his[self._index] = SubjectObservation(None, self.follow.sure and not self.shot.unconfirmed, "tracked", pbox)
        self.stats.detected += 1
        self.stats.tracked += 1
        return FrameTrack(pts, pbox.astype(np.float32), "detected", self.follow.height, self.margin * _size(pbox))

    def finish(self, tracks: list[FrameTrack], shots=None) -> tuple[list[FrameTrack], TrackingStats]:
        """Complete the clip: ``tracks`` are this tracker's :meth:`update` results, one per frame in
        order; fills the gaps between detections inside each of the camera ``shots``
        (:class:`mime_fast.subject.shots.Shot` list; ``None``: one shot; :func:`fill_gaps`, in
        place) and the statistics that need the whole clip (median face height, frames without the
        subject, shots), after the decision over the whole clip (:meth:`decide`)."""
        self.decide(tracks)
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
            self.follow.head, self.follow.seed = None, (self._index, frame, found.box)
            return found
        box = self._t("head", self._head_estimate, frame)
        if box is None:
            return found
        return FrameTrack(_box_ellipse(box), box.astype(np.float32), "head", None, self.margin * _size(box))

    def _jumped(self) -> None:
        """The picture jumped (module docstring, 3.): he is looked for again by identity, as after a
        loss, from this frame on -- where he stood, how he moved and his face track are forgotten."""
        self.stats.jumps += 1
        self.follow.last_seen = self.follow.present_at = self._index - self.hold_frames - 1
        self.follow.subject_track = None
        self.follow.vel, self.follow.vel_known = np.zeros(2), False
        self.follow.anchor = self.follow.last_points = None
        self.follow.partial_run = 0
        self.follow.head = self.follow.seed = None

    def _head_estimate(self, frame: np.ndarray) -> np.ndarray | None:
        """His head box in this frame, where his face was not matched: followed by its motion from his
        last match in this shot (:class:`~mime_fast.subject.head.HeadFlow`), ``None`` when there is
        none or the flow lost it, or when another face lies where it says his head is (someone
        stepped in front of him, or the estimate slid onto another person)."""
        if self.follow.head is None:
            if self.follow.seed is None or self.follow.seed[0] != self._index - 1 or self.follow.seed[0] < self.shot.shot_start:
                return None
            self.follow.head = HeadFlow(self.follow.seed[1], self.follow.seed[2])
            self.follow.seed = None
        box = self.follow.head.step(frame)
        faces = self.last_faces[1] if self.last_faces is not None and self.last_faces[0] == self._index else None
        if box is not None and faces is not None and len(faces) and float(_iou(faces.boxes, box).max()) >= TRACK_IOU:
            box = None
        if box is None:
            self.follow.head = None
        return box

    def _match(self, frame: np.ndarray) -> FrameTrack:
        self._index += 1
        self.stats.frames += 1
        if self._can_track():
            tracked = self._track(frame)
            if tracked is not None:
                return tracked
        self.follow.last_points = None
        before, before_ids = self.follow.last_detect, self.follow.detected_ids  # (full-frame runs only)
        self.follow.last_detect = self._index
        self.stats.detector_runs += 1
        roi = self._roi(frame)
        # searched for (lost, as matching below says, and not even partly detected within the hold)
        searching = self.follow.box is not None and all(
            at < self.shot.shot_start or self._index - at - 1 >= self.hold_frames for at in (self.follow.last_seen, self.follow.present_at))
        if searching and self.detect_size is not None and self.detect_size < SEARCH_DETECT_SIZE:
            faces = self._t("detect", _detect_at, self.stack.detector, frame, SEARCH_DETECT_SIZE, None)
        else:
            faces = self._t("detect", self._detect, frame, roi)
        self.last_faces = (self._index, faces)  # what the detector found here (AllFaceTracker reuses it)
        self.last_faces_full = roi is None
        if self._faces is None:  # hold_frames is half a second of frames: refresh every REEMBED_S
            # overlap with the last box only: near other faces this tracker detects every frame, and
            # the motion-predicted association of faces="all" gave his track to a crosser on the
            # real crowd (a half-hidden box's shifted centre is a false velocity): 83 frames lost
            self._faces = FaceTracks(max_gap=2 * self.detect_every, refresh=max(1, round(2 * REEMBED_S * self.hold_frames)),
                                     predict=False, by_distance=False, record=True)
            self._faces.shot = self.shot.shot_start
        face_tracks = self._faces.assign(faces.boxes, self._index) if len(faces) else np.zeros(0, np.int64)
        self.follow.frame_ids = [self._faces.ident(t) for t in face_tracks]
        # a jump (module docstring, 3.): two faces or more in this run and the last, his among those,
        # none continuing a track of the last run, none where he was in the previous frame
        self.follow.detected_ids = self.follow.frame_ids
        if (len(faces) >= 2 and len(before_ids) >= 2 and self.follow.subject_track in before_ids
                and self._index - before <= self._faces.max_gap and not set(self.follow.frame_ids) & set(before_ids)
                and self.follow.box is not None and self.follow.last_seen == self._index - 1
                and float(_iou(faces.boxes, self.follow.box).max()) < TRACK_IOU):
            self._jumped()
        if self.shot.unconfirmed and not searching and len(faces) >= 2:
            self.shot.others_at = self._index
            found = self._confirming(frame, faces, face_tracks)
            if found is not None:
                return found
        found = self._decide(frame, faces, face_tracks, searching)
        if self.shot.unconfirmed and len(faces):
            self._beside(faces)
        return found

    def _decide(self, frame, faces: Faces, face_tracks: np.ndarray, searching: bool) -> FrameTrack:
        """The subject among ``faces`` (this frame's detections, of face tracks ``face_tracks``):
        selection, the geometric match, identity, and the rules where identity cannot decide (module
        docstring, 1. - 7.).  ``searching``: he is searched for (lost, and not even partly detected
        within the hold)."""
        if self.follow.box is None:  # no subject selected yet
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
                self.identity.ref_emb = self._embed(frame, faces[i])[0]
                self.identity.ref_contrast = face_contrast(frame, faces.boxes[i])
                self._faces.remember(face_tracks[i], self.identity.ref_emb, _size(faces.boxes[i]), self._index, self.identity.ref_contrast)
            self.identity.ref_hist = body_histogram(frame, faces.boxes[i])
            return self._accept(frame, faces, i, lmk=lmk, how="selected")
        if not len(faces):
            return FrameTrack()
        k = self._index - self.follow.last_seen - 1  # frames missed since the last match
        s = _size(self.follow.box)
        cp = _centre(self.follow.box) + self.follow.vel * (k + 1)
        # his head, followed by its motion through the frames his face was missed, says where he
        # is now: the gates need not widen for those frames
        lost = k >= self.hold_frames or self.follow.last_seen < self.shot.shot_start  # lost, or a new shot
        gk = min(k, 3)  # (a face several sizes away is not his because he was missed a while)
        if self.follow.head is not None and self.follow.head.box is not None:
            cp, gk = _centre(self.follow.head.box), 0
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
                self.follow.crowded_at = self._index
            crowded = self._index - self.follow.crowded_at <= self.hold_frames
            if not lost and not crowded and len(near) == 1 and d[j] <= GATE + 0.25 * gk and 0.67 <= ratio[j] <= 1.5:
                return self._accept(frame, faces, j)
        cand = np.arange(len(faces)) if lost else near
        if not len(cand):
            return FrameTrack()
        sub = faces[cand]
        if self.identity.ref_emb is None:  # no identity to tell him by
            return self._undecided(sub, [self.follow.frame_ids[c] for c in cand])
        # re-acquiring (lost, or a new shot): each face's identity about once per face track (up to
        # SEARCH_READS times while it reads unsure of him);
        # telling the subject from faces next to him: read now
        emb = self._faces.embeddings(self, frame, sub, face_tracks[cand], fresh=not lost, search=lost)
        refs = [e for e in (self.identity.ref_emb, self.identity.last_emb) if e is not None]
        cos = _best_cos(emb, refs)
        if lost:  # (faces read unsure of him are read again while he is searched for)
            self._faces.unsure(face_tracks[cand], (cos >= SEARCH_UNSURE * self.identity.min_cos) & (cos < self.identity.strong_cos))
        corr = np.array([_hist_corr(body_histogram(frame, b), self.identity.ref_hist) for b in sub.boxes])
        score = W_EMBED * cos + W_HIST * np.maximum(corr, 0.0)
        best = int(np.argmax(score))
        # re-acquiring among several faces: only a strong match is his (each stranger is one more
        # chance of a weak one: a bystander read 0.39 against the subject's 0.38 threshold)
        weak_ok = not (searching and len(cand) >= 2)
        if not (cos[best] >= self.identity.strong_cos
                or (weak_ok and cos[best] >= self.identity.min_cos and score[best] >= self.identity.min_score)):
            # identity cannot decide: its rules, in their order (module docstring, 3., the last bullet but one)
            candidates = _Candidates(faces, cand, sub, emb, cos, corr, score, searching)
            for rule in self.UNDECIDED_RULES:
                pick = rule(self, candidates)
                if pick is not None:
                    setattr(self.stats, pick.counter, getattr(self.stats, pick.counter) + 1)
                    if pick.how == "views":
                        self.shot.unconfirmed = False
                    return self._accept(frame, faces, int(cand[pick.j]), emb=pick.emb, partial=pick.partial,
                                        how=pick.how)
            return self._undecided(sub, [self.follow.frame_ids[c] for c in cand])
        if lost:
            self.stats.reacquired += 1
        else:
            self.stats.ambiguous += 1
        strong = bool(cos[best] >= self.identity.strong_cos)
        if strong or lost:  # re-acquired by a weak match: he is followed unconfirmed (module docstring, 8.)
            self.shot.unconfirmed = not strong
        # (an unconfirmed face's embedding is not his to compare with: it may be a stranger's)
        keep = strong or not self.shot.unconfirmed
        if self.shot.unconfirmed:
            self.shot.weak_shots.add(self.shot.shot_start)
        return self._accept(frame, faces, int(cand[best]), emb=emb[best] if keep else None,
                            how="identity" if strong else "weak" if lost else "ambiguous")

    # -- where identity cannot decide: the rules of _decide, in order (UNDECIDED_RULES) ----------------

    def _rule_own_track(self, c: _Candidates) -> _Pick | None:
        """The face that continues his own face track (seen within the hold, in this shot,
        overlapping where he just was, or alone there) is his, unless another reads strongly as him:
        unconfirmed, masked as partial (with the hull around it)."""
        recent = self.follow.present_at >= self.shot.shot_start and self._index - self.follow.present_at <= self.hold_frames
        if not recent or self.follow.present_box is None:
            return None
        own = [j for j in range(len(c.cand)) if self.follow.frame_ids[c.cand[j]] == self.follow.subject_track
               and (float(_iou(c.sub.boxes[j], self.follow.present_box)[0, 0]) >= CONTINUITY_IOU
                    or _alone(c.faces.boxes, int(c.cand[j])))]
        ok = len(own) == 1 and not self._another_strong(c.cos, own[0])
        return _Pick(own[0], "continued", "continued", partial=True) if ok else None

    def _rule_head(self, c: _Candidates) -> _Pick | None:
        """His head, followed since he was last matched (:class:`HeadFlow`): the one face there is his."""
        if self.follow.head is None:
            return None
        own = [j for j in range(len(c.cand)) if float(_iou(c.sub.boxes[j], self.follow.head.box)[0, 0]) >= TRACK_IOU]
        ok = len(own) == 1 and not self._another_strong(c.cos, own[0])
        return _Pick(own[0], "head", "continued", partial=True) if ok else None

    def _rule_views(self, c: _Candidates) -> _Pick | None:
        """Searched for: the one face reading strongly as a view of him kept while he was followed
        (:meth:`_by_views`) is his, and confirms him."""
        j = self._by_views(c.emb, c.cos) if c.searching else None
        return None if j is None else _Pick(j, "views", "reacquired", emb=c.emb[j])

    def _rule_return(self, c: _Candidates) -> _Pick | None:
        """Back in a shot he was followed in: the face where he stood is his (:meth:`_returned`)."""
        j = self._returned(c.faces, c.cand, c.cos, c.corr, c.score)
        return None if j is None else _Pick(j, "returned", "returned", partial=True)

    #: Where identity cannot decide among a frame's candidates, these rules are asked in this order;
    #: the first to pick a face makes it his (its ``how`` recorded, its counter of
    #: :class:`TrackingStats` counted); when none does, the candidates are undecided (masked until the
    #: whole-clip decision, :mod:`mime_fast.subject.decision`, tells whose they are).
    UNDECIDED_RULES: tuple = (_rule_own_track, _rule_head, _rule_views, _rule_return)

    def _confirming(self, frame, faces: Faces, face_tracks: np.ndarray) -> FrameTrack | None:
        """Followed unconfirmed (module docstring, 8.) with other faces in the frame: the one face
        reading strongly as him (against the selection's embedding, the last one accepted while he
        was confirmed, and the views kept of him) is his, confirmed, whether or not it is the face
        followed; else ``None`` (the rules of :meth:`_decide` apply, and :meth:`_beside` masks the
        others).  Each face's identity is read about once per face track
        (:meth:`~mime_fast.subject.face_tracks.FaceTracks.embeddings`)."""
        if self.identity.ref_emb is None or getattr(self.stack, "embedder", None) is None:
            return None
        emb = self._faces.embeddings(self, frame, faces, face_tracks)
        refs = [e for e in (self.identity.ref_emb, self.identity.last_emb) if e is not None] + list(self.views())
        cos = _best_cos(emb, refs)
        strong = np.flatnonzero(cos >= self.identity.strong_cos)
        if len(strong) != 1:
            return None
        j = int(strong[0])
        if self.follow.frame_ids[j] != self.follow.subject_track:  # another face than the one followed: his, afresh
            self.follow.vel, self.follow.vel_known = np.zeros(2), False
            self.follow.last_seen = -(10**9)  # (no velocity from the stranger's place to his)
            self.follow.anchor = self.follow.last_points = self.follow.size_ref = None
            self.follow.partial_run = 0
            self.follow.head = self.follow.seed = None
        self.shot.unconfirmed = False
        self.stats.ambiguous += 1
        return self._accept(frame, faces, j, emb=emb[j], how="confirmed")

    def _beside(self, faces: Faces) -> None:
        """Followed unconfirmed (module docstring, 8.): every face of this frame's detections
        but the one taken for him (all of them where he was not matched) is masked as undecided."""
        at, i = self.follow.taken
        keep = [k for k in range(len(faces)) if not (at == self._index and k == i)]
        if not keep:
            return
        self.shot.others_at = self._index
        self._mask_undecided([faces.boxes[k] for k in keep], [self.follow.frame_ids[k] for k in keep])

    def _mask_undecided(self, boxes, idents) -> None:
        """This frame's undecided masks are the faces at ``boxes``, of face tracks ``idents``: each
        its box ellipse grown by the margin (the frame counted once in ``stats.undecided``)."""
        if self._index not in self.undecided:
            self.stats.undecided += 1
        self.undecided[self._index] = [grow_hull(_box_ellipse(b), self.margin * _size(b)) for b in boxes]
        self.record.undecided_ids[self._index] = list(idents)

    def _another_strong(self, cos: np.ndarray, j: int) -> bool:
        """Whether a candidate other than ``j`` reads strongly as him (``cos >= strong_cos``)."""
        return bool(np.any(np.delete(cos, j) >= self.identity.strong_cos))

    def _by_views(self, emb: np.ndarray, cos: np.ndarray) -> int | None:
        """While he is searched for and no rule above decided: the one candidate (index in ``emb``,
        the candidates' embeddings) reading strongly (``cos >= strong_cos``) as a view of him kept
        while he was followed (:data:`GALLERY_SIZE`), no other reading strongly as him (``cos``:
        against the selection's and the last embedding), or ``None``."""
        gallery = self.views()
        if not gallery:
            return None
        views = _best_cos(emb, gallery)
        strong = np.flatnonzero((views >= self.identity.strong_cos) | (cos >= self.identity.strong_cos))
        return int(strong[0]) if len(strong) == 1 and views[strong[0]] >= self.identity.strong_cos else None

    def _returned(self, faces: Faces, cand: np.ndarray, cos: np.ndarray, corr: np.ndarray,
                  score: np.ndarray) -> int | None:
        """In a shot that returns to one he was followed in (module docstring, 6.), before he is
        found in it and within ``hold_frames`` of its start (of the frame the return was told at,
        after a dissolve: :meth:`returns`): the index (in ``cand``) of the one
        face where he stood there, or ``None``."""
        if (self.shot.returning is None or self.follow.present_at >= self.shot.shot_start
                or self._index - self.shot.return_from >= self.hold_frames):
            return None
        c0, s0 = _centre(self.shot.returning), _size(self.shot.returning)
        d = np.array([np.linalg.norm(_centre(b) - c0) / s0 for b in faces.boxes])
        gate = REFRAME_GATE if self.shot.reframed else GATE
        own = [j for j, i in enumerate(cand) if d[i] <= gate and 0.67 <= _size(faces.boxes[i]) / s0 <= 1.5]
        if len(own) != 1:
            return None
        j = own[0]
        # nobody else where he stood: no face near his (the same picture, people may have moved
        # since), or none within GATE of where the re-framing put him (its features place him)
        clear = (np.count_nonzero(d <= GATE) == 1) if self.shot.reframed else _alone(faces.boxes, int(cand[j]))
        if not clear or corr[j] < RETURN_MIN_CORR or score[j] < score.max() or self._another_strong(cos, j):
            return None
        return j


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
