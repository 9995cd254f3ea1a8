"""Shared benchmark harness: interleaved repetitions (so background load hits every contender
alike), medians and ratios, machine metadata, JSON results under bench/results/."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Callable

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(doc: str | None, repeats: int) -> argparse.Namespace:
    """The options every benchmark takes: --repeats and --device."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=repeats, help=f"timed repetitions per contender (default {repeats})")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    return ap.parse_args()


def machine() -> dict:
    import cv2

    import mime_fast

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "opencv_threads": cv2.getNumThreads(),
        "mime_fast": mime_fast.__version__,
        "mime_fast_threads": mime_fast.num_threads(),
        "cuda": mime_fast.cuda_status(),
        "git_commit": commit,
    }


def compare(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 3) -> dict[str, dict]:
    """Time each contender `repeats` times, interleaved; return per-contender stats in ms."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {
        name: {
            "median_ms": float(np.median(ts)),
            "p10_ms": float(np.percentile(ts, 10)),
            "p90_ms": float(np.percentile(ts, 90)),
            "repeats": len(ts),
        }
        for name, ts in times.items()
    }


def save(name: str, payload: dict, device: str = "cpu") -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{device}.json"
    payload = {"benchmark": name, "device": device, "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def face_frame(height: int = 720, width: int = 1280) -> tuple[np.ndarray, np.ndarray]:
    """A 720p frame with a real face (scikit-image's astronaut, scaled up) and 106 landmark-like
    points whose hull is about 250 x 320 px."""
    import cv2
    from skimage import data

    face = cv2.resize(data.astronaut(), (600, 600), interpolation=cv2.INTER_CUBIC)
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    frame = cv2.GaussianBlur(frame, (9, 9), 0)  # textured background
    y0, x0 = (height - 600) // 2, (width - 600) // 2
    frame[y0 : y0 + 600, x0 : x0 + 600] = face
    t = np.linspace(0, 2 * np.pi, 33, endpoint=False)
    cx, cy = x0 + 293, y0 + 150
    outline = np.stack([cx + 125 * np.cos(t), cy + 160 * np.sin(t)], 1)
    inner = np.stack([cx + rng.uniform(-90, 90, 73), cy + rng.uniform(-110, 110, 73)], 1)
    return np.ascontiguousarray(frame), np.concatenate([outline, inner]).astype(np.float32)


def pipeline_with_hulls(src, out_dir, landmarks, **settings) -> tuple[float, float]:
    """``(seconds, masking seconds)`` of ``build_subsets`` given ``landmarks`` (the detected hulls),
    with the time spent in ``ops.hull_mask`` and ``ops.blur_in_mask`` summed apart: the mask+blur
    stage; the rest is decode, standardise and encode."""
    from mime_fast import build_subsets, ops

    acc = [0.0]
    hm, bm = ops.hull_mask, ops.blur_in_mask

    def timed(fn):
        def w(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[0] += time.perf_counter() - t0
        return w

    ops.hull_mask, ops.blur_in_mask = timed(hm), timed(bm)
    try:
        t = time.perf_counter()
        build_subsets(src, out_dir, landmarks=landmarks, **settings)
        return time.perf_counter() - t, acc[0]
    finally:
        ops.hull_mask, ops.blur_in_mask = hm, bm
