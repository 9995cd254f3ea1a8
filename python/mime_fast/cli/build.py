"""``mime-fast build``: a corpus of clips into the seven subsets and the manifest
(:func:`mime_fast.corpus.run_corpus`).  Every setting and input is checked before any clip starts."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..corpus import Inputs, SettingsChanged, check_settings, find_inputs, run_corpus
from ..corpus.progress import LineMonitor, TqdmMonitor
from ..devices import auto_workers
from ..manifest import utf8_text
from ..spec import CODES
from ..subsets import _codes
from .errors import RunError, UsageError, first_few
from .flags import add_settings, as_option, options

__all__ = ["add", "run"]


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def run(args: argparse.Namespace) -> int:
    # Every setting is checked here, before anything is read or written; the missing arguments first,
    # all of them at once (INPUT is optional for argparse so that both can be named in one line).
    missing = (["INPUT"] if not args.inputs else []) + (["--out"] if args.out is None and not args.list_skipped else [])
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (see 'mime-fast build --help')")
    try:
        codes = _codes([s.strip() for s in args.subsets.split(",") if s.strip()])
    except ValueError as exc:
        raise UsageError(f"--subsets: {exc}") from None
    if args.workers is None:
        args.workers = auto_workers(args.device)
    try:
        settings = check_settings(workers=args.workers, ray_cpus_per_clip=args.ray_cpus_per_clip,
                                  clips_per_process=args.clips_per_process, clip_timeout=args.clip_timeout,
                                  use_ray=args.ray, **options(args))
    except (ValueError, TypeError) as exc:
        raise UsageError(as_option(str(exc), getattr(args, "argv", []))) from None
    except RuntimeError as exc:  # e.g. --device cuda where CUDA is unavailable
        raise RunError(str(exc)) from None
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    try:
        inputs = find_inputs(args.inputs, exclude=args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.list_skipped:
        for p in inputs.skipped:  # a name that is not UTF-8 as the manifest writes it (utf8_text)
            print(utf8_text(str(p)))
        for p in inputs.builds:
            print(utf8_text(f"{p}{os.sep} (a mime-fast output folder: its files are outputs, not inputs)"))
        for p, why in inputs.links + inputs.unreadable:
            print(utf8_text(f"{p} ({why})"))
        for p in inputs.in_out:
            print(utf8_text(f"{p} (in the output folder {args.out}: not an input; move it out of there, or build "
                            "into another --out, to build it)"))
        return 0
    if not inputs.clips:
        skipped = f" (skipped {_skipped(inputs)}: --list-skipped)" if _skipped(inputs) else ""
        raise UsageError(f"no clips found in {', '.join(str(p) for p in args.inputs)}{skipped}")

    if args.quiet:
        monitor = LineMonitor(errors_only=True)
    elif stderr_is_terminal():
        monitor = TqdmMonitor()
    else:
        monitor = LineMonitor()
    try:
        summary = run_corpus(inputs.clips, args.out, subsets=codes, monitor=monitor, workers=args.workers,
                             clips_per_process=args.clips_per_process, use_ray=args.ray,
                             detect_ahead=args.detect_ahead, ray_address=args.ray_address,
                             ray_cpus_per_clip=args.ray_cpus_per_clip, clip_timeout=args.clip_timeout,
                             verify=args.verify, settings=settings)
    except SettingsChanged as exc:  # --out built with other settings: refused before anything is written
        raise UsageError(str(exc)) from None
    if not args.quiet:
        print(f"done {len(summary.done)} (no subject {len(summary.no_subject)}), already complete "
              f"{len(summary.skipped)}, failed {len(summary.failed)} in {summary.elapsed_s:.1f} s; "
              f"manifest: {args.out / 'manifest.jsonl'}")
        for clip_id, reason in summary.failed.items():
            print(f"  failed {clip_id}: {reason}")
        if summary.no_audio:  # built, but VMM (the audio over black frames) cannot exist without audio
            print(f"{len(summary.no_audio)} clip(s) without audio, so without VMM (its rows: skipped, no audio): "
                  f"{first_few(summary.no_audio)}")
        if _skipped(inputs):
            print(f"skipped {_skipped(inputs)} (list them: the same command with --list-skipped)")
    return 0 if summary.ok else 1


def _skipped(inputs: Inputs) -> str:
    """What the input folders held that is not a clip: "3 non-video files, 1 mime-fast output folder,
    1 broken link and 2 videos in the output folder" ("" for nothing)."""
    def count(n: int, what: str, where: str = "") -> str:
        return f"{n} {what}{'s' if n != 1 else ''}{where}"

    parts = [count(n, *what) for n, what in ((len(inputs.skipped), ("non-video file",)),
                                             (len(inputs.builds), ("mime-fast output folder",)),
                                             (len(inputs.links), ("broken link",)),
                                             (len(inputs.unreadable), ("unreadable item",)),
                                             (len(inputs.in_out), ("video", " in the output folder"))) if n]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def add(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "build", parents=[common], help="a corpus: clips, folders or CSV/JSONL lists -> subsets + manifest",
        description="Build the MIME subsets of a corpus into DIR/<SUBSET>/<clip_id>.mp4, DIR/audio/<clip_id>.wav "
                    "and the manifest DIR/manifest.jsonl (+ .parquet). Clips already complete in DIR are skipped, "
                    "so rerunning an interrupted or failed build resumes it.",
        epilog="Inputs: video files; folders, searched recursively for videos (a <clip>.npz or <clip>.json "
               "beside a clip is its landmarks; linked folders are followed; other files, folders holding a "
               "mime-fast build, broken links (a missing target, a loop) and what cannot be read are skipped and "
               "counted: "
               "--list-skipped lists them); "
               ".csv/.jsonl lists with the columns path, clip_id, emotion, dataset, landmarks. Progress: bars on "
               "a terminal, else one line per clip; --quiet: errors only. Exit status: 0 every clip built, 1 a "
               "clip failed or the run could not go on, 2 usage error, 130 interrupted (Ctrl-C: rerun to "
               "resume).")
    ap.add_argument("inputs", nargs="*", type=Path, metavar="INPUT",
                    help="video file, folder of clips (recursive) or .csv/.jsonl list of clips (one or more: "
                         "required)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (required)")
    ap.add_argument("--subsets", default=",".join(CODES), metavar="CODES",
                    help="comma-separated subset codes (default: all seven)")
    ap.add_argument("--no-detect-ahead", dest="detect_ahead", action="store_false",
                    help="do not detect the next clip's subject while the current clip encodes (one worker)")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="clips built at once on this machine (processes; default 1, with --device cuda one per "
                         "two cores, at most 8 per GPU: the GPUs share them)")
    ap.add_argument("--clips-per-process", type=int, default=1, metavar="K",
                    help="clips of --workers built on threads of one process (default 1); with --device cuda "
                         "they share the GPU's models, their calls batched across them (--workers / GPUs: one "
                         "process per GPU)")
    ap.add_argument("--clip-timeout", type=float, default=600.0, metavar="S",
                    help="a clip that makes no progress for S seconds (a hung decoder or filesystem) is stopped: "
                         "with --workers (or --ray) its worker process is killed and the clip fails; with one worker "
                         "the run ends (exit status 3) and the rerun builds that clip apart (default 600; 0: never)")
    ap.add_argument("--verify", action="store_true",
                    help="on a rerun, hash every output of the clips built before (default: only files whose size "
                         "or modification time differs from the manifest's are read)")
    ap.add_argument("--ray", action="store_true", help="distribute clips with Ray Data over a Ray cluster")
    ap.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="Ray cluster address (default: ray.init()'s choice)")
    ap.add_argument("--ray-cpus-per-clip", type=float, default=1.0, metavar="N", help="CPUs each clip task reserves")
    ap.add_argument("--list-skipped", action="store_true",
                    help="list the files of the input folders that are not videos, the mime-fast output "
                         "folders, the broken links and what cannot be read in them (skipped), and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    add_settings(ap)
    ap.set_defaults(run=run)
