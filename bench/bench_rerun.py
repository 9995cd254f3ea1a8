"""How long ``mime-fast build`` takes to start again on a finished corpus of 40,000 clips, where
every clip is already complete and skipped, without building 40,000 clips: a few tiny real clips
are built once (synthetic 320x240 clips with their landmarks), then a 40k-clip corpus is made of
them -- an input folder of hard links to those sources (no landmarks beside them, as a DFEW/MAFW
folder run with automatic detection), an output folder of hard links to their outputs under the
new clip ids (same bytes, sizes and modification times, so each file matches its row as a real
rerun finds it) and a compacted manifest (jsonl + parquet) of their rows under those ids.  The
rerun is the real command (``python -m mime_fast.cli build IN --out OUT``, stderr a pipe: the line
monitor), in a fresh process, timed from outside (interpreter start and imports included, and
measured apart: ``import_s``), warm page cache, medians of ``--repeats``.  One more run under
cProfile says where the time goes (cumulative seconds of the steps of a rerun, and the top
functions by own time; cProfile sees only the main thread: the outputs' stats, made on
``VERIFY_THREADS`` threads, show as the main thread's wait in ``_completed``), and each rerun's
peak memory is recorded.  ``--reference`` is the ``python/`` folder of another checkout (its
compiled core in place): its reruns of the same corpus are interleaved with this checkout's.
Writes bench/results/rerun-cpu.json.

    nice -n 10 python bench/bench_rerun.py [--clips 40000] [--repeats 3] [--reference /tmp/ref/python --label main]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import SHARED_MACHINE_NOTE, save

HERE = Path(__file__).resolve().parent
#: The quality gate lowered for the tiny seed clips (the reruns pass the same settings).
SMALL = ["--min-height", "0", "--min-duration", "0"]
#: The steps of a rerun whose cumulative time the profile reports (function names; a version that
#: lacks one reports none for it).
STEPS = {
    "find_inputs": "find_inputs",
    "read_rows": "read_rows",
    "read_manifest": "read_manifest",
    "compact": "compact",
    "check_same_settings": "check_same_settings",
    "clips_of_dead_runs": "clips_of_dead_runs",
    "clean_stale_temporaries": "clean_stale_temporaries",
    "completeness (_completed)": "_completed",
    "write_compacted": "write_compacted",
    "run_corpus": "run_corpus",
}


def make_seeds(root: Path, count: int, env: dict) -> tuple[Path, Path]:
    """``count`` tiny clips (0.6 s, 320x240, their landmarks beside them) built into ``root/seed_out``."""
    from mime_fast.samples import make_clip

    seed_in, seed_out = root / "seed_in", root / "seed_out"
    for k in range(count):
        make_clip(seed_in / f"seed{k}.mp4", duration=0.6, fps=25, size=(320, 240), seed=k + 1)
    subprocess.run([sys.executable, "-m", "mime_fast.cli", "build", str(seed_in), "--out", str(seed_out), "--quiet",
                    *SMALL], env=env, check=True)
    return seed_in, seed_out


def synthesise(root: Path, seed_in: Path, seed_out: Path, clips: int) -> tuple[Path, Path, int]:
    """The 40k-clip corpus: ``root/in`` (``clips`` hard links to the seed sources) and ``root/out``
    (hard links to the seed outputs under the new ids, and the manifest of their rows).  Returns
    the folders and the number of output files."""
    from mime_fast.manifest import compact, read_rows, write_compacted

    seeds: dict[str, list[dict]] = {}
    for r in read_rows(seed_out):
        seeds.setdefault(r["clip_id"], []).append(r)
    order = sorted(seeds)
    inp, out = root / "in", root / "out"
    inp.mkdir()
    rows, files = [], 0
    for i in range(clips):
        seed = order[i % len(order)]
        clip = f"clip{i:05d}"
        src = inp / f"{clip}.mp4"
        os.link(seed_in / f"{seed}.mp4", src)
        for r in seeds[seed]:
            r = dict(r, clip_id=clip, source=str(src))
            for key in ("path", "clear_path"):
                if r[key]:
                    r[key] = r[key].replace(f"/{seed}.", f"/{clip}.")
            if r["status"] == "ok" and r["path"]:
                dst = out / r["path"]
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.link(seed_out / seeds[seed][[x["subset"] for x in seeds[seed]].index(r["subset"])]["path"], dst)
                files += 1
            rows.append(r)
    write_compacted(out, compact(rows))  # a finished run's manifest, jsonl and parquet
    return inp, out, files


def rerun(python_path: str, inp: Path, out: Path, profile: Path | None = None) -> tuple[float, str, float]:
    """Seconds of one rerun in a fresh process (from outside), what it printed, and its peak
    resident memory (MiB)."""
    env = {**os.environ, "PYTHONPATH": python_path}
    cmd = [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else []), "-m", "mime_fast.cli", "build",
           str(inp), "--out", str(out), *SMALL]
    with tempfile.TemporaryFile("w+") as said, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=said, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        said.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"rerun failed ({proc.returncode}): {err.read()[-2000:]}")
        return seconds, said.read(), usage.ru_maxrss / 1024


def import_seconds(python_path: str) -> float:
    env = {**os.environ, "PYTHONPATH": python_path}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mime_fast.cli"], env=env, check=True)
    return time.perf_counter() - t


def profile_summary(path: Path) -> dict:
    """Cumulative seconds of :data:`STEPS` and the 15 functions with the most own time."""
    st = pstats.Stats(str(path))
    cumulative: dict[str, float] = {}
    for (filename, _, name), (_, _, _, ct, _) in st.stats.items():  # type: ignore[attr-defined]
        for label, fn in STEPS.items():
            if name == fn and "mime_fast" in filename:
                cumulative[label] = round(cumulative.get(label, 0.0) + ct, 3)
    top = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]  # type: ignore[attr-defined]
    return {
        "total_s": round(st.total_tt, 3),  # type: ignore[attr-defined]
        "steps_cumulative_s": cumulative,
        "top_own_time": [{"function": f"{Path(f).name}:{line}({name})", "calls": nc, "own_s": round(tt, 3),
                          "cumulative_s": round(ct, 3)}
                         for (f, line, name), (_, nc, tt, ct, _) in top],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=40_000)
    ap.add_argument("--seeds", type=int, default=4, help="real clips built once, repeated under new ids")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", type=Path, default=None, help="another checkout's python/ folder")
    ap.add_argument("--label", default="reference")
    ap.add_argument("--work", type=Path, default=None, help="folder for the corpus (default: a temporary one)")
    args = ap.parse_args()
    this = str((HERE.parent / "python").resolve())
    versions = {"this": this}
    if args.reference is not None:
        versions = {args.label: str(args.reference.resolve()), **versions}
    with tempfile.TemporaryDirectory(dir=args.work) as tmp_name:
        root = Path(tmp_name)
        t = time.perf_counter()
        seed_in, seed_out = make_seeds(root, args.seeds, {**os.environ, "PYTHONPATH": this})
        inp, out, files = synthesise(root, seed_in, seed_out, args.clips)
        manifest_mb = (out / "manifest.jsonl").stat().st_size / 2**20
        print(f"corpus: {args.clips} clips, {files} output files, manifest {manifest_mb:.1f} MiB "
              f"(made in {time.perf_counter() - t:.0f} s)", flush=True)
        runs: dict[str, list[float]] = {v: [] for v in versions}
        imports: dict[str, list[float]] = {v: [] for v in versions}
        peaks: dict[str, list[float]] = {v: [] for v in versions}
        for v, path in versions.items():  # a warm-up each (page cache, .pyc)
            _, said, _ = rerun(path, inp, out)
            m = re.search(r"already complete (\d+)", said)
            if not m or int(m.group(1)) != args.clips:
                raise RuntimeError(f"{v}: not every clip was skipped: {said.strip()}")
        for rep in range(args.repeats):
            for v, path in versions.items():
                imports[v].append(import_seconds(path))
                seconds, _, peak = rerun(path, inp, out)
                runs[v].append(seconds)
                peaks[v].append(peak)
                print(f"{v} repeat {rep}: {seconds:.2f} s, peak RSS {peak:.0f} MiB", flush=True)
        profiles = {}
        for v, path in versions.items():
            prof = root / f"{v}.prof"
            rerun(path, inp, out, profile=prof)
            profiles[v] = profile_summary(prof)
            print(f"{v} profile: " + ", ".join(f"{k} {s:.2f} s" for k, s in profiles[v]["steps_cumulative_s"].items()),
                  flush=True)
        summary = {}
        for v in versions:
            med = statistics.median(runs[v])
            imp = statistics.median(imports[v])
            summary[v] = {"median_s": round(med, 3), "import_s": round(imp, 3),
                          "per_clip_us": round((med - imp) / args.clips * 1e6, 1),
                          "runs_s": [round(s, 3) for s in runs[v]],
                          "peak_rss_mib": round(statistics.median(peaks[v]))}
        if args.reference is not None:
            summary["speedup"] = round(summary[args.label]["median_s"] / summary["this"]["median_s"], 2)
        print(json.dumps(summary, indent=2))
        path = save("rerun", {
            "note": SHARED_MACHINE_NOTE + "; warm page cache; hard-linked outputs (one inode per seed output)",
            "clips": args.clips, "output_files": files, "manifest_mib": round(manifest_mb, 1),
            "reference": args.label if args.reference is not None else None,
            "summary": summary, "profiles": profiles,
        })
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
