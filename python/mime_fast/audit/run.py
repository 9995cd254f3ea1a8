"""The audit of an output folder (:func:`audit`): which clips (all, given, or a seeded sample), the
journal that lets a rerun reuse unchanged clips, the clips audited in this process or in worker
processes, the report."""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..manifest import atomic_write
from .clip import Models, audit_clip, load_models, manifest_kernels
from .gallery import distractor_gallery, prime_distractors
from .progress import AuditMonitor
from .protocol import AUDIT_REVISION, AUDITED, FMR, JOURNAL
from .report import AuditReport, failed_rows, write_audit_parquet
from .verdicts import find_problems

__all__ = ["ClipJob", "audit", "clip_ids", "sample_clips"]


def clip_ids(out_dir: Path) -> list[str]:
    """The clips of an output folder: those with an FM file."""
    return sorted(p.stem for p in (Path(out_dir) / "FM").glob("*.mp4") if not p.name.startswith("."))


def sample_clips(ids: Iterable[str], n: int, seed: int | None = None) -> list[str]:
    """``n`` of ``ids``, the same ones every time for the same ``seed``: the first ``n`` by the
    SHA-256 of the clip id (``seed`` given: of ``"{seed}/{clip id}"``), spread over the corpus whatever
    the order or names of its clips (a clip added to the corpus takes the place of a sampled one only
    if its hash comes first), in id order."""
    salt = "" if seed is None else f"{seed}/"
    return sorted(sorted(ids, key=lambda c: hashlib.sha256((salt + c).encode()).hexdigest())[:max(0, n)])


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


@dataclass(frozen=True)
class ClipJob:
    """What every clip of one audit is audited with (a worker process gets it whole)."""

    out_dir: Path
    every: int
    fmr: float
    detect_size: int | None


def _audit_one(job: ClipJob, models: Models, clip_id: str, kernels: dict[str, int | None],
               on_frames: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """One clip's rows; a clip whose files cannot be read gets ``failed`` rows saying why."""
    try:
        return audit_clip(job.out_dir, clip_id, models, every=job.every, fmr=job.fmr, kernels=kernels,
                          on_frames=on_frames)
    except Exception as exc:  # noqa: BLE001 - one bad clip never stops the audit: its rows say why
        return failed_rows(job.out_dir, clip_id, exc, models.recogniser, job.fmr)


_WORKER_MODELS: list[Models] = []  # a worker process's models (loaded once, by _start_worker)


def _start_worker(detect_size: int | None, distractors: dict[str, Any], threads: int) -> None:
    prime_distractors(distractors)
    _WORKER_MODELS.append(load_models(detect_size, threads=threads))


def _work(job: ClipJob, clip_id: str, kernels: dict[str, int | None]) -> tuple[list[dict[str, Any]], float]:
    t = time.monotonic()
    rows = _audit_one(job, _WORKER_MODELS[0], clip_id, kernels)
    return rows, time.monotonic() - t


def _audited(job: ClipJob, models: Models, todo: list[str], kernels: dict[str, dict[str, int | None]],
             workers: int, monitor: AuditMonitor) -> Iterator[tuple[str, list[dict[str, Any]], float]]:
    """``(clip id, rows, seconds)`` of each clip of ``todo``: in this process, in order (``workers``
    1), or as they end in ``workers`` spawned processes, each with its own models (the distractor
    gallery handed over, not computed again) and its share of the cores."""
    if workers <= 1 or len(todo) <= 1:
        for cid in todo:
            monitor.clip_started(cid)
            t = time.monotonic()
            rows = _audit_one(job, models, cid, kernels.get(cid, {}),
                              lambda p, n, cid=cid: monitor.frames(cid, p, n))
            yield cid, rows, time.monotonic() - t
        return
    n = min(workers, len(todo))
    monitor.status(f"starting {n} worker processes (each loads the audit's models)")
    pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                               initargs=(job.detect_size, distractor_gallery(models.recognisers),
                                         max(1, (os.cpu_count() or 1) // n)))
    try:
        futures = {pool.submit(_work, job, cid, kernels.get(cid, {})): cid for cid in todo}
        for fut in as_completed(futures):
            rows, seconds = fut.result()
            yield futures[fut], rows, seconds
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def audit(out_dir, *, clips: Iterable[str] | None = None, every: int = 1, detect_size: int | None = 640,
          fmr: float = FMR, write: bool = True, resume: bool = True, sample: int | None = None,
          seed: int | None = None, workers: int = 1, monitor: AuditMonitor | None = None) -> AuditReport:
    """Audit the clips of ``out_dir`` (default: every clip with an FM file; see :mod:`mime_fast.audit`).

    ``every``: audit every n-th frame (1: all); ``detect_size``: the longer side of the frame given to
    the audit's face detector (``None``: native size); ``fmr``: the false-match rate verification's threshold is set at;
    ``write``: write ``out_dir/audit.parquet`` and journal each clip in ``out_dir/audit.jsonl``;
    ``resume``: reuse the journal's rows of the clips whose files (size and modification time) and
    audit settings are unchanged (:attr:`AuditReport.reused` counts them); ``sample``: audit that
    many of the clips, chosen by ``seed`` (:func:`sample_clips`: the same seed, the same clips);
    ``workers``: audit the clips in that many processes (the same rows, in the same order, as one);
    ``monitor``: told what runs as it goes (:class:`mime_fast.audit.progress.AuditMonitor`).
    A clip whose files cannot be read (truncated, empty, corrupt) gets ``failed`` rows saying why
    (:attr:`AuditReport.failed`) and the others are audited; failed clips are audited again on a rerun.
    Raises ``FileNotFoundError`` when ``out_dir`` has no FM folder or a clip of ``clips`` no FM file,
    :class:`mime_fast.detect.ModelNotAvailable` when the audit's models are not installed."""
    out_dir = Path(out_dir)
    if every < 1:
        raise ValueError("every must be >= 1")
    if workers < 1:
        raise ValueError("workers must be >= 1")
    if not (out_dir / "FM").is_dir():
        raise FileNotFoundError(f"{out_dir} holds no FM folder: not an output folder of mime-fast build")
    if sample is not None and sample < 1:
        raise ValueError("sample must be >= 1")
    ids = clip_ids(out_dir) if clips is None else list(clips)
    missing = [cid for cid in ids if not (out_dir / "FM" / f"{cid}.mp4").is_file()]
    if missing:
        raise FileNotFoundError(f"no FM file for clip(s) {', '.join(map(repr, missing))} in {out_dir}")
    if sample is not None:
        ids = sample_clips(ids, sample, seed)
    monitor = monitor or AuditMonitor()
    monitor.status("loading the audit's models (and its distractor gallery, once per process)")
    models = load_models(detect_size)
    kernels = manifest_kernels(out_dir)
    journal = out_dir / JOURNAL
    entries = _read_journal(journal) if write else {}
    done: dict[str, list[dict[str, Any]]] = {}
    todo: dict[str, tuple[dict[str, Any], dict[str, list[int]]]] = {}  # clip -> (settings key, files)
    for cid in ids:
        key = {"audit_revision": AUDIT_REVISION, "every": every, "detect_size": detect_size,
               "fmr": fmr, "recogniser": models.recogniser, "distractors": models.distractors, "kernels": kernels.get(cid, {})}
        files = _file_stats(out_dir, cid)
        e = entries.get(cid)
        if (resume and e is not None and e.get("key") == key and e.get("files") == files
                and all(r.get("status") != "failed" for r in e.get("rows", []))):
            done[cid] = e["rows"]
        else:
            todo[cid] = (key, files)
    reused = len(done)
    monitor.start(list(todo), reused)
    job = ClipJob(out_dir, every, fmr, detect_size)
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(journal, "a", encoding="utf-8")) if write else None
        for cid, got, seconds in _audited(job, models, list(todo), kernels, workers, monitor):
            done[cid] = got
            monitor.clip_done(cid, got, seconds)
            if log is not None:
                key, files = todo[cid]
                entries[cid] = {"clip_id": cid, "key": key, "files": files, "rows": got}
                log.write(json.dumps(entries[cid], separators=(",", ":")) + "\n")
                log.flush()
    rows = [r for cid in ids for r in done[cid]]
    path = None
    if write:
        # the journal compacted: the latest entry of every clip it knows (not only this run's), by clip
        atomic_write(journal, lambda tmp: Path(tmp).write_text(
            "".join(json.dumps(entries[c], separators=(",", ":")) + "\n" for c in sorted(entries)),
            encoding="utf-8"))
        path = out_dir / "audit.parquet"
        write_audit_parquet(path, rows)
    return AuditReport(rows, path, fmr, find_problems(rows), reused)
