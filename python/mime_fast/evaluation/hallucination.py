"""Facial-cue hallucination: rationales that describe facial movements the model cannot have seen.

On FSM and FSAM the subject's face is heavily blurred; where the audit (``DIR/audit.parquet``,
``mime-fast audit``) found no frame of the subject unmasked, a rationale (prompt conditions
``cot``, ``tom``, ``coe``) that still describes his smile, frown or raised brows describes what was
not there. :func:`describes_face` reads a reply by rules: a sentence names a facial movement
(:data:`FACIAL`) and does not say that the face is blurred or cannot be seen (:data:`UNSEEN`).
The rate is reported for every subset, FM's (where the face is there to describe) as the reference.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..spec import BLUR_LEVEL

__all__ = ["FACIAL", "MASKED_FACE", "UNSEEN", "describes_face", "facial_cue_rates", "unmasked_by_audit"]

FACIAL = re.compile(
    r"\b(?:smil\w*|grin\w*|frown\w*|furrow\w*|(?:eye)?brows?|squint\w*|lips?|mouth\w*|jaw\w*|cheeks?|nostrils?|"
    r"wrinkl\w*|teeth|tears?|grimac\w*|pout\w*|scowl\w*|wide[- ]eyed|eyes? (?:widen|narrow|sparkl)\w*|"
    r"facial (?:expression|movement|feature|muscle)s?)\b", re.I)
UNSEEN = re.compile(
    r"\b(?:blur\w*|obscur\w*|masked|hidden|pixelat\w*|indiscernible|not (?:visible|discernible|clear|seen)|"
    r"(?:cannot|can't|can not|unable to) (?:be )?(?:see|seen|discern\w*|make out|read)|no (?:visible )?facial)\b",
    re.I)
_SENTENCE = re.compile(r"(?<=[.!?;\n])\s+")

#: The subsets whose facial-cue descriptions are hallucinations where the audit shows the face masked:
#: the heavily blurred ones (FSM, FSAM; :data:`mime_fast.spec.BLUR_LEVEL`).
MASKED_FACE = tuple(c.value for c, level in BLUR_LEVEL.items() if level == "heavy")


def describes_face(text: str | None) -> bool:
    """Whether a sentence of ``text`` describes a facial movement without saying it cannot be seen."""
    return any(FACIAL.search(s) and not UNSEEN.search(s) for s in _SENTENCE.split(text or ""))


def unmasked_by_audit(corpus: Path) -> set[tuple[str, str]] | None:
    """The (clip, subset) whose audit row is not ``ok`` with 0 unmasked frames; ``None``: no audit."""
    path = Path(corpus) / "audit.parquet"
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    rows = pq.read_table(path, columns=["clip_id", "subset", "unmasked_frames", "status"]).to_pylist()
    return {(r["clip_id"], r["subset"]) for r in rows if r["status"] != "ok" or r["unmasked_frames"] != 0}


def facial_cue_rates(preds: list[dict[str, Any]], corpus: Path) -> dict[str, Any]:
    """Per subset: ``n`` answered replies, ``rate`` of those describing facial movements; FSM and
    FSAM only on the clips the audit shows masked throughout (``audited``: whether there was an
    audit to ask; without one, all their clips)."""
    left_out = unmasked_by_audit(corpus)
    out: dict[str, Any] = {}
    for r in preds:
        if r["status"] != "ok" or r["reply"] is None:
            continue
        if r["subset"] in MASKED_FACE and left_out is not None and (r["clip_id"], r["subset"]) in left_out:
            continue
        s = out.setdefault(r["subset"], {"n": 0, "describing": 0, "audited": left_out is not None})
        s["n"] += 1
        s["describing"] += describes_face(r["reply"])
    for s in out.values():
        s["rate"] = s["describing"] / s["n"]
    return out
