"""What a CoE run writes beside the manifest: ``coe.jsonl`` (a row per sample as it ends, compacted
to one per clip x subset), ``coe.parquet`` and ``coe_summary.csv``, their :data:`COLUMNS`, and the
run's result (:class:`CoEResult`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..manifest import EMOTIONS, atomic_write, write_jsonl, write_parquet
from ..spec import CODES

__all__ = ["COE_JSONL", "COE_PARQUET", "COE_SUMMARY", "COLUMNS", "CoEResult", "SUBSETS", "read_coe", "summary_counts", "summary_table", "write_coe_outputs"]


COE_JSONL = "coe.jsonl"
COE_PARQUET = "coe.parquet"
COE_SUMMARY = "coe_summary.csv"
SUBSETS = CODES  # the MIME order (mime_fast.spec)
_NUMBER = {s: i + 1 for i, s in enumerate(SUBSETS)}

#: The columns of coe.jsonl / coe.parquet (``None`` where a stage did not run).
COLUMNS: tuple[str, ...] = (
    "clip_id", "subset", "label", "dataset", "status", "reason", "model", "text_model",
    "video", "blur_level", "kernel", "media_mode",
    "stage1_video", "stage1_audio", "stage1_key", "stage1_output", "stage1_s",
    "stage2_prompt", "stage2_video", "stage2_audio", "stage2_key", "stage2_output", "stage2_s",
    "stage3_key", "stage3_output", "stage3_attempts", "predicted_emotion", "emotion_cues", "stage3_s",
    "stage4_video", "stage4_audio", "stage4_key", "stage4_output", "stage4_attempts", "scene_understanding",
    "emotional_analysis", "coe", "stage4_s",
    "prompt_tokens", "completion_tokens", "requests", "cached_replies", "seconds", "run",
)
_INT = {"kernel", "stage3_attempts", "stage4_attempts", "prompt_tokens", "completion_tokens", "requests",
        "cached_replies"}
_FLOAT = {"stage1_s", "stage2_s", "stage3_s", "stage4_s", "seconds"}


def read_coe(corpus_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of ``corpus_dir/coe.jsonl``, one per (clip, subset), the latest of each (torn lines
    of a killed run skipped)."""
    path = Path(corpus_dir) / COE_JSONL
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "clip_id" in obj:
                latest[(obj["clip_id"], obj.get("subset"))] = {c: obj.get(c) for c in COLUMNS}
    order = {s: i for i, s in enumerate(SUBSETS)}
    return sorted(latest.values(), key=lambda r: (str(r["clip_id"]), order.get(r["subset"], 99)))


def write_coe_outputs(corpus: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    def parquet(tmp: Path) -> None:
        schema = pa.schema([(c, pa.int64() if c in _INT else pa.float64() if c in _FLOAT else pa.string())
                            for c in COLUMNS])
        write_parquet(pa.Table.from_pylist(rows, schema=schema), tmp)

    def summary(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("subset,emotion,accepted,rejected,failed\n")
            for (subset, emotion), c in summary_counts(rows).items():
                f.write(f"{subset},{emotion},{c['ok']},{c['rejected']},{c['failed']}\n")

    atomic_write(corpus / COE_JSONL, lambda tmp: write_jsonl(rows, tmp))
    atomic_write(corpus / COE_PARQUET, parquet)
    atomic_write(corpus / COE_SUMMARY, summary)


def summary_counts(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (subset, emotion): samples accepted (``ok``), ``rejected`` and ``failed``."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        key = (r["subset"], r["label"] or "(none)")
        c = counts.setdefault(key, {"ok": 0, "rejected": 0, "failed": 0})
        c[r["status"]] = c.get(r["status"], 0) + 1
    order = {s: i for i, s in enumerate(SUBSETS)}
    emo = {e: i for i, e in enumerate(EMOTIONS)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 99), emo.get(kv[0][1], 99))))


def summary_table(rows: Iterable[dict[str, Any]]) -> str:
    """The paper's filtering statistics: accepted/rejected per emotion (rows) and subset (columns),
    then the failures, which are neither."""
    rows = list(rows)
    counts = summary_counts(rows)
    labels = [e for e in (*EMOTIONS, "(none)") if any(k[1] == e for k in counts)]
    width = max([len("emotion"), len("total")] + [len(e) for e in labels])
    cell = lambda c: f"{c['ok']}/{c['rejected']}"  # noqa: E731
    lines = ["accepted/rejected per subset and emotion",
             f"{'emotion':<{width}} " + " ".join(f"{s:>9}" for s in SUBSETS)]
    zero = {"ok": 0, "rejected": 0, "failed": 0}
    for e in labels:
        lines.append(f"{e:<{width}} " + " ".join(f"{cell(counts.get((s, e), zero)):>9}" for s in SUBSETS))
    totals = {s: {k: sum(c[k] for (ss, _), c in counts.items() if ss == s) for k in zero} for s in SUBSETS}
    lines.append(f"{'total':<{width}} " + " ".join(f"{cell(totals[s]):>9}" for s in SUBSETS))
    failed = sum(t["failed"] for t in totals.values())
    if failed:
        lines.append(f"failed: {failed} (see the reason column of {COE_JSONL})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- running


@dataclass
class CoEResult:
    """What :func:`run` did: the rows of this run, the output files' rows (all runs), HTTP
    requests made, replies from the cache, tokens used, and for ``dry_run`` the requests."""

    rows: list[dict[str, Any]]
    all_rows: list[dict[str, Any]]
    requests: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    elapsed_s: float
    dry_run_requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "rejected": 0, "failed": 0}
        for r in self.rows:
            out[r["status"]] += 1
        return out

