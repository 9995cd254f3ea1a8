"""The identity audit (mime_fast.audit) of real footage: the synthetic 720p clip, every real clip
of ../shared/media at its own size and the 1080p ones scaled to 720p too (tracking differs with the
frame size: at 720p the crowd's subject was once left clear for 59 frames), built with default settings (automatic detection, all seven
subsets; the quality gate lowered for the 340x256 clip), then audited on every frame.  Per clip and
subset: subject frames, mean/max similarity of the degraded face to its clear self, frames still
recognisable (>= the calibrated threshold), the detail ratio and the frames where the subject is
visible but unmasked (each count with its output frames).  Writes bench/results/audit_real-cpu.json.

    python bench/audit_real.py [--media ../shared/media] [--every 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _harness import REAL_CLIPS, media_dir, proof_clips, save, scaled_copy

import mime_fast
from mime_fast.audit import AUDIT_REVISION, AUDITED, MASKED_DETAIL_RATIO, RECOGNISABLE_COS


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
        clips = {name: (clip, extra) for name, (clip, extra, _) in proof_clips(args.media, tmp).items()}
        for name in REAL_CLIPS:
            if "1080p" in name:
                clips[f"{name.replace('_1080p', '')}@720p"] = (
                    scaled_copy(args.media / f"{name}.mp4", tmp / f"{name}-720.mp4", 720), {})
        for name, (clip, extra) in clips.items():
            r = mime_fast.build_subsets(clip, out, clip_id=name.replace("@", "_"), **extra)
            kernels[name.replace("@", "_")] = {"fdm": r.fdm_kernel, "fsm": r.fsm_kernel}
        report = mime_fast.audit(out, every=args.every, write=False)
    print(report.table())
    for p in report.problems:
        print(" ", p)
    keep = ("subject_frames", "mean_similarity", "max_similarity", "recognisable_frames", "detail_ratio",
            "unmasked_frames", "same_video_as", "recognisable_at", "unmasked_at")
    clips: dict = {}
    for row in report.rows:
        if row["status"] == "ok":
            clips.setdefault(row["clip_id"], {"kernels": kernels[row["clip_id"]]})[row["subset"]] = {
                k: row[k] for k in keep}
    totals = {s: {"subject_frames": sum(c[s]["subject_frames"] for c in clips.values() if s in c),
                  "recognisable_frames": sum(c[s]["recognisable_frames"] for c in clips.values() if s in c),
                  "unmasked_frames": sum(c[s]["unmasked_frames"] for c in clips.values() if s in c)}
              for s in AUDITED}
    payload = {"audit_revision": AUDIT_REVISION, "threshold": RECOGNISABLE_COS,
               "masked_detail_ratio": MASKED_DETAIL_RATIO, "every": args.every,
               "totals": totals, "problems": report.problems, "clips": clips}
    print(save("audit_real", payload))


if __name__ == "__main__":
    main()
