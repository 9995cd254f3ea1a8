"""The model broker (mime_fast.detect.batching) on a simulated GPU: what sharing one stack between
the clips of a process is worth when a forward costs its launches, not its items, and what the
broker itself costs.

A simulation, not a GPU measurement: the "GPU" is one lock (forwards run one at a time) held for a
fixed time per forward, whatever its batch (``--detector-ms``, ``--mesh-ms``, ``--embed-ms``: the
per-call times one process measured on an H100, README); waiting on it releases the interpreter
as a CUDA synchronisation does.  Each clip is a thread running the tracker's call pattern per
frame: ``--python-ms`` of work holding the interpreter (the tracker's own logic), the detector every
``--detect-every`` frames, the mesh on one face every frame, an embedding every 10th frame.

Contenders, for 1, 2, 4 and 8 clips on threads of one process:
* ``direct``: each clip calls the models itself (one forward per call, all on the one GPU);
* ``broker``: the clips' calls go through one :class:`~mime_fast.detect.batching.ModelBroker`
  (default batch 8, ``wait_s`` 4 ms).
Reported: source frames per second of the process, items per forward, and the broker's cost per
call with free models (``broker_overhead_us``).  Writes bench/results/batching-cpu.json.

    python bench/bench_batching.py [--frames 120] [--repeats 3]
"""

from __future__ import annotations

import argparse
import threading
import time
from types import SimpleNamespace

import numpy as np
from _harness import machine, save

from mime_fast.detect import Faces, Landmarks
from mime_fast.detect.batching import ModelBroker, shared_stack


class SimulatedGpu:
    """Forwards one at a time, each ``ms`` long whatever its size."""

    def __init__(self):
        self.lock = threading.Lock()
        self.forwards = 0

    def run(self, ms: float) -> None:
        with self.lock:
            self.forwards += 1
            time.sleep(ms / 1000.0)


def simulated_stack(gpu: SimulatedGpu, det_ms: float, mesh_ms: float, emb_ms: float):
    face = Faces(np.array([[10.0, 10.0, 50.0, 50.0]]), np.ones(1), np.full((1, 5, 2), 30.0))

    def detect_batch(frames):
        gpu.run(det_ms)
        return [face for _ in frames]

    def landmarks_batch(frames, faces_list):
        gpu.run(mesh_ms)
        return [Landmarks(np.zeros((len(f), 468, 2), np.float32), np.ones(len(f), np.float32)) for f in faces_list]

    def embed_batch(frames, faces_list):
        gpu.run(emb_ms)
        return [np.zeros((len(f), 128), np.float32) for f in faces_list]

    return SimpleNamespace(
        detector=SimpleNamespace(detect=lambda f: detect_batch([f])[0], detect_batch=detect_batch),
        landmarks=SimpleNamespace(num_points=468, landmarks=lambda f, fc: landmarks_batch([f], [fc])[0],
                                  landmarks_batch=landmarks_batch),
        embedder=SimpleNamespace(dim=128, embed=lambda f, fc: embed_batch([f], [fc])[0], embed_batch=embed_batch),
        persons=None, name="simulated")


def clip(stack, frames: int, python_ms: float, detect_every: int) -> None:
    frame = np.zeros((216, 384, 3), np.uint8)
    face = Faces(np.array([[10.0, 10.0, 50.0, 50.0]]), np.ones(1), np.full((1, 5, 2), 30.0))
    work = np.random.default_rng(0).random(64)
    for i in range(frames):
        t = time.perf_counter()
        while (time.perf_counter() - t) * 1000 < python_ms:  # the tracker's own logic: holds the interpreter
            work = np.sort(work)
        if i % detect_every == 0:
            stack.detector.detect(frame)
        stack.landmarks.landmarks(frame, face)
        if i % 10 == 0:
            stack.embedder.embed(frame, face)


def run(clips: int, brokered: bool, args) -> dict:
    gpu = SimulatedGpu()
    stack = simulated_stack(gpu, args.detector_ms, args.mesh_ms, args.embed_ms)
    if brokered:
        stack = shared_stack(stack)
    ts = [threading.Thread(target=clip, args=(stack, args.frames, args.python_ms, args.detect_every))
          for _ in range(clips)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    wall = time.perf_counter() - t
    calls = clips * sum(1 for i in range(args.frames) for c in (i % args.detect_every == 0, True, i % 10 == 0) if c)
    out = {"source_fps": clips * args.frames / wall, "forwards": gpu.forwards, "calls": calls,
           "items_per_forward": calls / gpu.forwards}
    if brokered:
        out["lanes"] = stack.broker.stats()
    return out


def overhead_us(n: int = 3000) -> float:
    """Time per call through a broker with free models (one thread), minus the direct call's."""
    free = SimpleNamespace(detector=SimpleNamespace(detect_batch=lambda fs: [None] * len(fs)),
                           landmarks=SimpleNamespace(landmarks_batch=lambda f, fc: [None] * len(f), num_points=1),
                           embedder=None, persons=None, name="free")
    broker = ModelBroker(free)
    frame = np.zeros((8, 8, 3), np.uint8)
    lane = broker.lanes["detector"]
    broker._call(lane, frame)  # the probe
    t = time.perf_counter()
    for _ in range(n):
        broker._call(lane, frame)
    through = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for _ in range(n):
        free.detector.detect_batch([frame] * 8)
    direct = (time.perf_counter() - t) / n
    return (through - direct) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python-ms", type=float, default=1.0)
    ap.add_argument("--detect-every", type=int, default=3)
    ap.add_argument("--detector-ms", type=float, default=3.0)
    ap.add_argument("--mesh-ms", type=float, default=3.9)
    ap.add_argument("--embed-ms", type=float, default=2.0)
    args = ap.parse_args()
    rows = {}
    for clips in (1, 2, 4, 8):
        for name in ("direct", "broker"):
            runs = [run(clips, name == "broker", args) for _ in range(args.repeats)]  # (interleaving: cheap runs)
            runs.sort(key=lambda r: r["source_fps"])
            rows[f"{name}_{clips}"] = {**runs[len(runs) // 2], "fps_all": [round(r["source_fps"], 1) for r in runs]}
        d, b = rows[f"direct_{clips}"], rows[f"broker_{clips}"]
        print(f"{clips} clips: direct {d['source_fps']:7.1f} fps ({d['items_per_forward']:.2f} items/forward), "
              f"broker {b['source_fps']:7.1f} fps ({b['items_per_forward']:.2f} items/forward): "
              f"{b['source_fps'] / d['source_fps']:.2f}x", flush=True)
    over = sorted(overhead_us() for _ in range(5))[2]
    print(f"broker cost per call (free models, one thread): {over:.1f} us")
    payload = {"machine": machine(), "simulation": True, "settings": vars(args),
               "speedup_broker_vs_direct": {str(c): rows[f"broker_{c}"]["source_fps"] / rows[f"direct_{c}"]["source_fps"]
                                            for c in (1, 2, 4, 8)},
               "broker_overhead_us": over, "runs": rows}
    print(f"wrote {save('batching', payload)}")


if __name__ == "__main__":
    main()
