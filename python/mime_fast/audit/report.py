"""What :func:`mime_fast.audit.audit` returns (:class:`AuditReport`: its rows, its problems, its table
with each recogniser's findings explained), the rows of a clip that could not be read
(:func:`failed_rows`) and ``audit.parquet`` written whole (:func:`write_audit_parquet`)."""

from __future__ import annotations

import contextlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..manifest import atomic_write, write_parquet
from ..media import ClipError
from .gallery import DISTRACTOR_NOTE
from .protocol import (
    AUDITED,
    COLUMNS,
    FMR,
    GALLERY_GAP_S,
    INTENT,
    RECOGNISERS,
    REID_MARGIN,
)
from .verdicts import recogniser_reidentifies

__all__ = ["TABLE_WIDTH", "AuditReport", "failed_rows", "write_audit_parquet"]

#: The widest line of :meth:`AuditReport.table`.
TABLE_WIDTH: int = 100


@dataclass
class AuditReport:
    """What :func:`audit` found: ``rows`` (:data:`COLUMNS`, one per clip x subset) and the folder
    written (``path``: ``audit.parquet``, ``None`` when not written)."""

    rows: list[dict[str, Any]]
    path: Path | None = None
    fmr: float = FMR
    problems: list[str] = field(default_factory=list)
    #: clips whose rows were reused from ``audit.jsonl`` (files and settings unchanged), not audited again
    reused: int = 0

    @property
    def ok(self) -> bool:
        """Every clip audited, no heavy-blur subset (FSM, FSAM) re-identified, no subject face
        unmasked and no other clear face re-identified as the subject."""
        return not self.problems and not self.failed

    @property
    def failed(self) -> dict[str, str]:
        """The clips the audit could not read (their rows' status ``failed``): clip id -> reason."""
        return {r["clip_id"]: r["reason"] for r in self.rows if r["status"] == "failed"}

    def table(self) -> str:
        """Per subset, FM (the baseline) first, a block at most :data:`TABLE_WIDTH` characters wide:
        what MIME intends; clips, probes, chance and the detail, unmasked and identity counts; a line
        per recogniser (rank-1 identification rate and TAR, means over the clips' probes; in how many
        clips it re-identifies him, and which bar it fell short of elsewhere); the verdict and why it
        is what it is (:func:`mime_fast.audit.verdicts.reidentified`: every recogniser in the same
        clip).  A legend of short lines follows."""
        lines: list[str] = []
        for s in ("FM", *AUDITED):
            lines += self._block(s)
        lines += self._legend()
        return "\n".join(lines)

    def _subset_rows(self, s: str) -> list[dict[str, Any]]:
        if s != "FM":
            return [r for r in self.rows if r["subset"] == s and r["status"] == "ok"]
        # FM's figures are in every row of a clip: its first audited subset's
        seen: set[str] = set()
        out = []
        for r in self.rows:
            if r["status"] == "ok" and r["clip_id"] not in seen:
                seen.add(r["clip_id"])
                out.append(r)
        return out

    def _block(self, s: str) -> list[str]:
        rs = self._subset_rows(s)
        col = "baseline_" if s == "FM" else ""
        probes = sum(r["probes"] or 0 for r in rs)

        def mean(c: str) -> str:
            v = [(r[c], r["probes"]) for r in rs if r.get(c) is not None and r["probes"]]
            return f"{sum(x * n for x, n in v) / sum(n for _, n in v):.3f}" if v else "-"

        chance = [r["chance_rank1"] for r in rs if r.get("chance_rank1") is not None]
        intent = "clear: the baseline (should be re-identified)" if s == "FM" else INTENT[s]
        out = [f"{s}: {intent}"]
        counts = f"  {_n(len(rs), 'clip')}, {probes} probes, chance {f'{max(chance):.4f}' if chance else '-'}"
        if s != "FM":
            det = [r["detail_ratio"] for r in rs if r["detail_ratio"] is not None]
            counts += (f"; detail {f'{float(np.median(det)):.3f}' if det else '-'}, unmasked "
                       f"{sum(r['unmasked_frames'] for r in rs)}, identity "
                       f"{sum(r.get('identity_frames') or 0 for r in rs)}")
        out.append(counts)
        found = {}
        for name in RECOGNISERS:
            per_clip = [recogniser_reidentifies({f"rank1_{name}": r.get(f"{col}rank1_{name}"),
                                                 f"tar_{name}": r.get(f"{col}tar_{name}")},
                                                name, r["chance_rank1"], r["fmr"]) for r in rs]
            found[name] = per_clip
            bars = {(r["chance_rank1"] + REID_MARGIN, r["fmr"] + REID_MARGIN) for r in rs
                    if r.get("chance_rank1") is not None and r.get("fmr") is not None}
            out.append(f"  {name:<6} rank-1 {mean(col + 'rank1_' + name):>5}  TAR {mean(col + 'tar_' + name):>5}  "
                       + _what_it_found(per_clip, s == "FM", bars.pop() if len(bars) == 1 else None))
        if s != "FM":
            out.append("  " + _why(rs, found))
        return [w for line in out for w in textwrap.wrap(line, TABLE_WIDTH, subsequent_indent=" " * 9)]

    def _legend(self) -> list[str]:
        text = [
            f"probes: the subject's faces, each ranked against a gallery of identities: his clear faces "
            f">= {GALLERY_GAP_S:g} s away, the clip's other people and {DISTRACTOR_NOTE}.",
            "rank-1: share of probes whose best-scoring identity is his; chance: 1 / identities.",
            f"TAR: share of probes verified as him at a false-match rate of {self.fmr:g} on clear impostor pairs.",
            f"bars: a recogniser re-identifies him in a clip when rank-1 >= chance + {REID_MARGIN:g} and "
            f"TAR >= {self.fmr:g} + {REID_MARGIN:g}; re-id: clips where every recogniser does.",
            "detail: median detail left on his face (1 untouched); unmasked: frames where his face kept "
            "its detail; identity: frames where another clear face is re-identified as him.",
        ]
        return [line for t in text for line in textwrap.wrap(t, TABLE_WIDTH, subsequent_indent="  ")]


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def _what_it_found(per_clip: list[tuple[bool, bool] | None], baseline: bool,
                   bars: tuple[float, float] | None) -> str:
    """One recogniser's findings over a subset's clips (``(rank-1 past its bar, TAR past its bar)``
    per clip, ``None`` without probes; ``bars``: rank-1's and TAR's when every clip has the same),
    in words."""
    known = [f for f in per_clip if f is not None]
    if not known:
        return "no probes (the subject seen for under the gallery's gap)"
    hit = sum(all(f) for f in known)
    whom = "him" + (" (clear)" if baseline else "")
    if len(known) == 1:
        figs = [(n, ok, f" {b:.3f}" if bars else "") for (n, ok), b in zip((("rank-1", known[0][0]),
                                                                             ("TAR", known[0][1])), bars or (0, 0))]
        if all(ok for _, ok, _ in figs):
            return f"re-identifies {whom}: " + ", ".join(f"{n} >= bar{b}" for n, _, b in figs)
        return f"does not re-identify {whom}: " + ", ".join(f"{n} {'>=' if ok else '<'} bar{b}" for n, ok, b in figs)
    shorts = [f"{n} in {sum(not f[i] for f in known)}" for i, n in enumerate(("rank-1", "TAR"))
              if any(not f[i] for f in known)]
    return (f"re-identifies {whom} in {hit} of {_n(len(known), 'clip')}"
            + (f" (misses: {', '.join(shorts)})" if shorts else ""))


def _why(rs: list[dict[str, Any]], found: dict[str, list[tuple[bool, bool] | None]]) -> str:
    """The verdict over a subset's clips (:func:`mime_fast.audit.verdicts.reidentified` per clip) and
    why: the recognisers that did not re-identify him where another did."""
    judged = [r for r in rs if r.get("reidentified") is not None]
    k = sum(bool(r["reidentified"]) for r in judged)
    head = f"re-id {k} of {_n(len(judged), 'clip')}"
    if not judged:
        return f"{head}: no probes"
    if k == len(judged):
        return f"{head}: every recogniser re-identifies him"
    # the clips some recogniser re-identifies him in but not every one: who held the verdict back
    held = {n: sum(1 for i, r in enumerate(rs) if r.get("reidentified") is False and f[i] is not None
                   and not all(f[i]) and any(g[i] is not None and all(g[i]) for m, g in found.items() if m != n))
            for n, f in found.items()}
    why = [f"{n} does not ({_n(c, 'clip')})" for n, c in held.items() if c]
    if why:
        return f"{head}: re-identified only where every recogniser is; " + ", ".join(why)
    return f"{head}: " + ("no recogniser re-identifies him" if not k else "no recogniser does in the others")


def failed_rows(out_dir: Path, clip_id: str, exc: Exception, recogniser: str,
                 fmr: float) -> list[dict[str, Any]]:
    """The rows of a clip the audit could not read: ``failed`` for every subset, the reason in plain
    words naming the file (relative to ``out_dir``) when the error names one."""
    if isinstance(exc, ClipError):
        where = exc.path
        with contextlib.suppress(ValueError, TypeError):
            where = exc.path.resolve().relative_to(out_dir.resolve())
        reason = f"{where}: {exc.reason}"
    else:
        reason = str(exc) or type(exc).__name__
    return [{**{c: None for c in COLUMNS}, "clip_id": clip_id, "subset": s, "intent": INTENT[s], "fmr": fmr,
             "recognisers": recogniser, "status": "failed", "reason": reason} for s in AUDITED]


def write_audit_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    atomic_write(path, lambda tmp: write_parquet(table, tmp))


