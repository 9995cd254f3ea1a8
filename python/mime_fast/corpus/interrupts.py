"""Ctrl-C in a corpus run: flagged where Python cannot raise it, deferred while the manifest is
rewritten, blocked while worker processes start (main thread, Python's default handler only)."""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
import threading
from typing import Iterator


def _default_sigint() -> bool:
    """Whether this is the main thread and Ctrl-C does what Python does by default (raise
    ``KeyboardInterrupt``): only then does a run handle it itself."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


@contextlib.contextmanager
def _sigint_flagged(interrupt: threading.Event, *, raise_now: bool = False) -> Iterator[None]:
    """Ctrl-C during the block sets ``interrupt``; the run raises ``KeyboardInterrupt`` itself at its
    next safe point (the next frame of the clip in progress, the wait for a clip, the end of a
    clip).  It is not raised where the signal lands: an exception raised between any two
    bytecodes can leave a lock taken and never released (between a lock's acquire and the ``with``
    that releases it, in ``queue``, ``threading`` or ``concurrent.futures``), and the run then
    hangs in its clean-up instead of stopping (the likely cause of a one-process Ctrl-C test that,
    once, under load, did not exit in 300 s).  A second Ctrl-C, or the first with ``raise_now`` (Ray, whose waits cannot be polled), raises at once.
    Where Python cannot raise it (in a weakref callback or a destructor it is "ignored"), it is
    dropped silently and the flag stops the run."""
    if not _default_sigint():
        yield
        return

    def on_sigint(signum, frame):
        again = interrupt.is_set()
        interrupt.set()
        if again or raise_now:
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


def start_sigint_blocked(process) -> None:
    """``process.start()`` with SIGINT blocked (:func:`_sigint_blocked`), so the process starts
    with it blocked.  multiprocessing's resource tracker is launched first: the first process a
    spawn context starts launches it, and it unblocks SIGINT in this thread once it has (it undoes
    its own block, not the mask it found), so the first worker would start with SIGINT deliverable
    and die of a Ctrl-C in its imports."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with _sigint_blocked():
        process.start()


def stacks_on_sigusr1() -> None:
    """``kill -USR1`` (to the run's process group) then prints every thread's stack of each process
    to stderr and the run goes on: how a run that hangs is looked into (the CLI and the corpus
    worker processes register it; the Ctrl-C tests send it before giving up on a build)."""
    if not hasattr(signal, "SIGUSR1") or threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no real stderr (captured, closed)
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
