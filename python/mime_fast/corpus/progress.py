"""Progress of corpus runs: what :func:`mime_fast.corpus.run_corpus` reports (:class:`Monitor`),
one line per clip (:class:`LineMonitor`), or progress bars on a terminal (:class:`TqdmMonitor`, drawn
with tqdm).

:class:`TqdmMonitor` draws one bar per clip in progress (its source frames, times its decode passes)
and one bar for the whole run, counted in frames, whose total -- and so whose ETA -- comes from the
frame counts the clips' containers declare (:func:`estimate_frames`), read on a background thread so
that a large corpus starts at once: at most :data:`ESTIMATE_SAMPLE` clips spread over the list, then
each clip as it starts, for its own bar (a clip not read counts as the mean of those read): a run of
40,000 clips opens 64 containers at its start, then one per clip as its workers reach it, not 40,000
at once beside them. Finished and failed clips are printed above the bars.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Callable, Sequence

import av

from ..media import av_path, main_video_stream
from .inputs import ClipSpec

__all__ = ["ESTIMATE_SAMPLE", "LineMonitor", "Monitor", "SKIPPED_SHOWN", "TqdmMonitor", "estimate_frames"]

#: The most clips :class:`LineMonitor` names as already complete; the others are counted in one line.
SKIPPED_SHOWN = 5

#: The most clips whose frame counts :class:`TqdmMonitor` reads when a run starts, for its total.
ESTIMATE_SAMPLE = 64


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Monitor:
    """What :func:`mime_fast.corpus.run_corpus` reports while it runs, from the thread that runs it;
    every method does nothing here (override the ones you need)."""

    def skipped(self, clip_id: str) -> None:
        """``clip_id`` is already complete: not rebuilt."""

    def start(self, pending: Sequence[ClipSpec], passes: Sequence[int]) -> None:
        """The clips to build, in order, and the decode passes each takes (0: it fails as listed;
        2: its subject is detected on the first of two passes): ``frames`` reports up to a clip's
        source frames times its passes."""

    def status(self, text: str | None) -> None:
        """What runs while no frame moves (``"loading detection models…"``); ``None``: over."""

    def frames(self, clip_id: str, n: int) -> None:
        """``n`` more source frames of ``clip_id`` processed (summed over its passes)."""

    def clip_done(self, clip_id: str, reason: str | None, frames: int) -> None:
        """``clip_id`` finished: ``reason`` is None on success; ``frames``: its source frames."""

    def note(self, clip_id: str, text: str) -> None:
        """What the user should know about ``clip_id``, just done (``"no audio, so no VMM ..."``)."""

    def clip_restarted(self, clip_id: str) -> None:
        """``clip_id`` is built again from its start (its worker process died, or was stopped for
        another clip's sake): the frames reported for it so far no longer count."""

    def close(self) -> None:
        """The run is over (finished or interrupted)."""


def _print_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LineMonitor(Monitor):
    """One line per clip through ``say`` (default: stderr): done or failed, clips and frames per
    second and the ETA. ``errors_only``: only failed clips. Clips already complete: the first
    :data:`SKIPPED_SHOWN` by name, the others in one line when the run starts (a rerun over 40,000
    complete clips prints 6 lines, not 40,000)."""

    def __init__(self, say: Callable[[str], None] | None = None, *, errors_only: bool = False):
        self.say = say or _print_stderr
        self.errors_only = errors_only
        self._n = self._total = self._frames = 0
        self._skipped = 0  # clips skipped and not yet counted in a line
        self._t0 = time.perf_counter()

    def skipped(self, clip_id: str) -> None:
        self._skipped += 1
        if not self.errors_only and self._skipped <= SKIPPED_SHOWN:
            self.say(f"{clip_id}: already complete, skipped")

    def _say_skipped(self) -> None:
        """The line that counts the clips skipped but not named, if any."""
        more, self._skipped = self._skipped - SKIPPED_SHOWN, 0
        if more > 0 and not self.errors_only:
            self.say(f"… and {more:,} more clip{'s' if more > 1 else ''} already complete, skipped")

    def start(self, pending: Sequence[ClipSpec], passes: Sequence[int]) -> None:
        self._say_skipped()
        self._n, self._total, self._frames = 0, len(pending), 0
        self._t0 = time.perf_counter()

    def close(self) -> None:
        self._say_skipped()  # (a run that did not start)

    def clip_done(self, clip_id: str, reason: str | None, frames: int) -> None:
        self._n += 1
        head = f"[{self._n}/{self._total}] {clip_id}"
        if reason is not None:
            self.say(f"{head}: failed: {reason}")
        elif not self.errors_only:
            self._frames += frames
            self.say(f"{head}: ok{self._rates()}")

    def note(self, clip_id: str, text: str) -> None:
        if not self.errors_only:
            self.say(f"  {clip_id}: {text}")

    def _rates(self) -> str:
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        rate = self._n / elapsed
        return (f" | {rate:.2f} clips/s, {self._frames / elapsed:.0f} frames/s, "
                f"ETA {_fmt_eta((self._total - self._n) / rate)}")


def estimate_frames(path: str | Path) -> int | None:
    """The video frames ``path`` declares (its frame count, or its duration times its frame rate),
    read from the container without decoding; ``None`` when it says neither or cannot be read."""
    try:
        with av.open(av_path(path)) as c:
            vs = main_video_stream(c)
            if vs is None:
                return None
            if vs.frames:
                return int(vs.frames)
            rate = vs.average_rate or vs.guessed_rate
            if vs.duration and vs.time_base:
                seconds = float(vs.duration * vs.time_base)
            elif c.duration:
                seconds = c.duration / 1_000_000
            else:
                return None
            return max(1, round(seconds * float(rate))) if rate else None
    except Exception:  # noqa: BLE001 - unreadable clips fail in the run itself, with the reason
        return None


class TqdmMonitor(LineMonitor):
    """Progress bars on ``file`` (default stderr): see the module docstring."""

    def __init__(self, file: IO[str] | None = None):
        super().__init__(self._write)
        self.file = file if file is not None else sys.stderr
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self.overall = None  # the run's bar (tqdm), from start()
        self._bars: dict = {}  # clip id -> its bar
        self._passes: dict[str, int] = {}
        self._est: dict[str, int] = {}  # clip id -> frames its container declares (when it says)
        self._paths: dict[str, Path] = {}  # clip id -> its file, for the clips with a pass
        self._queue: deque[str] = deque()  # clips to read (those started first)
        self._tried: set[str] = set()  # clips read, or being read
        self._reading = False  # an estimator thread runs
        self._estimator: threading.Thread | None = None
        self._received: dict[str, int] = {}
        self._finished: set[str] = set()
        self._done_units = 0  # frames x passes of finished clips
        self._known_units = 0  # estimated frames x passes of unfinished clips whose estimate is known
        self._unknown_passes = 0  # passes of unfinished clips not estimated yet
        self._est_sum = self._est_n = 0  # estimates read, for the mean
        self._clips_done = 0
        self._status: str | None = None

    def _write(self, line: str) -> None:
        from tqdm import tqdm

        tqdm.write(line, file=self.file)

    def _width(self) -> dict:
        """Follow the terminal's width; 80 columns where it reports none (tqdm would draw nothing)."""
        try:
            columns = os.get_terminal_size(self.file.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return {"dynamic_ncols": True} if columns > 0 else {"ncols": 80}

    def _desc(self) -> str:
        return self._status or f"clips {self._clips_done}/{len(self._passes)}"

    # -- Monitor ---------------------------------------------------------------------------------
    def start(self, pending: Sequence[ClipSpec], passes: Sequence[int]) -> None:
        from tqdm import tqdm

        super().start(pending, passes)
        with self._lock:
            self._passes = {s.clip_id: p for s, p in zip(pending, passes)}
            self._unknown_passes = sum(passes)
            self.overall = tqdm(total=None, unit="frame", desc=self._desc(), file=self.file, smoothing=0, leave=True,
                                **self._width())
        todo = [s for s, p in zip(pending, passes) if p]
        with self._lock:
            self._paths = {s.clip_id: s.path for s in todo}
            self._queue = deque(_spread([s.clip_id for s in todo], ESTIMATE_SAMPLE))
            self._wake()

    def status(self, text: str | None) -> None:
        with self._lock:
            self._status = text
            if self.overall is not None:
                self.overall.set_description_str(self._desc())

    def frames(self, clip_id: str, n: int) -> None:
        from tqdm import tqdm

        with self._lock:
            if self.overall is None or clip_id in self._finished:
                return
            if self._status is not None:
                self.status(None)
            self._received[clip_id] = self._received.get(clip_id, 0) + n
            bar = self._bars.get(clip_id)
            if bar is None:
                bar = self._bars[clip_id] = tqdm(total=self._clip_total(clip_id), unit="frame",
                                                 desc=_short(clip_id), file=self.file, leave=False,
                                                 **self._width())
                if clip_id not in self._tried and clip_id in self._paths:  # its total, read next
                    self._queue.appendleft(clip_id)
                    self._wake()
            bar.update(n)
            self.overall.update(n)

    def clip_done(self, clip_id: str, reason: str | None, frames: int) -> None:
        with self._lock:
            if self.overall is not None and clip_id not in self._finished:
                self._finished.add(clip_id)
                passes = self._passes.get(clip_id, 0)
                got = self._received.pop(clip_id, 0)
                units = got or frames * passes  # no frame reported (a Ray task): the clip's frames
                if clip_id in self._est:
                    self._known_units -= self._est[clip_id] * passes
                else:
                    self._unknown_passes -= passes
                self._done_units += units
                self.overall.update(units - got)
                bar = self._bars.pop(clip_id, None)
                if bar is not None:
                    bar.close()
                self._clips_done += 1
                self.overall.set_description_str(self._desc(), refresh=False)
                self._retotal()
        super().clip_done(clip_id, reason, frames)

    def clip_restarted(self, clip_id: str) -> None:
        with self._lock:
            got = self._received.pop(clip_id, 0)
            if self.overall is not None and got:
                self.overall.update(-got)
            bar = self._bars.get(clip_id)
            if bar is not None:
                bar.reset(total=bar.total)

    def _rates(self) -> str:
        return ""  # the run's bar shows the rate and the ETA

    def close(self) -> None:
        super().close()
        self._stop.set()
        with self._lock:
            for bar in self._bars.values():
                bar.close()
            self._bars.clear()
            if self.overall is not None:
                self.overall.close()

    # -- frame estimates -------------------------------------------------------------------------
    def _wake(self) -> None:
        """Start an estimator thread for the clips queued, unless one runs (called with the lock)."""
        if self._queue and not self._reading and not self._stop.is_set():
            self._reading = True
            self._estimator = threading.Thread(target=self._estimate, name="mime-fast-estimate", daemon=True)
            self._estimator.start()

    def _estimate(self) -> None:
        """Read the clips queued, each once, until none is left (not those finished meanwhile: a
        finished clip counts what it did)."""
        while True:
            with self._lock:
                while self._queue and (self._queue[0] in self._tried or self._queue[0] in self._finished):
                    self._queue.popleft()
                if not self._queue or self._stop.is_set():
                    self._reading = False
                    return
                clip_id = self._queue.popleft()
                self._tried.add(clip_id)
            est = estimate_frames(self._paths[clip_id])
            if est is None:
                continue  # counted as the mean of the others
            with self._lock:
                self._est[clip_id] = est
                self._est_sum += est
                self._est_n += 1
                if clip_id not in self._finished:
                    passes = self._passes[clip_id]
                    self._unknown_passes -= passes
                    self._known_units += est * passes
                    bar = self._bars.get(clip_id)
                    if bar is not None:
                        bar.total = est * passes
                        bar.refresh()
                self._retotal()

    def _clip_total(self, clip_id: str) -> int | None:
        est = self._est.get(clip_id)
        return None if est is None else est * self._passes.get(clip_id, 1)

    def _retotal(self) -> None:
        """The run's total in frames: finished clips as counted, the others as estimated."""
        if self.overall is None:
            return
        if self._unknown_passes and not self._est_n:
            total = None  # nothing read yet: no ETA rather than a wrong one
        else:
            mean = self._est_sum / self._est_n if self._est_n else 0.0
            total = max(self.overall.n, round(self._done_units + self._known_units + mean * self._unknown_passes))
        if total != self.overall.total:
            self.overall.total = total
            self.overall.refresh()


def _spread(items: list[str], count: int) -> list[str]:
    """``count`` of ``items`` spread evenly over them, in order, the first included (all of them
    where there are no more)."""
    n = len(items)
    return items if n <= count else [items[i * n // count] for i in range(count)]


def _short(clip_id: str, width: int = 24) -> str:
    return clip_id if len(clip_id) <= width else clip_id[: width - 1] + "…"
