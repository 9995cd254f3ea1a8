"""The model broker (mime_fast.detect.batching): calls from many threads batched across them, with
results that do not depend on who shared a batch."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import SHARED_MEDIA
from mime_fast.detect import Faces, Landmarks
from mime_fast.detect.batching import shared_stack

MEDIA = Path(SHARED_MEDIA)  # ../shared/media, or $MIME_FAST_SHARED_MEDIA (where the clips travel to a GPU machine)


class _Batched:
    """Fake batched models.  Results are a function of the item alone (batch-invariant), unless
    ``leak``: then every result also carries the mean of the whole forward (as a kernel whose
    reduction order depends on its neighbours would).  Records each forward's size."""

    num_points, dim = 4, 3

    def __init__(self, leak: bool = False, fail_on: float | None = None):
        self.leak, self.fail_on, self.sizes = leak, fail_on, []
        self._lock = threading.Lock()

    def _rec(self, n):
        with self._lock:
            self.sizes.append(n)

    def detect_batch(self, frames):
        self._rec(len(frames))
        means = [float(f[0, 0, 0]) for f in frames]
        if self.fail_on is not None and self.fail_on in means:
            raise ValueError(f"bad frame {self.fail_on:g}")
        extra = np.float32(np.mean(means) * 1e-3) if self.leak else np.float32(0)
        out = []
        for f, m in zip(frames, means):
            x = np.float32(m) + extra
            out.append(Faces(np.array([[x, x, x + 10, x + 10]]), np.ones(1), np.full((1, 5, 2), x)))
        return out

    def landmarks_batch(self, frames, faces_list):
        self._rec(sum(len(f) for f in faces_list))
        return [Landmarks(np.repeat(fc.keypoints[:, :4, :], 1, axis=0) + np.float32(f[0, 0, 0]),
                          fc.scores.copy()) for f, fc in zip(frames, faces_list)]

    def embed_batch(self, frames, faces_list):
        self._rec(sum(len(f) for f in faces_list))
        return [np.concatenate([fc.boxes[:, :2], np.full((len(fc), 1), float(f[0, 0, 1]), np.float32)], 1)
                .astype(np.float32) for f, fc in zip(frames, faces_list)]

    def stack(self):
        return SimpleNamespace(detector=SimpleNamespace(detect_batch=self.detect_batch, min_size=7),
                               landmarks=SimpleNamespace(landmarks_batch=self.landmarks_batch, num_points=4),
                               embedder=SimpleNamespace(embed_batch=self.embed_batch, dim=3, min_cos=0.3),
                               persons=None, name="fake")


def _frame(v: int, shape=(24, 32)) -> np.ndarray:
    """A frame that the fake models read by its top-left sample ``v`` (the bottom-right one differs:
    the probe's flipped frame is another input)."""
    f = np.full((*shape, 3), v, np.uint8)
    f[-1, -1] = 255 - v
    return f


def _faces(n: int, x: float) -> Faces:
    b = np.array([[x + 5 * i, x, x + 5 * i + 20, x + 20] for i in range(n)], np.float32).reshape(-1, 4)
    return Faces(b, np.linspace(0.5, 1, n), np.repeat(b[:, None, :2], 5, 1))


def _same(a, b) -> bool:
    from mime_fast.detect.batching import _equal

    return _equal(a, b)


_WARMED: dict[int, dict] = {}


def _counted(stack) -> dict:
    """The broker's stats of a :func:`_hammer` run, without its warm-up calls."""
    now, warm = stack.broker.stats(), _WARMED[id(stack)]
    return {n: dict(v, forwards=v["forwards"] - warm[n]["forwards"], items=v["items"] - warm[n]["items"])
            for n, v in now.items()}


def _in_threads(work, n: int) -> None:
    """``work(t)`` on ``n`` threads at once (``t`` = 0 .. n-1); fails with the errors they raised."""
    errors: list = []

    def run(t: int) -> None:
        try:
            work(t)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def _hammer(stack, threads: int, calls: int) -> list[list]:
    """Each thread makes ``calls`` calls of every model (its own inputs); returns each thread's
    results in call order."""
    out: list[list] = [[] for _ in range(threads)]
    # Each thread first makes one call of every model (not counted: the broker's stats are taken
    # again once all have), and only then do they start: a thread is waited for once it has made a
    # call, and on a busy machine the first thread to run would otherwise make dozens of calls alone
    # before the others are scheduled at all.
    warm = _frame(200), _faces(1, 0.0)
    start = threading.Barrier(threads, action=lambda: _WARMED.__setitem__(id(stack), stack.broker.stats()))

    def work(t: int) -> None:
        stack.detector.detect(warm[0]), stack.landmarks.landmarks(*warm), stack.embedder.embed(*warm)
        start.wait()
        for i in range(calls):
            f = _frame(10 * t + i % 7)
            fc = _faces(1 + (t + i) % 3, float(t + i))
            out[t].append((stack.detector.detect(f), stack.landmarks.landmarks(f, fc),
                           stack.embedder.embed(f, fc)))

    _in_threads(work, threads)
    return out


def test_calls_from_many_threads_share_forwards_and_get_their_own_results():
    model = _Batched()
    # a call waits until every thread waits (no deadline; a thread counts as idle only after its last call)
    stack = shared_stack(model.stack(), batch=8, wait_s=30.0, idle_s=1.0)
    got = _hammer(stack, threads=4, calls=30)
    # the result of each call is what the model gives that call alone
    ref = shared_stack(_Batched().stack(), batch=8)
    for t in range(4):
        for i, (faces, lmk, emb) in enumerate(got[t]):
            f = _frame(10 * t + i % 7)
            fc = _faces(1 + (t + i) % 3, float(t + i))
            assert _same(faces, ref.detector.detect(f)) and _same(lmk, ref.landmarks.landmarks(f, fc))
            assert _same(emb, ref.embedder.embed(f, fc))
    st = _counted(stack)
    # every forward at the fixed size; the threads' calls met (a thread waits for the others, wait_s is long)
    assert set(model.sizes) == {8}
    assert st["detector"]["mixes"] == {str((24, 32, 3)): True}
    # four threads waiting on three models: a forward holds the calls of nearly all four on a quiet
    # machine; on a busy one (a thread kept from running for over idle_s is not waited for) still
    # 1.25 on average
    assert st["detector"]["items"] == 120 and st["detector"]["forwards"] <= 120 / 1.25
    assert st["landmarks"]["forwards"] <= st["landmarks"]["items"] / 1.25 / 2


def test_a_model_whose_results_depend_on_the_batch_never_mixes_calls():
    model = _Batched(leak=True)
    stack = shared_stack(model.stack(), batch=4, wait_s=30.0, idle_s=1.0)
    got = _hammer(stack, threads=3, calls=12)
    assert stack.broker.stats()["detector"]["mixes"] == {str((24, 32, 3)): False}
    # the same results as the calls made one at a time from one thread, through another broker
    alone = shared_stack(_Batched(leak=True).stack(), batch=4)
    for t in range(3):
        for i, (faces, _, _) in enumerate(got[t]):
            assert _same(faces, alone.detector.detect(_frame(10 * t + i % 7)))
    # and not what mixing them would have given
    leaky = _Batched(leak=True)
    mixed = leaky.detect_batch([_frame(0), _frame(10), _frame(20), _frame(0)])[1]
    assert not _same(mixed, alone.detector.detect(_frame(10)))


def test_an_error_reaches_only_the_call_that_caused_it():
    model = _Batched(fail_on=66.0)
    stack = shared_stack(model.stack(), batch=8, wait_s=30.0, idle_s=1.0)
    results: dict = {}

    def work(v: int) -> None:
        try:
            results[v] = stack.detector.detect(_frame(v))
        except ValueError as e:
            results[v] = e

    ts = [threading.Thread(target=work, args=(v,)) for v in (11, 66, 22, 33)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert isinstance(results[66], ValueError) and "bad frame 66" in str(results[66])
    for v in (11, 22, 33):
        assert isinstance(results[v], Faces) and results[v].boxes[0, 0] == v


def test_empty_calls_sizes_and_attributes():
    stack = shared_stack(_Batched().stack())
    f = _frame(5)
    lmk = stack.landmarks.landmarks(f, _faces(0, 0))
    assert lmk.points.shape == (0, 4, 2) and lmk.quality.shape == (0,)
    assert stack.embedder.embed(f, _faces(0, 0)).shape == (0, 3)
    # frames of different sizes are batched apart; faces of different frames together
    a, b = stack.detector.detect(_frame(1, (24, 32))), stack.detector.detect(_frame(2, (16, 16)))
    assert a.boxes[0, 0] == 1 and b.boxes[0, 0] == 2
    assert len(stack.broker.stats()["detector"]["mixes"]) == 2
    # 11 faces: two forwards of 8, results in the call's order
    emb = stack.embedder.embed(f, _faces(11, 3.0))
    np.testing.assert_array_equal(emb[:, 0], 3.0 + 5 * np.arange(11))
    # the models' other attributes are the models'
    assert stack.embedder.min_cos == 0.3 and stack.landmarks.num_points == 4 and stack.detector.min_size == 7
    assert stack.name == "fake" and stack.persons is None


def test_models_without_batch_methods_are_called_one_call_at_a_time():
    calls = []

    def detect(frame):
        calls.append(frame.shape)
        return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))

    plain = SimpleNamespace(detector=SimpleNamespace(detect=detect),
                            landmarks=SimpleNamespace(landmarks=lambda f, fc: Landmarks(np.zeros((len(fc), 2, 2)),
                                                                                        np.zeros(len(fc))),
                                                      num_points=2),
                            embedder=None, persons=None, name="plain")
    stack = shared_stack(plain)
    assert len(stack.detector.detect(_frame(1))) == 0 and calls == [(24, 32, 3)]
    assert stack.landmarks.landmarks(_frame(1), _faces(3, 1.0)).points.shape == (3, 2, 2)
    assert stack.broker.lanes["detector"].batch == 1 and stack.embedder is None


# --------------------------------------------------------------------------------------------------
# The subject tracker of several real clips at once, through one shared stack


def _with_batch_methods(stack):
    """The offline (onnxruntime) stack's models given batch methods made of their single calls:
    batch-invariant by construction, so the broker mixes the clips' calls."""
    def frames_batch(model):
        return SimpleNamespace(detect=model.detect, detect_batch=lambda frames: [model.detect(f) for f in frames])

    lm, em = stack.landmarks, stack.embedder
    return SimpleNamespace(
        detector=frames_batch(stack.detector), persons=frames_batch(stack.persons),
        landmarks=SimpleNamespace(num_points=lm.num_points, landmarks=lm.landmarks,
                                  landmarks_batch=lambda fs, fcs: [lm.landmarks(f, fc) for f, fc in zip(fs, fcs)]),
        embedder=SimpleNamespace(dim=em.dim, min_cos=em.min_cos, strong_cos=em.strong_cos, min_score=em.min_score,
                                 embed=em.embed, embed_batch=lambda fs, fcs: [em.embed(f, fc) for f, fc in zip(fs, fcs)]),
        name=stack.name)


def _clips() -> list[Path]:
    clips = [MEDIA / "two_people_hug_1080p.mp4", MEDIA / "arm_wrestling_340x256.mp4", MEDIA / "crowd_1080p.mp4"]
    missing = [c.name for c in clips if not c.is_file()]
    if missing:
        pytest.skip(f"real clips not found in {MEDIA}: {', '.join(missing)}")
    return clips


def _track(path: Path, stack, frames: int, out: dict, wrap=None) -> None:
    """The first ``frames`` frames of ``path`` tracked into ``out[name]`` (``wrap``: what the frames
    are handed as, e.g. a DeviceFrame; default the numpy frame)."""
    from mime_fast.subject import SubjectDetection
    from mime_fast.media import iter_display_frames, probe

    info = probe(path)
    det = SubjectDetection(info, stack=stack)
    for i, _, rgb in iter_display_frames(path, info):
        if i >= frames:
            break
        det.feed(rgb if wrap is None else wrap(rgb))
    res = det.result()
    out[path.name] = ([None if p is None else p.tobytes() for p in (res.points(i) for i in range(res.num_frames))],
                      res.stats)


def _track_at_once(clips: list[Path], stack, frames: int, wrap=None) -> dict:
    """:func:`_track` of every clip at once, each on a thread of its own, through ``stack``
    (``wrap``: as :func:`_track`'s, for every clip, or a dict of it per clip name)."""
    out: dict = {}
    wraps = wrap if isinstance(wrap, dict) else {c.name: wrap for c in clips}
    ts = [threading.Thread(target=_track, args=(c, stack, frames, out, wraps.get(c.name))) for c in clips]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


@pytest.mark.slow
def test_real_clips_tracked_at_once_through_one_shared_stack_as_each_alone(stack):
    clips = _clips()
    frames = 36
    batched = _with_batch_methods(stack)
    alone: dict = {}
    for c in clips:  # each alone through a broker of its own
        _track(c, shared_stack(batched, batch=4), frames, alone)
    shared = shared_stack(batched, batch=4, wait_s=0.05)
    together = _track_at_once(clips, shared, frames)
    assert set(together) == set(alone)
    for name in alone:
        assert together[name][0] == alone[name][0], name  # every frame's mask points, bit for bit
        assert together[name][1] == alone[name][1], name
    st = shared.broker.stats()
    assert st["landmarks"]["mixes"] == {"crop": True}
    # the clips' calls met: fewer forwards than calls made
    assert st["landmarks"]["forwards"] < st["landmarks"]["items"]


def _torch_devices() -> list[str]:
    import os

    torch = pytest.importorskip("torch")
    return ["cpu"] + (["cuda"] if os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1" or torch.cuda.is_available() else [])


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_torch_stack_shared_by_real_clips_gives_each_its_own_result(device):
    """The torch stack (the GPU path's models) behind one broker: its networks pass the probe (no
    result depends on the batch's other items: calls of different clips share forwards), and
    each clip's tracking equals its run alone through a broker of its own."""
    if device not in _torch_devices():
        pytest.skip("torch sees no CUDA device")
    from mime_fast.detect.torch_models import load_torch_stack

    clips = _clips()
    st = load_torch_stack(device)
    alone: dict = {}
    for c in clips:
        _track(c, shared_stack(st), 24, alone)
    shared = shared_stack(st, wait_s=0.05)
    together = _track_at_once(clips, shared, 24)
    for name in alone:
        assert together[name][0] == alone[name][0], name
        assert together[name][1] == alone[name][1], name
    stats = shared.broker.stats()
    for lane in ("detector", "landmarks", "embedder"):
        assert stats[lane]["mixes"] and all(stats[lane]["mixes"].values()), (lane, stats[lane])


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_frames_kept_on_the_device_track_as_numpy_frames(device, monkeypatch):
    """The GPU path's frames (torch_ops.DeviceFrame: NVDEC's RGB left on the device, the detector's
    input shrunk there, crops cut there, regions downloaded for the host's histograms, thumbnails
    and flow) give the torch stack's tracking of the numpy frames, bit for bit: alone, and three
    real clips at once through one broker (whose probe turns device frames on the device)."""
    if device not in _torch_devices():
        pytest.skip("torch sees no CUDA device")
    import torch

    from mime_fast.detect.torch_models import load_torch_stack
    from mime_fast.detect.torch_ops import DeviceFrame

    clips = _clips()
    st = load_torch_stack(device)
    wrap = lambda rgb: DeviceFrame(torch.from_numpy(np.ascontiguousarray(rgb)).to(device))  # noqa: E731

    downloads: list = []  # (recorded too: the broker reruns a failed batched call call by call)

    def whole_frame_download(self, dtype=None, copy=None):
        downloads.append(self.shape)
        raise AssertionError("a whole device frame was copied to the host")

    monkeypatch.setattr(DeviceFrame, "__array__", whole_frame_download)  # only regions may come back
    numpy_frames: dict = {}  # under a broker the tracker detects on whole frames: the reference is brokered too
    for c in clips:
        _track(c, shared_stack(st), 24, numpy_frames)
    plain: dict = {}
    _track(clips[0], st, 24, plain)
    alone: dict = {}
    _track(clips[0], st, 24, alone, wrap)  # no broker: crop detection around the subject, on the device frame
    assert alone[clips[0].name] == plain[clips[0].name]
    shared = shared_stack(st, wait_s=0.05)
    together = _track_at_once(clips, shared, 24, wrap)
    for c in clips:
        assert together[c.name][0] == numpy_frames[c.name][0], c.name
        assert together[c.name][1] == numpy_frames[c.name][1], c.name
    stats = shared.broker.stats()
    for lane in ("detector", "landmarks", "embedder"):
        assert stats[lane]["mixes"] and all(stats[lane]["mixes"].values()), (lane, stats[lane])
    # one clip's frames on the device, the others' on the host (an NVDEC clip beside clips PyAV
    # decodes): the broker's batches mix them, and each frame is read where it is
    shared = shared_stack(st, wait_s=0.05)
    mixed = _track_at_once(clips, shared, 24, {clips[0].name: wrap})
    for c in clips:
        assert mixed[c.name] == numpy_frames[c.name], c.name
    assert not downloads, downloads


@pytest.mark.slow
def test_threads_released_from_a_slow_forward_are_still_waited_for():
    """A forward slower than ``idle_s`` (a long model call, a loaded machine): the threads it
    releases count as active from then on, so their next calls meet again.  Before, a released
    thread's idle clock ran from the end of its previous call: the thread that ran the forward
    called again at once, found the other one idle and ran alone (about 1.5 forwards per round)."""
    import time

    model = _Batched()
    fast = model.detect_batch

    def slow(frames):
        time.sleep(0.5)
        return fast(frames)

    st = model.stack()
    st.detector.detect_batch = slow
    stack = shared_stack(st, batch=8, wait_s=30.0, idle_s=0.4)
    stack.detector.detect(_frame(200))  # the shape's probe, before the clock
    _WARMED[id(stack)] = stack.broker.stats()
    go = threading.Barrier(2)
    rounds = 6

    def work(t: int) -> None:
        go.wait()
        for i in range(rounds):
            stack.detector.detect(_frame(10 * t + i))

    _in_threads(work, 2)
    det = _counted(stack)["detector"]
    assert det["items"] == 2 * rounds and det["forwards"] <= rounds + 1, det  # a forward per round (one spare)
