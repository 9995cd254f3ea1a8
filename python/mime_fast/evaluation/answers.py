"""Answer extraction by rules: the emotion a model's reply names, or why none can be taken.

In order, the first rule that gives an answer wins:

1. the text inside the last ``<answer>...</answer>`` tag, if any, is what is read;
2. a JSON object -- or a Python dict with single quotes, HitEmotion's ``{'emotion': 'label'}`` --
   anywhere in the reply (a Markdown fence included), its ``emotion`` (``label``, ``answer``,
   ``predicted_emotion``, ``prediction``) field; the last such object is the final answer;
3. the whole reply is a label (``Anger``, ``anger.``, ``**Anger**``, a fenced ``Anger``);
4. the labels in bold (``**Anger**``), when they are one label;
5. the last line ``Answer: X`` (``Final answer``, ``Emotion``, ``Label``, ``Prediction``);
6. a refusal ("I can't tell", "I'm sorry", "unable to determine") is unparseable, whatever it names;
7. the emotion words of the reply, when they are one label.

Spellings are the CoE schema's (:data:`mime_fast.coe.schema.SPELLINGS`: ``angry``, ``sadness``,
``joy``, ...). Two different labels, a refusal, a label outside the seven or none at all: the answer
is unparseable (``None`` and the reason), which the metrics count as wrong and report.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ..coe.schema import SPELLINGS

__all__ = ["extract_emotion"]

_KEYS = ("emotion", "label", "answer", "predicted_emotion", "prediction")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_OBJECT = re.compile(r"\{[^{}]*\}")
_FENCE = re.compile(r"```[A-Za-z]*")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.S)
_LINE = re.compile(r"^\W*(?:final answer|answer|emotion|label|prediction|predicted emotion)\W*[:=]\W*([A-Za-z]+)",
                   re.I | re.M)
_REFUSAL = re.compile(r"\b(?:I (?:can ?not|can't|cannot|am unable|'m unable|am not able|'m not able)|unable to "
                      r"(?:determine|tell|identify|infer)|I'?m sorry|I am sorry|as an AI|cannot be determined|"
                      r"not possible to (?:determine|tell))", re.I)
_WORDS = re.compile(r"\b(" + "|".join(sorted(map(re.escape, SPELLINGS), key=len, reverse=True)) + r")\b", re.I)


def _label(value: Any) -> str | None:
    """The category ``value`` spells (``" Angry. "`` -> ``"Anger"``), else ``None``."""
    if not isinstance(value, str):
        return None
    return SPELLINGS.get(value.strip().strip("*_'\"`.!,;:()[] \n").lower())


def _object(text: str) -> dict[str, Any] | None:
    for parse in (json.loads, ast.literal_eval):
        try:
            obj = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            return {str(k).lower(): v for k, v in obj.items()}
    return None


def _one(labels: list[str]) -> tuple[str | None, str | None]:
    distinct = list(dict.fromkeys(labels))
    if len(distinct) == 1:
        return distinct[0], None
    return None, f"names several emotions ({', '.join(distinct)})" if distinct else "names no emotion"


def extract_emotion(text: str | None) -> tuple[str | None, str | None]:
    """``(label, None)`` for a reply that gives one of the seven emotions, else ``(None, why)``."""
    body = (text or "").strip()
    if not body:
        return None, "empty reply"
    tags = _ANSWER_TAG.findall(body)
    if tags:
        body = tags[-1].strip()
    for raw in reversed(_OBJECT.findall(body)):  # rule 2: the last object with an answer field
        obj = _object(raw)
        key = next((k for k in _KEYS if obj is not None and k in obj), None)
        if obj is not None and key is not None:
            label = _label(obj[key])
            return (label, None) if label else (None, f"the answer {obj[key]!r} is none of the seven emotions")
    plain = _FENCE.sub("", body).strip()
    label = _label(plain)  # rule 3
    if label:
        return label, None
    bold = [_label(a or b) for a, b in _BOLD.findall(plain)]
    bold_labels = [x for x in bold if x]
    if bold_labels:  # rule 4
        label, why = _one(bold_labels)
        if label:
            return label, None
    lines = [_label(v) for v in _LINE.findall(plain)]
    if lines and lines[-1]:  # rule 5
        return lines[-1], None
    if _REFUSAL.search(plain):  # rule 6
        return None, "refusal"
    return _one([SPELLINGS[w.lower()] for w in _WORDS.findall(plain)])  # rule 7
