"""The curation's outputs (:func:`write_all`): ``selected.csv`` (``path, clip_id, emotion, dataset``:
a list ``mime-fast build`` reads), ``excluded.csv`` (``path, dataset, reason``), ``report.md``
(counts per emotion and corpus before and after, each rule's exclusions, shortfalls, the overlays
found) and ``balance.png`` (the long tail before and after, drawn with matplotlib).  Each is written
to a temporary and renamed into place once all are written; the same curation gives the same bytes
(the PNG without a date or software version)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from ..manifest import EMOTIONS
from . import labels, watermark
from .options import CurateOptions, Curation

__all__ = ["OUTPUTS", "RULES", "write_all"]

OUTPUTS = ("selected.csv", "excluded.csv", "report.md", "balance.png")
#: The rules in the order they apply, as ``excluded.csv``'s reasons and the report name them.
RULES = ("layout", "label", "ambiguity", "unreadable", "resolution", "duration", "watermark", "duplicate", "balance")
OTHER = "(other or no label)"


def _csv(rows: list[list[str]]) -> bytes:
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


def _before(clip) -> str:
    if clip.emotion is not None:
        return clip.emotion
    if clip.raw_label is None:
        return OTHER
    return labels.to_mime(clip.raw_label, "DFEW" if clip.dataset == "DFEW" else "") or OTHER


def _table(head: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return lines


def _counts(result: Curation):
    datasets = sorted({c.dataset for c in result.clips})
    rows = [*EMOTIONS, OTHER]
    before = {(e, d): 0 for e in rows for d in datasets}
    after = dict(before)
    for c in result.clips:
        before[(_before(c), c.dataset)] += 1
    for c in result.selected:
        after[(c.emotion, c.dataset)] += 1
    return datasets, rows, before, after


def markdown(result: Curation, options: CurateOptions) -> str:
    datasets, rows, before, after = _counts(result)
    per = options.per_class if options.per_class is not None else "all"
    out = ["# Curation report", "",
           (f"Options: --per-class {per}, --seed {options.seed}, --min-agreement {options.min_agreement:g}, "
           f"--min-height {options.min_height}, --min-duration {options.min_duration:g}, --watermarks {options.watermarks}."), "",
           f"{len(result.clips)} clips found, {len(result.selected)} selected.", "",
           "## Clips per emotion and corpus (before -> after)", ""]
    table = []
    for e in rows:
        cells = [f"{before[(e, d)]} -> {after[(e, d)]}" for d in datasets]
        table.append([e, *cells, f"{sum(before[(e, d)] for d in datasets)} -> {sum(after[(e, d)] for d in datasets)}"])
    out += _table(["emotion", *datasets, "total"], table)
    out += ["", "## Exclusions per rule", ""]
    excl = [[rule, *(sum(1 for c in result.clips if c.rule == rule and c.dataset == d) for d in datasets),
             sum(1 for c in result.clips if c.rule == rule)] for rule in RULES]
    out += _table(["rule", *datasets, "total"], excl)
    if options.per_class is not None:
        out += ["", "## Shortfalls", ""]
        if result.shortfall:
            out += [f"- {e}: {n} short of {options.per_class} ({options.per_class - n} available)"
                    for e, n in sorted(result.shortfall.items())]
        else:
            out += [f"None: every emotion has {options.per_class} clips."]
    out += ["", "## Static overlays found (watermarks, logos)", ""]
    by_id = {c.clip_id: c for c in result.clips}
    if result.overlays:
        found = []
        for clip_id in sorted(result.overlays):
            c = by_id[clip_id]
            severe = watermark.judge(result.overlays[clip_id])
            verdict = ("excluded" if c.rule == "watermark" else "severe, kept (--watermarks report)") if severe \
                else "kept (not severe)"
            found.append([clip_id, c.dataset, watermark.describe(result.overlays[clip_id]), verdict])
        out += _table(["clip", "dataset", "overlays (position, area, opacity)", "verdict"], found)
    else:
        out += ["None found."]
    return "\n".join(out) + "\n"


def balance_png(result: Curation) -> bytes:
    """Bars per emotion, most frequent first: the clips with each label before and the selected ones after."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # the curate extra
    from matplotlib.figure import Figure

    datasets, _rows, before, after = _counts(result)
    emotions = sorted(EMOTIONS, key=lambda e: (-sum(before[(e, d)] for d in datasets), e))
    b = [sum(before[(e, d)] for d in datasets) for e in emotions]
    a = [sum(after[(e, d)] for d in datasets) for e in emotions]
    fig = Figure(figsize=(7, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = list(range(len(emotions)))
    ax.bar([i - 0.2 for i in x], b, width=0.4, color="#bbbbbb", label="before (clips found)")
    ax.bar([i + 0.2 for i in x], a, width=0.4, color="#1f5fa8", label="after (selected)")
    for i in x:
        ax.text(i + 0.2, a[i], str(a[i]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, emotions)
    ax.set_ylabel("clips")
    ax.set_title("MIME curation: clips per emotion, before and after")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def write_all(out: Path, result: Curation, options: CurateOptions) -> dict[str, Path]:
    """Write the four outputs into ``out`` (temporaries, then renamed); their paths by name."""
    selected = [["path", "clip_id", "emotion", "dataset"]] + [
        [os.path.abspath(c.path), c.clip_id, c.emotion, c.dataset] for c in result.selected]
    excluded = [["path", "dataset", "reason"]] + [
        [os.path.abspath(c.path), c.dataset, c.reason]
        for c in sorted((c for c in result.clips if c.reason is not None), key=lambda c: (c.dataset, str(c.path)))]
    data = {"selected.csv": _csv(selected), "excluded.csv": _csv(excluded),
            "report.md": markdown(result, options).encode("utf-8"), "balance.png": balance_png(result)}
    temps = {}
    try:
        for name in OUTPUTS:
            tmp = out / f".{name}.tmp-{os.getpid()}"
            tmp.write_bytes(data[name])
            temps[name] = tmp
        for name, tmp in temps.items():
            os.replace(tmp, out / name)
    finally:
        for tmp in temps.values():
            if tmp.exists():
                tmp.unlink()
    return {name: out / name for name in OUTPUTS}
