"""What the subject looks like: his body's colours, the views of his face kept while he is
followed, and how a face's embedding reads against his (``docs/subject-tracking.md``, 3. and 7.).
The subject tracker (:class:`~mime_fast.subject.tracking.SubjectTracker`) keeps these in its
:class:`~mime_fast.subject.state.Identity`; the functions here read and grow it, the models
(the embedder) passed in."""

from __future__ import annotations

import numpy as np

from ..detect.align import arcface_transform
from ..detect.interface import Faces
from .face_tracks import face_contrast
from .geometry import _size

__all__ = ["CLIP_VIEWS", "GALLERY_SIZE", "best_cos", "body_histogram", "hist_corr", "keep_spread", "keep_view",
           "read_views", "view_crop", "whole_clip_views"]

#: While the subject is searched for and no other rule decides (the frame's faces would all be masked as
#: undecided), the one face reading strongly as one of up to this many views of him taken while he
#: was followed is his (one view per ``hold_frames``, about half a second, on a full detection, not
#: in a crowd, each reading strongly as a view already kept; embedded only when a search first needs
#: them, which most clips never do: a view is kept as the part of the frame its embedding reads,
#: :func:`view_crop`, and at most this many - 1 wait to be read): after a boy crossed in front of an
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


def hist_corr(a, b) -> float:
    """The correlation (``cv2.HISTCMP_CORREL``, -1 .. 1) of two :func:`body_histogram`s, 0 where
    either is missing."""
    import cv2

    if a is None or b is None:
        return 0.0
    return float(cv2.compareHist(a, b, cv2.HISTCMP_CORREL))


def best_cos(emb: np.ndarray, refs) -> np.ndarray:
    """Per row of ``emb``, its highest cosine with the embeddings ``refs`` (-1 for a face too small
    to embed: a NaN row)."""
    return np.nan_to_num(np.max(np.stack([emb @ r for r in refs]), axis=0), nan=-1.0)


def view_crop(frame, faces: Faces, i: int) -> tuple[np.ndarray, Faces]:
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


def keep_spread(kept: list, item) -> None:
    """Append ``item`` to ``kept``; past :data:`CLIP_VIEWS` items, every other one is let go (what
    is kept stays spread over the clip, the same whatever the clip's length)."""
    kept.append(item)
    if len(kept) > CLIP_VIEWS:
        del kept[1::2]


def keep_view(identity, frame, faces: Faces, i: int, index: int, sure: bool) -> None:
    """Take a view of him (face ``i`` of ``faces``, frame ``index``; ``sure``: he was found for
    sure) into ``identity`` (:class:`~mime_fast.subject.state.Identity`): to be read when a search
    needs the views (:func:`read_views`), and over the whole clip (:func:`whole_clip_views`).
    Only the part of the frame his embedding reads is kept (:func:`view_crop`).  Whether to take
    one is the tracker's call."""
    identity.gallery_at = index
    # [crop, face, embedding, found for sure, contrast]
    view = [*view_crop(frame, faces, i), None, sure, face_contrast(frame, faces.boxes[i])]
    identity.unread.append(view)
    keep_spread(identity.clip_views, view)


def read_views(identity, embed) -> list[np.ndarray]:
    """The views kept of him (:data:`GALLERY_SIZE` - 1 besides the selection's embedding), the
    views taken since the last call read first (``embed(frame, faces)``: the embedder), in the
    order they were taken: each is kept only when it reads strongly as a view already kept (the
    selection's first), so the views follow his pose and size without drifting to another person."""
    while identity.unread:
        view = identity.unread.popleft()
        e = view[2] = np.asarray(embed(view[0], view[1])[0], np.float32)
        if not np.all(np.isfinite(e)):
            continue
        if max(float(e @ g) for g in (identity.ref_emb, *identity.gallery)) >= identity.strong_cos:
            identity.gallery.append(e)
            if len(identity.gallery) > GALLERY_SIZE - 1:  # (the selection's embedding is the first view)
                identity.gallery.pop(0)
    return identity.gallery


def whole_clip_views(identity, embed) -> tuple[np.ndarray, np.ndarray] | None:
    """His embeddings over the whole clip for the whole-clip decision, and their faces' contrasts
    (:func:`~mime_fast.subject.face_tracks.face_contrast`): the selection's, his strong matches'
    and the views taken of him while he was found for sure (:data:`CLIP_VIEWS`), those not read
    yet embedded now (``embed``)."""
    out = [(np.asarray(identity.ref_emb, np.float32), identity.ref_contrast), *identity.his_embs]
    for view in identity.clip_views:
        if not view[3]:
            continue
        if view[2] is None:
            view[2] = np.asarray(embed(view[0], view[1])[0], np.float32)
        out.append((view[2], view[4]))
    out = [(e, c) for e, c in out if np.all(np.isfinite(e))]
    if not out:
        return None
    return np.stack([e for e, _ in out]), np.array([c for _, c in out], np.float64)
