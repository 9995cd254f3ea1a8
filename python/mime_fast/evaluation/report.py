"""The outputs of an evaluation run, from its predictions: ``predictions.jsonl`` and ``.parquet``,
``metrics.json``, ``report.md`` and, for ``recognize``, ``degradation.png`` (:mod:`.figure`)
(:func:`write_outputs`).

``metrics.json``:

- ``subsets.<CODE>``: ``n`` (answered clips: a request that still failed after its retries is left
  out and counted in ``failed``), ``accuracy`` (WAR), ``uar``, ``waf``, ``ci95`` (bootstrap over
  clips, fixed seed), ``parse_failures`` (unparseable answers: in ``n``, wrong), ``judged`` (answers
  the judge model read where the rules could not), ``failed``,
  ``with_audio`` (requests that carried the 16 kHz wav), ``prompt_tokens``, ``completion_tokens``;
- ``steps``: per degradation step (:data:`STEPS`) on the clips both subsets answered: ``n``,
  ``delta`` = accuracy(to) - accuracy(from), ``b`` (right in ``from``, wrong in ``to``), ``c`` (the
  reverse), ``p_mcnemar`` (exact, two-sided), ``p_holm`` (Holm over the steps tested);
- ``indices`` (accuracy differences on the clips all the subsets involved answered):
  ``audio_reliance`` = FM - AMM (what removing the audio costs with the face clear),
  ``face_reliance`` = FM - FSM (what removing the face structure costs with the audio),
  ``compensation`` = (FSM - FSAM) - (FM - AMM): how much more the audio is worth when the face is
  gone than when it is clear (> 0: the audio compensates for the face);
- ``confusion``: per subset, true label x answer (``unparseable`` a column of its own);
- ``datasets``: per manifest ``dataset``, per subset ``n``, ``accuracy``, ``uar``, ``waf``;
- ``coe_accepted``: with only the samples the CoE kept, how many and a warning when the model
  evaluated made the CoE, else ``None``;
- ``cost`` (with prices): ``money`` in all and per subset, the prices; ``not_sent`` (with
  ``max_cost``): the requests the spending limit kept back;
- ``facial_cue_rate`` (conditions with a rationale): per subset the share of replies describing
  facial movements; FSM/FSAM on the clips the audit shows masked throughout
  (:mod:`.hallucination`); ``None`` for ``direct``;
- ``transport_check``: with frames sent, whether they keep FDM's blur (:mod:`.transport`), else ``None``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..manifest import EMOTIONS, atomic_write, write_jsonl, write_parquet
from ..spec import CODES, spec as subset_spec
from .metrics import bootstrap_ci, confusion, holm, mcnemar_exact, scores

__all__ = ["PREDICTION_COLUMNS", "STEPS", "metrics", "pairs_markdown", "report_markdown", "statements_markdown",
           "write_outputs"]

PREDICTIONS = "predictions.jsonl"
PREDICTIONS_PARQUET = "predictions.parquet"
METRICS = "metrics.json"
REPORT = "report.md"
FIGURE = "degradation.png"
#: The columns of predictions.jsonl / .parquet, one row per request (clip x subset, and question).
PREDICTION_COLUMNS = ("clip_id", "subset", "dataset", "label", "task", "kind", "question", "expected", "answer",
                      "judged", "correct", "status", "reason", "reply", "video", "audio", "prompt_tokens",
                      "completion_tokens", "latency_s", "cached", "key")
_TYPES = {"correct": "bool_", "cached": "bool_", "judged": "bool_", "prompt_tokens": "int64",
          "completion_tokens": "int64",
          "latency_s": "float64"}

#: The degradation steps tested, (from, to): face details, face structure, picture, audio.
STEPS = (("FM", "FDM"), ("FDM", "FSM"), ("FM", "FSM"), ("FM", "VMM"), ("FM", "AMM"), ("FDM", "FDAM"),
         ("FSM", "FSAM"))


def _subset(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == "ok"]
    out = scores([r["label"] for r in ok], [r["answer"] for r in ok])
    out["ci95"] = bootstrap_ci([r["correct"] for r in ok])
    out["parse_failures"] = sum(r["answer"] is None for r in ok)
    out["judged"] = sum(bool(r["judged"]) for r in ok)
    out["failed"] = len(rows) - len(ok)
    out["with_audio"] = sum(r["audio"] is not None for r in rows)
    out["prompt_tokens"] = sum(r["prompt_tokens"] for r in ok)
    out["completion_tokens"] = sum(r["completion_tokens"] for r in ok)
    return out


def _correct_by_clip(preds: list[dict[str, Any]]) -> dict[str, dict[str, bool]]:
    """Per subset: clip -> whether its answer was right (answered clips only)."""
    out: dict[str, dict[str, bool]] = {}
    for r in preds:
        if r["status"] == "ok":
            out.setdefault(r["subset"], {})[r["clip_id"]] = bool(r["correct"])
    return out


def _accuracy_difference(right: dict[str, dict[str, bool]], plus: tuple[str, ...], minus: tuple[str, ...]) -> Any:
    """sum(accuracy of ``plus``) - sum(accuracy of ``minus``) on the clips all of them answered."""
    codes = plus + minus
    if any(c not in right for c in codes):
        return None
    clips = set.intersection(*(set(right[c]) for c in codes))
    if not clips:
        return None
    acc = {c: sum(right[c][k] for k in clips) / len(clips) for c in codes}
    return {"value": sum(acc[c] for c in plus) - sum(acc[c] for c in minus), "n": len(clips)}


def metrics(preds: list[dict[str, Any]], *, model: str, sent: dict[str, Any], unlabelled: int = 0,
            transport_check: dict[str, Any] | None = None,
            coe_accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metrics of the predictions ``preds`` (see the module's docstring)."""
    codes = [c for c in CODES if any(r["subset"] == c for r in preds)]
    by_subset = {c: [r for r in preds if r["subset"] == c] for c in codes}
    right = _correct_by_clip(preds)
    steps = []
    for a, b in STEPS:
        if a not in right or b not in right:
            continue
        clips = sorted(set(right[a]) & set(right[b]))
        nb = sum(right[a][k] and not right[b][k] for k in clips)
        nc = sum(right[b][k] and not right[a][k] for k in clips)
        steps.append({"from": a, "to": b, "n": len(clips), "delta": (nc - nb) / len(clips) if clips else None,
                      "b": nb, "c": nc, "p_mcnemar": mcnemar_exact(nb, nc) if clips else None})
    for s, p in zip(steps, holm([s["p_mcnemar"] for s in steps])):
        s["p_holm"] = p
    datasets: dict[str, dict[str, Any]] = {}
    for d in sorted({str(r["dataset"]) for r in preds}):
        datasets[d] = {}
        for c in codes:
            ok = [r for r in by_subset[c] if str(r["dataset"]) == d and r["status"] == "ok"]
            datasets[d][c] = scores([r["label"] for r in ok], [r["answer"] for r in ok])
    ok_rows = [r for r in preds if r["status"] == "ok"]
    return {
        "task": "recognize",
        "model": model,
        "sent": sent,
        "transport_check": transport_check,
        "coe_accepted": coe_accepted,
        "clips": len({r["clip_id"] for r in preds}),
        "unlabelled_clips": unlabelled,
        "subsets": {c: _subset(by_subset[c]) for c in codes},
        "steps": steps,
        "indices": {
            "audio_reliance": _accuracy_difference(right, ("FM",), ("AMM",)),
            "face_reliance": _accuracy_difference(right, ("FM",), ("FSM",)),
            "compensation": _accuracy_difference(right, ("FSM", "AMM"), ("FSAM", "FM")),
        },
        "confusion": {c: confusion([r["label"] for r in by_subset[c] if r["status"] == "ok"],
                                   [r["answer"] for r in by_subset[c] if r["status"] == "ok"], EMOTIONS)
                      for c in codes},
        "datasets": datasets,
        "tokens": {"prompt": sum(r["prompt_tokens"] for r in ok_rows),
                   "completion": sum(r["completion_tokens"] for r in ok_rows)},
    }


def _f(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def report_markdown(m: dict[str, Any]) -> str:
    """``report.md``: what was sent, the per-subset table, the steps and indices, per dataset."""
    sent = m["sent"]
    media = ("the subset's mp4 as a video_url data URL" if sent["transport"] == "video" else
             (f"{sent['fps']:g} JPEG frames per second of clip" if sent.get("fps")
              else f"{sent['frames']} JPEG frames")
             + f" (longest side {sent['frame_size']} px, qscale {sent['frame_quality']})")
    audio = ("the clip's 16 kHz wav as input_audio with the subsets that have audio" if sent["audio"] == "auto"
             else "no audio with any subset") + ("; VMM without its black picture (its audio alone)"
                                                 if sent.get("vmm_picture") == "none" else "")
    left_out = f" ({m['unlabelled_clips']} unlabelled clips left out)" if m["unlabelled_clips"] else ""
    lines = [f"# Evaluation: {m['model']}, task {m['task']}, prompt `{sent['condition']}`", "",
             f"Sent: {media}; {audio}. {m['clips']} clips{left_out}.", ""]
    check = m["transport_check"]
    if check and check["kept"] is not None:
        lines += [f"Face detail FDM's blur removes: {check['removed_source']:.0%} at full size, "
                  f"{check['removed_sent']:.0%} on the frames sent ({check['frames']} frames compared).", ""]
    if check and check["warning"]:
        lines += [f"**Warning:** {check['warning']}.", ""]
    coe = m["coe_accepted"]
    if coe:
        lines += [f"Only the {coe['accepted']} clip x subset samples the Chain-of-Emotion accepted (MIME's final "
                  "benchmark).", ""] + ([f"**Warning:** {coe['warning']}.", ""] if coe["warning"] else [])
    tokens = f"Tokens: {m['tokens']['prompt']} in, {m['tokens']['completion']} out"
    cost = m.get("cost")
    if cost:
        tokens += (f"; at {cost['price_in'] or 0:g} in / {cost['price_out'] or 0:g} out per million: "
                   f"{cost['money']:.4f}")
    lines += [tokens + ".", ""]
    if m.get("not_sent"):
        lines += [f"**Stopped at the spending limit** ({cost and cost['max_cost']}): {m['not_sent']} requests were "
                  "not sent; the tables cover the answers received (rerun with a higher limit to resume).", ""]
    lines += ["| subset | picture | audio sent | n | accuracy | 95% CI | UAR | WAF | unparseable | failed |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for code, s in m["subsets"].items():
        ci = "—" if s["ci95"] is None else f"{s['ci95'][0]:.3f}–{s['ci95'][1]:.3f}"
        lines.append(f"| {code} | {subset_spec(code).video} | {s['with_audio']}/{s['n'] + s['failed']} | {s['n']} | "
                     f"{_f(s['accuracy'])} | {ci} | {_f(s['uar'])} | {_f(s['waf'])} | {s['parse_failures']} | "
                     f"{s['failed']} |")
    lines += ["", "## Degradation steps (paired, exact McNemar, Holm-corrected)", "",
              "| step | n | Δ accuracy | b (lost) | c (gained) | p | p (Holm) |", "|---|---|---|---|---|---|---|"]
    for s in m["steps"]:
        lines.append(f"| {s['from']} → {s['to']} | {s['n']} | {_f(s['delta'])} | {s['b']} | {s['c']} | "
                     f"{_f(s['p_mcnemar'], 4)} | {_f(s['p_holm'], 4)} |")
    lines += ["", "## Indices", "", "| index | value | n |", "|---|---|---|"]
    for k, v in m["indices"].items():
        lines.append(f"| {k.replace('_', ' ')} | {_f(v and v['value'])} | {v['n'] if v else 0} |")
    lines += ["", "audio reliance = FM − AMM; face reliance = FM − FSM; "
                  "compensation = (FSM − FSAM) − (FM − AMM)."]
    rates = m.get("facial_cue_rate")
    if rates:
        audited = any(r["audited"] for r in rates.values())
        lines += ["", "## Facial-cue descriptions in the rationales", "",
                  "Replies that describe facial movements (smile, frown, brows, ...) without saying the face cannot "
                  "be seen; on FSM and FSAM " + ("only the clips the audit shows masked in every frame: there they "
                                                 "are hallucinated." if audited else
                                                 "all clips (no audit.parquet: run mime-fast audit to keep only the "
                                                 "clips masked throughout)."), "",
                  "| subset | n | describing the face | rate |", "|---|---|---|---|"]
        for code, r in rates.items():
            lines.append(f"| {code} | {r['n']} | {r['describing']} | {_f(r['rate'])} |")
    if len(m["datasets"]) > 1:
        codes = list(m["subsets"])
        lines += ["", "## Accuracy per dataset", "", "| dataset | " + " | ".join(codes) + " |",
                  "|---|" + "---|" * len(codes)]
        for d, per in m["datasets"].items():
            lines.append(f"| {d} | " + " | ".join(f"{_f(per[c]['accuracy'])} (n={per[c]['n']})" for c in codes) + " |")
    lines += ["", "## Prompt", "", "System:", "", "> " + sent["system"], "", "User:", ""]
    lines += ["> " + line if line else ">" for line in sent["user"].splitlines()]
    return "\n".join(lines) + "\n"


def pairs_markdown(m: dict[str, Any]) -> str:
    """``report.md`` of task ``pairs`` (EmotionHallucer's table per subset)."""
    sent = m["sent"]
    lines = [f"# Evaluation: {m['model']}, task pairs (basic and hallucinated yes/no questions)", "",
             f"Sent: {'the mp4' if sent['transport'] == 'video' else 'JPEG frames'}, audio {sent['audio']}; "
             f"{m['clips']} clips.", "",
             "| subset | pairs | basic % | hallucinated % | overall % | d_y (~0) | r_fp (~0.5) | unparseable "
             "| failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for code, s in m["subsets"].items():
        lines.append(f"| {code} | {s['pairs']} | {_f(s['basic'], 1)} | {_f(s['hallucinated'], 1)} | "
                     f"{_f(s['overall'], 1)} | {_f(s['d_y'])} | {_f(s['r_fp'])} | {s['parse_failures']} | "
                     f"{s['failed']} |")
    lines += ["", "## Prompt", "", "> " + sent["user"].replace("\n", "\n> ")]
    return "\n".join(lines) + "\n"


def statements_markdown(m: dict[str, Any]) -> str:
    """``report.md`` of task ``statements`` (ESJ: accuracy per subset and kind of statement)."""
    sent = m["sent"]
    kinds = ("true_scene", "true_emotion", "reversed", "other_clip")
    lines = [f"# Evaluation: {m['model']}, task statements (is this statement from the CoE right?)", "",
             f"Sent: {'the mp4' if sent['transport'] == 'video' else 'JPEG frames'}, audio {sent['audio']}; "
             f"{m['clips']} clips.", "",
             "| subset | n | accuracy | " + " | ".join(kinds) + " | unparseable | failed |",
             "|---|---|---|" + "---|" * len(kinds) + "---|---|"]
    for code, s in m["subsets"].items():
        per = " | ".join(f"{_f(s['by_kind'][k]['accuracy'])} (n={s['by_kind'][k]['n']})" for k in kinds)
        lines.append(f"| {code} | {s['n']} | {_f(s['accuracy'])} | {per} | {s['parse_failures']} | {s['failed']} |")
    return "\n".join(lines) + "\n"


def write_outputs(run_dir: Path, preds: list[dict[str, Any]], m: dict[str, Any]) -> None:
    """``predictions.jsonl``, ``predictions.parquet``, ``metrics.json``, ``report.md`` and (task
    ``recognize``) ``degradation.png`` in ``run_dir``, each written atomically."""
    import pyarrow as pa

    schema = pa.schema([(c, getattr(pa, _TYPES.get(c, "string"))()) for c in PREDICTION_COLUMNS])
    report = {"recognize": report_markdown, "pairs": pairs_markdown, "statements": statements_markdown}[m["task"]]
    atomic_write(run_dir / PREDICTIONS, lambda tmp: write_jsonl(preds, tmp))
    table = pa.Table.from_pylist(preds, schema=schema)
    atomic_write(run_dir / PREDICTIONS_PARQUET, lambda tmp: write_parquet(table, tmp))
    atomic_write(run_dir / METRICS, lambda tmp: tmp.write_text(json.dumps(m, indent=2, ensure_ascii=False) + "\n",
                                                               encoding="utf-8"))
    atomic_write(run_dir / REPORT, lambda tmp: tmp.write_text(report(m), encoding="utf-8"))
    if m["task"] == "recognize":
        from .figure import degradation_png

        degradation_png(m, run_dir / FIGURE)
