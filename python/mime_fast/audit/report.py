"""What :func:`mime_fast.audit.audit` returns (:class:`AuditReport`: its rows, its problems, its table
with each recogniser's findings explained), the rows of a clip that could not be read
(:func:`failed_rows`) and ``audit.parquet`` written whole (:func:`write_audit_parquet`)."""

from __future__ import annotations

import contextlib
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

__all__ = ["AuditReport", "failed_rows", "write_audit_parquet"]


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
        """Per subset, FM (the baseline) first: clips, probes, rank-1 identification rate and TAR of
        each recogniser (mean over the clips' probes), chance, clips re-identified, detail, unmasked,
        identity."""
        recs = RECOGNISERS
        head = (f"{'subset':<6} {'clips':>5} {'probes':>6} "
                + " ".join(f"{'r1 ' + r:>8} {'tar ' + r:>9}" for r in recs)
                + f" {'chance':>6} {'re-id':>5} {'detail':>6} {'unmasked':>8} {'identity':>8}  intent")
        lines = [head]
        for s in ("FM", *AUDITED):
            col = "baseline_" if s == "FM" else ""
            rs = [r for r in self.rows if r["subset"] == ("FDM" if s == "FM" else s) and r["status"] == "ok"]
            if s == "FM":  # FM's figures are in every row; FDM's rows (or the first present subset's)
                seen, rs = set(), []
                for r in self.rows:
                    if r["status"] == "ok" and r["clip_id"] not in seen:
                        seen.add(r["clip_id"])
                        rs.append(r)
            probes = sum(r["probes"] or 0 for r in rs)

            def mean(c: str, rs: list[dict[str, Any]] = rs) -> str:
                v = [(r[c], r["probes"]) for r in rs if r.get(c) is not None and r["probes"]]
                return f"{sum(x * n for x, n in v) / sum(n for _, n in v):.3f}" if v else "-"

            chance = [r["chance_rank1"] for r in rs if r.get("chance_rank1") is not None]
            det = [r["detail_ratio"] for r in rs if r["detail_ratio"] is not None]
            figures = " ".join(f"{mean(col + 'rank1_' + r):>8} {mean(col + 'tar_' + r):>9}" for r in recs)
            if s == "FM":
                lines.append(f"{s:<6} {len(rs):>5} {probes:>6} {figures} "
                             f"{(f'{max(chance):.4f}' if chance else '-'):>6} {'':>5} {'':>6} {'':>8} {'':>8}  "
                             "clear: the baseline (should be re-identified)")
                continue
            lines.append(f"{s:<6} {len(rs):>5} {probes:>6} {figures} "
                         f"{(f'{max(chance):.4f}' if chance else '-'):>6} {sum(bool(r['reidentified']) for r in rs):>5} "
                         f"{(f'{float(np.median(det)):.3f}' if det else '-'):>6} "
                         f"{sum(r['unmasked_frames'] for r in rs):>8} "
                         f"{sum(r.get('identity_frames') or 0 for r in rs):>8}  {INTENT[s]}")
        lines.append(
            f"r1: rank-1 identification rate of the subject's faces (probes) against a gallery of his clear faces "
            f">= {GALLERY_GAP_S:g} s away and impostors (the clip's other people, {DISTRACTOR_NOTE}); tar: share "
            f"verified at a false-match rate of {self.fmr:g} on clear impostor pairs; chance: 1 / identities; "
            f"re-id: clips where every recogniser's rank-1 rate is >= chance + {REID_MARGIN:g} and TAR >= "
            f"{self.fmr:g} + {REID_MARGIN:g}; unmasked: the "
            f"subject's face kept its detail; identity: frames where another clear face is re-identified as him")
        return "\n".join(lines)


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


