"""``mime-fast coe``: the paper's Chain-of-Emotion over a built corpus (:func:`mime_fast.coe.run`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .. import coe
from ..coe.client import MIN_FRAME_SIZE, ClientOptions
from ..coe.outputs import SUBSETS as COE_SUBSETS
from ..coe.runner import unknown_clips
from ..manifest import MANIFEST_JSONL
from ..spec import CODES
from .errors import RunError, UsageError

__all__ = ["add", "add_client_args", "add_selection_args", "add_target_args", "check_client_args", "run"]


def check_client_args(args: argparse.Namespace,
                      codes: tuple[str, ...]) -> tuple[ClientOptions, list[str], list[str] | None]:
    """The checks of the flags :func:`add_client_args` adds (and ``--subsets``, ``--clips``,
    ``--limit``), shared by ``coe`` and ``eval``: one :class:`UsageError` for the first wrong one;
    else the client's options (:class:`~mime_fast.coe.client.ClientOptions`, ``--extra-body``
    parsed), the subsets and the clips (``None``: all)."""
    if not (args.dir / MANIFEST_JSONL).is_file():
        raise UsageError(f"no {MANIFEST_JSONL} in {args.dir}: build the corpus first (mime-fast build)")
    if not re.match(r"^https?://", args.endpoint) or not _has_host(args.endpoint):
        raise UsageError(f"--endpoint {args.endpoint!r}: expected an http(s):// URL with a host (and a valid port), "
                         "such as http://localhost:8000/v1")
    for name in ("concurrency", "frames", "max_tokens"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
    if args.frame_size < MIN_FRAME_SIZE:
        raise UsageError(f"--frame-size must be >= {MIN_FRAME_SIZE} px")
    if not args.timeout > 0:  # also NaN
        raise UsageError("--timeout must be > 0 seconds")
    if args.retries < 0 or args.backoff < 0 or getattr(args, "schema_retries", 0) < 0:
        raise UsageError("--retries, --schema-retries and --backoff must be >= 0" if hasattr(args, "schema_retries")
                         else "--retries and --backoff must be >= 0")
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
    bad = [s for s in subsets if s not in codes]
    if bad or not subsets:
        raise UsageError(f"--subsets: unknown subset(s) {', '.join(bad)}; expected some of {', '.join(codes)}"
                         if bad else "--subsets: no subset given")
    clips = [c.strip() for c in args.clips.split(",") if c.strip()] if args.clips else None
    unknown = unknown_clips(args.dir, clips or [])
    if unknown:
        raise UsageError(f"--clips: unknown clip id(s) {', '.join(unknown)}: not in {args.dir / MANIFEST_JSONL}")
    client = ClientOptions(args.endpoint, args.model, api_key_env=args.api_key_env, concurrency=args.concurrency,
                           retries=args.retries, backoff=args.backoff, timeout=args.timeout,
                           temperature=args.temperature, max_tokens=args.max_tokens, extra_body=extra,
                           cache_dir=args.cache, use_cache=not args.no_cache, dry_run=args.dry_run)
    return client, subsets, clips


def run(args: argparse.Namespace) -> int:
    client, subsets, clips = check_client_args(args, COE_SUBSETS)
    res = coe.run(args.dir, client, text_model=args.text_model, subsets=subsets, clips=clips, limit=args.limit,
                  media=args.media, frames=args.frames, frame_size=args.frame_size,
                  media_base_url=args.media_base_url, schema_retries=args.schema_retries,
                  progress=None if args.quiet else sys.stderr)
    if args.dry_run:
        _dry_run_notes(res, quiet=args.quiet)
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


def _dry_run_notes(res: coe.CoEResult, *, quiet: bool) -> None:
    """Why samples of the dry run make no request, on stderr: one line per sample of the clip shown,
    one for the clips before it; :class:`RunError` when no sample makes one."""
    failed = [r for r in res.rows if r["status"] == "failed"]
    first = f"{failed[0]['clip_id']} {failed[0]['subset']}: {failed[0]['reason']}" if failed else ""
    if not res.dry_run_requests:
        clips = len({r["clip_id"] for r in failed})
        raise RunError(f"dry run: no request can be made: all {len(failed)} samples of {clips} clip(s) fail before "
                       f"one (first: {first})" if failed else
                       "dry run: no sample to run (no ok manifest row of the subsets and clips asked)")
    if quiet:
        return
    shown = res.dry_run_requests[0]["clip_id"]
    skipped = [r for r in failed if r["clip_id"] != shown]
    if skipped:
        clips = len({r["clip_id"] for r in skipped})
        print(f"coe: dry run: {clips} clip(s) before {shown} skipped: no request can be made for their "
              f"{len(skipped)} samples (first: {first})", file=sys.stderr)
    for r in failed:
        if r["clip_id"] == shown:
            print(f"coe: dry run: {shown} {r['subset']} would fail: {r['reason']}", file=sys.stderr)


def _has_host(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
    except ValueError:
        return False
    return bool(parts.hostname)


def add(sub, common: argparse.ArgumentParser) -> None:
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
    add_target_args(ap, model="the multimodal model (stages I, II and IV)")
    ap.add_argument("--text-model", default=None, metavar="NAME", help="stage III's text model (default: --model)")
    add_selection_args(ap)
    ap.add_argument("--media", choices=("video", "frames"), default="video",
                    help="video: the mp4 as a video_url part (default); frames: sampled frames as JPEG images, for "
                         "endpoints without video input. Either way the 16 kHz wav goes with a video that has audio")
    ap.add_argument("--frames", type=int, default=8, metavar="N", help="frames per video with --media frames (default 8)")
    ap.add_argument("--frame-size", type=int, default=448, metavar="PX",
                    help="longest side of a frame with --media frames (default 448)")
    ap.add_argument("--media-base-url", default=None, metavar="URL",
                    help="send media as URL + its path in DIR (e.g. file:///data/mime with vLLM's "
                         "--allowed-local-media-path) instead of base64 data URLs")
    ap.add_argument("--schema-retries", type=int, default=1, metavar="N",
                    help="times an invalid JSON reply (stages III, IV) is asked again with the error (default 1)")
    add_client_args(ap, cache="coe_cache")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the requests of the first clip that makes any (media elided) as JSON, and on stderr "
                         "why samples make none; send nothing, write nothing")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    ap.set_defaults(run=run)


def add_target_args(ap: argparse.ArgumentParser, *, model: str) -> None:
    """DIR, ``--endpoint`` and ``--model`` (``coe`` and ``eval``; ``model``: the latter's help)."""
    ap.add_argument("dir", type=Path, metavar="DIR", help="output folder of mime-fast build (with manifest.jsonl)")
    ap.add_argument("--endpoint", required=True, metavar="URL",
                    help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    ap.add_argument("--model", required=True, metavar="NAME", help=model)


def add_selection_args(ap: argparse.ArgumentParser) -> None:
    """``--subsets``, ``--clips``, ``--limit`` (``coe`` and ``eval``)."""
    ap.add_argument("--subsets", default=",".join(CODES), metavar="CODES",
                    help="comma-separated subset codes (default: all seven)")
    ap.add_argument("--clips", default=None, metavar="IDS", help="comma-separated clip ids (default: all)")
    ap.add_argument("--limit", type=int, default=None, metavar="N", help="the first N clips only")


def add_client_args(ap: argparse.ArgumentParser, *, cache: str) -> None:
    """The endpoint client's and the reply cache's flags (``coe`` and ``eval``; ``cache``: the
    default cache folder inside DIR)."""
    ap.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight (default 4)")
    ap.add_argument("--retries", type=int, default=5, metavar="N",
                    help="retries of a request on 429, 5xx, timeouts and connection errors (default 5)")
    ap.add_argument("--backoff", type=float, default=1.0, metavar="S",
                    help="first retry's wait in seconds, doubled each retry (default 1; Retry-After wins)")
    ap.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per-request timeout (default 300)")
    ap.add_argument("--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (default 0)")
    ap.add_argument("--max-tokens", type=int, default=2048, metavar="N", help="reply length limit (default 2048)")
    ap.add_argument("--extra-body", default=None, metavar="JSON",
                    help="extra request fields for the server, e.g. '{\"top_k\": 1}'")
    ap.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                    help="environment variable holding the API key (default OPENAI_API_KEY)")
    ap.add_argument("--cache", type=Path, default=None, metavar="DIR", help=f"reply cache (default: DIR/{cache})")
    ap.add_argument("--no-cache", action="store_true", help="neither read nor write the reply cache")
