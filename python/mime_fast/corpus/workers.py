"""How the clips of a corpus run are built: one by one in this thread, with the next clip's subject
detected ahead on a second thread, or as Ray Data tasks; in worker processes on this machine (GPUs
and cores shared out: :func:`worker_threads`, :func:`share_cores`) they are built by
:mod:`~mime_fast.corpus.pool`. Each way yields :func:`~mime_fast.corpus.clip._process_clip`'s results."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from ..detect.stacks import default_stack
from ..devices import MAX_CLIPS_PER_GPU
from ..manifest import compact, read_rows, write_compacted
from ..options import Settings
from ..subsets import locate_subject
from .clip import STALLED, WORKER_DIED, Progress, RunStopped, _detects, _failed, _process_clip
from .inputs import ClipSpec
from .progress import Monitor
from .resume import InProgress, clip_temporaries

__all__ = ["worker_threads", "share_cores"]


def _load_models(monitor: Monitor, pool=None, device: str = "cpu") -> None:
    """Load the detection models before the first clip (on ``pool``'s thread when given: the models
    are loaded once per thread), saying so; a missing model fails the run here, not every clip.
    ``device``: the stack of that device (:func:`mime_fast.detect.stacks.default_stack`), for runs whose
    clips are built in this process (worker processes load their own before they are ready:
    :mod:`~mime_fast.corpus.pool`; the driver loads none)."""
    monitor.status("loading detection models…")
    if pool is None:
        default_stack(device)
    else:
        pool.submit(default_stack, device).result()
    monitor.status(None)


def _frames_to(monitor: Monitor, clip_id: str, interrupt: threading.Event, in_progress: InProgress) -> Progress:
    def progress(n: int) -> None:
        if interrupt.is_set():
            raise KeyboardInterrupt  # a Ctrl-C, raised here, between two frames (_sigint_flagged)
        if n:  # (0: only asked whether to stop)
            monitor.frames(clip_id, n)
            in_progress.moved()

    return progress


#: Exit status of a run that ended because the clips it was building in its own process made no
#: progress for its ``clip_timeout`` (:func:`exit_when_stalled`).
STALLED_EXIT = 3


@contextlib.contextmanager
def exit_when_stalled(in_progress: InProgress, timeout: float | None) -> Iterator[None]:
    """While the block runs: when the clips in ``in_progress`` make no progress (no source frame)
    for ``timeout`` seconds, say which on stderr and end this process, exit status
    :data:`STALLED_EXIT`.  A thread stuck in a native decoder or in a hung filesystem call cannot be
    stopped from Python; the process ends as with ``kill -9``, which a run survives: the rerun
    builds those clips in a worker process of their own, where the same timeout stops them alone
    (:mod:`~mime_fast.corpus.pool`).  The manifest is compacted first (its parquet then lists the
    clips finished), unless that takes over :data:`COMPACT_BEFORE_EXIT_S`.  ``None`` or 0: no watch."""
    if not timeout:
        yield
        return

    def say() -> None:
        os.write(2, (f"{', '.join(in_progress.ids)}: no progress for {timeout:g} s: the run stops here; "
                     f"rerun to go on (then built in a worker process of their own)\n").encode())
        _compact_briefly(in_progress.path.parent)

    with _stall_watch(timeout, lambda: bool(in_progress.ids) and time.monotonic() - in_progress.last_moved > timeout,
                      say):
        yield


#: How long a run that stops for a stalled clip waits for its manifest's compaction.
COMPACT_BEFORE_EXIT_S = 30.0


def _compact_briefly(out_dir: Path) -> None:
    """The manifest of ``out_dir`` compacted (jsonl and parquet) on a thread of its own, waited for
    at most :data:`COMPACT_BEFORE_EXIT_S`: a hung filesystem, one reason a clip stalls, must not keep
    the process from ending.  Only while the run's own thread is stuck in a clip (it appends rows
    between clips); a failure is one line on stderr (the next run compacts)."""
    def compact_now() -> None:
        try:
            write_compacted(out_dir, compact(read_rows(out_dir)))
        except Exception as exc:  # noqa: BLE001 - the exit goes on; the rerun compacts
            os.write(2, f"{out_dir}: the manifest was not compacted ({type(exc).__name__}: {exc})\n".encode())

    thread = threading.Thread(target=compact_now, name="mime-fast-compact", daemon=True)
    thread.start()
    thread.join(COMPACT_BEFORE_EXIT_S)


@contextlib.contextmanager
def _stall_watch(timeout: float, stalled: Callable[[], bool], before_exit: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a thread asks ``stalled()`` every ``min(1 s, timeout / 4)``; when it
    is true, ``before_exit()`` runs and this process ends, exit status :data:`STALLED_EXIT`."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(min(1.0, timeout / 4)):
            if stalled():
                before_exit()
                os._exit(STALLED_EXIT)

    thread = threading.Thread(target=watch, name="mime-fast-stall-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _sequential_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings,
                        run: str, monitor: Monitor, detecting: bool, interrupt: threading.Event,
                        in_progress: InProgress) -> Iterator[tuple]:
    """Yield _process_clip results clip by clip, in this thread (each clip in ``in_progress`` while
    it is built)."""
    if detecting and pending:
        _load_models(monitor, device=settings.compute.device)
    for spec in pending:
        in_progress.set([spec.clip_id])
        yield _process_clip(spec, out_dir, codes, settings, run,
                            progress=_frames_to(monitor, spec.clip_id, interrupt, in_progress))


def _detect_ahead_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings,
                          run: str, monitor: Monitor, detecting: bool, interrupt: threading.Event,
                          in_progress: InProgress) -> Iterator[tuple]:
    """Yield _process_clip results in order, clip by clip, while one thread detects the subject of
    the next clip (clips with given landmarks or a known error need no detection); both clips are
    in ``in_progress`` meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mime-fast-detect")
    try:
        if detecting and pending:
            _load_models(monitor, pool, settings.compute.device)

        def start(i: int):
            if i >= len(pending) or not _detects(pending[i], codes):
                return None
            return pool.submit(locate_subject, pending[i].path, settings=settings,
                               progress=lambda n: in_progress.moved())

        def detected_next(i: int) -> list[str]:  # (in_progress before its detection starts)
            return [pending[i].clip_id] if i < len(pending) and _detects(pending[i], codes) else []

        in_progress.set(detected_next(0))
        ahead = start(0)
        for i, spec in enumerate(pending):
            in_progress.set([spec.clip_id, *detected_next(i + 1)])
            located, ahead = ahead, start(i + 1)
            if located is not None and not located.done():
                monitor.status(f"finding the subject of {spec.clip_id}…")
            yield _process_clip(spec, out_dir, codes, settings, run, located,
                                _frames_to(monitor, spec.clip_id, interrupt, in_progress))
    finally:
        # a detection running for the next clip writes nothing: it is waited for, not stopped
        pool.shutdown(wait=True, cancel_futures=True)


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
    from .. import set_num_threads  # lazy: the package root sits above every module

    set_num_threads(int(os.environ["MIME_FAST_NUM_THREADS"]))
    with contextlib.suppress(ImportError):
        import cv2

        cv2.setNumThreads(int(os.environ["MIME_FAST_MODEL_THREADS"]))


def _chained(*parts: Iterator[tuple]) -> Iterator[tuple]:
    """The results of ``parts``, one after the other; closing it closes them all."""
    try:
        for part in parts:
            yield from part
    finally:
        for part in parts:
            part.close()


#: Times Ray runs a clip's task again after its worker process died (a node lost, a crash, the
#: out-of-memory killer); Ray Data's default is forever, which a clip that crashes whatever builds it
#: turns into a run that never ends.
RAY_TASK_RETRIES = 1


@contextlib.contextmanager
def _exit_when_clip_stalls(timeout: float, marker: Path) -> Iterator[Progress | None]:
    """In a Ray task: the clip's progress callback.  When the clip makes no progress (no source
    frame) for ``timeout`` seconds, ``marker`` records this process's id and the process ends, as
    :func:`exit_when_stalled` ends a local run: a thread stuck in a native decoder or a hung
    filesystem call cannot be stopped from Python.  Ray then runs the task again, which finds the
    marker and fails the clip (:func:`_stalled`) instead of building it.  The clock starts when the
    clip does (the task loads the detection models first).  0: no watch (``None``)."""
    if not timeout:
        yield None
        return
    last = [time.monotonic()]

    def progress(n: int) -> None:
        if n:
            last[0] = time.monotonic()

    def mark() -> None:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(os.getpid()))

    with _stall_watch(timeout, lambda: time.monotonic() - last[0] > timeout, mark):
        yield progress


def _stalled(spec: ClipSpec, marker: Path, out_dir: Path, timeout: float, run: str) -> tuple:
    """The failed row of a clip whose Ray task ended its process for making no progress
    (:func:`_exit_when_clip_stalls`), the temporaries that process left for it removed."""
    try:
        pid = int(marker.read_text())
    except (OSError, ValueError):  # (cut short: its temporaries go with the next run's clean-up)
        pid = None
    if pid is not None:
        for p in clip_temporaries(out_dir, spec.clip_id, pid):
            p.unlink(missing_ok=True)
    return _failed(spec, f"no progress for {timeout:g} s: stopped", run, STALLED)


#: A worker process (of :mod:`~mime_fast.corpus.pool`, or Ray's) is handed at most this many clips;
#: it exits once they are done and a fresh process takes its place (``MIME_FAST_CLIPS_PER_WORKER``
#: overrides it).  Whatever native memory a
#: long run leaves in a process (allocator fragmentation, library caches of shapes seen once) goes
#: with it: over 300 clips of the real footage at 720p and 1080p a worker's median RSS rose from 712
#: to 733 MiB (``bench/bench_worker_memory.py``).  A new process loads its models again: a few
#: seconds on the CPU, once per this many clips.
CLIPS_PER_WORKER = 1000


def clips_per_worker() -> int:
    """:data:`CLIPS_PER_WORKER`, or ``MIME_FAST_CLIPS_PER_WORKER`` where set (a whole number >= 1)."""
    text = os.environ.get("MIME_FAST_CLIPS_PER_WORKER", "").strip()
    if not text:
        return CLIPS_PER_WORKER
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"MIME_FAST_CLIPS_PER_WORKER must be a whole number of clips >= 1, got {text!r}")
    return int(text)


def ray_task_resources(settings: Settings, cpus_per_clip: float, cluster: dict[str, float]) -> dict[str, float]:
    """What each clip's Ray task asks for: ``cpus_per_clip`` CPUs and, with ``device="cuda"``, a
    :data:`~mime_fast.devices.MAX_CLIPS_PER_GPU`-th of a GPU.  Ray hides every GPU from a task that
    asks for none (``CUDA_VISIBLE_DEVICES`` empty): its clips would find no CUDA device.  A cluster
    without GPUs (``cluster``: ``ray.cluster_resources()``) stops the run now
    (:class:`~mime_fast.corpus.clip.RunStopped`), rather than leave tasks waiting for a GPU forever."""
    resources = {"num_cpus": cpus_per_clip}
    if settings.compute.device == "cuda":
        if not cluster.get("GPU"):
            raise RunStopped(f"device='cuda' with Ray, but the Ray cluster has no GPU ({cluster.get('CPU', 0):g} CPUs, "
                             "0 GPUs): start its nodes with their GPUs, or build with --device cpu")
        resources["num_gpus"] = 1 / MAX_CLIPS_PER_GPU
    return resources


def _device_usable_here(settings: Settings) -> None:
    """In a Ray task: with ``device="cuda"``, this worker must see a usable CUDA device, or the run
    stops with one line naming the node (:class:`~mime_fast.corpus.clip.RunStopped`): every clip
    would fail there alike.  The driver does not check (``check_settings(use_ray=True)``)."""
    if settings.compute.device != "cuda":
        return
    from .. import cuda_available, cuda_status  # lazy: the package root sits above every module

    if not cuda_available():
        import socket

        raise RunStopped(f"device='cuda', but the Ray worker on {socket.gethostname()} cannot use CUDA "
                         f"({cuda_status()}): fix that node, or build with --device cpu")


def _ray_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings, run: str,
                 address: str | None, cpus_per_clip: float, clip_timeout: float | None = None):
    """Yield _process_clip results computed by Ray Data tasks, as they complete.  A clip whose task
    fails every time Ray runs it (its worker process died, or an error escaped the clip's own
    handling) gets a failed row and the run goes on, as with worker processes on one machine.  A
    clip that makes no progress for ``clip_timeout`` seconds ends its worker process and gets a
    failed row (:func:`_exit_when_clip_stalls`); its markers live in ``out_dir/.ray-stalled-<run>``
    until the run ends.  A Ray worker process runs at most :func:`clips_per_worker` clips, then
    exits and Ray starts a fresh one, as the pool's workers (Ray's ``max_calls``; without it Ray
    would reuse a CPU worker forever and start a new process, models loaded again, for every clip
    of a task that asks for a share of a GPU)."""
    max_calls = clips_per_worker()
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("use_ray needs Ray: pip install 'mime_fast[ray]'") from exc
    if not pending:
        return
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    items = [{"i": i, "spec": json.dumps({"clip_id": s.clip_id, "path": str(s.path), "label": s.label,
                                          "dataset": s.dataset, "landmarks": str(s.landmarks) if s.landmarks else None,
                                          "error": s.error,
                                          "duplicate_of": str(s.duplicate_of) if s.duplicate_of else None})}
             for i, s in enumerate(pending)]
    out = str(out_dir.resolve())
    timeout = float(clip_timeout or 0)
    stalls = out_dir.resolve() / f".ray-stalled-{run}"  # a marker per clip (by index) that stalled
    stalls_at = str(stalls)

    def task(item: dict[str, Any]) -> dict[str, Any]:
        d = json.loads(item["spec"])
        spec = ClipSpec(d["clip_id"], Path(d["path"]), d["label"], d["dataset"],
                        Path(d["landmarks"]) if d["landmarks"] else None, d["error"],
                        Path(d["duplicate_of"]) if d["duplicate_of"] else None)
        marker = Path(stalls_at) / str(item["i"])
        try:
            if marker.exists():  # this task's last run made no progress: its process was ended
                rows, reason, frames = _stalled(spec, marker, Path(out), timeout, run)
            else:
                _device_usable_here(settings)  # (the driver, maybe without a GPU, did not check it)
                if timeout and _detects(spec, codes):  # a new worker loads its models before the clock starts
                    default_stack(settings.compute.device)
                with _exit_when_clip_stalls(timeout, marker) as progress:
                    rows, reason, frames = _process_clip(spec, Path(out), codes, settings, run, progress=progress)
        except RunStopped as exc:  # the output disk is full, ...: the driver stops the run
            return {"i": item["i"], "rows": "[]", "reason": "", "frames": 0, "halt": str(exc)}
        return {"i": item["i"], "rows": json.dumps(rows), "reason": reason or "", "frames": frames, "halt": ""}

    import ray.data

    # One clip per block; a block whose task failed is dropped, not the run (its clip's row is made
    # below); the context is the caller's again afterwards.
    context = ray.data.DataContext.get_current()
    errored, context.max_errored_blocks = context.max_errored_blocks, -1
    came: set[int] = set()
    try:
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        resources = ray_task_resources(settings, cpus_per_clip, ray.cluster_resources())
        if "max_retries" in inspect.signature(ds.map).parameters:  # a named parameter in newer Rays
            ds = ds.map(task, **resources, max_retries=RAY_TASK_RETRIES, max_calls=max_calls)
        else:
            with warnings.catch_warnings():  # Ray >= 2.60 has it as a remote argument, no longer documented
                warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
                ds = ds.map(task, **resources, max_retries=RAY_TASK_RETRIES, max_calls=max_calls)
        for r in ds.iter_rows():
            if r["halt"]:
                raise RunStopped(r["halt"])
            came.add(int(r["i"]))
            yield json.loads(r["rows"]), (r["reason"] or None), int(r["frames"])
        for i, spec in enumerate(pending):
            if i in came:
                continue
            if (stalls / str(i)).exists():  # it stalled on the task's last run
                yield _stalled(spec, stalls / str(i), out_dir, timeout, run)
            else:
                yield _failed(spec, f"its Ray task failed {1 + RAY_TASK_RETRIES} times (the worker process building "
                                    f"it died, or an error escaped the clip's handling)", run, WORKER_DIED)
    finally:
        context.max_errored_blocks = errored
        shutil.rmtree(stalls, ignore_errors=True)
