"""Chain-of-Emotion (CoE) generation over a built corpus: the MIME paper's four MLLM stages
(Algorithm 1) against any OpenAI-compatible chat endpoint.

>>> from mime_fast import coe
>>> client = coe.ClientOptions("http://localhost:8000/v1", "Qwen/Qwen3-Omni-30B-A3B-Instruct")
>>> res = coe.run("mime_out", client)
>>> print(coe.summary_table(res.all_rows))

Writes ``coe.jsonl``, ``coe.parquet`` and ``coe_summary.csv`` beside the manifest; columns in
:data:`COLUMNS` (see :mod:`mime_fast.coe.chain`; the run: :mod:`mime_fast.coe.runner`). Needs the ``coe`` extra
(``pip install 'mime_fast[coe]'``: openai, jinja2, jsonschema).
"""

from __future__ import annotations

from .client import ClientOptions
from .outputs import COE_JSONL, COE_PARQUET, COE_SUMMARY, COLUMNS, CoEResult, read_coe, summary_counts, summary_table
from .runner import run

__all__ = ["COE_JSONL", "ClientOptions", "COE_PARQUET", "COE_SUMMARY", "COLUMNS", "CoEResult", "read_coe", "run", "summary_counts",
           "summary_table"]
