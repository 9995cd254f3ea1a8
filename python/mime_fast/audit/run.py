"""The audit of an output folder (:func:`audit`): which clips (all, given, or a seeded sample), the
journal that lets a rerun reuse unchanged clips, the clips audited in this process or in worker
processes, the report."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterable

from ..manifest import atomic_write
from .clip import audit_clip, load_models, manifest_kernels
from .protocol import AUDIT_REVISION, AUDITED, FMR, JOURNAL
from .report import AuditReport, failed_rows, write_audit_parquet
from .verdicts import find_problems

__all__ = ["audit", "clip_ids", "sample_clips"]


def clip_ids(out_dir: Path) -> list[str]:
    """The clips of an output folder: those with an FM file."""
    return sorted(p.stem for p in (Path(out_dir) / "FM").glob("*.mp4") if not p.name.startswith("."))


def sample_clips(ids: Iterable[str], n: int) -> list[str]:
    """``n`` of ``ids``, the same ones every time: the first ``n`` by the SHA-256 of the clip id
    (spread over the corpus whatever the order or names of its clips; a clip added to the corpus
    takes the place of a sampled one only if its hash comes first), in id order."""
    return sorted(sorted(ids, key=lambda c: hashlib.sha256(c.encode()).hexdigest())[:max(0, n)])


def _file_stats(out_dir: Path, clip_id: str) -> dict[str, list[int]]:
    """``{subset: [size, mtime_ns]}`` of the files of ``clip_id`` the audit reads (FM and the
    audited subsets present)."""
    out = {}
    for s in ("FM", *AUDITED):
        with contextlib.suppress(OSError):
            st = (out_dir / s / f"{clip_id}.mp4").stat()
            out[s] = [st.st_size, st.st_mtime_ns]
    return out


def _read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """The latest entry per clip of an audit journal (``{}`` when absent); lines that cannot be read
    (the last one of an audit killed while writing it) are ignored."""
    entries: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(FileNotFoundError):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    e = json.loads(line)
                    entries[str(e["clip_id"])] = e
                except (ValueError, KeyError, TypeError):
                    continue
    return entries


def audit(out_dir, *, clips: Iterable[str] | None = None, every: int = 1, detect_size: int | None = 640,
          fmr: float = FMR, write: bool = True, resume: bool = True, sample: int | None = None,
          progress: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the clips of ``out_dir`` (default: every clip with an FM file; see the module docstring).

    ``every``: audit every n-th frame (1: all); ``detect_size``: the longer side of the frame given to
    the audit's face detector (``None``: native size); ``fmr``: the false-match rate verification's threshold is set at;
    ``write``: write ``out_dir/audit.parquet`` and journal each clip in ``out_dir/audit.jsonl``;
    ``resume``: reuse the journal's rows of the clips whose files (size and modification time) and
    audit settings are unchanged (:attr:`AuditReport.reused` counts them); ``sample``: audit that
    many of the clips (:func:`sample_clips`); ``progress(clip_id)`` is called before each clip audited.
    A clip whose files cannot be read (truncated, empty, corrupt) gets ``failed`` rows saying why
    (:attr:`AuditReport.failed`) and the others are audited; failed clips are audited again on a rerun.
    Raises ``FileNotFoundError`` when ``out_dir`` has no FM folder or a clip of ``clips`` no FM file,
    :class:`mime_fast.detect.ModelNotAvailable` when the audit's models are not installed."""
    out_dir = Path(out_dir)
    if every < 1:
        raise ValueError("every must be >= 1")
    if not (out_dir / "FM").is_dir():
        raise FileNotFoundError(f"{out_dir} holds no FM folder: not an output folder of mime-fast build")
    if sample is not None and sample < 1:
        raise ValueError("sample must be >= 1")
    ids = clip_ids(out_dir) if clips is None else list(clips)
    missing = [cid for cid in ids if not (out_dir / "FM" / f"{cid}.mp4").is_file()]
    if missing:
        raise FileNotFoundError(f"no FM file for clip(s) {', '.join(map(repr, missing))} in {out_dir}")
    if sample is not None:
        ids = sample_clips(ids, sample)
    models = load_models(detect_size)
    kernels = manifest_kernels(out_dir)
    journal = out_dir / JOURNAL
    entries = _read_journal(journal) if write else {}
    rows: list[dict[str, Any]] = []
    reused = 0
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(journal, "a", encoding="utf-8")) if write else None
        for cid in ids:
            key = {"audit_revision": AUDIT_REVISION, "every": every, "detect_size": detect_size,
                   "fmr": fmr, "recogniser": models.recogniser, "distractors": models.distractors, "kernels": kernels.get(cid, {})}
            files = _file_stats(out_dir, cid)
            e = entries.get(cid)
            if (resume and e is not None and e.get("key") == key and e.get("files") == files
                    and all(r.get("status") != "failed" for r in e.get("rows", []))):
                rows += e["rows"]
                reused += 1
                continue
            if progress is not None:
                progress(cid)
            try:
                got = audit_clip(out_dir, cid, models, every=every, fmr=fmr, kernels=kernels.get(cid, {}))
            except Exception as exc:  # noqa: BLE001 - one bad clip never stops the audit: its rows say why
                got = failed_rows(out_dir, cid, exc, models.recogniser, fmr)
            rows += got
            if log is not None:
                entries[cid] = {"clip_id": cid, "key": key, "files": files, "rows": got}
                log.write(json.dumps(entries[cid], separators=(",", ":")) + "\n")
                log.flush()
    path = None
    if write:
        # the journal compacted: the latest entry of every clip it knows (not only this run's)
        atomic_write(journal, lambda tmp: Path(tmp).write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries.values()), encoding="utf-8"))
        path = out_dir / "audit.parquet"
        write_audit_parquet(path, rows)
    return AuditReport(rows, path, fmr, find_problems(rows), reused)

