"""What shot detection (mime_fast.subject.shots.ShotDetector) costs per frame on real footage, above
all where a clip cuts often: at a hard cut that returns to no alike shot, ORB features of the new
frame are matched against the last frames of up to RETURN_SHOTS earlier shots (a re-framed return,
a cut-in or cut-out), which no other frame pays.  Sequences of 300 frames at 720p made of the real
clips of ../shared/media (decoded once, scaled; never written):

* ``no_cut``: each real clip alone (the frames as they come);
* ``cut_every_N``: cuts every N frames cycling through the three clips, each picking up where it
  left off: most cuts return to a shot alike (no ORB);
* ``new_scene_every_N``: the worst case, every cut to a picture none of the last shots is alike
  (a quarter of one of the clips, upscaled, some flipped: 12 framings), so every cut matches ORB
  features against every earlier shot kept.

Per sequence: median ms per frame over ``--repeats`` runs, cuts, returns, re-framing matches and
their ms per cut.  Writes bench/results/shots-cpu.json.

    python bench/bench_shots.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import av
import cv2
import numpy as np
from _harness import media_dir, save

import mime_fast.subject.shots as shots_mod
from mime_fast.subject.shots import ShotDetector

CLIPS = {"crowd": "crowd_1080p.mp4", "hug": "two_people_hug_1080p.mp4", "arm": "arm_wrestling_340x256.mp4"}


def frames_720p(path: Path, limit: int = 105) -> list[np.ndarray]:
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(c.streams.video[0]):
            a = f.to_ndarray(format="rgb24")
            if a.shape[:2] != (720, 1280):
                a = cv2.resize(a, (1280, 720), interpolation=cv2.INTER_AREA if a.shape[0] > 720 else cv2.INTER_LINEAR)
            out.append(a)
            if len(out) >= limit:
                break
    return out


def framing(a: np.ndarray, v: int) -> np.ndarray:
    """One of 12 pictures made of frame ``a``: a quarter of it, upscaled, as is or flipped."""
    h, w = a.shape[:2]
    y, x = (v % 4) // 2 * h // 2, (v % 4) % 2 * w // 2
    b = cv2.resize(a[y:y + h // 2, x:x + w // 2], (w, h), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(b if v // 4 % 3 == 0 else (b[:, ::-1] if v // 4 % 3 == 1 else b[::-1]))


def sequences(clips: dict[str, list[np.ndarray]], n: int = 300) -> dict[str, list[np.ndarray]]:
    names = list(clips)
    seqs = {f"no_cut_{k}": clips[k] for k in names}
    for every in (10, 30):
        seq, pos, c = [], dict.fromkeys(names, 0), 0
        while len(seq) < n:
            k = names[c % len(names)]
            for _ in range(every):
                seq.append(clips[k][pos[k] % len(clips[k])])
                pos[k] += 1
            c += 1
        seqs[f"cut_every_{every}"] = seq[:n]
        seq, c = [], 0
        while len(seq) < n:
            k = names[c % len(names)]
            seq.extend(framing(clips[k][(7 * c + i) % len(clips[k])], c) for i in range(every))
            c += 1
        seqs[f"new_scene_every_{every}"] = seq[:n]
    return seqs


def run(frames: list[np.ndarray]) -> dict:
    spent = {"s": 0.0, "n": 0}
    real = shots_mod._reframing

    def timed(a, b):
        t = time.perf_counter()
        try:
            return real(a, b)
        finally:
            spent["s"] += time.perf_counter() - t
            spent["n"] += 1

    shots_mod._reframing = timed
    try:
        det, cuts, returns = ShotDetector(25), 0, 0
        t = time.perf_counter()
        for f in frames:
            if det.feed(f):
                cuts += 1
                returns += det.returns_to is not None
        total = time.perf_counter() - t
    finally:
        shots_mod._reframing = real
    return {"frames": len(frames), "ms_per_frame": 1000 * total / len(frames), "new_shots": cuts, "returns": returns,
            "reframing_matches": spent["n"], "reframing_ms": 1000 * spent["s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    clips = {k: frames_720p(args.media / v) for k, v in CLIPS.items()}
    results = {}
    for name, frames in sequences(clips).items():
        runs = [run(frames) for _ in range(args.repeats)]
        last = runs[-1]
        results[name] = {**{k: last[k] for k in ("frames", "new_shots", "returns", "reframing_matches")},
                         "ms_per_frame_median": round(statistics.median(r["ms_per_frame"] for r in runs), 3),
                         "reframing_ms_per_new_shot_median": round(statistics.median(
                             r["reframing_ms"] / max(r["new_shots"], 1) for r in runs), 2),
                         "ms_per_frame": [round(r["ms_per_frame"], 3) for r in runs]}
        print(name, results[name])
    print(save("shots", {"repeats": args.repeats, "size": [1280, 720], "results": results}))


if __name__ == "__main__":
    main()
