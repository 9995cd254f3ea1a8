"""Clips built in worker processes on this machine, each process joined to the driver by a pipe of
its own.

Each process loads its detection models before it says it is ready (the run's status line
counts the processes ready), so a slow load -- torch, a CUDA context and the networks on a GPU
machine -- is not a clip's time.  The driver hands each process clips as its slots free up
(``slots`` clips at once per process, on threads: with ``device="cuda"`` they share the process's
GPU and its models), and ``stop`` / ``end`` messages; a process sends back frame counts and each
clip's result.  Nothing is shared between the processes: no queue, lock or semaphore that a process
killed in the middle of a call could leave taken for the others (the out-of-memory killer's
SIGKILL, a crash in a native decoder or model library).  So a dying worker costs the run one clip,
not the batch:

- the driver sees the process end (its sentinel) with clips still in flight; with one clip in
  flight that clip gets a failed row naming how the process ended (``killed by SIGKILL - out of
  memory?``), its temporaries are removed and a new process takes the dead one's place (and GPU);
- with several clips in flight (``slots > 1``) the culprit is unknown: each of them is built again
  alone in a process, and only the one that kills its process again fails;
- a clip that makes no progress (no source frame) for ``clip_timeout`` seconds -- a decoder or a
  filesystem that hangs -- has its process killed and gets a failed row saying so; the other clips
  in flight in that process are built again;
- an exception that escapes a clip's build in the worker (one that is not an ``Exception``:
  ``SystemExit``, …) is that clip's failed row;
- processes that die before they are ready, or on their clip while no clip of the run has finished
  yet, three times, stop the run with the reason (``RuntimeError``): a run whose workers cannot
  start or load their models is not a run of failed clips.

A rerun (resume) tries a failed clip again."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import connection
from pathlib import Path
from typing import Any, Iterator

from ..detect.stacks import default_stack
from ..devices import gpu_count
from ..options import Settings
from .clip import STALLED, WORKER_DIED, RunStopped, _failed, _process_clip
from .inputs import ClipSpec
from .interrupts import stacks_on_sigusr1, start_sigint_blocked
from .progress import Monitor
from .resume import clean_stale_temporaries
from .workers import clips_per_worker, share_cores, worker_threads

__all__ = ["worker_process_results", "exit_description", "WORKER_DIED", "STALLED"]

#: How long the driver waits for its workers to stop (their clips stop at the next frame) before it
#: terminates them.
STOP_TIMEOUT_S = 120.0
#: Processes that die while they start, or before any clip of the run has finished, that stop the run.
START_FAILURES = 3

_HINTS = {"SIGKILL": "out of memory?", "SIGSEGV": "a crash in native code", "SIGBUS": "a crash in native code",
          "SIGABRT": "a native library aborted", "SIGILL": "a crash in native code", "SIGFPE": "a crash in native code"}


def exit_description(code: int | None) -> str:
    """How a process ended, in words: ``killed by SIGKILL - out of memory?``, ``exit status 3``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = _HINTS.get(name)
        return f"killed by {name}" + (f" - {hint}" if hint else "")
    return f"exit status {code}"


# -- the worker process --------------------------------------------------------------------------

def _worker_setup(index: int, gpus: int = 0, threads: int = 0) -> None:
    """A worker's process-wide settings, before anything loads: Ctrl-C ignored (a terminal's
    reaches every process of the group; the driver decides, and says ``stop``), stacks on
    SIGUSR1, the cores shared out (:func:`~mime_fast.corpus.workers.share_cores`), and with
    ``gpus > 1`` GPU ``index`` mod ``gpus`` (of those visible) as its only GPU."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (and blocked since the process started: start_sigint_blocked)
    stacks_on_sigusr1()
    if threads:
        share_cores(threads)
    if gpus > 1:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(g) for g in range(gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[index % len(ids)]  # before anything touches CUDA here


def _worker_main(conn: connection.Connection, index: int, gpus: int, threads: int, slots: int,
                 models: str | None = None) -> None:
    """A worker process: ``slots`` threads build the clips the driver sends over ``conn``.  With
    ``models`` (a device), each thread loads the detection models of that device first
    (:func:`~mime_fast.detect.stacks.default_stack`: the threads of a CUDA process share one), and the
    process says it is ready only then: a clip's time, and its stall clock, start with its first
    frame, not with a model load (on a GPU machine: torch, the CUDA context, the networks)."""
    send_lock = threading.Lock()

    def send(*message: Any) -> None:
        with send_lock:
            conn.send(message)

    try:
        _worker_setup(index, gpus, threads)
    except BaseException as exc:  # noqa: BLE001 - said to the driver, which stops the run with it
        send("fatal", *_fatal(exc))
        return
    stop = threading.Event()
    clips: queue.SimpleQueue = queue.SimpleQueue()
    loaded = threading.Barrier(slots + 1)
    failures: list[tuple[str, BaseException | None]] = []

    def slot() -> None:
        if models is not None:
            try:
                default_stack(models)  # (per thread on the CPU, per process on a GPU)
            except BaseException as exc:  # noqa: BLE001 - said to the driver, which stops the run with it
                failures.append(_fatal(exc))
        loaded.wait()
        if failures:
            return
        while (item := clips.get()) is not None:
            i, args = item
            try:
                try:
                    message = ("done", i, _clip_in_worker(i, *args, stop=stop, send=send))
                except KeyboardInterrupt:  # told to stop: its temporaries are gone
                    message = ("stopped", i)
                except RunStopped as exc:  # the output disk is full, ...: the driver stops the run
                    message = ("halt", i, str(exc))
                except BaseException as exc:  # noqa: BLE001 - escaped the clip's own handling: its failed row
                    message = ("error", i, _said(exc))
                try:
                    send(*message)
                except OSError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a result that cannot be sent still ends its clip
                    send("error", i, f"its result could not be sent to the driver: {_said(exc)}")
            except OSError:  # the driver is gone: nothing more to do
                stop.set()

    workers = [threading.Thread(target=slot, name=f"mime-fast-clip-{k}") for k in range(slots)]
    for t in workers:
        t.start()
    loaded.wait()
    if failures:
        send("fatal", *failures[0])
        for t in workers:
            t.join()
        return
    send("ready")
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the driver is gone: stop the clips in progress
                stop.set()
                break
            if message[0] == "clip":
                clips.put(message[1:])
            elif message[0] == "stop":
                stop.set()
            elif message[0] == "end":
                break
    finally:
        for _ in workers:
            clips.put(None)
        for t in workers:
            t.join()


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _fatal(exc: BaseException) -> tuple[str, BaseException | None]:
    """What a worker that cannot start tells the driver: the traceback's text, and the exception
    itself where it is an ``ImportError`` that survives pickling (a model or its runtime not
    installed: the driver raises it as an in-process run would, :func:`_start_failure`)."""
    said = traceback.format_exc(limit=4)
    if isinstance(exc, ImportError):
        try:
            back = pickle.loads(pickle.dumps(exc))
        except Exception:  # noqa: BLE001 - its text is enough
            return said, None
        if type(back) is type(exc) and str(back) == str(exc):  # (a class whose pickling garbles its text: not sent)
            return said, exc
    return said, None


def _start_failure(said: str, exc: BaseException | None = None) -> BaseException:
    """The error a run stops with when a worker process cannot start: a model that is not installed
    as itself (``ImportError``, e.g. :class:`~mime_fast.detect.ModelNotAvailable`: the same one
    line as a run in one process), anything else as ``RuntimeError`` naming it."""
    if isinstance(exc, ImportError):
        return exc
    return RuntimeError(f"a worker process could not start: {said.strip().splitlines()[-1]}")


def _clip_in_worker(i: int, spec: ClipSpec, out_dir: Path, codes: list[str], settings: Settings, run: str, *,
                    stop: threading.Event, send) -> tuple[list[dict[str, Any]], str | None, int]:
    """:func:`~mime_fast.corpus.clip._process_clip` in a worker: frame counts sent every 0.1 s (the
    last before the result), stopped at the next frame once ``stop`` is set."""
    if stop.is_set():
        raise KeyboardInterrupt
    unsent, last = 0, time.monotonic()

    def progress(n: int) -> None:
        nonlocal unsent, last
        if stop.is_set():
            raise KeyboardInterrupt  # aborts the clip: its temporaries are removed
        unsent += n
        if time.monotonic() - last >= 0.1:
            send("frames", i, unsent)
            unsent, last = 0, time.monotonic()

    try:
        return _process_clip(spec, out_dir, codes, settings, run, progress=progress)
    finally:
        if unsent:
            send("frames", i, unsent)


# -- the driver --------------------------------------------------------------------------------

@dataclass(eq=False)
class _Worker:
    index: int  # its place: a process that replaces a dead one takes its index (and so its GPU)
    process: Any
    conn: connection.Connection
    clips: set[int] = field(default_factory=set)  # in flight
    moved: dict[int, float] = field(default_factory=dict)  # clip in flight -> when it last made progress
    stalled: int | None = None  # the clip it was killed for
    ready: bool = False  # set up: clips are handed to it from then on
    ended: bool = False  # told "end": it exits once its clips are done
    handed: int = 0  # clips handed to it (at most CLIPS_PER_WORKER: then a fresh process goes on)


def worker_process_results(pending: list[ClipSpec], out_dir: Path, codes: list[str], settings: Settings, run: str,
                           workers: int, per_process: int, monitor: Monitor, detecting: bool,
                           interrupt: threading.Event, clip_timeout: float | None = None) -> Iterator[tuple]:
    """Yield :func:`~mime_fast.corpus.clip._process_clip` results from worker processes that each
    build ``per_process`` clips at once on threads (``workers`` clips at once in all), as clips
    complete, relaying their frame counts to ``monitor``.  With ``device="cuda"`` worker i uses GPU
    i mod n.  A worker that dies costs its clip a failed row, not the run, and so does a clip that
    makes no progress for ``clip_timeout`` seconds (the module's text)."""
    # (each worker loads the detection models before it is ready; one that cannot stops the run
    # with the reason: a missing model is raised here as it would be in one process)
    # "spawn": a fresh interpreter per worker, never a fork of a process that holds threads.
    ctx = multiprocessing.get_context("spawn")
    procs = -(-workers // per_process)
    slots = -(-workers // procs)
    gpus = gpu_count() if settings.compute.device == "cuda" else 0
    threads = worker_threads(procs)
    limit = clips_per_worker()
    todo = deque(range(len(pending)))
    suspects: set[int] = set()  # in flight in a process that died with others: each built again alone
    live: dict[connection.Connection, _Worker] = {}
    deaths = 0  # processes that died starting, or while no clip of the run had finished
    finished = False
    stopping = False
    first = min(procs, len(pending))
    starting = set(range(first))  # the first processes, until each says it is ready (the status line)

    def start(index: int) -> None:
        here, there = ctx.Pipe()
        process = ctx.Process(target=_worker_main,
                              args=(there, index, gpus, threads, slots, settings.compute.device if detecting else None),
                              name=f"mime-fast-worker-{index}", daemon=True)
        start_sigint_blocked(process)  # the process starts with SIGINT blocked
        there.close()
        live[here] = _Worker(index, process, here)

    def send(w: _Worker, *message: Any) -> bool:
        try:
            w.conn.send(message)
            return True
        except OSError:  # it died: its sentinel says so next
            return False

    def hand_out(w: _Worker) -> None:
        if not w.ready:
            return
        while not stopping and len(w.clips) < slots and w.handed < limit and not (w.clips & suspects):
            i = next((i for i in todo if i not in suspects or not w.clips), None)
            if i is None:
                break
            if not send(w, "clip", i, (pending[i], out_dir, codes, settings, run)):
                return
            todo.remove(i)
            w.clips.add(i)
            w.handed += 1
            w.moved[i] = time.monotonic()
        if (stopping or not todo or w.handed >= limit) and not w.clips and not w.ended:
            w.ended = send(w, "end")

    def failed(i: int, reason: str, detail: str) -> tuple:
        return _failed(pending[i], reason, run, detail)

    def receive(w: _Worker) -> Iterator[tuple]:
        """The messages ``w`` sent so far (a result: yielded)."""
        nonlocal finished
        while True:
            try:
                if not w.conn.poll():
                    return
                message = w.conn.recv()
            except (EOFError, OSError):
                return
            kind = message[0]
            if kind == "ready":
                w.ready = True
                if detecting and w.index in starting:
                    starting.discard(w.index)
                    monitor.status(f"worker processes loading their models: {first - len(starting)}/{first} ready"
                                   if starting else None)
            elif kind == "frames":
                if message[1] in w.clips:
                    w.moved[message[1]] = time.monotonic()
                monitor.frames(pending[message[1]].clip_id, message[2])
            elif kind == "fatal":
                raise _start_failure(*message[1:])
            elif kind == "halt":
                w.clips.discard(message[1])
                raise RunStopped(message[2])
            else:
                i = message[1]
                w.clips.discard(i)
                w.moved.pop(i, None)
                suspects.discard(i)
                finished = True
                if kind == "done":
                    yield message[2]
                elif kind == "error":
                    yield failed(i, message[2], "worker")

    def again(clips: list[int]) -> None:
        """``clips`` (in flight in a process that ended) are built again, first."""
        todo.extendleft(reversed(clips))
        for i in clips:
            monitor.clip_restarted(pending[i].clip_id)

    def reap(w: _Worker) -> Iterator[tuple]:
        """``w``'s process has ended: its last messages, then its clips in flight dealt with."""
        nonlocal deaths
        yield from receive(w)
        w.process.join()
        w.conn.close()
        del live[w.conn]
        how = exit_description(w.process.exitcode)
        lost = sorted(w.clips)
        if lost:
            clean_stale_temporaries(out_dir)  # the dead process's (its pid no longer runs)
        if stopping or (w.ended and not lost):
            if not stopping and todo:  # it built its CLIPS_PER_WORKER: a fresh process goes on
                start(w.index)
            return
        if w.stalled is not None:  # killed for that clip: the others are built again
            if w.stalled in lost:
                lost.remove(w.stalled)
                yield failed(w.stalled, f"no progress for {clip_timeout:g} s: stopped", STALLED)
            again(lost)
            lost = []
        elif not w.ready or not finished:
            deaths += 1
            if deaths >= START_FAILURES:
                when = "while they start" if not w.ready else "before any clip has finished"
                raise RuntimeError(f"worker processes die {when} ({how})")
        if len(lost) == 1:
            yield failed(lost[0], f"the worker process building this clip died ({how})", WORKER_DIED)
            suspects.discard(lost[0])
        elif lost:
            suspects.update(lost)
            again(lost)
        if todo:
            start(w.index)

    def watch(w: _Worker) -> None:
        """Kill ``w``'s process if a clip of it has made no progress for ``clip_timeout``."""
        now = time.monotonic()
        for i in w.clips:
            if clip_timeout and w.stalled is None and now - w.moved.get(i, now) > clip_timeout:
                w.stalled = i
                w.process.kill()  # (its end is dealt with by reap, as any process's)

    def pump(timeout: float) -> Iterator[tuple]:
        """Wait up to ``timeout`` for any message or process end, and deal with all there are."""
        connection.wait([*live, *(w.process.sentinel for w in live.values())], timeout=timeout)
        for w in list(live.values()):
            if w.process.is_alive():
                yield from receive(w)
                hand_out(w)
                if not stopping:
                    watch(w)
            else:
                yield from reap(w)

    try:
        for k in range(first):
            start(k)  # (clips are handed out once it says it is ready)
        if detecting:
            monitor.status(f"worker processes loading their models: 0/{first} ready")
        try:
            while live:
                if interrupt.is_set():
                    raise KeyboardInterrupt
                yield from pump(0.1)
        except KeyboardInterrupt:
            stopping = True  # the clips in progress stop at their next frame; no clip is handed out
            for w in list(live.values()):
                send(w, "stop")
                hand_out(w)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while live and time.monotonic() < deadline:
                yield from pump(0.1)  # clips that finished before they were told to stop keep their rows
            raise
    finally:
        stopping = True
        for w in live.values():
            send(w, "stop")
            send(w, "end")
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for w in live.values():
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():  # stuck: its temporaries go with the run's clean-up
                w.process.kill()
                w.process.join()
            w.conn.close()
        live.clear()
