"""Model stacks whose calls are recorded once and then answered instantly, so that a benchmark can
time everything a clip costs the host except the networks themselves: decode, the detector's
downscale, tracking, shots, masks, blur, and the hand-off to the encoders.

On a GPU the networks run on the device and their launches are replayed from CUDA graphs; what is
left on the CPU is this host work, and it bounds how many source frames a process can move (the
GPU no-encode target of issue 12).  Measured here on the CPU with the offline stack's recorded
answers: the tracker is deterministic, so the replayed run makes the same calls in the same order
and gets the same answers.  A call whose first image argument has another shape than the recorded
one, or one call too many, raises :class:`ReplayDiverged`: the replay then measured something else.

Works with any version of the package that has the stack roles ``detector``, ``landmarks``,
``embedder`` and ``persons`` (bench_host_overhead.py runs it against another checkout too).
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict, deque
from typing import Any

ROLES = ("detector", "landmarks", "embedder", "persons")


class ReplayDiverged(RuntimeError):
    """The replayed run asked the models something the recorded run did not."""


def _shape(args: tuple) -> tuple | None:
    for a in args:
        s = getattr(a, "shape", None)
        if s is not None:
            return tuple(s)
        if isinstance(a, (list, tuple)) and a and getattr(a[0], "shape", None) is not None:
            return (len(a), *tuple(a[0].shape))
    return None


class CallLog:
    """What one run asked each model (role, method) and was answered, in order, and how long the
    models took."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], list[tuple[tuple | None, Any]]] = defaultdict(list)
        self.seconds = 0.0
        self.calls = 0

    def fresh(self) -> dict[tuple[str, str], deque]:
        """Copies of the answers for one replayed run (made before the clock: the pipeline may
        keep or change what it is given)."""
        return {k: deque(copy.deepcopy(v)) for k, v in self.answers.items()}


class _Model:
    """A model whose method calls are recorded into ``log`` (``queues`` None) or answered from
    ``queues``; other attributes are the model's."""

    def __init__(self, role: str, model, log: CallLog, queues: dict | None):
        self._role, self._model, self._log, self._queues = role, model, log, queues

    def __getattr__(self, name: str):
        key = (self._role, name)
        if self._queues is not None and key in self._queues:
            return self._answer(key)  # (the model is not touched)
        value = getattr(self._model, name)
        if not callable(value) or name.startswith("_"):
            return value
        if self._queues is None:
            def record(*args, **kwargs):
                t = time.perf_counter()
                out = value(*args, **kwargs)
                self._log.seconds += time.perf_counter() - t
                self._log.calls += 1
                self._log.answers[key].append((_shape(args), copy.deepcopy(out)))
                return out
            return record
        return self._answer(key)

    def _answer(self, key: tuple[str, str]):
        def answer(*args, **kwargs):
            queue = self._queues.get(key)
            if not queue:
                raise ReplayDiverged(f"{key[0]}.{key[1]}: a call the recorded run did not make")
            shape, out = queue.popleft()
            if shape != _shape(args):
                raise ReplayDiverged(f"{key[0]}.{key[1]}: input {_shape(args)}, recorded {shape}")
            return out
        return answer


class _Stack:
    """``stack`` with its models recorded or replayed; every other attribute is the stack's."""

    def __init__(self, stack, log: CallLog, queues: dict | None):
        self._stack = stack
        for role in ROLES:
            model = getattr(stack, role, None)
            setattr(self, role, None if model is None else _Model(role, model, log, queues))

    def __getattr__(self, name: str):
        return getattr(self._stack, name)


def recording(stack) -> tuple[_Stack, CallLog]:
    """``stack`` whose model calls are recorded, and the log they go to."""
    log = CallLog()
    return _Stack(stack, log, None), log


def replaying(stack, log: CallLog) -> tuple[_Stack, dict]:
    """``stack`` whose models answer from ``log`` without running, and the answers left (every
    queue should be empty after the run: :func:`unanswered`)."""
    queues = log.fresh()
    return _Stack(stack, log, queues), queues


def unanswered(queues: dict) -> dict[str, int]:
    """Recorded calls the replayed run did not make ({} when it made them all)."""
    return {f"{r}.{m}": len(q) for (r, m), q in queues.items() if q}
