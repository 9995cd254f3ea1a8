"""The identity audit (mime_fast.audit) of real footage: the synthetic 720p clip and every real clip
of ../shared/media at its own size, built with default settings (automatic detection, all seven
subsets; the quality gate lowered for the 340x256 clip), then audited on every frame.  Per clip and
subset: subject frames, mean/max similarity of the degraded face to its clear self, frames still
recognisable (>= the calibrated threshold), the detail ratio and the frames where the subject is
visible but unmasked.  Writes bench/results/audit_real-cpu.json.

    python bench/audit_real.py [--media ../shared/media] [--every 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _harness import media_dir, proof_clips, save

import mime_fast
from mime_fast.audit import AUDITED, MASKED_DETAIL_RATIO, RECOGNISABLE_COS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--every", type=int, default=1)
    args = ap.parse_args()
    if not (args.media / "crowd_1080p.mp4").is_file():
        sys.exit(f"audit_real: no real clips in {args.media} (pass --media)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / "out"
        kernels = {}
        for name, (clip, extra, _) in proof_clips(args.media, tmp).items():
            r = mime_fast.build_subsets(clip, out, clip_id=name.replace("@", "_"), **extra)
            kernels[name.replace("@", "_")] = {"fdm": r.fdm_kernel, "fsm": r.fsm_kernel}
        report = mime_fast.audit(out, every=args.every, write=False)
    print(report.table())
    for p in report.problems:
        print(" ", p)
    keep = ("subject_frames", "mean_similarity", "max_similarity", "recognisable_frames", "detail_ratio",
            "unmasked_frames", "same_video_as")
    clips: dict = {}
    for row in report.rows:
        if row["status"] == "ok":
            clips.setdefault(row["clip_id"], {"kernels": kernels[row["clip_id"]]})[row["subset"]] = {
                k: row[k] for k in keep}
    totals = {s: {"subject_frames": sum(c[s]["subject_frames"] for c in clips.values() if s in c),
                  "recognisable_frames": sum(c[s]["recognisable_frames"] for c in clips.values() if s in c),
                  "unmasked_frames": sum(c[s]["unmasked_frames"] for c in clips.values() if s in c)}
              for s in AUDITED}
    payload = {"threshold": RECOGNISABLE_COS, "masked_detail_ratio": MASKED_DETAIL_RATIO, "every": args.every,
               "totals": totals, "problems": report.problems, "clips": clips}
    print(save("audit_real", payload))


if __name__ == "__main__":
    main()
