"""Whether a worker process's memory creeps over a long run: one worker process of the pool
(:func:`mime_fast.corpus.pool.worker_process_results`, as ``mime-fast build --workers N`` starts
them) builds ``--clips`` short clips one after the other with automatic detection (all seven
subsets), and its resident memory (``VmRSS`` of ``/proc/<pid>/status``) is read after each clip.
The clips are the real clips of ../shared/media cut to their first ``--seconds`` and scaled to a
few heights (6 sources by default), given under new ids in turn; the quality gate is lowered.
Writes bench/results/worker_memory-cpu.json: the RSS after every clip, and its growth over the
first and second halves of the run (a creep keeps growing in the second half; a plateau does not).

``--in-process`` builds the clips in this process instead, as a worker's clip thread does
(:func:`mime_fast.corpus.clip._process_clip`, the models loaded first), and also records after
each clip the Python objects the garbage collector tracks and the RSS once glibc has given back
the memory it keeps free (``malloc_trim(0)``): what is kept, told apart from what is only not
returned yet.  Writes bench/results/worker_memory_in_process-cpu.json.

    nice -n 10 python bench/bench_worker_memory.py [--clips 300] [--seconds 1.5] [--in-process]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _harness import REAL_CLIPS, SHARED_MACHINE_NOTE, media_dir, save, scaled_copy


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def in_process_results(specs, out: Path, settings):
    """The clips built one after the other in this process, as a worker's clip thread builds them."""
    from mime_fast.corpus.clip import _process_clip
    from mime_fast.detect.stacks import default_stack
    from mime_fast.spec import CODES

    default_stack("cpu")
    for spec in specs:
        yield _process_clip(spec, out, list(CODES), settings, "bench")


def kept_memory() -> dict:
    """This process's RSS, the Python objects the collector tracks (after a collection), and the
    RSS once glibc has returned the memory it keeps free (``malloc_trim``; none off glibc)."""
    import ctypes
    import gc

    gc.collect()
    sample = {"rss_mib": round(rss_mib(os.getpid()), 1), "objects": len(gc.get_objects())}
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        sample["rss_trimmed_mib"] = round(rss_mib(os.getpid()), 1)
    except (OSError, AttributeError):
        sample["rss_trimmed_mib"] = None
    return sample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=1.5, help="length of each source clip")
    ap.add_argument("--heights", default="360,480", help="heights the real clips are scaled to")
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--in-process", action="store_true", help="build the clips in this process (objects, trimmed RSS)")
    args = ap.parse_args()

    import multiprocessing

    from mime_fast.corpus import ClipSpec
    from mime_fast.corpus.pool import worker_process_results
    from mime_fast.options import Settings
    from mime_fast.corpus.progress import Monitor
    from mime_fast.spec import CODES

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sources = [scaled_copy(args.media / f"{name}.mp4", tmp / f"{name}-{h}.mp4", int(h), seconds=args.seconds)
                   for name in REAL_CLIPS for h in args.heights.split(",")]
        inp = tmp / "in"
        inp.mkdir()
        specs = []
        for i in range(args.clips):
            p = inp / f"c{i:04d}.mp4"
            os.link(sources[i % len(sources)], p)
            specs.append(ClipSpec(p.stem, p))
        settings = Settings.resolve(None, min_height=0, min_duration=0)
        out = tmp / "out"
        out.mkdir()
        if args.in_process:
            results = in_process_results(specs, out, settings)
        else:
            results = worker_process_results(specs, out, list(CODES), settings, "bench", 1, 1, Monitor(), True,
                                             threading.Event())
        samples, t0 = [], time.perf_counter()
        try:
            for k, (rows, reason, frames) in enumerate(results):
                if args.in_process:
                    sample = kept_memory()
                    pid = os.getpid()
                else:
                    (pid,) = [p.pid for p in multiprocessing.active_children()]
                    sample = {"rss_mib": round(rss_mib(pid), 1)}
                samples.append({"clip": k, **sample, "s": round(time.perf_counter() - t0, 1), "failed": reason})
                if k % 10 == 0 or k == args.clips - 1:
                    print(f"clip {k}: worker {pid} RSS {samples[-1]['rss_mib']:.0f} MiB "
                          f"({samples[-1]['s']:.0f} s){' FAILED ' + reason if reason else ''}", flush=True)
                for r in rows:  # the outputs are not kept: a long run on a small disk
                    if r.get("path") and r["status"] == "ok":
                        (out / r["path"]).unlink(missing_ok=True)
        finally:
            results.close()
    rss = [s["rss_mib"] for s in samples]
    n = len(rss)
    first, mid, last = rss[min(4, n - 1)], rss[n // 2], rss[-1]
    summary = {"clips": n, "rss_after_clip_5_mib": first, "rss_mid_mib": mid, "rss_last_mib": last,
               "rss_max_mib": max(rss), "growth_first_half_mib": round(mid - first, 1),
               "growth_second_half_mib": round(last - mid, 1),
               "rss_median_by_50_clips_mib": [statistics.median(rss[i:i + 50]) for i in range(0, n, 50)],
               "failed": sum(1 for s in samples if s["failed"])}
    if args.in_process:
        for key in ("rss_trimmed_mib", "objects"):
            values = [s[key] for s in samples]
            summary[f"{key}_after_clip_5"], summary[f"{key}_mid"], summary[f"{key}_last"] = \
                values[min(4, n - 1)], values[n // 2], values[-1]
            summary[f"{key}_max"] = max(values)
    print(summary)
    from mime_fast.detect.stacks import default_stack

    path = save("worker_memory_in_process" if args.in_process else "worker_memory", {
        "note": SHARED_MACHINE_NOTE, "stack": default_stack().name, "sources": [p.name for p in sources],
        "seconds": args.seconds, "summary": summary, "samples": samples})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
