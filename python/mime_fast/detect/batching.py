"""One model stack shared by the clips a process builds at once, its calls batched across them.

On a GPU the face models cost little to compute and much to launch: one clip's tracker calls the
detector on one frame and the mesh on one or two faces at a time, and each call pays every layer's
launch.  A :class:`ModelBroker` sits between the trackers of several clips (one thread each) and one
stack: a call blocks its thread, the calls waiting on a model are run together as one batch, and
each thread gets back its own result.

Same results whoever shares a batch: every forward runs at one fixed batch size (``batch``; a
model's items are cut into chunks of exactly that many, the last padded with copies of its first
item), so the network always sees the same shapes, and items of different calls share a chunk only
where the model was found *batch-invariant* for that input shape: the first time a shape is seen,
an item is run alone (its chunk padded with copies of itself) and then last in a chunk of another
input, and the two results must be equal bit for bit (the probe, :meth:`_Lane._mixes`).  Where
they are not, each call's items get chunks of their own (still padded to the same size), so
results never depend on which calls met.  A clip run alone through a broker therefore gets the bytes it gets among others.

When a batch runs (:meth:`ModelBroker._call`): as soon as its items fill a chunk, or when every
thread that used the broker in the last ``IDLE_S`` is waiting on it (nobody else will call soon:
then the model with the most items queued runs, and the threads waiting on the others follow into
it, so the clips keep meeting), or when a call has waited ``wait_s``.  The thread whose call triggers it runs the batch
(no broker thread), one batch at a time: the device runs forwards one after another anyway, and
while one runs the calls of the other models gather; a batch that fails is rerun call by call, so
an error reaches only the call that caused it.

Models with a batch method (``detect_batch``, ``landmarks_batch``, ``embed_batch``: the torch stack,
:mod:`mime_fast.detect.torch_models`) are batched; others, and the person detector (a few whole
frames per clip), are called one call at a time (chunk size 1).  :func:`shared_stack` wraps a
stack; the result has the stack's interface (``detector``, ``landmarks``, ``embedder``,
``persons``, ``name``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from .interface import Faces, Landmarks, Persons

__all__ = ["BATCH", "IDLE_S", "WAIT_S", "BrokeredStack", "ModelBroker", "shared_stack"]

#: Items per forward (every forward of a batched model runs at exactly this many).
BATCH = 8
#: Longest a call waits for others to join its batch (seconds).
WAIT_S = 0.004
#: A thread that has not called the broker for this long is not waited for.
IDLE_S = 0.1


_UNSET = object()


class _Request:
    __slots__ = ("args", "units", "result", "error", "done", "thread")

    def __init__(self, args: tuple, units: list, thread: int):
        self.args, self.units, self.thread = args, units, thread
        self.result, self.error, self.done = _UNSET, None, False


def _turned(frame):
    """Another input of ``frame``'s shape for the probe: the frame turned half a turn (a frame kept
    on a device turns there, :meth:`mime_fast.detect.torch_ops.DeviceFrame.turned`)."""
    if not isinstance(frame, np.ndarray) and hasattr(frame, "turned"):
        return frame.turned()
    return np.ascontiguousarray(frame[::-1, ::-1])


def _equal(a, b) -> bool:
    """Bit-equal results (Faces, Landmarks, Persons, arrays)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype \
            and a.tobytes() == b.tobytes()
    if type(a) is not type(b):
        return False
    fields = getattr(type(a), "__dataclass_fields__", None)
    if fields is None:
        return bool(a == b)
    return all(_equal(getattr(a, f), getattr(b, f)) for f in fields)


class _Lane:
    """One model's calls: how a call becomes items (``units``), which items may share a forward
    (``key``: the input shape), the forward on a list of items (``call``), a call's result from its
    items' results (``assemble``), and another input of an item's shape for the probe (``variant``)."""

    def __init__(self, name: str, *, units: Callable, key: Callable, call: Callable, assemble: Callable,
                 variant: Callable | None, batch: int):
        self.name, self.units, self.key, self.call, self.assemble = name, units, key, call, assemble
        self.variant = variant
        self.batch = int(batch) if variant is not None else 1
        self.pending: list[_Request] = []
        self.mix: dict = {}  # input shape -> whether calls may share a forward there (the probe's answer)
        self.forwards = 0
        self.items = 0

    def queued(self) -> int:
        return sum(len(r.units) for r in self.pending)

    def _forward(self, items: list) -> list:
        pad = items + [items[0]] * (self.batch - len(items))
        self.forwards += 1
        return list(self.call(pad))[: len(items)]

    def _mixes(self, key, item) -> bool:
        """Whether the model gives ``item`` the same result alone in a forward (padded with copies
        of itself) and last in a forward of another input (asked once per input shape)."""
        if key not in self.mix:
            if self.batch == 1:
                self.mix[key] = True
            else:
                other = self.variant(item)
                alone = self._forward([item])[0]  # (padded with copies of itself)
                among = self._forward([other] * (self.batch - 1) + [item])[-1]
                self.mix[key] = _equal(alone, among)
        return self.mix[key]

    def run(self, reqs: list[_Request]) -> None:
        """Results (or errors) of ``reqs`` into them; raises only what is no ``Exception``
        (an interrupt)."""
        try:
            outs = self._run(reqs)
        except Exception as exc:  # noqa: BLE001 - rerun call by call: the error goes to its own call
            if len(reqs) == 1:
                reqs[0].error = exc
            else:
                for r in reqs:
                    self.run([r])
            return
        for r, o in zip(reqs, outs):
            r.result = o

    def _run(self, reqs: list[_Request]) -> list:
        per: list[list] = [[] for _ in reqs]
        groups: dict = {}
        for ri, r in enumerate(reqs):
            for u in r.units:
                groups.setdefault(self.key(u), []).append((ri, u))
        for key, items in groups.items():
            runs = [items] if self._mixes(key, items[0][1]) else \
                [[it for it in items if it[0] == ri] for ri in dict.fromkeys(i for i, _ in items)]
            for run in runs:
                for k in range(0, len(run), self.batch):
                    chunk = run[k:k + self.batch]
                    self.items += len(chunk)
                    for (ri, _), o in zip(chunk, self._forward([u for _, u in chunk])):
                        per[ri].append(o)
        return [self.assemble(r.args, p) for r, p in zip(reqs, per)]


class ModelBroker:
    """The models of ``stack`` called from many threads, batched across them (module doc).
    ``batch``: items per forward; ``wait_s``: longest wait for a batch to fill."""

    def __init__(self, stack, *, batch: int = BATCH, wait_s: float = WAIT_S, idle_s: float = IDLE_S):
        self.stack = stack
        self.wait_s, self.idle_s = float(wait_s), float(idle_s)
        self._cond = threading.Condition()
        self._seen: dict[int, float] = {}
        self._waiting: set[int] = set()
        self._busy = False  # a forward is running (one at a time: the device runs them one after another)
        self.lanes: dict[str, _Lane] = {}
        det, lmk = stack.detector, stack.landmarks
        emb, per = getattr(stack, "embedder", None), getattr(stack, "persons", None)
        frame_lane = dict(units=lambda frame: [frame], key=lambda f: tuple(f.shape),
                          assemble=lambda args, outs: outs[0], batch=batch)
        self.lanes["detector"] = _Lane("detector", **frame_lane, **self._frames_call(det, "detect"))
        if per is not None:  # called on a few whole frames per clip: one call at a time, unpadded
            self.lanes["persons"] = _Lane("persons", **frame_lane, call=lambda frames: [per.detect(f) for f in frames],
                                          variant=None)
        npts = int(getattr(lmk, "num_points", 0))
        self.lanes["landmarks"] = _Lane(
            "landmarks", units=self._face_units, key=lambda u: "crop", batch=batch,
            assemble=lambda args, outs: Landmarks(
                np.concatenate([o.points for o in outs]) if outs else np.zeros((0, npts, 2), np.float32),
                np.concatenate([o.quality for o in outs]) if outs else np.zeros(0, np.float32)),
            **self._faces_call(lmk, "landmarks"))
        if emb is not None:
            dim = int(getattr(emb, "dim", 0))
            self.lanes["embedder"] = _Lane(
                "embedder", units=self._face_units, key=lambda u: "crop", batch=batch,
                assemble=lambda args, outs: np.concatenate(outs) if outs else np.zeros((0, dim), np.float32),
                **self._faces_call(emb, "embed"))

    # -- how each kind of model is called ----------------------------------------------------------

    @staticmethod
    def _frames_call(model, method: str) -> dict:
        batched = getattr(model, method + "_batch", None)
        if batched is None:
            return dict(call=lambda frames: [getattr(model, method)(f) for f in frames], variant=None)
        return dict(call=batched, variant=_turned)

    @staticmethod
    def _face_units(frame, faces: Faces) -> list:
        return [(frame, faces[j]) for j in range(len(faces))]

    @staticmethod
    def _faces_call(model, method: str) -> dict:
        batched = getattr(model, method + "_batch", None)
        if batched is None:
            return dict(call=lambda items: [getattr(model, method)(f, fc) for f, fc in items], variant=None)

        def shifted(item):  # the same frame, the face moved by a few pixels: another crop
            f, fc = item
            d = np.array([3.0, 2.0], np.float32)
            return f, Faces(fc.boxes + np.tile(d, 2), fc.scores, fc.keypoints + d)

        return dict(call=lambda items: batched([f for f, _ in items], [fc for _, fc in items]), variant=shifted)

    # -- the calls ---------------------------------------------------------------------------------

    def _everyone_waits(self, now: float) -> bool:
        active = {t for t, last in self._seen.items() if now - last <= self.idle_s} | self._waiting
        return len(self._waiting) >= len(active)

    def _fullest(self) -> _Lane | None:
        """The lane that runs when every thread waits: the one with the most items queued (the
        threads of the others follow into it, so calls keep meeting), ties to the first lane."""
        ready = [ln for ln in self.lanes.values() if ln.pending]
        return max(ready, key=lambda ln: ln.queued()) if ready else None

    def _call(self, lane: _Lane, *args) -> Any:
        me = threading.get_ident()
        req = _Request(args, lane.units(*args), me)  # its items, made once
        with self._cond:
            now = time.monotonic()
            deadline = now + self.wait_s
            lane.pending.append(req)
            self._waiting.add(me)
            self._cond.notify_all()  # the others re-check: with this thread waiting, all may be
            try:
                while not req.done:
                    if not self._busy and lane.pending and (
                            now >= deadline or lane.queued() >= lane.batch
                            or (self._everyone_waits(now) and self._fullest() is lane)):
                        reqs, lane.pending = lane.pending, []
                        self._busy = True
                        self._cond.release()
                        try:
                            lane.run(reqs)
                        finally:
                            self._cond.acquire()
                            self._busy = False
                            released = time.monotonic()
                            for r in reqs:
                                if r.result is _UNSET and r.error is None:  # the leader was interrupted
                                    r.error = RuntimeError(f"{lane.name}: the batch holding this call was interrupted")
                                r.done = True
                                self._waiting.discard(r.thread)  # running again from now on
                                # ... and active: its idle clock starts now, not at the end of its
                                # previous call (it may not run again before idle_s has passed since)
                                self._seen[r.thread] = released
                            self._cond.notify_all()
                        continue
                    # until the deadline, or until a thread that is not waiting counts as idle
                    idle = [last + self.idle_s - now for t, last in self._seen.items()
                            if t not in self._waiting and last + self.idle_s > now]
                    self._cond.wait(timeout=None if self._busy else max(min([deadline - now] + idle), 0.0005))
                    now = time.monotonic()
            finally:
                self._waiting.discard(me)
                self._seen[me] = time.monotonic()
                if len(self._seen) > 256:  # threads long gone
                    cut = time.monotonic() - self.idle_s
                    self._seen = {t: s for t, s in self._seen.items() if s >= cut or t == me}
                self._cond.notify_all()  # one thread fewer to wait for
        if req.error is not None:
            raise req.error
        return req.result

    def stats(self) -> dict:
        """Per model: forwards run, items computed (padding excluded), and the probe's answers."""
        return {n: {"forwards": ln.forwards, "items": ln.items, "batch": ln.batch,
                    "mixes": {str(k): v for k, v in ln.mix.items()}} for n, ln in self.lanes.items()}


class _Proxy:
    """A model of the shared stack: its calls go through the broker, its attributes are the model's."""

    def __init__(self, broker: ModelBroker, lane: str, model):
        self._broker, self._lane, self._model = broker, broker.lanes[lane], model

    def __getattr__(self, name: str):
        return getattr(self._model, name)


class _DetectorProxy(_Proxy):
    def detect(self, frame: np.ndarray) -> Faces:
        return self._broker._call(self._lane, frame)


class _PersonsProxy(_Proxy):
    def detect(self, frame: np.ndarray) -> Persons:
        return self._broker._call(self._lane, frame)


class _LandmarksProxy(_Proxy):
    def landmarks(self, frame: np.ndarray, faces: Faces) -> Landmarks:
        return self._broker._call(self._lane, frame, faces)


class _EmbedderProxy(_Proxy):
    def embed(self, frame: np.ndarray, faces: Faces) -> np.ndarray:
        return self._broker._call(self._lane, frame, faces)


class BrokeredStack:
    """A stack whose models are shared through a :class:`ModelBroker` (same attributes as the
    stack: ``detector``, ``landmarks``, ``embedder``, ``persons``, ``name``; ``broker``)."""

    #: The subject tracker detects on whole frames, never on a crop around him
    #: (:meth:`~mime_fast.subject.SubjectTracker._roi`): crops come in every size, each size a
    #: forward of its own, while one clip size's whole frames are batched across clips; on a GPU a
    #: crop costs as much as the whole downscaled frame.
    crop_detection = False

    def __init__(self, broker: ModelBroker):
        s = broker.stack
        self.broker = broker
        self.name = getattr(s, "name", "?")
        self.detector = _DetectorProxy(broker, "detector", s.detector)
        self.landmarks = _LandmarksProxy(broker, "landmarks", s.landmarks)
        emb, per = getattr(s, "embedder", None), getattr(s, "persons", None)
        self.embedder = None if emb is None else _EmbedderProxy(broker, "embedder", emb)
        self.persons = None if per is None else _PersonsProxy(broker, "persons", per)

    def __getattr__(self, name: str):
        return getattr(self.broker.stack, name)


def shared_stack(stack, **broker_options) -> BrokeredStack:
    """``stack`` shared by every thread that calls it, its calls batched across them (module doc)."""
    return BrokeredStack(ModelBroker(stack, **broker_options))
