"""The host's own work per source frame, the networks and the encoders left out: what bounds a
process of the GPU path once its models run on the device (issue 12's no-encode target).

Per clip, in a fresh process: ``build_subsets`` writes FM, FDM, FSM and VMM with every encoder
replaced by a writer that drops the frames (``_harness.NullWriter``) and automatic detection
with the offline CPU stack, once with the models running (their answers recorded,
``_replay.py``), then ``--repeats`` times with the models answering instantly from that record.
The replayed runs' CPU time (all the process's threads: ``time.process_time``) is the host work:
decode, the detector's downscale, tracking, shots, masks and blur, frames handed to the writers.
Reported per source frame, with the decode alone (the pipeline's decode passes, PyAV: two, or
one where the detection pass keeps its frames for the face pass, ``ClipResult.decodes``)
measured apart and subtracted, and the rate one core would reach on the rest.  Each replay checks
it made every recorded call and tracked as the recording did.

Not the GPU path itself: there NVDEC decodes, the downscale, the shot thumbnail and the blur run
on the device, and the networks cost their launches (CUDA graphs); the tracking, the selection,
the masks' geometry and the per-frame Python are the same code.

``--reference DIR``: the same measurement with another checkout's ``python/`` folder (its
compiled core in place), side by side in the same run, the two interleaved; the JSON then holds
both and the ratios.  Writes bench/results/host_overhead-cpu.json.

    python bench/bench_host_overhead.py [--repeats 5] [--reference /tmp/ref/python --label a66e3a9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NO_ENCODE = {"subsets": ["FM", "FDM", "FSM", "VMM"], "fm_copy": False, "min_height": 0}


# ------------------------------------------------------------------------------------ in the child

def _tracking(r) -> dict:
    s = r.tracking
    return {k: v for k, v in vars(s).items() if isinstance(v, (int, float, str))} if s is not None else {}


#: Host steps that the GPU path runs on the device (NVDEC frames, the torch stack on CUDA):
#: ``(module, function, what)``; timed apart in the replays (CPU time of the calling thread).
DEVICE_SIDE = (("mime_fast.ops", "blur_hull_yuv420", "mask+blur"), ("mime_fast.ops", "blur_in_mask", "mask+blur"),
               ("mime_fast.ops", "hull_mask", "mask+blur"),
               ("mime_fast.subject.face_tracks", "_downscale", "detector downscale"),
               ("mime_fast.subject.shots", "_features", "shot features"))


def _time_device_side() -> dict[str, float]:
    """Wrap the :data:`DEVICE_SIDE` functions (those present in this version) to add their time to
    the returned dict."""
    import importlib

    seconds: dict[str, float] = {}
    for module, name, what in DEVICE_SIDE:
        mod = importlib.import_module(module)
        fn = getattr(mod, name, None)
        if fn is None:
            continue
        seconds[what] = 0.0

        def timed(*a, _fn=fn, _what=what, **k):
            t = time.thread_time()
            try:
                return _fn(*a, **k)
            finally:
                seconds[_what] += time.thread_time() - t
        setattr(mod, name, timed)
    return seconds


#: The modules that may hold ``default_stack`` (its home first; mime_fast.landmarks in older versions),
#: and those that import it by name: the replay's stack is set in each this version has.
_STACK_HOMES = ("mime_fast.detect.stacks", "mime_fast.landmarks", "mime_fast.subject.detection")


def _stack_homes() -> list:
    import importlib

    homes = []
    for name in _STACK_HOMES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "default_stack"):
            homes.append(module)
    return homes


def child(clip: Path, repeats: int) -> dict:
    """One clip measured in this process (the ``mime_fast`` on ``sys.path``)."""
    import cv2

    import mime_fast
    import mime_fast.subsets as subsets
    from _harness import NullWriter
    from _replay import recording, replaying, unanswered
    from mime_fast.media import iter_display_frames, probe

    subsets.Mp4Writer = NullWriter
    # one thread for the core and OpenCV: each operator's CPU time is then its calling thread's
    mime_fast.set_num_threads(1)
    cv2.setNumThreads(1)
    moved = _time_device_side()
    homes = _stack_homes()
    stack = homes[0].default_stack("cpu")
    info = probe(clip)

    def run(st) -> tuple[object, float, float, float]:
        """build_subsets with ``st``: the result, CPU s, wall s, CPU s of its first pass."""
        for home in homes:
            home.default_stack = lambda device="cpu": st
        marks: list[float] = []
        with tempfile.TemporaryDirectory() as d:
            c0, w0 = time.process_time(), time.perf_counter()
            r = subsets.build_subsets(clip, d, progress=lambda n: marks.append(time.process_time()), **NO_ENCODE)
            c1, w1 = time.process_time(), time.perf_counter()
        n = r.source_frames
        return r, c1 - c0, w1 - w0, (marks[n - 1] - c0) if len(marks) >= n else c1 - c0

    rec, log = recording(stack)
    r0, cpu0, wall0, _ = run(rec)
    n = r0.source_frames
    tracking = _tracking(r0)

    passes = getattr(r0, "decodes", 2)  # (a version before ClipResult.decodes decoded twice)

    def decode_only() -> float:
        c0 = time.process_time()
        for _ in iter_display_frames(clip, info, rgb=True, keep_yuv=True):  # the pass that detects
            pass
        if passes > 1:
            for _ in iter_display_frames(clip, info, rgb=False, keep_yuv=True):  # the face pass
                pass
        return time.process_time() - c0

    replays, decodes = [], []
    for _ in range(repeats):
        st, queues = replaying(stack, log)
        for k in moved:
            moved[k] = 0.0
        r, cpu, wall, first = run(st)
        left = unanswered(queues)
        if left or _tracking(r) != tracking:
            raise RuntimeError(f"{clip.name}: the replay did not track as the recording (left {left})")
        replays.append({"cpu_s": cpu, "wall_s": wall, "pass1_cpu_s": first, "device_side_cpu_s": dict(moved)})
        decodes.append(decode_only())
    return {"mime_fast": str(Path(mime_fast.__file__).parent), "source_frames": n, "decodes": passes,
            "size": [info.width, info.height], "tracking": tracking,
            "recorded": {"cpu_s": cpu0, "wall_s": wall0, "model_s": log.seconds, "model_calls": log.calls},
            "replays": replays, "decode_cpu_s": decodes}


# ------------------------------------------------------------------------------------ the driver

def _measure(clip: Path, repeats: int, python_dir: Path | None) -> dict:
    env = dict(os.environ)
    if python_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_dir), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(clip), "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{clip.name}: the measuring process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(m: dict) -> dict:
    """Per source frame, medians over the replays (ms)."""
    n = m["source_frames"]
    med = statistics.median
    host = med(r["cpu_s"] for r in m["replays"]) / n * 1e3
    decode = med(m["decode_cpu_s"]) / n * 1e3
    rest = max(host - decode, 1e-9)
    kinds = m["replays"][0]["device_side_cpu_s"]
    device = {k: med(r["device_side_cpu_s"][k] for r in m["replays"]) / n * 1e3 for k in kinds}
    stays = max(rest - sum(device.values()), 1e-9)
    return {"source_frames": n, "size": m["size"], "decodes": m.get("decodes", 2),
            "models_ms": m["recorded"]["model_s"] / n * 1e3, "model_calls_per_frame": m["recorded"]["model_calls"] / n,
            "host_cpu_ms": host, "host_wall_ms": med(r["wall_s"] for r in m["replays"]) / n * 1e3,
            "pass1_cpu_ms": med(r["pass1_cpu_s"] for r in m["replays"]) / n * 1e3,
            "pass2_cpu_ms": med(r["cpu_s"] - r["pass1_cpu_s"] for r in m["replays"]) / n * 1e3,
            "decode_cpu_ms": decode, "host_minus_decode_cpu_ms": rest,
            "one_core_fps_without_decode": 1e3 / rest,
            "device_side_cpu_ms": device, "stays_on_host_cpu_ms": stays, "one_core_fps_host_side": 1e3 / stays,
            "tracking": m["tracking"]}


def corpus(tmp: Path, media: Path, seconds: float) -> dict[str, Path]:
    from _harness import REAL_CLIPS, scaled_copy

    from mime_fast.samples import make_clip

    clips: dict[str, Path] = {}
    for name in REAL_CLIPS:
        src = media / f"{name}.mp4"
        if src.exists():
            clips[f"{name}@720p"] = scaled_copy(src, tmp / f"{name}-720.mp4", 720, fps=30)
    crowd = media / "crowd_1080p.mp4"
    if crowd.exists():
        clips["crowd_1080p@native"] = crowd
    clips["synthetic@720p"] = make_clip(tmp / "synthetic.mp4", duration=seconds, fps=30, size=(1280, 720),
                                        audio=True, save_npz=False).path
    return clips


def main() -> None:
    from _harness import media_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--reference", type=Path, help="another checkout's python/ folder, measured side by side")
    ap.add_argument("--label", default="reference")
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the synthetic clip")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.repeats)))
        return

    from _harness import save

    contenders = {"this": HERE.parent / "python"}
    if args.reference is not None:
        contenders[args.label] = args.reference.resolve()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        for name, clip in corpus(Path(d), args.media, args.seconds).items():
            row: dict = {}
            for who, path in contenders.items():  # interleaved: one clip, each version, then the next clip
                row[who] = summary(_measure(clip, args.repeats, path))
                s = row[who]
                print(f"{name:28s} {who:10s} host {s['host_cpu_ms']:6.2f} ms/frame (decode {s['decode_cpu_ms']:5.2f}, "
                      f"rest {s['host_minus_decode_cpu_ms']:5.2f}, of which stays on the host with a GPU "
                      f"{s['stays_on_host_cpu_ms']:5.2f}); models {s['models_ms']:6.2f} ms/frame", flush=True)
            if args.reference is not None:
                a, b = row["this"], row[args.label]
                row["ratio_rest_vs_reference"] = a["host_minus_decode_cpu_ms"] / b["host_minus_decode_cpu_ms"]
                row["ratio_host_vs_reference"] = a["host_cpu_ms"] / b["host_cpu_ms"]
                row["ratio_host_side_vs_reference"] = a["stays_on_host_cpu_ms"] / b["stays_on_host_cpu_ms"]
                if a["tracking"] != b["tracking"]:
                    row["tracking_differs"] = True
            results[name] = row
    payload: dict = {"repeats": args.repeats, "contenders": {k: str(v) for k, v in contenders.items()},
                     "no_encode_settings": NO_ENCODE, "clips": results}
    if args.reference is not None:
        ratios = [r["ratio_rest_vs_reference"] for r in results.values()]
        payload["median_ratio_rest_vs_reference"] = statistics.median(ratios)
        payload["median_ratio_host_side_vs_reference"] = statistics.median(
            r["ratio_host_side_vs_reference"] for r in results.values())
    print(f"wrote {save('host_overhead', payload)}")


if __name__ == "__main__":
    main()
