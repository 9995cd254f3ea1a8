"""``mime-fast curate``: clips chosen from corpus releases into ``selected.csv`` (a list ``mime-fast
build`` reads), ``excluded.csv``, ``report.md`` and ``balance.png`` (:func:`mime_fast.curate.curate`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..curate import CurateOptions, UnknownLayout, curate, resolve_roots
from .errors import UsageError

__all__ = ["add", "run"]


def _dataset(text: str) -> tuple[str, Path]:
    name, sep, root = text.partition("=")
    name = name.strip()
    if not sep or not name or not root.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=ROOT (e.g. DFEW=/data/dfew_release)")
    if any(ch in name for ch in "/\\") or name.startswith(".") or any(ch.isspace() for ch in name):
        raise argparse.ArgumentTypeError(f"{name!r}: a dataset name prefixes its clip ids, so it holds no path "
                                         "separator or space and does not start with a dot")
    return name, Path(root.strip())


def run(args: argparse.Namespace) -> int:
    try:
        options = CurateOptions(per_class=args.per_class, seed=args.seed, min_agreement=args.min_agreement,
                                min_height=args.min_height, min_duration=args.min_duration,
                                watermarks=args.watermarks, workers=args.workers, progress=not args.quiet)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).split()[0].replace('_', '-')}: {exc}") from None
    if not args.roots and not args.dataset:
        raise UsageError("no corpus given: ROOT... or --dataset NAME=ROOT (see 'mime-fast curate --help')")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    try:
        roots = resolve_roots(args.roots, args.dataset)
    except UnknownLayout as exc:
        raise UsageError(str(exc)) from None
    try:
        result = curate(roots, args.out, options)
    except (UnknownLayout, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not args.quiet:
        excluded = len(result.clips) - len(result.selected)
        print(f"selected {len(result.selected)} of {len(result.clips)} clips ({excluded} excluded, reasons in "
              f"{result.outputs['excluded.csv']}); report: {result.outputs['report.md']}")
        for emotion, n in sorted(result.shortfall.items()):
            print(f"  {emotion}: {n} short of --per-class {options.per_class}", file=sys.stdout)
    return 0


def add(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "curate", parents=[common], help="corpus releases (DFEW, MAFW, FERV39k, CAER) -> a balanced list of clips",
        description="Choose MIME's clips from corpus releases, each recognised by its layout: labels mapped to the "
                    "seven emotions, ambiguous labels, low resolutions, severe watermarks and duplicates excluded "
                    "with their reasons, and a balanced draw. Writes DIR/selected.csv (path, clip_id, emotion, "
                    "dataset: give it to 'mime-fast build'), DIR/excluded.csv (path, dataset, reason), "
                    "DIR/report.md and DIR/balance.png; DIR/probes.jsonl caches the probes, so a rerun is quick. "
                    "Nothing of a corpus is written.",
        epilog="Layouts: DFEW (Clip/original/, EmoLabel_DataSplit/, Annotation/annotation.xlsx), MAFW (data/clips/, "
               "'Train & Test Set/', Labels/), FERV39k (0_7_LabelClips/, 4_setups/), CAER ({train,validation,test}/"
               "<Emotion>/). Exit status: 0 done, 1 the run could not go on, 2 usage error (a root that matches no "
               "layout, a bad option). See docs/curate.md.")
    ap.add_argument("roots", nargs="*", type=Path, metavar="ROOT", help="a corpus release's folder")
    ap.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (outside every ROOT)")
    ap.add_argument("--dataset", action="append", type=_dataset, default=[], metavar="NAME=ROOT",
                    help="read ROOT as the layout NAME (DFEW, MAFW, FERV39k, CAER) where it is not recognised, or, "
                         "for another NAME, as <Emotion>/ folders of a corpus called NAME (repeatable)")
    ap.add_argument("--per-class", type=int, default=None, metavar="N",
                    help="clips drawn per emotion, stratified by corpus (default: every clip that passes)")
    ap.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the draw (default 0)")
    ap.add_argument("--min-agreement", type=float, default=0.5, metavar="A",
                    help="share of annotators a label needs where votes exist (default 0.5)")
    ap.add_argument("--min-height", type=int, default=CurateOptions.min_height, metavar="PX",
                    help="shorter displayed side a clip needs, as mime-fast build's gate (default 480)")
    ap.add_argument("--min-duration", type=float, default=CurateOptions.min_duration, metavar="S",
                    help="seconds of video a clip needs, as mime-fast build's gate (default 0.5)")
    ap.add_argument("--watermarks", choices=("drop", "report"), default="drop",
                    help="drop clips with a severe watermark (default) or only report them")
    ap.add_argument("--workers", type=int, default=1, metavar="N", help="clips probed at once (processes; default 1)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    ap.set_defaults(run=run)
