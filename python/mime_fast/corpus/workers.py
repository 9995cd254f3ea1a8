"""How the clips of a corpus run are built: one by one in this thread, with the next clip's subject
detected ahead on a second thread, in worker processes on this machine (GPUs and cores shared
out), or as Ray Data tasks. Each way yields :func:`~mime_fast.corpus.clip._process_clip`'s results."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ..devices import gpu_count
from ..landmarks import default_stack
from ..options import Settings
from ..progress import Monitor
from ..subsets import locate_subject
from .clip import Progress, _detects, _process_clip
from .inputs import ClipSpec
from .interrupts import _sigint_blocked, stacks_on_sigusr1

__all__ = ["worker_threads", "share_cores"]


def _load_models(monitor: Monitor, pool=None, device: str = "cpu") -> None:
    """Load the detection models before the first clip (on ``pool``'s thread when given: the models
    are loaded once per thread), saying so; a missing model fails the run here, not every clip.
    ``device``: the stack of that device (:func:`mime_fast.landmarks.default_stack`), for runs whose
    clips are built in this process; a pool's driver checks with the CPU stack (its workers load
    their own, and the driver holds no GPU memory)."""
    monitor.status("loading detection models…")
    if pool is None:
        default_stack(device)
    else:
        pool.submit(default_stack, device).result()
    monitor.status(None)


def _frames_to(monitor: Monitor, clip_id: str, interrupt: threading.Event) -> Progress:
    def progress(n: int) -> None:
        if interrupt.is_set():
            raise KeyboardInterrupt  # a Ctrl-C, raised here, between two frames (_sigint_flagged)
        if n:  # (0: only asked whether to stop)
            monitor.frames(clip_id, n)

    return progress


def _sequential_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings,
                        run: str, monitor: Monitor, detecting: bool, interrupt: threading.Event) -> Iterator[tuple]:
    """Yield _process_clip results clip by clip, in this thread."""
    if detecting:
        _load_models(monitor, device=settings.compute.device)
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
            _load_models(monitor, pool, settings.compute.device)

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
    from .. import set_num_threads  # lazy: the package root sits above every module

    set_num_threads(int(os.environ["MIME_FAST_NUM_THREADS"]))
    with contextlib.suppress(ImportError):
        import cv2

        cv2.setNumThreads(int(os.environ["MIME_FAST_MODEL_THREADS"]))


def _init_worker(stop, frames, counter=None, gpus: int = 0, threads: int = 0, tasks=None, results=None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (and blocked since the worker started: _sigint_blocked)
    stacks_on_sigusr1()
    _WORKER.update(stop=stop, frames=frames, tasks=tasks, results=results)
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


def _clip_slots(slots: int) -> None:
    """In a worker process of :func:`_shared_process_results`: ``slots`` threads build clips taken
    from the task queue, at once (on a GPU their models are one stack shared through a model broker,
    :func:`~mime_fast.landmarks.default_stack`), each result sent as its clip finishes; returns
    when every thread has met the end of the queue."""
    tasks, results = _WORKER["tasks"], _WORKER["results"]

    def slot() -> None:
        while True:
            item = tasks.get()
            if item is None:
                return
            i, args = item
            try:
                results.put((i, _process_clip_in_worker(*args)))
            except KeyboardInterrupt:  # stopped: its temporaries are gone
                results.put((i, None))

    threads = [threading.Thread(target=slot, name=f"mime-fast-clip-{k}") for k in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _shared_process_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings, run: str,
                            workers: int, per_process: int, monitor: Monitor, detecting: bool,
                            interrupt: threading.Event) -> Iterator[tuple]:
    """Yield _process_clip results from worker processes that each build ``per_process`` clips at
    once in threads (``workers`` clips in all), as clips complete.  With ``device="cuda"`` each
    process owns one GPU (worker i uses GPU i mod n) and its clips share that GPU's models, their
    calls batched across them; the clips' encoders are libx264 threads, which run outside the
    interpreter's lock."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if detecting:
        _load_models(monitor)
    ctx = multiprocessing.get_context("spawn")
    stop, frames, tasks, results = ctx.Event(), ctx.SimpleQueue(), ctx.SimpleQueue(), ctx.SimpleQueue()
    procs = -(-workers // per_process)
    slots = -(-workers // procs)

    def relay() -> None:
        while not frames.empty():
            monitor.frames(*frames.get())

    gpus = gpu_count() if settings.compute.device == "cuda" else 0
    pool = ProcessPoolExecutor(max_workers=procs, mp_context=ctx, initializer=_init_worker,
                               initargs=(stop, frames, ctx.Value("i", 0), gpus, worker_threads(procs), tasks, results))
    # Clips are handed out as slots free up (the queue's pipe never holds more than one per slot),
    # then one end mark per slot.
    sent, received, ended = 0, 0, False

    def hand_out() -> None:
        nonlocal sent, ended
        while sent < len(pending) and sent - received < procs * slots:
            tasks.put((sent, (pending[sent], out_dir, codes, settings, run)))
            sent += 1
        if sent == len(pending) and not ended:
            for _ in range(procs * slots):
                tasks.put(None)
            ended = True

    def finished() -> Iterator[tuple]:
        nonlocal received
        relay()  # a clip's last frame count was sent before its result
        while not results.empty():
            _, res = results.get()
            received += 1
            if res is not None:
                yield res

    try:
        with _sigint_blocked():
            futures = [pool.submit(_clip_slots, slots) for _ in range(procs)]
        hand_out()  # (after the workers start: they read the queue)
        try:
            while received < len(pending):
                if interrupt.is_set():
                    raise KeyboardInterrupt
                before = received
                yield from finished()
                if received == before:
                    for fut in futures:  # a worker process that died (BrokenProcessPool) raises here
                        if fut.done():
                            fut.result()
                    time.sleep(0.05)
                hand_out()
        except KeyboardInterrupt:
            stop.set()  # the clips in progress stop at their next frame; the slots take no new clip
            sent = len(pending)
            hand_out()  # (the end marks, if not sent yet)
            while not all(f.done() for f in futures):
                yield from finished()  # clips that finished before they were told to stop keep their rows
                time.sleep(0.05)
            yield from finished()
            raise
    finally:
        stop.set()
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
