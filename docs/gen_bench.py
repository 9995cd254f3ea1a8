"""The docs' benchmark tables, generated from the committed results in ``bench/results/*.json``.

An MkDocs hook (``hooks:`` in ``mkdocs.yml``): every ``<!-- bench-table: NAME -->`` line of a page
becomes the table NAME, made from the JSON when the site is built, so the tables cannot drift from
the measurements.  Rerun a benchmark, commit its JSON, rebuild the site.

``python docs/gen_bench.py [NAME ...]`` prints the tables (all of them without a name).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
MARKER = re.compile(r"^<!-- bench-table: ([a-z0-9_]+) -->$", re.MULTILINE)


def load(name: str) -> dict:
    """``bench/results/<name>.json``."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _source(name: str, data: dict) -> str:
    machine = data.get("machine", {})
    return (f"*Generated from `bench/results/{name}.json` ({machine.get('cores', '?')} cores, "
            f"{machine.get('cpu', '?')}; {str(machine.get('date', '?'))[:10]}, commit "
            f"`{machine.get('git_commit', '?')}`).*")


def vs_reference() -> str:
    """The engine against the straightforward MIME pipeline (``bench/bench_vs_reference.py``)."""
    d = load("vs_reference-cpu")
    rows = [[f"{clip} ({c['source_frames']} frames)", f"{c['reference_s']:.1f} s", f"{c['mime_fast_s']:.1f} s",
             f"{c['speedup']:.2f}×", f"{c['source_fps_reference']:.1f} → {c['source_fps_mime_fast']:.1f}",
             f"{c['mask_iou']:.3f}"] for clip, c in d["clips"].items()]
    table = _table(["clip", "reference", "mime_fast", "speedup", "source fps (ref → mime_fast)", "mask IoU"], rows)
    return (f"{table}\n\n**`speedup_vs_reference` = {d['speedup_vs_reference']:.2f}×** (median over the clips; "
            f"target ≥ {d['target_speedup']:g}×; lowest {d['min_speedup']:.2f}×).\n\n{_source('vs_reference-cpu', d)}")


def vs_deface() -> str:
    """The engine's seven subsets against deface's one output (``bench/bench_vs_deface.py``)."""
    d = load("vs_deface-cpu")
    rows = [[clip, f"{c['deface_s']:.1f} s", f"{c['mime_fast_s']:.1f} s ({c['outputs']['mime_fast']} outputs)",
             f"{c['speedup']:.1f}×"] for clip, c in d["clips"].items()]
    table = _table(["clip", "deface, 1 output", "mime_fast, all subsets", "speedup"], rows)
    return (f"{table}\n\n**`min_speedup_vs_deface` = {d['min_speedup_vs_deface']:.2f}×**.\n\n"
            f"{_source('vs_deface-cpu', d)}")


def real_720p() -> str:
    """Issue 37's ratio on the real clips at 720p (``bench/bench_real.py``)."""
    d = load("real-720p-cpu")
    rows = [[clip, f"{c['end_to_end_over_encoders_alone']:.2f}×", f"{c['given_hulls_over_encoders_alone']:.2f}×",
             f"{c['detection_cpu_ms_per_frame']:.1f}", f"{c['detection_budget_cpu_ms_per_frame']:.1f}"]
            for clip, c in d["clips"].items()]
    table = _table(["clip", "end to end / encoders alone", "given the hulls / encoders alone",
                    "detection CPU, ms/frame", "budget, ms/frame"], rows)
    return f"{table}\n\n{_source('real-720p-cpu', d)}"


def _headline(data: dict) -> str:
    """The top-level numbers of a result (its headline figures), at most four."""
    figures = [f"{k} {v:.3g}" for k, v in data.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.startswith("target")]
    return ", ".join(figures[:4]) or "(per case, in the file)"


def index() -> str:
    """Every committed result: what, where it ran, when, its headline figures."""
    rows = []
    for path in sorted(RESULTS.glob("*.json")):
        d = json.loads(path.read_text())
        machine = d.get("machine", {})
        rows.append([f"`{path.name}`", str(d.get("benchmark", path.stem)), str(d.get("device", "?")),
                     f"{machine.get('cores', '?')} cores", str(machine.get("date", "?"))[:10],
                     f"`{machine.get('git_commit', '?')}`", _headline(d)])
    return _table(["file", "benchmark", "device", "machine", "date", "commit", "headline figures"], rows)


TABLES: dict[str, Callable[[], str]] = {"vs_reference": vs_reference, "vs_deface": vs_deface,
                                        "real_720p": real_720p, "index": index}


def render(markdown: str) -> str:
    """``markdown`` with each ``<!-- bench-table: NAME -->`` line replaced by its table."""
    def table(m: re.Match) -> str:
        if m.group(1) not in TABLES:
            raise KeyError(f"unknown bench table {m.group(1)!r} (known: {', '.join(TABLES)})")
        return TABLES[m.group(1)]()
    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, **kwargs) -> str:  # the MkDocs hook
    return render(markdown)


if __name__ == "__main__":
    for name in sys.argv[1:] or list(TABLES):
        print(f"<!-- {name} -->\n{TABLES[name]()}\n")
