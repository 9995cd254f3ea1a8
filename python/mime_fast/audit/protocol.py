"""The audit's protocol in figures: its calibrated constants (each with what it was measured on),
the subsets it audits and what MIME intends for each (read from :mod:`mime_fast.spec`), the
columns of its rows and the revision of its procedure (the procedure itself:
:mod:`mime_fast.audit`'s docstring)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

from ..options import FsmKernel, MaskOptions
from ..spec import SUBSETS, spec

__all__ = [
    "AUDITED", "AUDIT_REVISION", "CALIBRATION", "CALIBRATION_FILE", "COLUMNS", "FMR", "FRAMES_NAMED",
    "GALLERY_GAP_S", "IDENTITY_EVERY", "IDENTITY_MARGIN", "IDENTITY_REFS", "IDENTITY_SUPPORT", "INTENT",
    "INTENT_OF_LEVEL", "JOURNAL", "LINK_DISTANCE", "LINK_IOU", "MASKED_DETAIL_RATIO", "MIME_KERNEL",
    "MIN_FACE_PX", "RECOGNISABLE_COS", "RECOGNISERS", "REID_MARGIN", "TEMPLATE_FACES",
]

#: The calibration ``bench/calibrate_audit.py`` writes: ``threshold`` (the similarity that different
#: people exceed in 1 % of pairs on the real clips) and ``mean`` (dlib's mean face embedding there).
CALIBRATION_FILE = Path(__file__).with_name("audit_calibration.json")
CALIBRATION: dict[str, Any] = json.loads(CALIBRATION_FILE.read_text()) if CALIBRATION_FILE.is_file() else {
    "threshold": 0.0, "mean": [0.0] * 128}
#: The calibration's likeness threshold (:func:`.recognisers.similarity` that different people exceed in 1 % of
#: pairs); no verdict reads it since revision 4 (re-identification replaced likeness).
RECOGNISABLE_COS: float = float(CALIBRATION["threshold"])
#: Detail ratio below which a face counts as masked (an untouched face is near 1).
MASKED_DETAIL_RATIO: float = 0.5
#: Box overlap that links a face to the next frame's in :func:`.detection.link_tracks` (the calibration's tracks).
LINK_IOU: float = 0.3
#: How far (in face heights) the subject's face may move from one audited frame to the next and
#: still be followed where it is unmasked (:func:`.detection.subject_per_frame`).
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
#: (:func:`.verdicts.reidentified`).  Measured (every 2nd frame): planted leaks 1.00 for both figures of both
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
#: 35/55): :func:`.detection.looks_clear` compares a degraded face with the clear one blurred so.
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
#: references only from faces on tracks masked in at least half their frames (:func:`.detection.reference_frames`).
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

