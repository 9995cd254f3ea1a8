"""The functions of the lmms-eval tasks' ``utils.py`` (:mod:`.lmms` writes it): the visuals and
the prompt of a document, its answer scored, and the aggregations accuracy, UAR and WAF.

The exported ``utils.py`` is generated so that lmms-eval does not need mime_fast installed: it is
this module's code below the line :data:`EXPORTED_BELOW`, after the recognition prompt of
``mime-fast eval`` (condition ``direct``, a video), the seven labels, and the source of mime_fast's
own answer extraction (:func:`mime_fast.evaluation.answers.extract_emotion`) and metrics
(:func:`mime_fast.evaluation.metrics.scores`), copied in when the task folder is written -- the
same code as ``mime-fast eval`` runs, not a copy kept by hand.  Above that line, the same names
imported from mime_fast, for this module's own use and its checks.
"""

from __future__ import annotations

import os
from typing import Any

from ..evaluation.answers import extract_emotion
from ..evaluation.metrics import scores
from ..evaluation.prompts import render

__all__ = ["EXPORTED_BELOW", "PROMPT", "SYSTEM_PROMPT", "extract_emotion", "scores"]

#: The line of this file after which its code is copied into the exported ``utils.py``.
EXPORTED_BELOW = "# ---- exported: the code of the tasks' utils.py from here on ----"

SYSTEM_PROMPT, PROMPT = render("direct", "video")

# ---- exported: the code of the tasks' utils.py from here on ----

#: The folder of the task files: the data files' media paths are relative to it.
HERE = os.path.dirname(os.path.abspath(__file__))


#: The environment variable that, set to 0, leaves the wav out of the visuals: for a model that
#: takes videos alone (the mp4s of FM, FDM, FSM and VMM carry the same audio as their track).
AUDIO_ENV = "MIME_LMMS_AUDIO"


def mime_doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """The sample's mp4, then its 16 kHz wav for the subsets with audio (FM, FDM, FSM, VMM), as
    absolute paths (as lmms-eval's own audio-visual tasks give theirs); the mp4 alone where the
    environment variable MIME_LMMS_AUDIO is 0."""
    audio = doc.get("audio") and os.environ.get(AUDIO_ENV, "1") != "0"
    paths = [doc["video"]] + ([doc["audio"]] if audio else [])
    return [os.path.join(HERE, p) for p in paths]


def mime_doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The recognition prompt of ``mime-fast eval`` (its system prompt first), between the model's
    ``pre_prompt`` and ``post_prompt``."""
    kwargs = lmms_eval_specific_kwargs or {}
    return f"{kwargs.get('pre_prompt', '')}{SYSTEM_PROMPT} {PROMPT}{kwargs.get('post_prompt', '')}"


def mime_doc_to_target(doc: dict[str, Any]) -> str:
    return doc["label"]


def mime_process_results(doc: dict[str, Any], results: list[str]) -> dict[str, dict[str, Any]]:
    """The emotion the reply names (``None``: none could be read, which counts as wrong), for each
    metric."""
    pred, _why = extract_emotion(results[0] if results else "")
    item = {"clip_id": doc["clip_id"], "label": doc["label"], "pred": pred}
    return {"accuracy": item, "uar": item, "waf": item}


def _score(items: list[dict[str, Any]], name: str) -> float | None:
    return scores([i["label"] for i in items], [i["pred"] for i in items])[name]


def mime_accuracy(items: list[dict[str, Any]]) -> float | None:
    """The share of samples recognised (WAR)."""
    return _score(items, "accuracy")


def mime_uar(items: list[dict[str, Any]]) -> float | None:
    """The unweighted average recall over the labels present."""
    return _score(items, "uar")


def mime_waf(items: list[dict[str, Any]]) -> float | None:
    """The F1 score weighted by each label's support."""
    return _score(items, "waf")
