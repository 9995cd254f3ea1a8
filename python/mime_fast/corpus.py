"""Corpus-scale runs: many clips in, the MIME subsets and one manifest out.

Inputs (:func:`find_inputs`, :func:`discover`), any number of:

- a folder, searched recursively for video files (:data:`VIDEO_EXTENSIONS`); the clip id is the file
  stem; a ``<stem>.npz`` / ``<stem>.json`` beside a clip is taken as its landmarks
  (:mod:`mime_fast.landmarks`); other files are skipped and listed (:attr:`Inputs.skipped`);
- a video file (same rules);
- a ``.csv`` or ``.jsonl`` list with a ``path`` column (relative paths are relative to the list) and
  optional ``clip_id``, ``emotion`` (one of :data:`mime_fast.manifest.EMOTIONS`, any case),
  ``dataset`` and ``landmarks`` columns.

Outputs: ``DIR/<SUBSET>/<clip_id>.mp4``, ``DIR/audio/<clip_id>.wav`` and the manifest
(:mod:`mime_fast.manifest`).

Safety: a clip that cannot be used (missing or unreadable file, duplicate clip id, unknown emotion,
corrupt video, no usable landmarks, …) gets manifest rows with status ``"failed"`` and the reason,
and the batch goes on. Outputs are written under temporary names and renamed when the clip is
complete; manifest rows are appended after that, so a run killed at any moment (even ``kill -9``)
and rerun completes with no partial file and no duplicated row: a rerun skips clips whose manifest
rows match the files on disk (size and SHA-256), redoes the others, and removes temporaries a killed
run left behind. An interrupted run (``KeyboardInterrupt``: Ctrl-C) stops its clips in progress, removes
their temporaries, compacts the manifest (rows of finished clips only) and re-raises.

Progress: :func:`run_corpus` reports to a :class:`mime_fast.progress.Monitor` (clips skipped,
started, frames processed, finished).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .devices import gpu_count
from .landmarks import default_stack
from .manifest import BLUR_LEVEL, CLEAR_VERSION, EMOTIONS, ManifestWriter, compact, read_rows, write_compacted
from .media import ClipError
from .progress import LineMonitor, Monitor
from .spec import CODES, SUBSETS, face_codes
from .options import Settings
from .subsets import _codes, build_subsets, locate_subject

__all__ = ["VIDEO_EXTENSIONS", "ClipSpec", "CorpusSummary", "Inputs", "check_settings", "discover", "find_inputs",
           "run_corpus", "clean_stale_temporaries"]

VIDEO_EXTENSIONS = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv",
                              ".wmv", ".3gp"})
ALL_SUBSETS = CODES
_EMOTION_BY_LOWER = {e.lower(): e for e in EMOTIONS}


@dataclass
class ClipSpec:
    """One clip of a corpus. ``error`` is set when the clip cannot be processed as listed."""

    clip_id: str
    path: Path
    label: str | None = None
    dataset: str | None = None
    landmarks: Path | None = None
    error: str | None = None


@dataclass
class CorpusSummary:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already complete
    failed: dict[str, str] = field(default_factory=dict)  # clip_id -> reason
    no_subject: list[str] = field(default_factory=list)  # done, but no face: face subsets skipped
    frames: int = 0
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


# ------------------------------------------------------------------------------------------- inputs


def _sidecar_landmarks(video: Path) -> Path | None:
    for ext in (".npz", ".json"):
        p = video.with_suffix(ext)
        if p.is_file():
            return p
    return None


def _valid_id(clip_id: str) -> str | None:
    if not clip_id or clip_id in (".", "..") or "/" in clip_id or "\\" in clip_id or clip_id.startswith("."):
        return f"clip id {clip_id!r} cannot name a file (empty, hidden or containing a path separator)"
    return None


def _from_folder(root: Path, exclude: Path | None) -> tuple[list[ClipSpec], list[Path]]:
    """The clips of a folder, and its other files (hidden files and landmark sidecars aside)."""
    specs, others = [], []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if exclude is not None and exclude in p.resolve().parents:
            continue  # never take our own outputs as inputs
        if p.suffix.lower() in VIDEO_EXTENSIONS:
            specs.append(ClipSpec(p.stem, p, landmarks=_sidecar_landmarks(p)))
        else:
            others.append(p)
    sidecars = {s.landmarks for s in specs}
    return specs, [p for p in others if p not in sidecars]


def _from_list(list_path: Path) -> list[ClipSpec]:
    base = list_path.parent
    if list_path.suffix.lower() == ".csv":
        with open(list_path, newline="", encoding="utf-8") as f:
            records = list(csv.DictReader(f))
    else:
        records = []
        for n, line in enumerate(list_path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{list_path}:{n}: not a JSON object ({exc})") from exc
    specs = []
    for n, rec in enumerate(records, 1):
        rec = {str(k).strip().lower(): (v.strip() if isinstance(v, str) else v) for k, v in rec.items() if k}
        raw = rec.get("path")
        if not raw:
            specs.append(ClipSpec(str(rec.get("clip_id") or f"row{n}"), list_path, error=f"{list_path} row {n}: no path"))
            continue
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        lmk = rec.get("landmarks")
        specs.append(ClipSpec(
            clip_id=str(rec.get("clip_id") or path.stem),
            path=path,
            label=rec.get("emotion") or rec.get("label") or None,
            dataset=rec.get("dataset") or None,
            landmarks=(Path(lmk) if Path(lmk).is_absolute() else base / lmk) if lmk else _sidecar_landmarks(path),
        ))
    return specs


@dataclass
class Inputs:
    """What :func:`find_inputs` found: the clips, and the files of the folders searched that are
    not videos (hidden files and the landmarks beside clips aside), which are skipped."""

    clips: list[ClipSpec]
    skipped: list[Path]


def find_inputs(sources: str | os.PathLike | Iterable[str | os.PathLike], *,
                exclude: str | os.PathLike | None = None) -> Inputs:
    """The clips of one or more inputs -- folders, video files, CSV/JSONL lists -- validated: each
    problem is recorded on its clip (``error``), never raised, except for an input that is none of
    these (``ValueError``).  ``exclude``: a folder whose files are never inputs (the output folder).
    A file reached twice (a clip given and also inside a folder given) is taken once."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = [Path(s) for s in sources]
    if not sources:
        raise ValueError("no input given")
    excluded = Path(exclude).resolve() if exclude else None
    specs: list[ClipSpec] = []
    skipped: list[Path] = []
    found: set[Path] = set()
    for source in sources:
        suffix = source.suffix.lower()
        if source.is_dir():
            clips, others = _from_folder(source, excluded)
        elif source.is_file() and suffix in (".csv", ".jsonl"):
            specs.extend(_from_list(source))
            continue
        elif source.is_file() and suffix in VIDEO_EXTENSIONS:
            clips, others = [ClipSpec(source.stem, source, landmarks=_sidecar_landmarks(source))], []
        elif not source.exists():
            raise ValueError(f"{source}: no such file or folder")
        else:
            raise ValueError(f"{source}: not a folder, a video ({', '.join(sorted(VIDEO_EXTENSIONS))}) or a "
                             ".csv/.jsonl list of clips")
        for spec in clips:
            key = spec.path.resolve()
            if key not in found:
                found.add(key)
                specs.append(spec)
        skipped.extend(others)
    _validate(specs)
    return Inputs(specs, skipped)


def discover(*sources: str | os.PathLike, exclude: str | os.PathLike | None = None) -> list[ClipSpec]:
    """The clips of folders, video files and CSV/JSONL lists (:func:`find_inputs`)."""
    return find_inputs(sources, exclude=exclude).clips


def _validate(specs: list[ClipSpec]) -> None:
    """Record on each clip what makes it unusable as listed (``error``)."""
    seen: dict[str, Path] = {}
    for s in specs:
        if s.error:
            continue
        s.error = _valid_id(s.clip_id)
        if s.error:
            continue
        if s.clip_id in seen:
            s.error = f"duplicate clip id {s.clip_id!r} (also {seen[s.clip_id]})"
            continue
        seen[s.clip_id] = s.path
        if s.label is not None:
            canonical = _EMOTION_BY_LOWER.get(str(s.label).lower())
            if canonical is None:
                s.error = f"unknown emotion label {s.label!r}; expected one of {', '.join(EMOTIONS)}"
                continue
            s.label = canonical
        if not s.path.exists():
            s.error = f"input file not found: {s.path}"
        elif not os.access(s.path, os.R_OK):
            s.error = f"input file not readable: {s.path}"
        elif s.landmarks is not None and not s.landmarks.is_file():
            s.error = f"landmarks file not found: {s.landmarks}"


# ---------------------------------------------------------------------------------------- resuming


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(rows: list[dict[str, Any]], out_dir: Path, subsets: Iterable[str], faces: str = "subject") -> bool:
    """A clip is complete when its latest rows cover every requested subset without failure, its
    face-blurred rows were made with the ``faces`` policy asked for (rows without the column:
    ``"subject"``), and every file they name is on disk with the recorded size and hash."""
    by_subset = {r["subset"]: r for r in rows}
    for code in subsets:
        r = by_subset.get(code)
        if r is None or r["status"] == "failed":
            return False
        if SUBSETS[code].face and r["status"] == "ok" and (r.get("faces") or "subject") != faces:
            return False
    for r in rows:
        if r["status"] != "ok" or r["subset"] is None:
            continue
        p = out_dir / r["path"]
        if not p.is_file() or p.stat().st_size != r["bytes"] or sha256_file(p) != r["sha256"]:
            return False
    return True


_TEMP = re.compile(r"^\..+\.(?:tmp|scratch)-(\d+)(?:\.[A-Za-z0-9]+)?$")


def clean_stale_temporaries(out_dir: Path, *, mine: bool = False) -> list[Path]:
    """Remove temporaries (``.<name>.tmp-<pid>…``, ``….scratch-<pid>…``) of processes that no longer
    run: what a killed run leaves behind; with ``mine``, also this process's (once it writes no
    more: after an interrupted run). Returns the removed paths."""
    removed = []
    if not out_dir.exists():
        return removed
    for p in out_dir.rglob(".*"):
        m = _TEMP.match(p.name)
        if not m or not p.is_file():
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the process exists
            alive = not (mine and pid == os.getpid())
        except ProcessLookupError:
            alive = False
        except PermissionError:  # exists, owned by someone else
            alive = True
        if not alive:
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


# ------------------------------------------------------------------------------------------ running


def _rows_for(spec: ClipSpec, result, out_dir: Path, run: str) -> list[dict[str, Any]]:
    tracking = getattr(result, "tracking", None)
    common = {
        "clip_id": spec.clip_id, "label": spec.label, "dataset": spec.dataset, "source": str(spec.path), "run": run,
        "tracking_status": getattr(tracking, "status", None),
        "tracking_frames_detected": getattr(tracking, "detected", None),
        "tracking_frames_interpolated": getattr(tracking, "interpolated", None),
        "tracking_frames_held": getattr(tracking, "held", None),
        "tracking_frames_head": getattr(tracking, "head", None),
        "tracking_frames_without_subject": getattr(tracking, "without_subject", None),
        "tracking_shots": getattr(tracking, "shots", None),
        "tracking_shot_frames": json.dumps(tracking.shot_frames) if getattr(tracking, "shot_frames", None) else None,
        "faces": getattr(result, "faces", None),
        "face_tracks": getattr(result, "face_tracks", None),
    }
    width = result.source.width - result.source.width % 2
    height = result.source.height - result.source.height % 2
    fps = float(result.settings.encode.fps) if result.settings is not None else None
    rows = []
    for code, st in result.status.items():
        row = dict(common, subset=code, status=st.status, reason=st.reason or None, blur_level=BLUR_LEVEL[code],
                   kernel=st.kernel, fps=fps)
        if st.status == "ok" and st.path is not None:
            p = Path(st.path)
            clear = CLEAR_VERSION.get(code)
            row.update(
                path=str(p.relative_to(out_dir)), duration_s=st.duration, frames=st.frames, width=width,
                height=height, has_audio=st.has_audio, bytes=p.stat().st_size, sha256=sha256_file(p),
                clear_path=str(result.outputs[clear].relative_to(out_dir)) if clear in result.outputs else None,
            )
            row.update(decoder=result.decoder, decoder_reason=result.decoder_reason or None)
            if SUBSETS[code].base == "FM":  # the rows whose video is FM's (copied or encoded)
                row.update(fm_video=result.fm_video, fm_video_reason=result.fm_video_reason or None)
        rows.append(row)
    if result.audio is not None:
        p = Path(result.audio)
        rows.append(dict(common, subset="audio", status="ok", path=str(p.relative_to(out_dir)), blur_level="none",
                         duration_s=result.duration, has_audio=True, bytes=p.stat().st_size, sha256=sha256_file(p)))
    return rows


def _failed_row(spec: ClipSpec, reason: str, run: str, detail: str | None = None) -> dict[str, Any]:
    return {"clip_id": spec.clip_id, "subset": None, "path": str(spec.path), "status": "failed", "reason": reason,
            "detail": detail, "label": spec.label, "dataset": spec.dataset, "source": str(spec.path), "run": run}


Progress = Callable[[int], None]


def _process_clip(spec: ClipSpec, out_dir: Path, codes: list[str], settings: Settings, run: str,
                  located=None, progress: Progress | None = None) -> tuple[list[dict[str, Any]], str | None, int]:
    """Build one clip: (manifest rows, failure reason or None, source frames). Never raises for a
    bad clip (``KeyboardInterrupt`` propagates). Runs in the driver (local runs) or in a worker.
    ``located``: a future of the clip's :func:`~mime_fast.subsets.locate_subject` (detection
    started ahead), or None; ``progress``: :func:`~mime_fast.subsets.build_subsets`'s."""
    if spec.error:
        return [_failed_row(spec, spec.error, run)], spec.error, 0
    try:
        landmarks = located.result() if located is not None else spec.landmarks
        result = build_subsets(spec.path, out_dir, landmarks=landmarks, subsets=codes, clip_id=spec.clip_id,
                               progress=progress, settings=settings)
    except ClipError as exc:  # the clip itself: the reason in plain words, FFmpeg's message apart
        _raise_if_interrupted(exc)
        return [_failed_row(spec, exc.reason, run, exc.detail)], exc.reason, 0
    except Exception as exc:  # one bad clip never stops the batch
        _raise_if_interrupted(exc)
        reason = str(exc) or type(exc).__name__
        return [_failed_row(spec, reason, run, type(exc).__name__)], reason, 0
    return _rows_for(spec, result, out_dir, run), None, result.source_frames


def _raise_if_interrupted(exc: BaseException) -> None:
    """An error that a Ctrl-C caused (FFmpeg stopped by PyAV's interrupt callback, anywhere in the
    chain of causes) is the interrupt, not a failure of the clip: it must not get a failed row."""
    import av

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (KeyboardInterrupt, av.error.ExitError)):
            raise KeyboardInterrupt from exc
        exc = exc.__cause__ or exc.__context__


def check_settings(*, workers: int = 1, ray_cpus_per_clip: float = 1.0, settings: Settings | None = None,
                   **options: Any) -> Settings:
    """The settings of a :func:`run_corpus` (``settings`` changed by ``options``:
    :meth:`mime_fast.options.Settings.resolve`), checked before anything runs: ``ValueError`` or
    ``TypeError`` for a bad or unknown one, ``RuntimeError`` for a device that cannot be used."""
    if int(workers) < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not float(ray_cpus_per_clip) > 0:
        raise ValueError(f"ray_cpus_per_clip must be > 0, got {ray_cpus_per_clip}")
    return Settings.resolve(settings, **options)


def _face_codes(codes: Iterable[str]) -> bool:
    return bool(face_codes(codes))


def _detects(spec: ClipSpec, codes: list[str]) -> bool:
    """Whether building ``spec`` runs the subject detection (no landmarks given, a face subset asked)."""
    return not spec.error and spec.landmarks is None and _face_codes(codes)


def _check_writable(out_dir: Path) -> None:
    """Raise ``OSError`` now, before any clip, when files cannot be created in ``out_dir``."""
    probe = out_dir / f".write-check.tmp-{os.getpid()}"
    probe.touch()
    probe.unlink()


def _default_sigint() -> bool:
    """Whether this is the main thread and Ctrl-C does what Python does by default (raise
    ``KeyboardInterrupt``): only then does a run handle it itself."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


@contextlib.contextmanager
def _sigint_flagged(interrupt: threading.Event) -> Iterator[None]:
    """Ctrl-C during the block sets ``interrupt`` and raises ``KeyboardInterrupt``. Where Python
    cannot raise it (in a weakref callback or a destructor it is "ignored"), it is dropped silently
    and the flag stops the run at its next frame or clip."""
    if not _default_sigint():
        yield
        return

    def on_sigint(signum, frame):
        interrupt.set()
        raise KeyboardInterrupt

    def unraisable(u) -> None:
        if not isinstance(u.exc_value, KeyboardInterrupt):
            previous_hook(u)

    previous, previous_hook = signal.signal(signal.SIGINT, on_sigint), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ctrl-C during the block takes effect after it (``KeyboardInterrupt`` then): what the block
    writes is written whole. Only in the main thread with Python's default SIGINT handler."""
    if not _default_sigint():
        yield
        return
    hit: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: hit.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread (delivered when the block ends): processes started meanwhile
    inherit it blocked, so a terminal's Ctrl-C, which reaches the whole process group, never
    interrupts a worker while it starts."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _load_models(monitor: Monitor, pool=None) -> None:
    """Load the detection models before the first clip (on ``pool``'s thread when given: the models
    are loaded once per thread), saying so; a missing model fails the run here, not every clip."""
    monitor.status("loading detection models…")
    if pool is None:
        default_stack()
    else:
        pool.submit(default_stack).result()
    monitor.status(None)


def run_corpus(
    specs: list[ClipSpec],
    out_dir: str | os.PathLike,
    *,
    subsets: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
    monitor: Monitor | None = None,
    workers: int = 1,
    use_ray: bool = False,
    ray_address: str | None = None,
    ray_cpus_per_clip: float = 1.0,
    detect_ahead: bool = True,
    settings: Settings | None = None,
    **options: Any,
) -> CorpusSummary:
    """Build the subsets of every clip into ``out_dir``, appending manifest rows as clips finish and
    compacting the manifest at the end. ``settings`` (a :class:`mime_fast.options.Settings`) changed
    by ``options`` (option groups or single options by keyword, as :func:`mime_fast.build_subsets`
    takes them) are what every clip is built with; they, ``subsets`` and the output folder are
    checked before anything is written or any clip starts (``ValueError`` /
    ``TypeError`` for a bad or unknown setting, ``RuntimeError`` for an unusable device, ``OSError`` for a
    folder that cannot be written), and so are the detection models when a clip needs them
    (``ImportError``). ``monitor`` hears about clips and frames as they go
    (:class:`mime_fast.progress.Monitor`); default: a :class:`~mime_fast.progress.LineMonitor`
    printing through ``progress`` (default stderr) one line per clip.
    ``workers > 1`` builds that many clips at once in worker processes on this machine (each
    libx264 encoder also runs its own threads).
    With one worker and ``detect_ahead`` (default), the subject of the next clip is detected on a
    second thread while the current clip encodes (in one pass, with those masks); without it, each
    clip's detection rides along the pass that encodes its FM and VMM (:func:`mime_fast.build_subsets`).
    Either way the detection, which uses under two cores by itself, runs beside encoders, and
    outputs are the same bytes (``bench/bench_detect.py`` measures both).

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
    settings = check_settings(workers=workers, ray_cpus_per_clip=ray_cpus_per_clip, settings=settings,
                              **options)  # before the first clip
    monitor = monitor if monitor is not None else LineMonitor(progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_writable(out_dir)
    run = f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"
    clean_stale_temporaries(out_dir)
    prev_by_clip: dict[str, list[dict[str, Any]]] = {}
    for r in compact(read_rows(out_dir)):
        prev_by_clip.setdefault(r["clip_id"], []).append(r)

    summary = CorpusSummary()
    pending = []
    for spec in specs:
        if not spec.error and spec.clip_id in prev_by_clip and _complete(prev_by_clip[spec.clip_id], out_dir, codes,
                                                                                 settings.detect.faces):
            summary.skipped.append(spec.clip_id)
            monitor.skipped(spec.clip_id)
        else:
            pending.append(spec)
    pool_mode = not use_ray and workers > 1 and len(pending) > 1
    ahead = detect_ahead and not use_ray and not pool_mode
    detecting = any(_detects(s, codes) for s in pending)
    # detected ahead, a clip's subject comes with its landmarks: one pass; else detection is a pass
    passes = [0 if s.error else 2 if _detects(s, codes) and not ahead else 1 for s in pending]
    t0 = time.perf_counter()
    interrupted, interrupt = False, threading.Event()
    with ManifestWriter(out_dir) as writer, _sigint_flagged(interrupt):
        monitor.start(pending, passes)
        if use_ray:
            results = _ray_results(pending, out_dir, codes, settings, run, ray_address, ray_cpus_per_clip)
        elif pool_mode:
            results = _process_pool_results(pending, out_dir, codes, settings, run, workers, monitor, detecting,
                                            interrupt)
        elif ahead:
            results = _detect_ahead_results(pending, out_dir, codes, settings, run, monitor, detecting, interrupt)
        else:
            results = _sequential_results(pending, out_dir, codes, settings, run, monitor, detecting, interrupt)
        try:
            for rows, reason, frames in results:
                clip_id = rows[0]["clip_id"]
                writer.append(rows)
                if reason is not None:
                    summary.failed[clip_id] = reason
                else:
                    summary.done.append(clip_id)
                    if any(r["status"] == "skipped" and str(r["reason"]).startswith("no subject") for r in rows):
                        summary.no_subject.append(clip_id)
                    summary.frames += frames
                monitor.clip_done(clip_id, reason, frames)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            results.close()  # stops worker processes and threads (on an interrupt: clips in progress)
            monitor.close()
    with _sigint_deferred():  # the manifest is rewritten whole, even on a second Ctrl-C
        write_compacted(out_dir, compact(read_rows(out_dir)))
        if interrupted:
            clean_stale_temporaries(out_dir, mine=True)  # nothing of this run writes any more
    summary.elapsed_s = time.perf_counter() - t0
    if interrupted:
        raise KeyboardInterrupt
    return summary


def _frames_to(monitor: Monitor, clip_id: str, interrupt: threading.Event) -> Progress:
    def progress(n: int) -> None:
        if interrupt.is_set():
            raise KeyboardInterrupt  # a Ctrl-C Python could not raise where it came (_sigint_flagged)
        monitor.frames(clip_id, n)

    return progress


def _sequential_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings,
                        run: str, monitor: Monitor, detecting: bool, interrupt: threading.Event) -> Iterator[tuple]:
    """Yield _process_clip results clip by clip, in this thread."""
    if detecting:
        _load_models(monitor)
    for spec in pending:
        yield _process_clip(spec, out_dir, codes, settings, run,
                            progress=_frames_to(monitor, spec.clip_id, interrupt))


def _detect_ahead_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings,
                          run: str, monitor: Monitor, detecting: bool, interrupt: threading.Event) -> Iterator[tuple]:
    """Yield _process_clip results in order, clip by clip, while one thread detects the subject of
    the next clip (clips with given landmarks or a known error need no detection)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mime-fast-detect")
    try:
        if detecting:
            _load_models(monitor, pool)

        def start(i: int):
            if i >= len(pending) or not _detects(pending[i], codes):
                return None
            return pool.submit(locate_subject, pending[i].path, settings=settings)

        ahead = start(0)
        for i, spec in enumerate(pending):
            located, ahead = ahead, start(i + 1)
            if located is not None and not located.done():
                monitor.status(f"finding the subject of {spec.clip_id}…")
            yield _process_clip(spec, out_dir, codes, settings, run, located,
                                _frames_to(monitor, spec.clip_id, interrupt))
    finally:
        # a detection running for the next clip writes nothing: it is waited for, not stopped
        pool.shutdown(wait=True, cancel_futures=True)


# Worker processes: the driver hands each worker an event that stops its clip (workers ignore
# SIGINT: a terminal's Ctrl-C reaches every process of the group, and the driver decides) and a
# queue for frame counts.
_WORKER: dict[str, Any] = {}


#: Environment variables that size the thread pools a worker's libraries start (read when they load).
_THREAD_ENV = ("MIME_FAST_NUM_THREADS", "MIME_FAST_MODEL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_NUM_THREADS")


def worker_threads(workers: int, cores: int | None = None) -> int:
    """Threads each of ``workers`` clip processes gives its operators and models: the cores
    shared out (at least one), so that the workers together do not start cores x workers threads
    that wait on each other (libx264's threads are set per output: ``EncodeOptions.threads``)."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, workers))


def share_cores(threads: int) -> None:
    """Give this worker process's libraries ``threads`` threads each (:func:`worker_threads`):
    the compiled core's pool now, OpenCV now, onnxruntime sessions and torch when they load
    (environment variables an explicit setting of the user's overrides)."""
    for name in _THREAD_ENV:
        os.environ.setdefault(name, str(threads))
    from . import set_num_threads  # lazy: the package root sits above every module

    set_num_threads(int(os.environ["MIME_FAST_NUM_THREADS"]))
    with contextlib.suppress(ImportError):
        import cv2

        cv2.setNumThreads(int(os.environ["MIME_FAST_MODEL_THREADS"]))


def _init_worker(stop, frames, counter=None, gpus: int = 0, threads: int = 0) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (and blocked since the worker started: _sigint_blocked)
    _WORKER.update(stop=stop, frames=frames)
    if threads:
        share_cores(threads)
    if counter is not None and gpus > 1:  # device="cuda" on several GPUs: worker i uses GPU i mod n
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(g) for g in range(gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[index % len(ids)]  # before anything touches CUDA here


def _process_clip_in_worker(spec: ClipSpec, out_dir: Path, codes: list[str], settings: Settings,
                            run: str) -> tuple[list[dict[str, Any]], str | None, int]:
    stop, queue = _WORKER["stop"], _WORKER["frames"]
    if stop.is_set():
        raise KeyboardInterrupt
    unsent, last = 0, time.monotonic()

    def progress(n: int) -> None:
        nonlocal unsent, last
        if stop.is_set():
            raise KeyboardInterrupt  # aborts the clip: its temporaries are removed
        unsent += n
        if time.monotonic() - last >= 0.1:
            queue.put((spec.clip_id, unsent))
            unsent, last = 0, time.monotonic()

    try:
        return _process_clip(spec, out_dir, codes, settings, run, progress=progress)
    finally:
        if unsent:  # sent before the result: the driver reads it first (_process_pool_results)
            queue.put((spec.clip_id, unsent))


def _process_pool_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings, run: str,
                          workers: int, monitor: Monitor, detecting: bool,
                          interrupt: threading.Event) -> Iterator[tuple]:
    """Yield _process_clip results from a pool of worker processes, as clips complete, relaying
    the frame counts the workers send to ``monitor``."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    if detecting:  # each worker loads its own; loaded here first, a missing model stops the run now
        _load_models(monitor)
    # "spawn": a fresh interpreter per worker, never a fork of a process that holds threads.
    ctx = multiprocessing.get_context("spawn")
    stop, frames = ctx.Event(), ctx.SimpleQueue()

    def relay() -> None:
        while not frames.empty():
            monitor.frames(*frames.get())

    gpus = 0
    if settings.compute.device == "cuda":
        gpus = gpu_count()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(stop, frames, ctx.Value("i", 0), gpus, worker_threads(workers)))
    try:
        with _sigint_blocked():  # the workers start (on submit) with SIGINT blocked
            futures = [pool.submit(_process_clip_in_worker, spec, out_dir, codes, settings, run) for spec in pending]
        running, yielded = set(futures), set()
        try:
            while running:
                if interrupt.is_set():
                    raise KeyboardInterrupt
                done, running = wait(running, timeout=0.1, return_when=FIRST_COMPLETED)
                relay()  # a worker sends its last count before its result: a finished clip's are all here
                for fut in done:
                    yielded.add(fut)
                    yield fut.result()
        except KeyboardInterrupt:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            for fut in futures:  # clips that were finished when they were told to stop still get their rows
                if fut not in yielded and fut.done() and not fut.cancelled() and fut.exception() is None:
                    yield fut.result()
            raise
    finally:
        stop.set()  # on an interrupt: the clips in progress stop at their next frame
        pool.shutdown(wait=True, cancel_futures=True)


def _ray_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings, run: str,
                 address: str | None, cpus_per_clip: float):
    """Yield _process_clip results computed by Ray Data tasks, as they complete."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("use_ray needs Ray: pip install 'mime_fast[ray]'") from exc
    if not pending:
        return
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    items = [{"spec": json.dumps({"clip_id": s.clip_id, "path": str(s.path), "label": s.label, "dataset": s.dataset,
                                  "landmarks": str(s.landmarks) if s.landmarks else None, "error": s.error})}
             for s in pending]
    out = str(out_dir.resolve())

    def task(item: dict[str, Any]) -> dict[str, Any]:
        d = json.loads(item["spec"])
        spec = ClipSpec(d["clip_id"], Path(d["path"]), d["label"], d["dataset"],
                        Path(d["landmarks"]) if d["landmarks"] else None, d["error"])
        rows, reason, frames = _process_clip(spec, Path(out), codes, settings, run)
        return {"rows": json.dumps(rows), "reason": reason or "", "frames": frames}

    import ray.data

    ds = ray.data.from_items(items, override_num_blocks=len(items)).map(task, num_cpus=cpus_per_clip)
    for r in ds.iter_rows():
        yield json.loads(r["rows"]), (r["reason"] or None), int(r["frames"])
