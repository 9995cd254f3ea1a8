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
run left behind.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .manifest import BLUR_LEVEL, EMOTIONS, ManifestWriter, compact, read_rows, write_compacted
from .subsets import Settings, _codes

__all__ = ["VIDEO_EXTENSIONS", "ClipSpec", "CorpusSummary", "Inputs", "check_settings", "discover", "find_inputs",
           "run_corpus", "clean_stale_temporaries"]

VIDEO_EXTENSIONS = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv",
                              ".wmv", ".3gp"})
ALL_SUBSETS = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
_CLEAR_VERSION = {"FDM": "FM", "FSM": "FM", "FDAM": "FM", "FSAM": "FM"}
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


def _complete(rows: list[dict[str, Any]], out_dir: Path, subsets: Iterable[str]) -> bool:
    """A clip is complete when its latest rows cover every requested subset without failure and
    every file they name is on disk with the recorded size and hash."""
    by_subset = {r["subset"]: r for r in rows}
    for code in subsets:
        r = by_subset.get(code)
        if r is None or r["status"] == "failed":
            return False
    for r in rows:
        if r["status"] != "ok" or r["subset"] is None:
            continue
        p = out_dir / r["path"]
        if not p.is_file() or p.stat().st_size != r["bytes"] or sha256_file(p) != r["sha256"]:
            return False
    return True


_TEMP = re.compile(r"^\..+\.(?:tmp|scratch)-(\d+)(?:\.[A-Za-z0-9]+)?$")


def clean_stale_temporaries(out_dir: Path) -> list[Path]:
    """Remove temporaries (``.<name>.tmp-<pid>…``, ``….scratch-<pid>…``) of processes that no longer
    run: what a killed run leaves behind. Returns the removed paths."""
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
            alive = True
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
        "tracking_frames_without_subject": getattr(tracking, "without_subject", None),
    }
    width = result.source.width - result.source.width % 2
    height = result.source.height - result.source.height % 2
    fps = float(result.settings.fps) if result.settings is not None else None
    rows = []
    for code, st in result.status.items():
        row = dict(common, subset=code, status=st.status, reason=st.reason or None, blur_level=BLUR_LEVEL[code],
                   kernel=st.kernel, fps=fps)
        if st.status == "ok" and st.path is not None:
            p = Path(st.path)
            clear = _CLEAR_VERSION.get(code)
            row.update(
                path=str(p.relative_to(out_dir)), duration_s=st.duration, frames=st.frames, width=width,
                height=height, has_audio=st.has_audio, bytes=p.stat().st_size, sha256=sha256_file(p),
                clear_path=str(result.outputs[clear].relative_to(out_dir)) if clear in result.outputs else None,
            )
        rows.append(row)
    if result.audio is not None:
        p = Path(result.audio)
        rows.append(dict(common, subset="audio", status="ok", path=str(p.relative_to(out_dir)), blur_level="none",
                         duration_s=result.duration, has_audio=True, bytes=p.stat().st_size, sha256=sha256_file(p)))
    return rows


def _failed_row(spec: ClipSpec, reason: str, run: str) -> dict[str, Any]:
    return {"clip_id": spec.clip_id, "subset": None, "path": str(spec.path), "status": "failed", "reason": reason,
            "label": spec.label, "dataset": spec.dataset, "source": str(spec.path), "run": run}


def _process_clip(spec: ClipSpec, out_dir: Path, codes: list[str], settings: dict[str, Any],
                  run: str, located=None) -> tuple[list[dict[str, Any]], str | None, int]:
    """Build one clip: (manifest rows, failure reason or None, source frames). Never raises for a
    bad clip. Runs in the driver (local runs) or in a Ray worker. ``located``: a future of the
    clip's :func:`~mime_fast.subsets.locate_subject` (detection started ahead), or None."""
    if spec.error:
        return [_failed_row(spec, spec.error, run)], spec.error, 0
    from .subsets import build_subsets

    try:
        landmarks = located.result() if located is not None else spec.landmarks
        result = build_subsets(spec.path, out_dir, landmarks=landmarks, subsets=codes, clip_id=spec.clip_id,
                               **settings)
    except Exception as exc:  # one bad clip never stops the batch
        reason = str(exc) or type(exc).__name__
        return [_failed_row(spec, reason, run)], reason, 0
    return _rows_for(spec, result, out_dir, run), None, result.source_frames


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def check_settings(*, workers: int = 1, ray_cpus_per_clip: float = 1.0, **settings: Any) -> Settings:
    """Check the settings of a :func:`run_corpus` before anything runs: ``ValueError`` or
    ``TypeError`` for a bad or unknown one (:class:`mime_fast.subsets.Settings`), ``RuntimeError``
    for a device that cannot be used."""
    if int(workers) < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not float(ray_cpus_per_clip) > 0:
        raise ValueError(f"ray_cpus_per_clip must be > 0, got {ray_cpus_per_clip}")
    return Settings.from_kwargs(**settings)


def _check_writable(out_dir: Path) -> None:
    """Raise ``OSError`` now, before any clip, when files cannot be created in ``out_dir``."""
    probe = out_dir / f".write-check.tmp-{os.getpid()}"
    probe.touch()
    probe.unlink()


def run_corpus(
    specs: list[ClipSpec],
    out_dir: str | os.PathLike,
    *,
    subsets: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    use_ray: bool = False,
    ray_address: str | None = None,
    ray_cpus_per_clip: float = 1.0,
    detect_ahead: bool = True,
    **settings: Any,
) -> CorpusSummary:
    """Build the subsets of every clip into ``out_dir``, appending manifest rows as clips finish and
    compacting the manifest at the end. ``settings`` go to :func:`mime_fast.build_subsets`; they,
    ``subsets`` and the output folder are checked before the first clip (``ValueError`` /
    ``TypeError`` for a bad setting, ``RuntimeError`` for an unusable device, ``OSError`` for a
    folder that cannot be written). ``progress`` receives one line per clip (default: stderr).
    ``workers > 1`` builds that many clips at once in worker processes on this machine (each
    libx264 encoder also runs its own threads).
    With one worker and ``detect_ahead`` (default), the subject of the next clip is detected on a
    second thread while the current clip encodes (in one pass, with those masks); without it, each
    clip's detection rides along the pass that encodes its FM and VMM (:func:`mime_fast.build_subsets`).
    Either way the detection, which uses under two cores by itself, runs beside encoders, and
    outputs are the same bytes (``bench/bench_detect.py`` measures both).

    With ``use_ray=True`` the clips are distributed with Ray Data over the workers of a Ray cluster
    (``ray_address``; default: the cluster ``ray.init()`` finds, or a local one), each clip task
    reserving ``ray_cpus_per_clip`` CPUs. Workers write the outputs, so ``out_dir`` must be a path
    every worker sees (a shared filesystem on a multi-machine cluster); the driver writes the
    manifest. Outputs and manifest are the same as a local run's."""
    out_dir = Path(out_dir)
    codes = _codes(subsets)
    check_settings(workers=workers, ray_cpus_per_clip=ray_cpus_per_clip, **settings)  # before the first clip
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_writable(out_dir)
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    run = f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"
    clean_stale_temporaries(out_dir)
    prev_by_clip: dict[str, list[dict[str, Any]]] = {}
    for r in compact(read_rows(out_dir)):
        prev_by_clip.setdefault(r["clip_id"], []).append(r)

    summary = CorpusSummary()
    pending = []
    for spec in specs:
        if not spec.error and spec.clip_id in prev_by_clip and _complete(prev_by_clip[spec.clip_id], out_dir, codes):
            summary.skipped.append(spec.clip_id)
            say(f"{spec.clip_id}: already complete, skipped")
        else:
            pending.append(spec)
    t0 = time.perf_counter()
    if use_ray:
        results = _ray_results(pending, out_dir, codes, settings, run, ray_address, ray_cpus_per_clip)
    elif workers > 1 and len(pending) > 1:
        results = _process_pool_results(pending, out_dir, codes, settings, run, workers)
    elif detect_ahead:
        results = _detect_ahead_results(pending, out_dir, codes, settings, run)
    else:
        results = (_process_clip(spec, out_dir, codes, settings, run) for spec in pending)
    with ManifestWriter(out_dir) as writer:
        for n, (rows, reason, frames) in enumerate(results, 1):
            clip_id = rows[0]["clip_id"]
            writer.append(rows)
            head = f"[{n}/{len(pending)}] {clip_id}"
            if reason is not None:
                summary.failed[clip_id] = reason
                say(f"{head}: failed: {reason}")
                continue
            summary.done.append(clip_id)
            summary.frames += frames
            elapsed = time.perf_counter() - t0
            rate = n / elapsed
            say(f"{head}: ok | {rate:.2f} clips/s, {summary.frames / elapsed:.0f} frames/s, "
                f"ETA {_fmt_eta((len(pending) - n) / rate)}")
    write_compacted(out_dir, compact(read_rows(out_dir)))
    summary.elapsed_s = time.perf_counter() - t0
    return summary


def _detect_ahead_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: dict[str, Any],
                          run: str):
    """Yield _process_clip results in order, clip by clip, while one thread detects the subject of
    the next clip (clips with given landmarks or a known error need no detection)."""
    from concurrent.futures import ThreadPoolExecutor

    from .subsets import locate_subject

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mime-fast-detect") as pool:

        def start(i: int):
            if i >= len(pending) or pending[i].error or pending[i].landmarks is not None:
                return None
            return pool.submit(locate_subject, pending[i].path, **settings)

        ahead = start(0)
        for i, spec in enumerate(pending):
            located, ahead = ahead, start(i + 1)
            yield _process_clip(spec, out_dir, codes, settings, run, located)


def _process_pool_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: dict[str, Any], run: str,
                          workers: int):
    """Yield _process_clip results from a pool of worker processes, as clips complete."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # "spawn": a fresh interpreter per worker, never a fork of a process that holds threads.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_process_clip, spec, out_dir, codes, settings, run) for spec in pending]
        for fut in as_completed(futures):
            yield fut.result()


def _ray_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: dict[str, Any], run: str,
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
