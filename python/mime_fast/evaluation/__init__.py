"""``mime-fast eval``: multimodal models evaluated on a built MIME corpus, subset by subset.

>>> import mime_fast
>>> from mime_fast.coe import ClientOptions
>>> client = ClientOptions("http://localhost:8000/v1", "Qwen/Qwen3-Omni-30B-A3B-Instruct")
>>> res = mime_fast.evaluate("mime_out", client)
>>> res.metrics["steps"]        # FM->FDM, ..., paired exact McNemar tests

:mod:`.runner` (the requests), :mod:`.prompts`, :mod:`.answers` (answer extraction),
:mod:`.metrics` (the statistics), :mod:`.report` (``metrics.json``, ``report.md``). Needs the
``coe`` extra (the openai client).
"""

from __future__ import annotations

from .answers import extract_emotion
from .prompts import CONDITIONS
from .report import STEPS
from .runner import AUDIO_MODES, TASKS, TRANSPORTS, EvalResult, evaluate, run_name

__all__ = ["AUDIO_MODES", "CONDITIONS", "STEPS", "TASKS", "TRANSPORTS", "EvalResult", "evaluate", "extract_emotion",
           "run_name"]
