"""How often the subject tracker looks: detector runs, face-mesh runs and embeddings per source frame
on bench_real's 720p clips (the real crowd, hug and arm wrestling scaled to 720p, and the cut
sequence), under each detection schedule (``DetectOptions.schedule``: ``mesh``, the default, and
``period``, issue 50's).  Counts, not timings: the same on any machine and under any load.  Issue
50's target is at most 0.35 detector runs a frame on each clip; the end-to-end time is
bench_real's.  Writes bench/results/schedule-cpu.json.

    python bench/bench_schedule.py [--only crowd@720p,arm_wrestling@720p,...]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _harness import real_clip_args, save
from bench_real import clips

from mime_fast.detect import load_offline_stack
from mime_fast.options import SCHEDULES
from mime_fast.subject import detect_subject

TARGET = 0.35


def main() -> None:
    args = real_clip_args(__doc__, "bench_schedule")
    stack = load_offline_stack()
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        only = set(args.only.split(",")) if args.only else {"crowd@720p", "two_people_hug@720p", "arm_wrestling@720p", "cut_sequence@720p"}
        for name, (clip, _) in clips(args.media, Path(tmp_name), only).items():
            out[name] = {}
            for schedule in SCHEDULES:
                s = detect_subject(clip, stack=stack, schedule=schedule).stats
                n = max(1, s.frames)
                out[name][schedule] = {"frames": s.frames, "detector_runs_per_frame": round(s.detector_runs / n, 3),
                                       "mesh_runs_per_frame": round(s.mesh_runs / n, 3),
                                       "embeddings_per_frame": round(s.embeddings / n, 3),
                                       "waited": s.waited, "tracked": s.tracked, "head": s.head,
                                       "undecided": s.undecided}
                print(name, schedule, out[name][schedule], flush=True)
    print(save("schedule", {"target_detector_runs_per_frame": TARGET, "clips": out}))


if __name__ == "__main__":
    main()
