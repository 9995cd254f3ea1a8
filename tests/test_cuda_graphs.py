"""The face networks' CUDA graphs (:mod:`mime_fast.detect.cuda_graphs`).

Three layers:

* :class:`GraphedNet`'s logic with numpy stand-ins that keep CUDA graphs' semantics (outputs are
  fixed buffers that every replay overwrites). These run everywhere, CI included.
* The real torch face models on the CPU, their forwards replayed through a torch stand-in of the
  same semantics, on real frames: bit-identical to the plain models. This shows that their forwards
  can run from static buffers. Skipped without torch.
* On a GPU, the real ``torch.cuda.CUDAGraph``: the three models and the brokered stack give the
  eager forward's bits, and every shape got a graph (none left eager). It skips without a GPU;
  ``MIME_FAST_REQUIRE_CUDA=1`` makes it fail instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from mime_fast.detect import cuda_graphs
from mime_fast.detect.cuda_graphs import CudaRecorder, GraphedNet, _Graph, graph_stats, graphed, graphs_wanted

REQUIRE_CUDA = os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1"


class NumpyRecorder:
    """CUDA graphs' semantics on numpy arrays: the function recorded on static inputs; a replay
    computes it again into the same output arrays. ``fail``: every capture raises it; ``drift``:
    a replay's outputs are off by that much (a graph that is not the eager forward)."""

    def __init__(self, fail: str | None = None, drift: float = 0.0, replays_before_error: int | None = None):
        self.fail, self.drift, self.replays_left = fail, drift, replays_before_error
        self.attempts = 0

    def key(self, x):
        return (tuple(x.shape), x.strides, x.dtype) if isinstance(x, np.ndarray) else None

    def capture(self, fn, inputs):
        self.attempts += 1
        if self.fail:
            raise RuntimeError(self.fail)
        static = [x.copy() for x in inputs]
        outs = tuple(np.array(o) for o in fn(*static))
        return (fn, static, outs), static, outs

    def replay(self, graph) -> None:
        if self.replays_left is not None:
            if self.replays_left == 0:
                raise RuntimeError("CUDA error: out of memory")
            self.replays_left -= 1
        fn, static, outs = graph
        for o, n in zip(outs, fn(*static)):
            o[...] = n + np.asarray(self.drift, o.dtype)

    def ordered(self, inputs):
        return contextlib.nullcontext(lambda x: x)  # (synchronous: nothing to order)

    def copy(self, dst, src) -> None:
        dst[...] = src

    def clone(self, x):
        return x.copy()

    def equal(self, a, b) -> bool:
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Net:
    """A two-output network that counts its eager forwards."""

    output_names = ["scaled", "sums"]

    def __init__(self):
        self.forwards = 0
        self._lock = threading.Lock()

    def __call__(self, x):
        with self._lock:
            self.forwards += 1
        return (x * np.float32(2) + np.float32(1)), x.sum(axis=-1)


def _want(x):
    return x * np.float32(2) + np.float32(1), x.sum(axis=-1)


def _inputs(n, shape=(8, 3, 4), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random(shape, dtype=np.float32) for _ in range(n)]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))


# --------------------------------------------------------------------------------------------------
# GraphedNet's logic (numpy stand-ins)


def test_each_call_gets_its_own_result_and_later_replays_leave_it_alone():
    g = GraphedNet(Net(), NumpyRecorder())
    xs = _inputs(10)
    got = [g(x) for x in xs]
    for x, r in zip(xs, got):  # checked after all the calls: no replay overwrote an earlier result
        assert _same(r, _want(x))
    st = g.stats()
    # 2 eager calls, the third captures (its result the eager forward's, checked against the graph), 7 replays
    assert (st["calls"], st["captures"], st["replays"], st["dropped"]) == (10, 1, 7, 0)
    assert st["graphs"] == ["8x3x4"] and st["eager"] == {}
    # forwards: 2 eager + the recorder's capture + its check replay + the eager reference + 7 replays
    assert g.net.forwards == 2 + 1 + 1 + 1 + 7


def test_eager_calls_zero_captures_at_the_first_call():
    g = GraphedNet(Net(), NumpyRecorder(), eager_calls=0)
    x = _inputs(1)[0]
    assert _same(g(x), _want(x))
    assert g.stats()["captures"] == 1


def test_each_shape_gets_its_graph_and_the_least_recently_used_is_dropped():
    g = GraphedNet(Net(), NumpyRecorder(), eager_calls=0, max_graphs=2)
    a, b, c = (_inputs(1, shape)[0] for shape in [(8, 2), (8, 3), (4, 3)])
    for x in (a, b, a, c):  # c evicts b (a was used after b)
        assert _same(g(x), _want(x))
    st = g.stats()
    assert st["captures"] == 3 and st["dropped"] == 1 and st["graphs"] == ["8x2", "4x3"]
    assert _same(g(b), _want(b))  # b comes back: captured again
    assert g.stats()["captures"] == 4


def test_strides_and_dtypes_are_part_of_the_shape():
    g = GraphedNet(Net(), NumpyRecorder(), eager_calls=0)
    x = _inputs(1, (4, 6))[0]
    for v in (x, np.asfortranarray(x), x.astype(np.float64)):
        assert _same(g(v), _want(v))
    assert g.stats()["captures"] == 3


def test_a_capture_that_fails_leaves_the_shape_eager_once_and_for_all(caplog):
    rec = NumpyRecorder(fail="operation not permitted when stream is capturing")
    g = GraphedNet(Net(), rec, eager_calls=1, name="Det")
    xs = _inputs(6)
    with caplog.at_level(logging.WARNING, logger="mime_fast.detect.cuda_graphs"):
        for x in xs:
            assert _same(g(x), _want(x))
    assert rec.attempts == 1
    st = g.stats()
    assert st["captures"] == 0 and st["replays"] == 0 and st["graphs"] == []
    assert "capture failed: RuntimeError: operation not permitted" in st["eager"]["8x3x4"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("Det: forward on 8x3x4 stays eager (capture failed")


def test_a_graph_whose_bits_differ_from_the_eager_forward_is_not_used():
    g = GraphedNet(Net(), NumpyRecorder(drift=1e-6), eager_calls=0)
    xs = _inputs(4)
    for x in xs:
        assert _same(g(x), _want(x))  # the eager bits, never the graph's
    st = g.stats()
    assert st["replays"] == 0 and st["graphs"] == []
    assert st["eager"] == {"8x3x4": "the graph's outputs differ from the eager forward's"}


def test_a_replay_that_fails_drops_its_graph_and_the_call_gets_the_eager_result(caplog):
    # the capture's own check replays once; then 3 replays work and the 4th raises
    g = GraphedNet(Net(), NumpyRecorder(replays_before_error=4), eager_calls=0, name="Mesh")
    xs = _inputs(8)
    with caplog.at_level(logging.WARNING, logger="mime_fast.detect.cuda_graphs"):
        for x in xs:
            assert _same(g(x), _want(x))
    st = g.stats()
    assert st["captures"] == 1 and st["replays"] == 3 and st["graphs"] == []
    assert st["eager"] == {"8x3x4": "replay failed: RuntimeError: CUDA error: out of memory"}
    assert [r.getMessage() for r in caplog.records] == [
        "Mesh: forward on 8x3x4 stays eager (replay failed: RuntimeError: CUDA error: out of memory)"]


def test_inputs_that_are_no_tensors_run_eagerly():
    rec = NumpyRecorder()
    g = GraphedNet(lambda xs: (np.asarray(xs, np.float32) * 2,), rec, eager_calls=0)
    for _ in range(3):
        assert _same(g([1.0, 2.0]), (np.array([2.0, 4.0], np.float32),))
    assert rec.attempts == 0 and g.stats()["calls"] == 3


def test_threads_calling_at_once_each_get_their_own_result():
    g = GraphedNet(Net(), NumpyRecorder(), eager_calls=1)
    shapes = [(8, 3, 4), (8, 5)]
    errors: list = []
    start = threading.Barrier(4)

    def work(t):
        try:
            start.wait()
            for x in _inputs(40, shapes[t % 2], seed=t):
                if not _same(g(x), _want(x)):
                    errors.append(t)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    st = g.stats()
    assert st["captures"] == 2 and st["calls"] == 160 and st["replays"] > 100


def test_the_networks_attributes_pass_through():
    net = Net()
    g = GraphedNet(net, NumpyRecorder())
    assert g.output_names == ["scaled", "sums"] and g.net is net
    with pytest.raises(AttributeError):
        g.no_such_attribute  # noqa: B018
    with pytest.raises(ValueError):
        GraphedNet(net, NumpyRecorder(), max_graphs=0)


def test_graphs_are_wanted_on_cuda_unless_turned_off(monkeypatch):
    monkeypatch.delenv(cuda_graphs.ENV, raising=False)
    assert graphs_wanted("cuda") and graphs_wanted("cuda:1") and not graphs_wanted("cpu")
    monkeypatch.setenv(cuda_graphs.ENV, "0")
    assert not graphs_wanted("cuda")
    net = Net()
    assert graphed(net, "cpu") is net and graphed(net, "cuda") is net
    with pytest.raises(ValueError, match="CUDA device"):
        graphed(net, "cpu", enabled=True)


def test_graph_stats_finds_the_graphed_models_behind_a_broker():
    class Model:
        def __init__(self, net):
            self.net = net

    class Proxy:  # as batching._Proxy: the model behind it is ``_model``
        def __init__(self, model):
            self._model = model

    g = GraphedNet(Net(), NumpyRecorder(), name="mesh")
    g(_inputs(1)[0])

    class Stack:
        detector = Proxy(Model(Net()))  # not graphed
        landmarks = Proxy(Model(g))
        embedder = None

    assert graph_stats(Stack()) == {"landmarks": g.stats()}


class _FakeCuda:
    """``torch.cuda``'s streams as torch keeps them (a current stream per thread; ``stream(s)``
    makes ``s`` current and puts the previous one back; ``graph(...)`` makes its capture stream
    current and, like torch, puts the previous one back only if the capture ends cleanly), the
    events between streams logged: CudaRecorder's stream handling, run without a GPU."""

    def __init__(self, fail_capture_end: bool = False):
        self.log: list = []
        self.fail_capture_end = fail_capture_end
        self._local = threading.local()
        self.legacy = SimpleNamespace(name="legacy", wait_stream=self._waiter("legacy"))
        self.streams = 0

    def _waiter(self, name):
        return lambda other: self.log.append(("wait", name, other.name))

    def current_stream(self, device=None):
        return getattr(self._local, "current", self.legacy)

    def Stream(self, device=None):  # noqa: N802 - torch's name
        self.streams += 1
        name = f"s{self.streams}"
        return SimpleNamespace(name=name, wait_stream=self._waiter(name))

    @contextlib.contextmanager
    def stream(self, s):
        before = self.current_stream()
        self._local.current = s
        try:
            yield
        finally:
            self._local.current = before

    def device(self, d):
        return contextlib.nullcontext()

    def CUDAGraph(self):  # noqa: N802
        return SimpleNamespace(replay=lambda: self.log.append(("replay", self.current_stream().name)))

    @contextlib.contextmanager
    def graph(self, g, stream=None, capture_error_mode="global"):
        before = self.current_stream()
        stream = stream or SimpleNamespace(name="torch's capture stream")
        self._local.current = stream
        self.log.append(("capture", stream.name, capture_error_mode, CudaRecorder._capturing.locked()))
        yield
        if self.fail_capture_end:  # torch.cuda.graph.__exit__: capture_end() raises before the stream is put back
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
        self._local.current = before


class _FakeTensor:
    def __init__(self, log, name):
        self.log, self.name = log, name
        self.device = SimpleNamespace(type="cuda", index=0)
        self.shape, self.dtype = (2, 3), "float32"

    def stride(self):
        return (3, 1)

    def clone(self):
        return _FakeTensor(self.log, self.name + "'")

    def copy_(self, other):
        self.log.append(("copy", other.name, self.name))

    def record_stream(self, s):
        self.log.append(("record", self.name, s.name))


def _fake_recorder(cuda: _FakeCuda) -> CudaRecorder:
    rec = CudaRecorder.__new__(CudaRecorder)  # (no torch needed: its torch is the stand-in)
    rec._torch = SimpleNamespace(cuda=cuda, inference_mode=contextlib.nullcontext, Tensor=_FakeTensor)
    rec.device, rec._streams = SimpleNamespace(type="cuda", index=None), {}
    return rec


def test_the_cuda_recorder_captures_on_a_stream_of_its_own_and_gives_the_callers_back():
    cuda = _FakeCuda()
    rec = _fake_recorder(cuda)
    x = _FakeTensor(cuda.log, "x")
    graph, static, outs = rec.capture(lambda *a: (_FakeTensor(cuda.log, "out"),), (x,))
    assert cuda.current_stream() is cuda.legacy
    # one warm-up on a side stream after the caller's work, then the capture on a stream of its
    # own, in thread_local mode, holding the process's capture lock
    assert cuda.log == [("wait", "s1", "legacy"), ("wait", "legacy", "s1"), ("capture", "s2", "thread_local", True)]
    assert not CudaRecorder._capturing.locked()
    # a capture that fails when it ends: the caller's stream is the current one again
    cuda = _FakeCuda(fail_capture_end=True)
    rec = _fake_recorder(cuda)
    with pytest.raises(RuntimeError, match="during capture"):
        rec.capture(lambda *a: (_FakeTensor(cuda.log, "out"),), (_FakeTensor(cuda.log, "x"),))
    assert cuda.current_stream() is cuda.legacy
    assert not CudaRecorder._capturing.locked()


def test_a_replay_runs_on_the_networks_stream_between_the_callers_work():
    cuda = _FakeCuda()
    rec = _fake_recorder(cuda)
    g = GraphedNet(lambda x: (x.clone(),), rec, eager_calls=0)
    g._graphs[("k",)] = _Graph(cuda.CUDAGraph(), [_FakeTensor(cuda.log, "in")], (_FakeTensor(cuda.log, "out"),))
    x = _FakeTensor(cuda.log, "x")
    for _ in range(2):
        cuda.log.clear()
        out = g._replay(g._graphs[("k",)], (x,))
        assert out[0].name == "out'"
        # the network's stream (the same every time) waits for the caller's work, copies in,
        # replays, copies out (recorded as used on the caller's stream); the caller waits for it
        assert cuda.log == [("wait", "s1", "legacy"), ("copy", "x", "in"), ("replay", "s1"), ("record", "out'", "legacy"),
                            ("wait", "legacy", "s1")]
        assert cuda.current_stream() is cuda.legacy


# --------------------------------------------------------------------------------------------------
# The real torch models, replayed from static buffers on the CPU


class TorchHostRecorder:
    """CUDA graphs' semantics on CPU torch tensors (as :class:`NumpyRecorder`)."""

    def __init__(self, torch):
        self.t = torch

    def key(self, x):
        return (tuple(x.shape), tuple(x.stride()), x.dtype) if isinstance(x, self.t.Tensor) else None

    def capture(self, fn, inputs):
        static = [x.clone() for x in inputs]
        outs = tuple(o.clone() for o in fn(*static))
        return (fn, static, outs), static, outs

    def replay(self, graph) -> None:
        fn, static, outs = graph
        for o, n in zip(outs, fn(*static)):
            o.copy_(n)

    def ordered(self, inputs):
        return contextlib.nullcontext(lambda x: x)

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def clone(self, x):
        return x.clone()

    def equal(self, a, b) -> bool:
        return a.dtype == b.dtype and bool(self.t.equal(a, b))


def test_the_cuda_recorder_takes_the_tensors_of_its_device_however_it_was_named():
    # torch.device("cuda") != torch.device("cuda:0"), the device every CUDA tensor reports: a
    # recorder made for "cuda" (what the stack passes) must still take them, or no forward is
    # ever captured.  Fake CUDA tensors (no GPU needed) stand in for real ones.
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from mime_fast.detect.cuda_graphs import CudaRecorder

    with FakeTensorMode():
        x = torch.empty(2, 3, device="cuda")
    assert str(x.device) == "cuda:0"
    for name in ("cuda", "cuda:0", torch.device("cuda")):
        rec = CudaRecorder(name)
        assert rec.key(x) == ((2, 3), (3, 1), torch.float32, 0), name
        assert GraphedNet(lambda *a: a, rec)._key((x, x)) is not None, name
    assert CudaRecorder("cuda:1").key(x) is None  # another device's tensor: eager
    assert CudaRecorder("cuda").key(torch.empty(2, 3)) is None  # a CPU tensor: eager
    with pytest.raises(ValueError, match="CUDA device"):
        CudaRecorder("cpu")


@pytest.fixture(scope="module")
def hug_frames(shared_media) -> list[np.ndarray]:
    from mime_fast.media import iter_display_frames, probe

    clip = shared_media / "two_people_hug_1080p.mp4"
    info = probe(clip)
    frames = []
    for _, _, rgb in iter_display_frames(clip, info):
        frames.append(rgb)
        if len(frames) == 12:
            break
    return frames


def _faces_equal(a, b) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in [(a.boxes, b.boxes), (a.scores, b.scores),
                                                       (a.keypoints, b.keypoints)])


def _run_models(det, lmk, emb, frames):
    """Each model on each frame (the detector's faces feed the other two), in batches of 4
    frames as the broker groups them; the outputs as bytes."""
    out = []
    for k in range(0, len(frames), 4):
        fs = frames[k:k + 4]
        faces = det.detect_batch(fs)
        marks = lmk.landmarks_batch(fs, faces)
        embs = emb.embed_batch(fs, faces)
        out.append([(f.boxes.tobytes(), f.scores.tobytes(), f.keypoints.tobytes(), m.points.tobytes(),
                     m.quality.tobytes(), e.tobytes()) for f, m, e in zip(faces, marks, embs)])
    return out


def test_the_torch_models_replayed_from_static_buffers_give_their_own_bits(hug_frames):
    torch = pytest.importorskip("torch")
    from mime_fast.detect.torch_models import TorchFaceMesh, TorchRetinaFace, TorchSFace

    det, lmk, emb = TorchRetinaFace(max_size=384), TorchFaceMesh(), TorchSFace()
    want = _run_models(det, lmk, emb, hug_frames)
    rec = TorchHostRecorder(torch)
    for m in (det, lmk, emb):
        m.net = GraphedNet(m.net, rec, eager_calls=0)
    got = _run_models(det, lmk, emb, hug_frames)
    assert got == want
    assert any(len(fr[0]) for part in want for fr in part)  # faces were found
    for m in (det, lmk, emb):
        st = m.net.stats()
        assert st["eager"] == {} and st["captures"] >= 1 and st["replays"] >= 1, st


@pytest.mark.slow
def test_real_clips_tracked_through_a_broker_with_replayed_forwards_as_without():
    # the GPU path's arrangement: three clips at once on threads, one brokered torch stack whose
    # networks replay from static buffers (captured after the broker's probe), against the same
    # stack without graphs, each clip through a broker of its own
    torch = pytest.importorskip("torch")
    from test_batching import _clips, _track, _track_at_once

    from mime_fast.detect.batching import shared_stack
    from mime_fast.detect.torch_models import load_torch_stack

    clips = _clips()
    want: dict = {}
    plain = load_torch_stack("cpu", persons=False)
    for c in clips:
        _track(c, shared_stack(plain), 24, want)
    replayed = load_torch_stack("cpu", persons=False)
    rec = TorchHostRecorder(torch)
    for m in (replayed.detector, replayed.landmarks, replayed.embedder):
        m.net = GraphedNet(m.net, rec)
    shared = shared_stack(replayed, wait_s=0.05)
    got = _track_at_once(clips, shared, 24)
    assert set(got) == set(want)
    for name in want:
        assert got[name][0] == want[name][0], name  # every frame's mask points, bit for bit
        assert got[name][1] == want[name][1], name
    st = graph_stats(shared)
    assert set(st) == {"detector", "landmarks", "embedder"}
    for role in ("detector", "landmarks"):
        assert st[role]["eager"] == {} and st[role]["replays"] > 0, (role, st[role])


# --------------------------------------------------------------------------------------------------
# On a GPU: torch.cuda.CUDAGraph


def _cuda(torch) -> None:
    if not torch.cuda.is_available():
        msg = f"torch {torch.__version__} sees no CUDA device"
        if REQUIRE_CUDA:
            pytest.fail(f"CUDA required (MIME_FAST_REQUIRE_CUDA=1): {msg}")
        pytest.skip(msg)


@pytest.mark.cuda
def test_cuda_graphs_give_the_eager_forwards_bits_and_every_shape_is_captured(hug_frames):
    torch = pytest.importorskip("torch")
    _cuda(torch)
    from mime_fast.detect.torch_models import TorchFaceMesh, TorchRetinaFace, TorchSFace

    eager = [TorchRetinaFace(device="cuda", max_size=384, graphs=False), TorchFaceMesh(device="cuda", graphs=False),
             TorchSFace(device="cuda", graphs=False)]
    graphs = [TorchRetinaFace(device="cuda", max_size=384, graphs=True), TorchFaceMesh(device="cuda", graphs=True),
              TorchSFace(device="cuda", graphs=True)]
    want = _run_models(*eager, hug_frames)
    # a shape is captured at its third call and replayed from its fourth: the mesh's and SFace's
    # shapes are the faces of a group of 4 frames, which may differ group to group, so 4 passes
    for _ in range(4):
        assert _run_models(*graphs, hug_frames) == want
    for m in graphs:
        st = m.net.stats()
        assert st["eager"] == {} and st["captures"] >= 1 and st["replays"] >= 1, st


@pytest.mark.cuda
def test_the_brokered_cuda_stack_replays_graphs(hug_frames):
    torch = pytest.importorskip("torch")
    _cuda(torch)
    from mime_fast.detect.batching import shared_stack
    from mime_fast.detect.torch_models import load_torch_stack

    # both through a broker: forwards at its batch size (padded), which is what the graphs see
    plain = shared_stack(load_torch_stack("cuda", persons=False, graphs=False))
    stack = shared_stack(load_torch_stack("cuda", persons=False, graphs=True))
    for _ in range(2):
        for f in hug_frames:
            a, b = plain.detector.detect(f), stack.detector.detect(f)
            assert _faces_equal(a, b)
            if len(a):
                la, lb = plain.landmarks.landmarks(f, a), stack.landmarks.landmarks(f, b)
                assert la.points.tobytes() == lb.points.tobytes()
    st = graph_stats(stack)
    assert set(st) >= {"detector", "landmarks"}
    for role in ("detector", "landmarks"):  # (the embedder is not called here)
        assert st[role]["eager"] == {} and st[role]["replays"] > 0, (role, st[role])
