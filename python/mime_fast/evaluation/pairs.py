"""Task ``pairs`` (EmotionHallucer's protocol on a MIME corpus): per clip x subset, a basic yes/no
question whose answer is yes and a hallucinated one whose answer is no.

The pair (:func:`make_pair`):

- on FSM and FSAM, where the Chain-of-Emotion's stage II (``coe.jsonl``) kept a cue and deleted a
  facial one -- the face is heavily blurred, so the facial cue is not in the clip: "Does the clip
  show this? <kept cue>" (yes) and "... <deleted facial cue>" (no);
- otherwise, an emotion pair: "Does the person express <the label>?" (yes) and "... <another of
  the seven, the same one for a clip every run>?" (no).

Metrics per subset (:func:`pair_metrics`, EmotionHallucer's): ``basic`` and ``hallucinated``
accuracy, ``overall`` (pairs with both right), ``d_y`` (yes answers minus yes truths, over the
questions), ``r_fp`` (the share of yes among the wrong answers), in percent for the accuracies.
An unparseable answer is wrong (and neither yes nor no in ``d_y``/``r_fp``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..manifest import EMOTIONS
from .hallucination import MASKED_FACE

__all__ = ["extract_yes_no", "make_pair", "pair_metrics"]

_CUE = re.compile(r"\[(REMAINED|DELETED)\]\**\s*\(([^)]*)\)\**\s*(.+)", re.I)
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)
_REFUSAL = re.compile(r"\b(?:can ?not|can't|cannot|unable to|I'?m sorry|not sure)\b", re.I)

#: The subsets whose face the blur removes (FSM, FSAM: :data:`mime_fast.spec.BLUR_LEVEL` heavy), where a
#: deleted facial cue makes a hallucinated question.
HEAVY = MASKED_FACE


def _cues(stage2: str | None) -> tuple[str | None, str | None]:
    """The first kept cue (not the identity line) and the first deleted facial cue of a stage II output."""
    kept = deleted = None
    for line in (stage2 or "").splitlines():
        m = _CUE.search(line)
        if not m:
            continue
        status, category, text = m.group(1).upper(), m.group(2).strip().lower(), m.group(3).strip().strip("*").strip()
        if status == "REMAINED" and kept is None and category != "identity" and text:
            kept = text
        elif status == "DELETED" and deleted is None and "face" in category and text:
            deleted = text
    return kept, deleted


def make_pair(row: dict[str, Any], coe_row: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """``[("basic", question, "yes"), ("hallucinated", question, "no")]`` for manifest ``row``."""
    kept, deleted = _cues(coe_row.get("stage2_output")) if coe_row and row["subset"] in HEAVY else (None, None)
    if kept and deleted:
        ask = "Does the clip show the following? "
        return [("basic", ask + kept, "yes"), ("hallucinated", ask + deleted, "no")]
    others = [e for e in EMOTIONS if e != row["label"]]
    other = others[int(hashlib.sha256(str(row["clip_id"]).encode()).hexdigest(), 16) % len(others)]
    return [("basic", f"Does the person express {row['label']}?", "yes"),
            ("hallucinated", f"Does the person express {other}?", "no")]


def extract_yes_no(text: str | None) -> tuple[str | None, str | None]:
    """``("yes"|"no", None)`` for a reply that says one of them, else ``(None, why)``."""
    words = {w.lower() for w in _YES_NO.findall(text or "")}
    if len(words) == 1:
        return words.pop(), None
    if words:
        return None, "says both yes and no"
    return None, "refusal" if _REFUSAL.search(text or "") else "says neither yes nor no"


def pair_metrics(preds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per subset: ``pairs`` (both questions answered), ``basic``, ``hallucinated``, ``overall`` (%),
    ``d_y``, ``r_fp``, ``parse_failures``, ``failed`` (questions)."""
    out: dict[str, Any] = {}
    for code in dict.fromkeys(r["subset"] for r in preds):
        rows = [r for r in preds if r["subset"] == code]
        by_clip: dict[str, dict[str, dict[str, Any]]] = {}
        for r in rows:
            if r["status"] == "ok":
                by_clip.setdefault(r["clip_id"], {})[r["kind"]] = r
        pairs = [p for p in by_clip.values() if len(p) == 2]
        qs = [q for p in pairs for q in p.values()]
        wrong = [q for q in qs if not q["correct"]]
        n = len(pairs)

        def pct(count: int) -> float | None:
            return 100 * count / n if n else None

        yes = sum(q["answer"] == "yes" for q in qs) - sum(q["expected"] == "yes" for q in qs)
        out[code] = {
            "pairs": n, "basic": pct(sum(p["basic"]["correct"] for p in pairs)),
            "hallucinated": pct(sum(p["hallucinated"]["correct"] for p in pairs)),
            "overall": pct(sum(p["basic"]["correct"] and p["hallucinated"]["correct"] for p in pairs)),
            "d_y": yes / len(qs) if qs else None,
            "r_fp": sum(q["answer"] == "yes" for q in wrong) / len(wrong) if wrong else None,
            "parse_failures": sum(q["answer"] is None for q in qs),
            "failed": sum(r["status"] == "failed" for r in rows),
        }
    return out
