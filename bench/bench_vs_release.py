"""This checkout against another release on real footage, side by side in one run: all seven
subsets of the real clips of ../shared/media scaled to 720p, default settings, automatic detection,
each build in a fresh process, the two versions interleaved (so background load hits both alike).
``--reference`` is the ``python/`` folder of the other release's checkout with its compiled core in
place (``git worktree add /tmp/ref <commit>`` and copy or build ``_core*.so`` there).  Writes
bench/results/vs_release-cpu.json: seconds per run, source fps, medians and the ratio.

    python bench/bench_vs_release.py --reference /tmp/ref/python --label ac3fe8d [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import REAL_CLIPS, media_dir, save, scaled_copy

HERE = Path(__file__).resolve().parent
CHILD = """
import json, sys, time
from mime_fast import build_subsets
t = time.perf_counter()
r = build_subsets(sys.argv[1], sys.argv[2])
s = r.tracking
print(json.dumps({"seconds": time.perf_counter() - t, "source_frames": r.source_frames,
                  "embeddings": getattr(s, "embeddings", None), "without_subject": getattr(s, "without_subject", None)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, required=True, help="the other release's python/ folder")
    ap.add_argument("--label", default="reference")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--media", type=Path, default=media_dir(), help="real clips (default: $MIME_FAST_SHARED_MEDIA or ../shared/media)")
    args = ap.parse_args()
    versions = {args.label: str(args.reference.resolve()), "this": str((HERE.parent / "python").resolve())}
    runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clips = {name: scaled_copy(args.media / f"{name}.mp4", tmp / f"{name}-720.mp4", 720)
                 for name in REAL_CLIPS}
        for rep in range(args.repeats):
            for name, clip in clips.items():
                for ver, path in versions.items():
                    env = {**os.environ, "PYTHONPATH": path}
                    out = subprocess.run([sys.executable, "-c", CHILD, str(clip), str(tmp / f"{ver}-{name}-{rep}")],
                                         env=env, capture_output=True, text=True, check=True)
                    d = json.loads(out.stdout.strip().splitlines()[-1])
                    runs.setdefault(name, {}).setdefault(ver, []).append(d)
                    print(f"{name} {ver} repeat {rep}: {d['seconds']:.1f} s "
                          f"({d['source_frames'] / d['seconds']:.1f} source fps), embeddings {d['embeddings']}", flush=True)

    def med(v):
        return sorted(v)[len(v) // 2]

    summary = {}
    for name, by in runs.items():
        ref, this = med([d["seconds"] for d in by[args.label]]), med([d["seconds"] for d in by["this"]])
        n = by["this"][0]["source_frames"]
        summary[f"{name}@720p"] = {f"{args.label}_source_fps": round(n / ref, 1), "this_source_fps": round(n / this, 1),
                                  "speedup": round(ref / this, 2),
                                  f"{args.label}_embeddings": by[args.label][0]["embeddings"],
                                  "this_embeddings": by["this"][0]["embeddings"]}
        print(name, summary[f"{name}@720p"])
    path = save("vs_release", {"reference": args.label, "summary": summary, "runs": runs})
    print(path)


if __name__ == "__main__":
    main()
