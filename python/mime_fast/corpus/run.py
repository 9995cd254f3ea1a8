"""A corpus run (:func:`run_corpus`): settings and output folder checked, complete clips skipped,
the others built (:mod:`~mime_fast.corpus.workers`), manifest rows appended as clips finish and
compacted at the end; :class:`CorpusSummary` says what happened."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..media import check_writable
from ..manifest import (DUPLICATE, ManifestRead, ManifestWriter, compact, read_manifest, read_rows, utf8_text,
                        write_compacted)
from ..options import Settings, device_checked_elsewhere
from ..subsets import _codes
from .clip import STALLED, WORKER_DIED, _detects
from .inputs import ClipSpec
from .interrupts import _sigint_deferred, _sigint_flagged
from .pool import worker_process_results
from .progress import LineMonitor, Monitor
from .resume import (InProgress, _complete, check_same_settings, clean_stale_temporaries, clips_of_dead_runs,
                     settings_record)
from .workers import _chained, _detect_ahead_results, _ray_results, _sequential_results, exit_when_stalled

__all__ = ["CorpusSummary", "check_settings", "run_corpus"]


@dataclass
class CorpusSummary:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already complete
    failed: dict[str, str] = field(default_factory=dict)  # clip_id -> reason
    no_subject: list[str] = field(default_factory=list)  # done, but no face: face subsets skipped
    no_audio: list[str] = field(default_factory=list)  # done, but the source has no audio: no VMM
    frames: int = 0
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def check_settings(*, workers: int = 1, ray_cpus_per_clip: float = 1.0, clips_per_process: int = 1,
                   clip_timeout: float | None = None, use_ray: bool = False, settings: Settings | None = None,
                   **options: Any) -> Settings:
    """The settings of a :func:`run_corpus` (``settings`` changed by ``options``:
    :meth:`mime_fast.options.Settings.resolve`), checked before anything runs: ``ValueError`` or
    ``TypeError`` for a bad or unknown one, ``RuntimeError`` for a device that cannot be used here
    (with ``use_ray``, the device is the Ray workers' to check: the driver may have no GPU)."""
    if int(workers) < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if int(clips_per_process) < 1:
        raise ValueError(f"clips_per_process must be >= 1, got {clips_per_process}")
    if not float(ray_cpus_per_clip) > 0:
        raise ValueError(f"ray_cpus_per_clip must be > 0, got {ray_cpus_per_clip}")
    if clip_timeout is not None and not float(clip_timeout) >= 0:
        raise ValueError(f"clip_timeout must be >= 0 seconds (0: none), got {clip_timeout}")
    with device_checked_elsewhere() if use_ray else contextlib.nullcontext():
        return Settings.resolve(settings, **options)


#: Threads that check the outputs of earlier runs' clips at the start of a rerun (each file's size,
#: and its SHA-256 where its modification time changed, or with ``verify``): hashing releases the
#: GIL, and a corpus of 40k clips holds hundreds of GB of outputs.
VERIFY_THREADS = 4


#: Clips checked by one task of the :data:`VERIFY_THREADS` (a task per clip cost more than the
#: check of a clip whose files are unchanged: a stat per file).
VERIFY_CHUNK = 64


def _completed(specs: list[ClipSpec], prev_by_clip: dict[str, list[dict[str, Any]]], out_dir: Path,
               codes: list[str], faces: str, verify: bool = False) -> Iterator[bool]:
    """Whether each of ``specs`` is complete in ``out_dir`` (:func:`~mime_fast.corpus.resume._complete`),
    in order, the clips checked :data:`VERIFY_THREADS` at a time (:data:`VERIFY_CHUNK` clips a task).
    Closing it early (a Ctrl-C) cancels the checks not started."""
    from concurrent.futures import ThreadPoolExecutor

    def check(chunk: list[ClipSpec]) -> list[bool | Exception]:
        done: list[bool | Exception] = []
        for s in chunk:
            try:
                done.append(not s.error and s.clip_id in prev_by_clip
                            and _complete(prev_by_clip[s.clip_id], out_dir, codes, faces, verify))
            except Exception as exc:  # noqa: BLE001 - raised where that clip is reached, as before
                done.append(exc)
                break
        return done

    pool = ThreadPoolExecutor(max_workers=VERIFY_THREADS, thread_name_prefix="mime-fast-verify")
    try:
        checks = [pool.submit(check, specs[i:i + VERIFY_CHUNK]) for i in range(0, len(specs), VERIFY_CHUNK)]
        for chunk in checks:
            for complete in chunk.result():
                if isinstance(complete, Exception):
                    raise complete
                yield complete
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _compact_manifest(out_dir: Path, known: ManifestRead, previous: list[dict[str, Any]],
                      writer: ManifestWriter) -> None:
    """The manifest compacted at the end of a run (:func:`~mime_fast.manifest.write_compacted`),
    from the rows read at its start (``known``, ``previous`` their compaction) and those ``writer``
    appended when nothing else changed the file meanwhile (else it is read again); left as it is
    when the run appended nothing to a manifest that is already exactly that (a rerun of a
    finished corpus rewrote hundreds of MB, jsonl and parquet, to the same rows)."""
    rows = writer.rows()
    if rows is None:
        compacted = compact(read_rows(out_dir))
    elif not writer.appended:
        compacted = previous  # (the same rows)
        if known.compacted_on_disk(compacted, out_dir):
            return
    else:
        compacted = compact(rows)
    write_compacted(out_dir, compacted)


def run_corpus(
    specs: list[ClipSpec],
    out_dir: str | os.PathLike,
    *,
    subsets: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
    monitor: Monitor | None = None,
    workers: int = 1,
    clips_per_process: int = 1,
    use_ray: bool = False,
    ray_address: str | None = None,
    ray_cpus_per_clip: float = 1.0,
    detect_ahead: bool = True,
    clip_timeout: float | None = None,
    verify: bool = False,
    settings: Settings | None = None,
    **options: Any,
) -> CorpusSummary:
    """Build the subsets of every clip into ``out_dir``, appending manifest rows as clips finish and
    compacting the manifest at the end. ``settings`` (a :class:`mime_fast.options.Settings`) changed
    by ``options`` (option groups or single options by keyword, as :func:`mime_fast.build_subsets`
    takes them) are what every clip is built with; they, ``subsets`` and the output folder are
    checked before anything is written or any clip starts (``ValueError`` /
    ``TypeError`` for a bad or unknown setting, ``RuntimeError`` for an unusable device, ``OSError`` for a
    folder that cannot be written, :class:`~mime_fast.corpus.resume.SettingsChanged` for an output
    folder whose clips were built with other values of an option that changes the outputs:
    :func:`~mime_fast.corpus.resume.check_same_settings`), and so are the detection models when a
    clip needs them (``ImportError``).  Every row written records the settings (manifest column
    ``settings``). ``monitor`` hears about clips and frames as they go
    (:class:`mime_fast.corpus.progress.Monitor`); default: a :class:`~mime_fast.corpus.progress.LineMonitor`
    printing through ``progress`` (default stderr) one line per clip.
    ``workers > 1`` builds that many clips at once in worker processes on this machine (each
    libx264 encoder also runs its own threads); ``clips_per_process > 1`` puts that many of them in
    each process, on threads: with ``device="cuda"`` the clips of a process share its GPU's models
    and their model calls are batched across them (one process per GPU: ``clips_per_process`` =
    ``workers`` / GPUs).  The bytes are the same either way.  A worker process that dies (out of memory,
    a crash in a native library) costs the clip it was building a failed row naming how it died,
    not the run (:mod:`~mime_fast.corpus.pool`); with one worker such a crash ends the run, and
    the next builds the clip that was in progress in a worker process of its own
    (:class:`~mime_fast.corpus.resume.InProgress`).  ``clip_timeout`` (seconds; ``None`` or 0:
    none): a clip that makes no progress (no source frame) that long -- a hung decoder or
    filesystem -- gets a failed row in a worker process, whose process is killed; in this process
    (one worker) the run ends with exit status 3 (:func:`~mime_fast.corpus.workers.exit_when_stalled`)
    and the rerun builds that clip in a worker process of its own; in a Ray task its worker process
    ends and the clip gets a failed row.
    With one worker and ``detect_ahead`` (default), the subject of the next clip is detected on a
    second thread while the current clip encodes (in one pass, with those masks); without it, each
    clip's detection rides along the pass that encodes its FM and VMM (:func:`mime_fast.build_subsets`).
    Either way the detection, which uses under two cores by itself, runs beside encoders, and
    outputs are the same bytes (``bench/bench_detect.py`` measures both).

    A clip of an earlier run is complete (skipped) when its rows cover the subsets asked for and
    every file they name has the recorded size and modification time; a file whose time changed is
    hashed and compared with its recorded SHA-256.  ``verify=True`` hashes every file (a copy that
    kept the times of other files, a filesystem without modification times).

    ``KeyboardInterrupt`` (Ctrl-C) stops the clips in progress (worker processes too), removes
    their temporaries, compacts the manifest (the rows of finished clips) and is re-raised: a rerun
    resumes.

    With ``use_ray=True`` the clips are distributed with Ray Data over the workers of a Ray cluster
    (``ray_address``; default: the cluster ``ray.init()`` finds, or a local one), each clip task
    reserving ``ray_cpus_per_clip`` CPUs. Workers write the outputs, so ``out_dir`` must be a path
    every worker sees (a shared filesystem on a multi-machine cluster); the driver writes the
    manifest. Outputs and manifest are the same as a local run's."""
    out_dir = Path(out_dir)
    codes = _codes(subsets)
    settings = check_settings(workers=workers, ray_cpus_per_clip=ray_cpus_per_clip,
                              clips_per_process=clips_per_process, clip_timeout=clip_timeout, use_ray=use_ray,
                              settings=settings, **options)  # before the first clip
    known = read_manifest(out_dir)  # (read once: a 40k-clip corpus's manifest is hundreds of MB)
    previous = compact(known.rows)
    check_same_settings(previous, settings, out_dir)  # SettingsChanged, before anything is written
    recorded = settings_record(settings)
    monitor = monitor if monitor is not None else LineMonitor(progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_writable(out_dir)
    run = f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"
    crashed = clips_of_dead_runs(out_dir)  # (before the temporaries: a dead run's are told by its pid)
    clean_stale_temporaries(out_dir)
    prev_by_clip: dict[str, list[dict[str, Any]]] = {}
    for r in previous:
        if r["detail"] != DUPLICATE:  # another file's row (manifest.compact)
            prev_by_clip.setdefault(r["clip_id"], []).append(r)

    summary = CorpusSummary()
    pending = []
    for spec, complete in zip(specs, _completed(specs, prev_by_clip, out_dir, codes, settings.detect.faces, verify)):
        if complete:
            summary.skipped.append(spec.clip_id)
            monitor.skipped(spec.clip_id)
        else:
            pending.append(spec)
    pool_mode = not use_ray and workers > 1 and len(pending) > 1
    local = not use_ray and not pool_mode  # clips built in this process
    # A clip that a run building clips in its own process was building when that process died, or
    # whose worker process died building it, is built in a worker process of its own: if it kills
    # whatever builds it, it costs itself a failed row, not this run too (resume.InProgress).
    crashed |= {c for c, rows in prev_by_clip.items() if any(r.get("detail") in (WORKER_DIED, STALLED) for r in rows)}
    isolated = [s for s in pending if local and not s.error and s.clip_id in crashed]
    apart = {id(s) for s in isolated}  # (a set: thousands of clips may have crashed earlier runs)
    here = [s for s in pending if id(s) not in apart]
    ahead = detect_ahead and local
    detecting = any(_detects(s, codes) for s in pending)
    # detected ahead, a clip's subject comes with its landmarks: one pass; else detection is a pass
    passes = [0 if s.error else 2 if _detects(s, codes) and not (ahead and s not in isolated) else 1 for s in pending]
    in_progress = InProgress(out_dir)
    t0 = time.perf_counter()
    interrupted, interrupt = False, threading.Event()
    with ManifestWriter(out_dir, known) as writer, _sigint_flagged(interrupt, raise_now=use_ray), \
            exit_when_stalled(in_progress, clip_timeout if local else None):
        monitor.start(pending, passes)
        if use_ray:
            results = _ray_results(pending, out_dir, codes, settings, run, ray_address, ray_cpus_per_clip,
                                   clip_timeout)
        elif pool_mode:
            results = worker_process_results(pending, out_dir, codes, settings, run, workers, clips_per_process,
                                             monitor, detecting, interrupt, clip_timeout)
        else:
            results = (_detect_ahead_results if ahead else _sequential_results)(
                here, out_dir, codes, settings, run, monitor, detecting, interrupt, in_progress)
            if isolated:
                results = _chained(worker_process_results(isolated, out_dir, codes, settings, run, 1, 1, monitor,
                                                          detecting, interrupt, clip_timeout), results)
        try:
            for rows, reason, frames in results:
                clip_id = rows[0]["clip_id"]
                reason = utf8_text(reason) if reason is not None else None  # as its row has it
                writer.append([dict(r, settings=recorded) for r in rows])
                if reason is not None:
                    summary.failed[clip_id] = reason
                else:
                    summary.done.append(clip_id)
                    if any(r["status"] == "skipped" and str(r["reason"]).startswith("no subject") for r in rows):
                        summary.no_subject.append(clip_id)
                    if any(r["status"] == "skipped" and r["reason"] == "no audio" for r in rows):
                        summary.no_audio.append(clip_id)
                    summary.frames += frames
                monitor.clip_done(clip_id, reason, frames)
                if summary.no_audio and summary.no_audio[-1] == clip_id:
                    monitor.note(clip_id, "no audio, so no VMM (VMM is the audio over black frames)")
                if interrupt.is_set():  # Ctrl-C after the last frame of that clip
                    raise KeyboardInterrupt
            if interrupt.is_set():  # ... of the last clip
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            interrupted = True
        finally:
            results.close()  # stops worker processes and threads (on an interrupt: clips in progress)
            in_progress.close()
            monitor.close()
    with _sigint_deferred():  # the manifest is rewritten whole, even on a second Ctrl-C
        _compact_manifest(out_dir, known, previous, writer)
        if interrupted:
            clean_stale_temporaries(out_dir, mine=True)  # nothing of this run writes any more
    summary.elapsed_s = time.perf_counter() - t0
    if interrupted:
        raise KeyboardInterrupt
    return summary
