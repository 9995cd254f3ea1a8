"""This checkout against another release on real footage, side by side in one run: all seven
subsets of the real clips of ../shared/media scaled to 720p, default settings, automatic detection,
each build in a fresh process, the two versions interleaved (so background load hits both alike),
and beside them the clip's **encoders alone** (issue 37's speed floor, in the same fresh-process
turn: the clip decoded once onto the 30 fps grid, then the libx264 encodes the build runs, with its
settings, threads and queues: ``_harness.libx264_alone``; FM left out where the build stream-copies
it).  Clips: the real clips of ``../shared/media`` and a 9 s cut sequence of them (the subject's
wide shot, a shot of two strangers, him again, an arm wrestling match: the shape of a stage clip,
where the tracker meets faces it must decide).
``--reference`` is the ``python/`` folder of the other release's checkout with its compiled core in
place (``git worktree add /tmp/ref <commit>`` and copy or build ``_core*.so`` there).  Writes
bench/results/vs_release-cpu.json: seconds per run, source fps, embeddings per source frame,
medians, the ratio of the versions and each version's time over the encoders' alone (target 1.25).

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

from _harness import REAL_CLIPS, media_dir, save, scaled_copy, upper_median as med

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
FLOOR = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from _harness import grid_frames, libx264_alone
from mime_fast.fm_copy import fm_copy_reason
from mime_fast.media import probe
from mime_fast.subsets import Settings
t = time.perf_counter()
info, st = probe(sys.argv[1]), Settings()
frames = list(grid_frames(Path(sys.argv[1]), st.encode.fps))
codes = [c for c in ("FM", "FDM", "FSM", "VMM") if c != "FM" or not fm_copy_reason(info, st)[0]]
size = (info.width - info.width % 2, info.height - info.height % 2)
libx264_alone(frames, Path(sys.argv[2]), size, info.matrix, codes)
print(json.dumps({"seconds": time.perf_counter() - t, "source_frames": info.video_frames, "codes": codes}))
"""


def cut_sequence(media: Path, dst: Path) -> Path:
    """The stage clip's shape from the real clips: his wide shot (the crowd's first 60 frames), two
    strangers (the hug, 60), him again (the crowd's last 45), an arm wrestling match (60); 1280 x 720
    at 30 fps, 7.5 s."""
    from mime_fast.samples import make_cut_sequence

    crowd, hug, arm = (media / f"{n}.mp4" for n in ("crowd_1080p", "two_people_hug_1080p", "arm_wrestling_340x256"))
    return make_cut_sequence(dst, [(crowd, 0, 60), (hug, 0, 60), (crowd, 60, 45), (arm, 0, 60)],
                             size=(1280, 720), fps=30).path


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
        clips["cut_sequence"] = cut_sequence(args.media, tmp / "cut_sequence-720.mp4")
        for rep in range(args.repeats):
            for name, clip in clips.items():
                for ver, path in (*versions.items(), ("encoders", versions["this"])):
                    env = {**os.environ, "PYTHONPATH": path}
                    child = [FLOOR, str(clip), str(tmp / f"{ver}-{name}-{rep}"), str(HERE)] if ver == "encoders" else \
                        [CHILD, str(clip), str(tmp / f"{ver}-{name}-{rep}")]
                    out = subprocess.run([sys.executable, "-c", *child], env=env, capture_output=True, text=True,
                                         check=True)
                    d = json.loads(out.stdout.strip().splitlines()[-1])
                    runs.setdefault(name, {}).setdefault(ver, []).append(d)
                    print(f"{name} {ver} repeat {rep}: {d['seconds']:.1f} s "
                          f"({d['source_frames'] / d['seconds']:.1f} source fps), embeddings {d.get('embeddings')}",
                          flush=True)

    summary = {}
    for name, by in runs.items():
        ref, this = med([d["seconds"] for d in by[args.label]]), med([d["seconds"] for d in by["this"]])
        floor = med([d["seconds"] for d in by["encoders"]])
        n = by["this"][0]["source_frames"]
        summary[f"{name}@720p"] = {f"{args.label}_source_fps": round(n / ref, 1), "this_source_fps": round(n / this, 1),
                                  "speedup": round(ref / this, 2), "encoders_source_fps": round(n / floor, 1),
                                  "encoders_codes": by["encoders"][0]["codes"],
                                  f"{args.label}_over_encoders": round(ref / floor, 2),
                                  "this_over_encoders": round(this / floor, 2),
                                  f"{args.label}_embeddings": by[args.label][0]["embeddings"],
                                  "this_embeddings": by["this"][0]["embeddings"],
                                  f"{args.label}_embeddings_per_frame": round(by[args.label][0]["embeddings"] / n, 3),
                                  "this_embeddings_per_frame": round(by["this"][0]["embeddings"] / n, 3)}
        print(name, summary[f"{name}@720p"])
    path = save("vs_release", {"reference": args.label, "summary": summary, "runs": runs})
    print(path)


if __name__ == "__main__":
    main()
