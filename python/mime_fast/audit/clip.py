"""One clip audited (:func:`audit_clip`): its outputs decoded side by side, the subject found and his
faces probed against the gallery by each recogniser, the identity rule, one row per subset; and the
models it needs (:func:`load_models`).

Over 200 lines on purpose: :func:`audit_clip` is the procedure of :mod:`mime_fast.audit`'s
docstring in order, its steps sharing the clip's faces, tracks and features."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..detect import CenterFaceDetector
from ..manifest import MANIFEST_JSONL, compact, read_rows
from ..media import video_digest
from ..spec import spec
from .detection import (
    decode_together,
    detail_ratio,
    link_tracks,
    looks_clear,
    luma,
    reference_frames,
    subject_per_frame,
)
from .gallery import distractor_gallery, his_templates, verification_threshold
from .protocol import (
    AUDITED,
    COLUMNS,
    FMR,
    GALLERY_GAP_S,
    IDENTITY_EVERY,
    IDENTITY_MARGIN,
    IDENTITY_REFS,
    IDENTITY_SUPPORT,
    INTENT,
    MASKED_DETAIL_RATIO,
    MIME_KERNEL,
    MIN_FACE_PX,
)
from .recognisers import DlibRecogniser, SFaceRecogniser, unit
from .verdicts import reidentified

__all__ = ["Models", "audit_clip", "load_models", "manifest_kernels"]


@dataclass
class Models:
    """The audit's models, loaded once per process: its face detector, its recognisers (the
    verdicts need all of them) and their description for the rows."""

    detector: Any
    recognisers: list[Any]
    recogniser: str
    #: how many distractor identities the gallery holds (:func:`distractor_gallery`)
    distractors: int = 0


def load_models(detect_size: int | None, *, threads: int | None = None) -> Models:
    """The detector (at ``detect_size``, ``threads`` for its ONNX session: ``None``, the runtime's
    default), the recognisers and the distractor gallery (computed once per process: about 40 s on
    two cores; :func:`mime_fast.audit.gallery.prime_distractors` hands a worker the parent's)."""
    recs = [DlibRecogniser(), SFaceRecogniser()]
    rec = "; ".join(r.label for r in recs) + " (SFace is also the engine's tracker)"
    return Models(CenterFaceDetector(max_size=detect_size, threads=threads), recs, rec,
                  len(distractor_gallery(recs)[recs[0].name]))


def manifest_kernels(out_dir: Path) -> dict[str, dict[str, int | None]]:
    """The blur kernel of every clip's subsets in the manifest: ``{clip_id: {subset: kernel}}`` (the
    manifest is read once per audit, not once per clip)."""
    out: dict[str, dict[str, int | None]] = {}
    if (out_dir / MANIFEST_JSONL).is_file():
        for r in compact(read_rows(out_dir)):
            out.setdefault(r["clip_id"], {})[r["subset"]] = r.get("kernel")
    return out


def audit_clip(out_dir: Path, clip_id: str, models: Models, *, every: int = 1, fmr: float = FMR,
               kernels: dict[str, int | None] | None = None,
               on_frames: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """The audit rows (:data:`COLUMNS`) of one clip of ``out_dir``; ``kernels``: its subsets' blur
    kernels (``{subset: kernel}``, default: read from the manifest); ``fmr``: the false-match rate
    verification's threshold is set at; ``on_frames(pass_no, frames)``: called as each of the two passes
    over the clip's frames reads one (1: faces and masks, 2: the recognisers)."""
    out_dir = Path(out_dir)
    fm = out_dir / "FM" / f"{clip_id}.mp4"
    present = {s: out_dir / s / f"{clip_id}.mp4" for s in AUDITED if (out_dir / s / f"{clip_id}.mp4").is_file()}
    if kernels is None:
        kernels = manifest_kernels(out_dir).get(clip_id, {})
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
    for i, t, imgs in decode_together([fm] + [present[s] for s in decode]):
        n_frames += 1
        if on_frames is not None:
            on_frames(1, n_frames)
        if i % every:
            continue
        audited.append(i)
        times.append(t)
        faces = models.detector.detect(imgs[0])
        tall = (faces.boxes[:, 3] - faces.boxes[:, 1]) >= MIN_FACE_PX
        b = faces.boxes[tall]
        boxes.append(b)
        kpss.append(faces.keypoints[tall])
        g = luma(imgs[0])
        for s, img in zip(decode, imgs[1:]):
            d = luma(img)
            ratios[s].append(np.array([detail_ratio(g, d, bb) for bb in b], np.float64))
            near_clear[s].append(np.array([looks_clear(g, d, bb, MIME_KERNEL[s]) for bb in b], bool))
    masked = [np.nan_to_num(m, nan=1.0) < MASKED_DETAIL_RATIO for m in ratios[ref]]
    subject = subject_per_frame(boxes, masked)
    at = {f: k for k, f in enumerate(audited)}
    tracks = link_tracks(boxes)
    # his identity reference (rule 1, nobody else masked), for the identity rule
    ref_frames = reference_frames(subject, masked, tracks)
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
    for i, _, imgs in decode_together([fm] + [present[s] for s in decode]):
        if on_frames is not None:
            on_frames(2, i + 1)
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
    track_feats = {r.name: {t: unit(np.mean([f[r.name] for _, tt, f in reads if tt == t], axis=0))
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
    templates = {r.name: his_templates(clear_m[r.name], t_of) for r in recs}
    has_gallery = np.array([bool((np.abs(t_of - t) >= GALLERY_GAP_S).any()) for t in t_of], bool)
    thresholds = {r.name: verification_threshold(clear_m[r.name] @ impostors[r.name].T, fmr) for r in recs}

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
    able = [r for r in recs if reidentified(baseline, [r.name], chance, fmr) is not False]
    margin = 0.0 if len(able) > 1 else IDENTITY_MARGIN
    his = set()
    if ref_idx and able:
        # who votes: the able recognisers; where one is left, the abstaining ones' support too
        voters = recs if len(able) == 1 else able
        refs = {r.name: unit(clear_m[r.name][ref_idx].mean(axis=0)) for r in voters}
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
                   "reidentified": reidentified(got, [x.name for x in recs], chance, fmr) if got else None,
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


