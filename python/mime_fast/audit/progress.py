"""What an audit reports while it runs (:class:`AuditMonitor`), and one line per event on a stream
(:class:`LineMonitor`, what ``mime-fast audit`` prints on stderr): the models loading, each clip's
frames read by the pass in progress (at most one line per :data:`FRAMES_EVERY_S` seconds), and each
clip done with its time, what each subset gave and the time left for the others."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from .protocol import AUDITED

__all__ = ["FRAMES_EVERY_S", "AuditMonitor", "LineMonitor", "clip_summary"]

#: :class:`LineMonitor` prints a clip's frame count at most once per this many seconds.
FRAMES_EVERY_S: float = 10.0

#: The passes over a clip's frames (:func:`mime_fast.audit.clip.audit_clip`), by number.
PASSES: dict[int, str] = {1: "faces and masks", 2: "recognisers"}


class AuditMonitor:
    """What :func:`mime_fast.audit.audit` reports as it goes, from the thread that called it; every
    method does nothing here (override the ones you need)."""

    def status(self, text: str) -> None:
        """What runs while no clip moves (``"loading the audit's models"``)."""

    def start(self, todo: Sequence[str], reused: int) -> None:
        """The clips to audit, in order, and how many are reused from the journal (not audited)."""

    def clip_started(self, clip_id: str) -> None:
        """``clip_id`` is being audited (in this process; a worker process's clip is reported done)."""

    def frames(self, clip_id: str, pass_no: int, done: int) -> None:
        """``done`` frames of ``clip_id`` read by pass ``pass_no`` (:data:`PASSES`); in this process only."""

    def clip_done(self, clip_id: str, rows: list[dict[str, Any]], seconds: float) -> None:
        """``clip_id`` audited in ``seconds``: its rows."""


def clip_summary(rows: list[dict[str, Any]]) -> str:
    """One clip's rows in a few words per subset: ``FDM re-identified, FSM not re-identified, FSM
    unmasked 3``; ``failed: reason`` when it could not be read."""
    failed = [r for r in rows if r.get("status") == "failed"]
    if failed:
        return f"failed: {failed[0]['reason']}"
    out = []
    for r in rows:
        if r.get("status") != "ok" or r.get("same_video_as"):
            continue
        words = {True: "re-identified", False: "not re-identified", None: "no probes"}[r.get("reidentified")]
        extra = [f"{k} {r[c]}" for k, c in (("unmasked", "unmasked_frames"), ("identity", "identity_frames"))
                 if r.get(c)]
        out.append(" ".join([r["subset"], words, *extra]))
    return ", ".join(out) or "skipped: " + next((str(r.get("reason")) for r in rows), "")


def _clock(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class LineMonitor(AuditMonitor):
    """One line per event on ``stream`` (default stderr): ``[3/10] clip: 12.3 s, FDM re-identified,
    FSM not re-identified; 0:01:30 left``."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream
        self.total = 0
        self.done = 0
        self.started = time.monotonic()
        self._last_line: dict[str, float] = {}

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stderr, flush=True)

    def status(self, text: str) -> None:
        self._print(text)

    def start(self, todo: Sequence[str], reused: int) -> None:
        self.total, self.started = len(todo), time.monotonic()
        subsets = ", ".join(AUDITED)
        self._print(f"auditing {len(todo)} clip(s) (FM against {subsets})"
                    + (f"; {reused} unchanged since an earlier audit, reused" if reused else ""))

    def clip_started(self, clip_id: str) -> None:
        self._last_line[clip_id] = time.monotonic()
        self._print(f"[{self.done + 1}/{self.total}] {clip_id}: pass 1 of 2 ({PASSES[1]})")

    def frames(self, clip_id: str, pass_no: int, done: int) -> None:
        now = time.monotonic()
        if now - self._last_line.get(clip_id, 0.0) >= FRAMES_EVERY_S:
            self._last_line[clip_id] = now
            self._print(f"[{self.done + 1}/{self.total}] {clip_id}: pass {pass_no} of 2 ({PASSES[pass_no]}): "
                        f"{done} frames")

    def clip_done(self, clip_id: str, rows: list[dict[str, Any]], seconds: float) -> None:
        self.done += 1
        self._last_line.pop(clip_id, None)
        elapsed = time.monotonic() - self.started
        left = self.total - self.done
        eta = f"; {_clock(elapsed / self.done * left)} left" if left else ""
        self._print(f"[{self.done}/{self.total}] {clip_id}: {seconds:.1f} s, {clip_summary(rows)}{eta}")
