"""Task ``statements`` (ESJ, emotion statement judgment, on a MIME corpus): is this statement about
the clip correct? yes or no.

Statements come from the Chain-of-Emotion (``coe.jsonl``, its accepted rows' stage IV): per clip x
subset with an accepted CoE (:func:`make_statements`),

- ``true_scene``: the first sentence of its ``scene_understanding`` (yes);
- ``true_emotion``: the sentence of its ``emotional_analysis`` that names the clip's emotion, else its
  first sentence (yes);
- ``reversed``: that sentence with the emotion replaced by its opposite (:data:`OPPOSITE`: the
  polarity reversed; only where the sentence names the emotion) (no);
- ``other_clip``: the first sentence of the ``scene_understanding`` of another clip of the same
  subset with another emotion (the same one every run) (no).

Metrics per subset (:func:`statement_metrics`): ``n`` statements answered, ``accuracy`` and the
accuracy per kind; an unparseable answer is wrong.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..coe.schema import SPELLINGS

__all__ = ["KINDS", "OPPOSITE", "make_statements", "statement_metrics"]

KINDS = ("true_scene", "true_emotion", "reversed", "other_clip")
#: The emotion a reversed statement names instead (valence reversed; Neutral becomes Anger).
OPPOSITE = {"Happy": "Sad", "Sad": "Happy", "Anger": "Happy", "Disgust": "Happy", "Fear": "Happy",
            "Surprise": "Sad", "Neutral": "Anger"}
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_ASK = "Is this statement about the clip correct? Statement: "


def _first(text: str | None) -> str | None:
    parts = [p.strip() for p in _SENTENCES.split(text or "") if p.strip()]
    return parts[0] if parts else None


def _naming(text: str | None, label: str) -> tuple[str | None, re.Match[str] | None]:
    """The first sentence of ``text`` that spells ``label``, and the spelling found."""
    words = [w for w, e in SPELLINGS.items() if e == label]
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b", re.I)
    for sentence in _SENTENCES.split(text or ""):
        m = pattern.search(sentence)
        if m:
            return sentence.strip(), m
    return None, None


def make_statements(row: dict[str, Any], coe_row: dict[str, Any] | None,
                    accepted: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """``[(kind, question, "yes"|"no"), ...]`` for manifest ``row`` from its accepted CoE row
    ``coe_row`` (none: no statement) and the accepted CoE rows of its subset ``accepted``."""
    if coe_row is None or coe_row.get("status") != "ok":
        return []
    out = []
    scene = _first(coe_row.get("scene_understanding"))
    if scene:
        out.append(("true_scene", _ASK + scene, "yes"))
    sentence, m = _naming(coe_row.get("emotional_analysis"), row["label"])
    emotion = sentence or _first(coe_row.get("emotional_analysis"))
    if emotion:
        out.append(("true_emotion", _ASK + emotion, "yes"))
    if sentence and m:
        flipped = sentence[:m.start()] + OPPOSITE[row["label"]].lower() + sentence[m.end():]
        out.append(("reversed", _ASK + flipped, "no"))
    others = [r for r in accepted if r["clip_id"] != row["clip_id"] and r["label"] != row["label"]
              and _first(r.get("scene_understanding"))]
    if others:
        pick = others[int(hashlib.sha256(str(row["clip_id"]).encode()).hexdigest(), 16) % len(others)]
        out.append(("other_clip", _ASK + str(_first(pick.get("scene_understanding"))), "no"))
    return out


def statement_metrics(preds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per subset: ``n`` (statements answered), ``accuracy``, ``by_kind`` accuracy,
    ``parse_failures``, ``failed``."""
    out: dict[str, Any] = {}
    for code in dict.fromkeys(r["subset"] for r in preds):
        rows = [r for r in preds if r["subset"] == code]
        ok = [r for r in rows if r["status"] == "ok"]
        by_kind = {}
        for kind in KINDS:
            k = [r for r in ok if r["kind"] == kind]
            by_kind[kind] = {"n": len(k), "accuracy": sum(r["correct"] for r in k) / len(k) if k else None}
        out[code] = {"n": len(ok), "accuracy": sum(r["correct"] for r in ok) / len(ok) if ok else None,
                     "by_kind": by_kind, "parse_failures": sum(r["answer"] is None for r in ok),
                     "failed": len(rows) - len(ok)}
    return out
