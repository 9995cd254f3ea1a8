"""All seven MIME subsets of a 10 s 720p clip with a face: one build_subsets pass against seven
separate single-subset degrade passes with the same settings (interleaved, medians), source frames
per second, and the peak memory of a 60 s clip against a 10 s clip (each in a fresh process).
Writes bench/results/build_subsets-cpu.json.

    python bench/bench_build_subsets.py [--repeats 2]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import parse_args, save

from mime_fast import build_subsets, degrade
from mime_fast.samples import make_clip
from mime_fast.spec import CODES, spec

SUBSETS = CODES

_CHILD = """
import json, resource, sys, time
import numpy as np
from mime_fast import build_subsets
t = time.perf_counter()
r = build_subsets(sys.argv[1], sys.argv[2], landmarks=np.load(sys.argv[3])["landmarks"])
print(json.dumps({"seconds": time.perf_counter() - t, "source_frames": r.source_frames,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def peak_memory(clip: Path, out: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", _CHILD, str(clip), str(out), str(clip.with_suffix(".npz"))],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args(__doc__, repeats=2)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clip = make_clip(tmp / "face10.mp4", duration=10.0, fps=25, size=(1280, 720), audio=True)
        landmarks = clip.landmarks
        one, seven, src_frames = [], [], 0
        for rep in range(args.repeats):
            t = time.perf_counter()
            r = build_subsets(clip.path, tmp / f"one{rep}", landmarks=landmarks)
            one.append(time.perf_counter() - t)
            src_frames = r.source_frames
            t = time.perf_counter()
            for code in SUBSETS:
                kernel = {"fdm": 15, "fsm": r.fsm_kernel}.get(spec(code).kernel)
                degrade(clip.path, tmp / f"seven{rep}" / f"{code}.mp4", subset=code, kernel=kernel, landmarks=landmarks)
            seven.append(time.perf_counter() - t)
            print(f"repeat {rep}: one pass {one[-1]:.1f} s, seven passes {seven[-1]:.1f} s")
        one_med = sorted(one)[len(one) // 2]
        seven_med = sorted(seven)[len(seven) // 2]

        clip60 = make_clip(tmp / "face60.mp4", duration=60.0, fps=25, size=(1280, 720), audio=True)
        mem10 = peak_memory(clip.path, tmp / "mem10")
        mem60 = peak_memory(clip60.path, tmp / "mem60")

    payload = {
        "clip": {"size": [1280, 720], "fps_in": 25, "seconds": 10.0, "source_frames": src_frames, "audio": "48 kHz stereo"},
        "one_pass_s": one,
        "seven_passes_s": seven,
        "one_pass_median_s": one_med,
        "seven_passes_median_s": seven_med,
        "speedup_one_pass_vs_seven": seven_med / one_med,
        "target_speedup": 3.0,
        "source_fps_one_pass": src_frames / one_med,
        "output_fps_all_seven": 300 / one_med,
        "peak_rss_mib_10s": mem10["peak_rss_mib"],
        "peak_rss_mib_60s": mem60["peak_rss_mib"],
        "peak_rss_ratio_60s_vs_10s": mem60["peak_rss_mib"] / mem10["peak_rss_mib"],
        "target_peak_rss_ratio": 1.10,
        "memory_runs": {"10s": mem10, "60s": mem60},
    }
    path = save("build_subsets", payload)
    print(f"one pass {one_med:.1f} s vs seven passes {seven_med:.1f} s: {seven_med / one_med:.2f}x; "
          f"{src_frames / one_med:.1f} source fps; peak RSS 60 s / 10 s = "
          f"{payload['peak_rss_ratio_60s_vs_10s']:.3f} ({mem60['peak_rss_mib']:.0f} / {mem10['peak_rss_mib']:.0f} MiB)")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
