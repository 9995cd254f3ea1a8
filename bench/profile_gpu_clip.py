"""Where one clip's time goes with ``device="cuda"`` (a profiling aid for the GPU machine): the
detection pass's stages (timers of the tracker: detector, mesh, embedder, persons, shots), the
torch models called alone on the clip's frames, the CUDA runtime calls of the detection pass per
source frame (``torch.profiler``: kernel launches, graph replays, copies, synchronisations) with
the face networks' CUDA graphs (:mod:`mime_fast.detect.cuda_graphs`), and a cProfile of
``build_subsets`` with the encoders replaced by a null writer.  Prints tables; no JSON.

    python bench/profile_gpu_clip.py CLIP [--device cuda] [--frames 90]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("clip", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--frames", type=int, default=90)
    args = ap.parse_args()

    from mime_fast.detect.stacks import default_stack
    from mime_fast.subject import SubjectDetection
    from mime_fast.media import iter_display_frames, probe

    info = probe(args.clip)
    frames = [rgb for _, _, rgb in iter_display_frames(args.clip, info)][: args.frames]
    stack = default_stack(args.device)
    print(f"{args.clip.name}: {info.width}x{info.height}, {len(frames)} frames, stack {stack.name}")

    def sync():
        if args.device == "cuda":
            import torch

            torch.cuda.synchronize()

    # the models alone, per call
    faces = stack.detector.detect(frames[0])
    rows = []
    for name, fn in [("detector (full frame)", lambda f: stack.detector.detect(f)),
                     ("mesh (faces of frame 0)", lambda f: stack.landmarks.landmarks(f, faces)),
                     ("embedder (faces of frame 0)", lambda f: stack.embedder.embed(f, faces)),
                     ("persons", lambda f: stack.persons.detect(f) if stack.persons is not None else None)]:
        for f in frames[:3]:
            fn(f)
        sync()
        timed = frames[:30]
        t = time.perf_counter()
        for f in timed:
            fn(f)
        sync()
        rows.append((name, (time.perf_counter() - t) / len(timed) * 1000))
    print(f"faces in frame 0: {len(faces)}")
    for name, ms in rows:
        print(f"  {name:30s} {ms:8.2f} ms/call")

    # the detection pass, stage by stage
    timers: dict = {}
    det = SubjectDetection(info, timers=timers, device=args.device)
    t = time.perf_counter()
    for f in frames:
        det.feed(f)
    det.result()
    sync()
    total = time.perf_counter() - t
    print(f"detection pass: {len(frames) / total:.1f} frames/s; stages (s): "
          + ", ".join(f"{k} {v:.2f}" for k, v in sorted(timers.items(), key=lambda kv: -kv[1])))

    # the detection pass again, its CUDA runtime calls counted
    if args.device == "cuda":
        import torch
        from torch.profiler import ProfilerActivity, profile

        from mime_fast.detect.cuda_graphs import graph_stats

        det = SubjectDetection(info, device=args.device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for f in frames:
                det.feed(f)
            det.result()
            torch.cuda.synchronize()
        calls: dict = {}
        for e in prof.key_averages():
            if e.key.startswith(("cuda", "cu")) and not e.key.startswith("cudnn"):
                calls[e.key] = calls.get(e.key, 0) + e.count
        print(f"CUDA runtime calls per source frame ({len(frames)} frames):")
        for k, n in sorted(calls.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {k:40s} {n / len(frames):8.1f}")
        for role, st in graph_stats(stack).items():
            print(f"  CUDA graphs, {role}: {st['replays']} replays of {st['calls']} calls, graphs {st['graphs']}, "
                  f"eager {st['eager'] or 'none'}")

    # build_subsets without encoders, profiled
    import mime_fast.subsets as subsets
    from _harness import NullWriter

    subsets.Mp4Writer = NullWriter
    pr = cProfile.Profile()
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        pr.enable()
        r = subsets.build_subsets(args.clip, d, subsets=["FM", "FDM", "FSM", "VMM"], device=args.device,
                                  fm_copy=False, min_height=0)
        pr.disable()
        dt = time.perf_counter() - t
    print(f"build_subsets (no encoders): {r.source_frames / dt:.1f} source fps, decoder {r.decoder}")
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print("\n".join(s.getvalue().splitlines()[:40]))
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(30)
    print("\n".join(s.getvalue().splitlines()[:45]))


if __name__ == "__main__":
    main()
