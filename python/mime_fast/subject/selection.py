"""Primary-subject selection on the first frame with a face (MIME seed, section 2).

``score_i = 0.40 * C_i + 0.30 * Q_i + 0.20 * B_i + 0.10 * F_i`` for every detected face ``i``;
the subject is ``argmax score`` (ties: higher detector score, then lower index).  Every term is in
[0, 1].  Notation: frame ``W x H``; face box ``(x0, y0, x1, y1)`` with centre ``(cx, cy)``, width
``w``, height ``h``; ``area(.)`` is a box's area after clipping it to the frame.

**C, facial centrality** -- 1 at the frame centre, 0 at a corner, aspect-ratio independent::

    dx = (cx - W/2) / (W/2),  dy = (cy - H/2) / (H/2)
    C  = clip(1 - sqrt(dx^2 + dy^2) / sqrt(2), 0, 1)

**Q, structural quality** -- how complete and usable the face's structure is, from the dense landmarks
and the detector's 5 keypoints (eye, eye, nose, mouth, mouth)::

    Q = p * v * s
    p = the landmark model's per-face confidence (Landmarks.quality; MediaPipe: sigmoid of the
        face-presence logit; 1 when no landmarks are given)
    v = fraction of the dense landmark points that lie inside the frame (the face box's fraction
        inside the frame when no landmarks are given)
    s = 1 - |d_l - d_r| / (d_l + d_r): left-right symmetry, with d_l, d_r the distances from the nose
        keypoint to the two eye keypoints (1 frontal, -> 0 in profile, as the nose approaches one eye)

**B, relative body-box area** -- the candidate's body box area relative to the largest candidate's::

    B_i = area(body_i) / max_j area(body_j)

``body_i`` is the person box assigned to face ``i`` by :func:`assign_bodies`.  Persons that know
their nose (BlazePose, :class:`mime_fast.detect.pose.PosePersons`): a face takes the person whose
visible nose lies inside its box grown by :data:`NOSE_MARGIN` (one-to-one, nearest the face centre
first; the body box is the person's, grown to hold the face).  Then the faces left and the persons without a nose (HOG, YOLO):
greedy one-to-one matching -- the face centre must lie inside the person box
horizontally, the face top within ``[top - h, top + 0.4 * box height]``, the box at least 1.5
face heights tall; cost = horizontal offset of the face centre from the box centre / box width +
vertical offset of the face top from the box top / box height.  A face without a person box gets a human-proportion prior
``(cx - 1.5 w, y0, cx + 1.5 w, y0 + 5 h)`` (head and torso) (clipped to the frame, so a person cut by the frame edge
scores less) and ``Selection.body_detected[i]`` is False.  Normalising by the largest candidate (rather
than the frame area) gives every term the full [0, 1] range, so the weights mean what they say.

**F, facial scale** -- the face's linear size relative to the largest face::

    F_i = sqrt(area(face_i)) / max_j sqrt(area(face_j))

With a single candidate, B = F = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..detect.interface import Faces, Landmarks, Persons

__all__ = [
    "WEIGHTS",
    "Selection",
    "assign_bodies",
    "body_area_term",
    "centrality_term",
    "detect_candidates",
    "facial_scale_term",
    "select_primary_subject",
    "structural_quality_term",
]

#: Weights of the four terms (seed, section 2).
WEIGHTS = {"centrality": 0.40, "structure": 0.30, "body": 0.20, "scale": 0.10}


@dataclass(frozen=True)
class Selection:
    """Result of :func:`select_primary_subject`.

    ``index`` (``None`` when there is no face), ``scores (N,)`` the weighted sums, ``terms`` name ->
    ``(N,)`` array for each of ``centrality``, ``structure``, ``body``, ``scale``; ``bodies (N, 4)`` the
    body boxes used; ``body_detected (N,)`` whether each came from the person detector.
    """

    index: int | None
    scores: np.ndarray
    terms: dict[str, np.ndarray]
    bodies: np.ndarray
    body_detected: np.ndarray

    def breakdown(self, i: int | None = None) -> dict[str, float]:
        """Per-term values (and ``score``) of candidate ``i`` (default: the winner), and its
        ``margin``: its score less the best other candidate's (1.0 alone).  A small margin is a
        near tie that the pictures' noise can turn (on the real hug 0.025: another encode of the
        same frames selected the other man)."""
        i = self.index if i is None else i
        if i is None:
            return {}
        out = {k: float(v[i]) for k, v in self.terms.items()}
        out["score"] = float(self.scores[i])
        others = np.delete(np.asarray(self.scores, np.float64), i)
        out["margin"] = float(self.scores[i] - others.max()) if len(others) else 1.0
        return out


def _frame_hw(frame) -> tuple[int, int]:
    if isinstance(frame, tuple):
        return int(frame[0]), int(frame[1])
    s = np.shape(frame)
    return int(s[0]), int(s[1])


def _clip_boxes(boxes: np.ndarray, h: int, w: int) -> np.ndarray:
    b = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    b[:, 0::2] = b[:, 0::2].clip(0, w)
    b[:, 1::2] = b[:, 1::2].clip(0, h)
    return b


def _areas(boxes: np.ndarray) -> np.ndarray:
    return np.maximum(boxes[:, 2] - boxes[:, 0], 0) * np.maximum(boxes[:, 3] - boxes[:, 1], 0)


def _relative(v: np.ndarray) -> np.ndarray:
    m = float(v.max()) if v.size else 0.0
    return (v / m) if m > 0 else np.zeros_like(v)


def centrality_term(faces: Faces, frame_hw: tuple[int, int]) -> np.ndarray:
    """C: ``1 - |normalised offset of the face centre from the frame centre| / sqrt(2)``."""
    h, w = frame_hw
    b = faces.boxes.astype(np.float64)
    dx = ((b[:, 0] + b[:, 2]) / 2 - w / 2) / (w / 2)
    dy = ((b[:, 1] + b[:, 3]) / 2 - h / 2) / (h / 2)
    return np.clip(1.0 - np.hypot(dx, dy) / np.sqrt(2.0), 0.0, 1.0)


def structural_quality_term(faces: Faces, landmarks: Landmarks | None, frame_hw: tuple[int, int]) -> np.ndarray:
    """Q = p * v * s (landmark confidence, in-frame fraction of the points, eye-nose symmetry)."""
    h, w = frame_hw
    n = len(faces)
    if landmarks is None:
        p = np.ones(n)
        full = _areas(faces.boxes.astype(np.float64).reshape(-1, 4))
        v = np.divide(_areas(_clip_boxes(faces.boxes, h, w)), full, out=np.zeros(n), where=full > 0)
    else:
        if len(landmarks) != n:
            raise ValueError(f"{len(landmarks)} landmark sets for {n} faces")
        p = np.clip(np.asarray(landmarks.quality, np.float64), 0, 1)
        pts = np.asarray(landmarks.points, np.float64)
        ok = (pts[..., 0] >= 0) & (pts[..., 0] <= w) & (pts[..., 1] >= 0) & (pts[..., 1] <= h)
        v = ok.mean(axis=1) if pts.shape[1] else np.zeros(n)
    k = faces.keypoints.astype(np.float64)
    dl = np.linalg.norm(k[:, 2] - k[:, 0], axis=1)
    dr = np.linalg.norm(k[:, 2] - k[:, 1], axis=1)
    s = 1.0 - np.divide(np.abs(dl - dr), dl + dr, out=np.ones(n), where=(dl + dr) > 0)
    return np.clip(p * v * s, 0.0, 1.0)


#: How far outside a face's box (a share of its width and height) a person's nose may lie and
#: still give that face the person's body: a face in profile has its nose at the box's edge, and
#: the landmarks' nose moves with coding noise (on the real hug, 3 px inside or outside the box of
#: the man turned to the other: his body found or not, and another man selected).
NOSE_MARGIN = 0.25


def _greedy(pairs: list[tuple[float, int, int]]) -> list[tuple[int, int]]:
    """One-to-one (face, person) pairs by increasing cost."""
    used_f, used_p, out = set(), set(), []
    for _, i, j in sorted(pairs):
        if i not in used_f and j not in used_p:
            used_f.add(i)
            used_p.add(j)
            out.append((i, j))
    return out


def assign_bodies(faces: Faces, persons: Persons | None, frame_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Body box per face: ``(bodies (N, 4) clipped to the frame, detected (N,) bool)`` (see module
    doc): the persons whose nose is known by the nose first, then the others by geometry."""
    h, w = frame_hw
    fb = faces.boxes.astype(np.float64)
    n = len(fb)
    fw, fh = fb[:, 2] - fb[:, 0], fb[:, 3] - fb[:, 1]
    cx = (fb[:, 0] + fb[:, 2]) / 2
    bodies = np.stack([cx - 1.5 * fw, fb[:, 1], cx + 1.5 * fw, fb[:, 1] + 5.0 * fh], 1) if n else np.zeros((0, 4))
    detected = np.zeros(n, bool)
    if persons is None or not len(persons) or not n:
        return _clip_boxes(bodies, h, w), detected
    pb = persons.boxes.astype(np.float64)
    noses = getattr(persons, "noses", None)
    noses = np.full((len(pb), 2), np.nan) if noses is None else np.asarray(noses, np.float64)
    by_nose = np.isfinite(noses).all(1)
    pairs = []
    for i in range(n):
        for j in np.flatnonzero(by_nose):
            x, y = noses[j]
            mx, my = NOSE_MARGIN * fw[i], NOSE_MARGIN * fh[i]  # (a face in profile: its nose at the box's edge)
            if fb[i, 0] - mx <= x <= fb[i, 2] + mx and fb[i, 1] - my <= y <= fb[i, 3] + my:
                pairs.append((float(np.hypot(x - cx[i], y - (fb[i, 1] + fb[i, 3]) / 2)), i, int(j)))
    for i, j in _greedy(pairs):
        bodies[i] = np.concatenate([np.minimum(pb[j, :2], fb[i, :2]), np.maximum(pb[j, 2:], fb[i, 2:])])
        detected[i] = True
    pw, ph = pb[:, 2] - pb[:, 0], pb[:, 3] - pb[:, 1]
    pairs = []
    for i in np.flatnonzero(~detected):
        for j in np.flatnonzero(~by_nose):
            if pw[j] <= 0 or ph[j] < 1.5 * fh[i]:
                continue
            if not (pb[j, 0] <= cx[i] <= pb[j, 2]):
                continue
            if not (pb[j, 1] - fh[i] <= fb[i, 1] <= pb[j, 1] + 0.4 * ph[j]):
                continue
            cost = abs(cx[i] - (pb[j, 0] + pb[j, 2]) / 2) / pw[j] + abs(fb[i, 1] - pb[j, 1]) / ph[j]
            pairs.append((cost, int(i), int(j)))
    for i, j in _greedy(pairs):
        bodies[i] = pb[j]
        detected[i] = True
    return _clip_boxes(bodies, h, w), detected


def body_area_term(bodies: np.ndarray, frame_hw: tuple[int, int]) -> np.ndarray:
    """B: body-box area (clipped to the frame) / the largest candidate's."""
    h, w = frame_hw
    return _relative(_areas(_clip_boxes(bodies, h, w)))


def facial_scale_term(faces: Faces, frame_hw: tuple[int, int]) -> np.ndarray:
    """F: sqrt(face-box area clipped to the frame) / the largest candidate's."""
    h, w = frame_hw
    return _relative(np.sqrt(_areas(_clip_boxes(faces.boxes, h, w))))


def select_primary_subject(frame, faces: Faces, landmarks: Landmarks | None = None,
                           persons: Persons | None = None) -> Selection:
    """Score every face (module docstring) and pick the primary subject.

    ``frame``: the RGB frame (only its shape is used) or ``(height, width)``.  ``landmarks``: dense
    landmarks of the same faces, in the same order (optional); ``persons``: person boxes (optional).
    """
    hw = _frame_hw(frame)
    n = len(faces)
    if n == 0:
        z = np.zeros(0)
        return Selection(None, z, {k: z for k in WEIGHTS}, np.zeros((0, 4)), np.zeros(0, bool))
    bodies, detected = assign_bodies(faces, persons, hw)
    terms = {
        "centrality": centrality_term(faces, hw),
        "structure": structural_quality_term(faces, landmarks, hw),
        "body": body_area_term(bodies, hw),
        "scale": facial_scale_term(faces, hw),
    }
    scores = sum(WEIGHTS[k] * terms[k] for k in WEIGHTS)
    order = np.lexsort((np.arange(n), -faces.scores.astype(np.float64), -np.round(scores, 12)))
    return Selection(int(order[0]), scores, terms, bodies, detected)


def detect_candidates(stack, frame: np.ndarray) -> tuple[Faces, Landmarks, Persons | None]:
    """Run a stack's detector, landmark model and person detector (if any) on one RGB frame."""
    faces = stack.detector.detect(frame)
    lmk = stack.landmarks.landmarks(frame, faces)
    persons = stack.persons.detect(frame) if getattr(stack, "persons", None) is not None else None
    return faces, lmk, persons
