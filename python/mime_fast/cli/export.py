"""``mime-fast export``: a built corpus and its Chain-of-Emotion as a Hugging Face ``datasets``
folder or an lmms-eval task folder (:func:`mime_fast.export.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..export import FORMATS, ExportError, ExportOptions, export
from .errors import UsageError

__all__ = ["add", "run"]


def run(args: argparse.Namespace) -> int:
    options = ExportOptions(format=args.format, coe_accepted=args.coe_accepted, link=args.link)
    shown = -1

    def progress(done: int, total: int) -> None:
        nonlocal shown
        if not args.quiet and sys.stderr.isatty() and (done == total or done * 10 // total != shown):
            shown = done * 10 // total
            print(f"\rplacing media files: {done}/{total}", end="\n" if done == total else "", file=sys.stderr,
                  flush=True)

    try:
        res = export(args.dir, args.out, options, progress=progress)
    except ExportError as exc:
        raise UsageError(str(exc)) from None
    p = res.placed
    counts = ", ".join(f"{code} {n}" for code, n in res.counts.items())
    print(f"exported {sum(res.counts.values())} samples ({counts}) to {res.dest} as {res.format}")
    print(f"media files: {p.copied} copied, {p.linked} linked, {p.kept} already there"
          + (f"; {res.removed} no longer part of the export removed" if res.removed else ""))
    for note in res.notes:
        print(f"note: {note}")
    return 0


def add(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "export", parents=[common], help="a built corpus as a Hugging Face dataset or lmms-eval tasks",
        description="Export a built corpus (mime-fast build) and its Chain-of-Emotion (mime-fast coe, where "
                    "DIR/coe.jsonl exists) to a release format. hf: a Hugging Face datasets folder, one config per "
                    "subset (FM ... AMM, split 'test'): each subset's videos and metadata.jsonl (file_name, "
                    "clip_id, label, dataset, duration, has_audio, kernel, blur_level and the Chain-of-Emotion's "
                    "fields) and a dataset card (README.md: the subsets, the build settings, the counts); "
                    "datasets.load_dataset(DEST, 'FM') loads it. lmms-eval: a task folder, the group 'mime' and a "
                    "task per subset (mime_fm ... mime_amm: the mp4, and the 16 kHz wav where the subset has audio; "
                    "mime-fast eval's recognition prompt; accuracy, UAR and WAF), for lmms-eval --include_path DEST "
                    "--tasks mime. A rerun into the same DEST completes a partial export and brings it up to date.",
        epilog="Exit status: 0 exported, 1 the export could not go on (a file could not be read or written: rerun "
               "to complete it), 2 a usage error (DIR not a built corpus, an output missing, DEST inside DIR or "
               "not an export of DIR, --coe-accepted without coe.jsonl).")
    ap.add_argument("dir", type=Path, metavar="DIR", help="the output folder of mime-fast build")
    ap.add_argument("--format", required=True, choices=FORMATS, help="hf (Hugging Face datasets) or lmms-eval")
    ap.add_argument("--out", required=True, type=Path, metavar="DEST",
                    help="the folder to write (new, empty, or an earlier export of DIR in this format; not inside "
                         "DIR)")
    ap.add_argument("--coe-accepted", action="store_true",
                    help="only the samples whose Chain-of-Emotion was accepted, per subset (MIME's final benchmark; "
                         "needs DIR/coe.jsonl)")
    ap.add_argument("--link", action="store_true",
                    help="hard-link the media files instead of copying them (a symbolic link where DEST is on "
                         "another file system)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    ap.set_defaults(run=run)
