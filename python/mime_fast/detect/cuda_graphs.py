"""The face networks' forwards replayed from CUDA graphs, one graph per input shape.

On a GPU the face networks cost little to compute and much to launch. The torch stack runs them
node by node from Python (:class:`~mime_fast.detect.torch_graphs.OnnxModule`, ``TFLiteModule``):
per forward, RetinaFace makes about 135 torch operator calls, the face mesh about 105 and SFace
about 65 (counted on the CPU), most of them a kernel launch each. A CUDA graph records a
forward's launches once and replays them as one. The model broker (:mod:`mime_fast.detect.batching`) runs every forward at one batch size, so a
process sees few input shapes: one per clip frame size for the detector, one each for the mesh's
and SFace's crops. Each of those gets a graph.

:class:`GraphedNet` wraps a network (``net(*tensors) -> tuple of tensors``):

* A shape's first ``eager_calls`` calls run eagerly. They also warm up cuDNN and cuBLAS for it.
* The next call captures the forward into a graph on static input buffers, after one warm-up
  forward on a side stream, as PyTorch's documentation asks. Then it checks the graph: its outputs
  on that call's inputs must equal the eager forward's outputs bit for bit. Only then is the graph
  used.
* A capture that fails (an operation that cannot be captured) or a mismatch leaves that shape
  eager for the rest of the process. It is logged once (``mime_fast.detect.cuda_graphs``, WARNING)
  and counted in :meth:`GraphedNet.stats`.
* A replay copies the inputs into the static buffers, replays the graph, and returns copies of
  the static outputs (the next replay overwrites them). Replays and captures of one network hold
  its lock, so they never overlap; on the GPU a network's replays also run on a stream of its own,
  after the caller's work (:class:`CudaRecorder`). Eager calls do not take the lock.
* A replay that raises drops its graph: that shape is eager from then on (logged as above), and
  the call gets the eager forward's result.
* At most ``max_graphs`` shapes keep a graph. The least recently used one is dropped, with its
  memory, and is captured again if it comes back.

So wherever a graph is used, the results are the eager forward's, bit for bit.

On for CUDA devices unless ``MIME_FAST_CUDA_GRAPHS=0`` (:func:`graphs_wanted`). The capture itself
is done by a *recorder*: :class:`CudaRecorder` (``torch.cuda.CUDAGraph``) on a GPU. The tests drive
the same logic on the CPU through stand-in recorders that keep CUDA graphs' semantics: outputs are
fixed buffers, overwritten by every replay.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, ContextManager, Protocol

__all__ = ["EAGER_CALLS", "ENV", "MAX_GRAPHS", "CudaRecorder", "GraphedNet", "Recorder", "graph_stats",
           "graphed", "graphs_wanted"]

_log = logging.getLogger(__name__)

#: Eager calls of a shape before its capture.
EAGER_CALLS = 2
#: Shapes that keep a graph per network (the least recently used beyond that is dropped).
MAX_GRAPHS = 8
#: ``MIME_FAST_CUDA_GRAPHS=0`` turns the graphs off (every forward eager).
ENV = "MIME_FAST_CUDA_GRAPHS"


class Recorder(Protocol):
    """What :class:`GraphedNet` needs of a tensor library and its graphs."""

    def key(self, x: Any) -> Any:
        """What must be equal for two inputs to share a graph (shape, strides, dtype, device), or
        ``None`` when ``x`` cannot be a graph input."""

    def capture(self, fn: Callable, inputs: tuple) -> tuple[Any, list, tuple]:
        """``(graph, static inputs, static outputs)``: ``fn`` recorded on copies of ``inputs``."""

    def ordered(self, inputs: tuple) -> ContextManager[Callable[[Any], Any]]:
        """Around a replay on ``inputs`` (its copies in, the replay, its copies out): makes it
        follow the caller's work so far, and the caller's later work follow it; yields what each
        copy out goes through before it is handed back."""

    def replay(self, graph: Any) -> None:
        """Run ``graph`` again on the current contents of its static inputs."""

    def copy(self, dst: Any, src: Any) -> None:
        """``src``'s values into ``dst`` (same shape)."""

    def clone(self, x: Any) -> Any:
        """A copy of ``x`` that no later replay touches."""

    def equal(self, a: Any, b: Any) -> bool:
        """Bit-equal tensors (shape and dtype included)."""


class CudaRecorder:
    """:class:`Recorder` for torch CUDA tensors: ``torch.cuda.CUDAGraph``, captured in
    ``thread_local`` error mode (other threads may keep using the GPU while one captures).

    ``device``: ``"cuda"`` takes tensors on any CUDA device (each device its own graphs),
    ``"cuda:k"`` only those on device k.  Captures are one at a time in the process (torch's
    capture machinery allows no other), each on a stream of its own, and the caller's stream is
    the thread's current stream again afterwards, also after a capture that failed.  Replays of a
    network run on a stream of that network's: they follow the caller's work queued so far, the
    caller's later work follows them, and the replays of two threads never overlap whatever
    streams the threads use."""

    #: Forwards on a side stream before a capture (PyTorch's rule for graph capture).
    WARMUP = 1
    _capturing = threading.Lock()  # one capture at a time in the process

    def __init__(self, device):
        import torch

        self._torch = torch
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, got {device!r}")
        self._streams: dict = {}  # device index -> this network's replay stream

    def key(self, x):
        t = self._torch
        if not isinstance(x, t.Tensor) or x.device.type != "cuda":
            return None
        if self.device.index is not None and x.device.index != self.device.index:
            return None
        return tuple(x.shape), tuple(x.stride()), x.dtype, x.device.index

    def capture(self, fn, inputs):
        t = self._torch
        device = inputs[0].device
        with self._capturing, t.cuda.device(device), t.inference_mode():  # static buffers: inference tensors
            current = t.cuda.current_stream(device)
            static = [x.clone() for x in inputs]
            side = t.cuda.Stream(device)
            side.wait_stream(current)
            with t.cuda.stream(side):
                for _ in range(self.WARMUP):
                    fn(*static)
            current.wait_stream(side)
            graph = t.cuda.CUDAGraph()
            # (torch.cuda.graph leaves its capture stream current when the capture fails at its
            # end: the outer context puts the caller's back)
            with t.cuda.stream(current), t.cuda.graph(graph, stream=t.cuda.Stream(device),
                                                      capture_error_mode="thread_local"):
                outs = fn(*static)
        return graph, static, tuple(outs)

    @contextlib.contextmanager
    def ordered(self, inputs):
        t = self._torch
        device = inputs[0].device  # (the graph's: keys hold the device)
        caller = t.cuda.current_stream(device)
        own = self._streams.get(device.index)
        if own is None:
            own = self._streams[device.index] = t.cuda.Stream(device)
        own.wait_stream(caller)  # the inputs the caller may still be writing

        def hand_back(x):
            x.record_stream(caller)  # made on our stream, used on the caller's
            return x

        try:
            with t.cuda.device(device), t.cuda.stream(own):
                yield hand_back
        finally:
            caller.wait_stream(own)

    def replay(self, graph) -> None:
        graph.replay()

    def copy(self, dst, src) -> None:
        with self._torch.inference_mode():
            dst.copy_(src)

    def clone(self, x):
        return x.clone()

    def equal(self, a, b) -> bool:
        t = self._torch
        return isinstance(a, t.Tensor) and isinstance(b, t.Tensor) and a.dtype == b.dtype and bool(t.equal(a, b))


class _Graph:
    __slots__ = ("graph", "inputs", "outputs")

    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs


class GraphedNet:
    """``net``'s forward, replayed from a graph per input shape where that gives the eager
    forward's bits (module doc). Other attributes are ``net``'s."""

    def __init__(self, net: Callable, recorder: Recorder, *, eager_calls: int = EAGER_CALLS,
                 max_graphs: int = MAX_GRAPHS, name: str | None = None):
        if eager_calls < 0 or max_graphs < 1:
            raise ValueError(f"eager_calls must be >= 0 and max_graphs >= 1, got {eager_calls}, {max_graphs}")
        self.net, self.recorder = net, recorder
        self.eager_calls, self.max_graphs = int(eager_calls), int(max_graphs)
        self.name = name or type(net).__name__
        self._lock = threading.Lock()
        self._seen: dict = {}  # shape -> calls so far (until captured)
        self._graphs: OrderedDict = OrderedDict()  # shape -> _Graph, least recently used first
        self._eager: dict = {}  # shape -> why it stays eager
        self.calls = self.replays = self.captures = self.dropped = 0

    def __getattr__(self, name: str):
        if name == "net":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.net, name)

    def _key(self, inputs: tuple):
        keys = tuple(self.recorder.key(x) for x in inputs)
        return None if not keys or any(k is None for k in keys) else keys

    def __call__(self, *inputs):
        key = self._key(inputs)
        with self._lock:
            self.calls += 1
            if key is not None and key not in self._eager:
                g = self._graphs.get(key)
                if g is not None:
                    self._graphs.move_to_end(key)
                    try:
                        out = self._replay(g, inputs)
                    except Exception as exc:  # noqa: BLE001 - the graph is dropped; the eager forward answers
                        del self._graphs[key]
                        return self._stay_eager(key, inputs, f"replay failed: {type(exc).__name__}: {exc}")
                    self.replays += 1
                    return out
                if len(self._seen) > 4 * self.max_graphs and key not in self._seen:
                    self._seen.clear()  # many shapes seen once or twice (calls outside the broker)
                self._seen[key] = self._seen.get(key, 0) + 1
                if self._seen[key] > self.eager_calls:
                    return self._capture(key, inputs)
        return self.net(*inputs)

    def _replay(self, g: _Graph, inputs: tuple) -> tuple:
        rec = self.recorder
        with rec.ordered(inputs) as hand_back:
            for s, x in zip(g.inputs, inputs):
                rec.copy(s, x)
            rec.replay(g.graph)
            return tuple(hand_back(rec.clone(o)) for o in g.outputs)

    def _capture(self, key, inputs: tuple) -> tuple:
        try:
            graph, static_in, static_out = self.recorder.capture(self.net, inputs)
            g = _Graph(graph, list(static_in), tuple(static_out))
            got = self._replay(g, inputs)
        except Exception as exc:  # noqa: BLE001 - an operation that cannot be captured: this shape stays eager
            return self._stay_eager(key, inputs, f"capture failed: {type(exc).__name__}: {exc}")
        want = tuple(self.net(*inputs))
        if len(got) != len(want) or not all(self.recorder.equal(a, b) for a, b in zip(got, want)):
            return self._stay_eager(key, inputs, "the graph's outputs differ from the eager forward's", want)
        self._graphs[key] = g
        self._seen.pop(key, None)
        self.captures += 1
        _log.info("%s: forward on %s captured as a CUDA graph", self.name, _shape_text(key))
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
            self.dropped += 1
        return want

    def _stay_eager(self, key, inputs: tuple, why: str, result: tuple | None = None) -> tuple:
        self._eager[key] = why
        self._seen.pop(key, None)
        _log.warning("%s: forward on %s stays eager (%s)", self.name, _shape_text(key), why)
        return tuple(self.net(*inputs)) if result is None else result

    def stats(self) -> dict:
        """Calls, replays, captures, graphs dropped, the shapes holding a graph, and the shapes
        left eager with the reason."""
        with self._lock:
            return {"calls": self.calls, "replays": self.replays, "captures": self.captures, "dropped": self.dropped,
                    "graphs": [_shape_text(k) for k in self._graphs],
                    "eager": {_shape_text(k): why for k, why in self._eager.items()}}


def _shape_text(key) -> str:
    return ", ".join("x".join(str(d) for d in k[0]) for k in key)


def graphs_wanted(device) -> bool:
    """Whether models on ``device`` replay CUDA graphs: CUDA devices, unless
    ``MIME_FAST_CUDA_GRAPHS=0``."""
    return str(device).startswith("cuda") and os.environ.get(ENV, "1").strip() != "0"


def graphed(net: Callable, device, *, name: str | None = None, enabled: bool | None = None):
    """``net`` wrapped in a :class:`GraphedNet` on ``device`` when graphs are wanted there
    (``enabled``; default :func:`graphs_wanted`), else ``net`` itself.  ``enabled=True`` on another
    device is a ``ValueError``."""
    if not (graphs_wanted(device) if enabled is None else enabled):
        return net
    if not str(device).startswith("cuda"):
        raise ValueError(f"CUDA graphs need a CUDA device, got {device!r}")
    return GraphedNet(net, CudaRecorder(device), name=name)


def graph_stats(stack) -> dict:
    """:meth:`GraphedNet.stats` of each face model of ``stack`` that replays graphs (by role:
    ``detector``, ``landmarks``, ``embedder``)."""
    out = {}
    for role in ("detector", "landmarks", "embedder"):
        model = getattr(stack, role, None)
        model = getattr(model, "_model", model)  # a broker's proxy: the model behind it
        net = getattr(model, "net", None)
        if isinstance(net, GraphedNet):
            out[role] = net.stats()
    return out
