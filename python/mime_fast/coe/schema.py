"""The JSON replies of stages III and IV: their schemas, parsing and validation."""

from __future__ import annotations

import json
import re
from typing import Any

from ..manifest import EMOTIONS

__all__ = ["SPELLINGS", "normalise_emotion", "parse_reply", "stage3_schema", "stage4_schema"]

# Spellings a model gives for the seven categories (case-insensitive); anything else is invalid.
_SYNONYMS = {
    "angry": "Anger", "disgusted": "Disgust", "fearful": "Fear", "afraid": "Fear", "scared": "Fear",
    "happiness": "Happy", "joy": "Happy", "sadness": "Sad", "surprised": "Surprise",
}
_BY_LOWER = {e.lower(): e for e in EMOTIONS} | _SYNONYMS

#: Every spelling taken (lower case) -> its category (the evaluation's answer extraction reads it).
SPELLINGS: dict[str, str] = dict(_BY_LOWER)


def normalise_emotion(value: Any) -> Any:
    """``"anger"``, ``"Angry"`` -> ``"Anger"``; a value that names no category is returned as given."""
    if isinstance(value, str):
        return _BY_LOWER.get(value.strip().strip(".").lower(), value)
    return value


def stage3_schema() -> dict[str, Any]:
    """Stage III (blind inference): the predicted category and the cues that carry it."""
    return {
        "type": "object",
        "required": ["predicted_emotion", "emotion_cues"],
        "properties": {
            "predicted_emotion": {"enum": list(EMOTIONS)},
            "confidence": {"type": "string"},
            "emotion_cues": {"type": "string", "minLength": 1},
            "reasoning": {"type": "string"},
        },
    }


def stage4_schema(emotion: str) -> dict[str, Any]:
    """Stage IV (structured CoE): scene understanding, emotional analysis and the predicted
    emotion, which must be the ground truth (the paper: it "strictly aligns with the ground-truth
    label")."""
    return {
        "type": "object",
        "required": ["scene_understanding", "emotional_analysis", "predicted_emotion"],
        "additionalProperties": False,
        "properties": {
            "scene_understanding": {"type": "string", "minLength": 1},
            "emotional_analysis": {"type": "string", "minLength": 1},
            "predicted_emotion": {"const": emotion},
        },
    }


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```\s*$", re.S)


def parse_reply(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)`` for a reply that is (or holds, in a Markdown fence) a JSON object
    matching ``schema`` once its ``predicted_emotion`` is normalised; else ``(None, error)``,
    the error in words the model can act on when it is asked again."""
    import jsonschema

    body = (text or "").strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        start, end = body.find("{"), body.rfind("}")
        try:
            obj = json.loads(body[start:end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            obj = None
        if obj is None:
            return None, "the reply is not a JSON object"
    if not isinstance(obj, dict):
        return None, "the reply is not a JSON object"
    if "predicted_emotion" in obj:
        obj["predicted_emotion"] = normalise_emotion(obj["predicted_emotion"])
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        where = lambda e: "/".join(str(p) for p in e.path) or "(top level)"  # noqa: E731
        return None, "; ".join(f"{where(e)}: {e.message}" for e in errors[:5])
    return obj, None
