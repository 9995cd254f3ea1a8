"""``mime-fast eval``: a multimodal model's emotion recognition on a built corpus, subset by subset
(:func:`mime_fast.evaluation.evaluate`)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..coe.client import DEFAULT_QSCALE
from ..evaluation import AUDIO_MODES, CONDITIONS, TASKS, TRANSPORTS, evaluate
from ..spec import CODES
from .coe import add_client_args, add_selection_args, add_target_args, check_client_args
from .errors import UsageError

__all__ = ["add", "run"]


def run(args: argparse.Namespace) -> int:
    client, subsets, clips = check_client_args(args, CODES)
    if args.fps is not None and not (args.fps > 0 and math.isfinite(args.fps)):
        raise UsageError("--fps must be > 0")
    if args.check_frames < 0:
        raise UsageError("--check-frames must be >= 0")
    if not 2 <= args.frame_quality <= 31:
        raise UsageError("--frame-quality must be 2..31 (FFmpeg's JPEG qscale: 2 best)")
    for flag in ("price_in", "price_out", "max_cost"):
        value = getattr(args, flag)
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise UsageError(f"--{flag.replace('_', '-')} must be a number >= 0")
    if args.max_cost is not None and args.price_in is None and args.price_out is None:
        raise UsageError("--max-cost needs --price-in and/or --price-out (per million tokens)")
    res = evaluate(args.dir, client, task=args.task, judge_model=args.judge_model, condition=args.condition,
                   transport=args.transport, subsets=subsets, clips=clips, limit=args.limit, audio=args.audio,
                   vmm_picture=args.vmm_picture,
                   frames=args.frames, fps=args.fps, frame_size=args.frame_size, frame_quality=args.frame_quality,
                   name=args.name, coe_accepted=args.coe_accepted, price_in=args.price_in,
                   price_out=args.price_out, max_cost=args.max_cost,
                   check_transport=args.check_frames, progress=None if args.quiet else sys.stderr)
    if res.dry_run is not None:
        print(json.dumps(res.dry_run, indent=2))
        return 0
    failed = sum(s["failed"] for s in res.metrics["subsets"].values())
    not_sent = res.metrics.get("not_sent", 0)
    if not args.quiet and args.task == "pairs":
        for code, s in res.metrics["subsets"].items():
            f = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
            print(f"{code:<6} pairs {s['pairs']}, basic {f(s['basic'])}, hallucinated {f(s['hallucinated'])}, "
                  f"overall {f(s['overall'])}, d_y {s['d_y']}, r_fp {s['r_fp']}")
    elif not args.quiet and args.task == "statements":
        for code, s in res.metrics["subsets"].items():
            acc = "-" if s["accuracy"] is None else f"{s['accuracy']:.3f}"
            print(f"{code:<6} statements {s['n']}, accuracy {acc}, unparseable {s['parse_failures']}")
    elif not args.quiet:
        print(f"{'subset':<6} {'n':>6} {'acc':>6} {'UAR':>6} {'WAF':>6} {'unparseable':>11} {'failed':>6}")
        for code, s in res.metrics["subsets"].items():
            f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            print(f"{code:<6} {s['n']:>6} {f(s['accuracy']):>6} {f(s['uar']):>6} {f(s['waf']):>6} "
                  f"{s['parse_failures']:>11} {s['failed']:>6}")
        for st in res.metrics["steps"]:
            p = "-" if st["p_holm"] is None else f"{st['p_holm']:.4f}"
            d = "-" if st["delta"] is None else f"{st['delta']:+.3f}"
            print(f"{st['from']}->{st['to']}: n {st['n']}, delta {d}, b {st['b']}, c {st['c']}, p (Holm) {p}")
    if not args.quiet:
        cost = res.metrics.get("cost")
        print(f"{res.requests} requests, {res.cached} answers from the cache, tokens {res.prompt_tokens} in, "
              f"{res.completion_tokens} out" + (f", all answers {cost['money']:.4f}" if cost else "")
              + f", {res.elapsed_s:.1f} s; output: {res.out_dir}")
    if not_sent:
        print(f"mime-fast eval: stopped at --max-cost {args.max_cost:g}: {not_sent} requests not sent (rerun with a "
              "higher limit to resume)", file=sys.stderr)
    return 0 if failed == 0 and not not_sent else 1


def add(sub, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser(
        "eval", parents=[common], help="evaluate a multimodal model's emotion recognition, subset by subset",
        description="Ask a multimodal model at an OpenAI-compatible endpoint for the emotion of every clip and "
                    "subset of the corpus in DIR (task recognize: one of the seven emotions), extract its answers "
                    "by rules, and write DIR/eval/<run>/ (<run>: the model and the prompt condition): "
                    "predictions.jsonl, metrics.json (per subset accuracy, UAR, WAF, bootstrap CI; the degradation "
                    "steps FM->FDM ... FSM->FSAM with exact McNemar tests, Holm-corrected; audio and face "
                    "reliance), report.md and degradation.png; --task pairs and statements ask EmotionHallucer's "
                    "and ESJ's yes/no questions instead. Replies are cached (default DIR/eval/cache): a rerun, or a run "
                    "resumed after Ctrl-C or a kill, repeats no answered request.",
        epilog="FDAM, FSAM and AMM are never sent audio; VMM is sent its black picture and its audio. The API key "
               "is read from the variable named by --api-key-env and never written. Exit status: 0 every request "
               "answered, 1 a request still failed after its retries (left out of n), --max-cost kept requests back "
               "or the run could not go on, "
               "2 usage error, 130 interrupted (rerun to resume).")
    add_target_args(ap, model="the model evaluated")
    ap.add_argument("--task", choices=TASKS, default="recognize",
                    help="recognize: one of the seven emotions (default); pairs: EmotionHallucer's basic and "
                         "hallucinated yes/no questions (a facial cue stage II of coe.jsonl deleted on FSM/FSAM, "
                         "else the wrong emotion); statements: ESJ's true and false statements made from "
                         "coe.jsonl's analyses (needs a CoE)")
    ap.add_argument("--judge-model", default=None, metavar="NAME",
                    help="a text model (same endpoint) that reads the answers no rule reads; what it cannot read "
                         "either stays unparseable (default: none)")
    ap.add_argument("--condition", choices=CONDITIONS, default="direct",
                    help="prompt: direct (the label alone, default), cot (step by step), tom (HitEmotion's "
                         "Theory-of-Mind scaffold; cot and tom end in {'emotion': 'label'}), coe (a Chain of Emotion: "
                         "scene understanding, emotional analysis, then predicted_emotion, as JSON)")
    add_selection_args(ap)
    ap.add_argument("--transport", choices=TRANSPORTS, default="video",
                    help="video: the subset's mp4 as a video_url data URL (default); frames: --frames JPEG images")
    ap.add_argument("--audio", choices=AUDIO_MODES, default="auto",
                    help="auto: the 16 kHz wav as input_audio with the subsets that have audio (default); none: never")
    ap.add_argument("--vmm-picture", choices=("black", "none"), default="black",
                    help="VMM: its black video with its audio (default), or none: the audio alone")
    ap.add_argument("--frames", type=int, default=8, metavar="N", help="frames per clip with --transport frames (8)")
    ap.add_argument("--fps", type=float, default=None, metavar="F",
                    help="with --transport frames: F frames per second of each clip instead of --frames")
    ap.add_argument("--frame-size", type=int, default=448, metavar="PX",
                    help="longest side of a frame with --transport frames (default 448)")
    ap.add_argument("--frame-quality", type=int, default=DEFAULT_QSCALE, metavar="Q",
                    help=f"JPEG quantiser of the frames, 2 (best) .. 31 (default {DEFAULT_QSCALE})")
    ap.add_argument("--coe-accepted", action="store_true",
                    help="only the clips the Chain-of-Emotion accepted for each subset (DIR/coe.jsonl, status ok: "
                         "MIME's final benchmark); a warning when --model is the CoE's own")
    ap.add_argument("--check-frames", type=int, default=3, metavar="N",
                    help="with --transport frames, before any request: compare FM's and FDM's face detail on the "
                         "pictures sent for N clips and warn when FDM's blur does not survive them (default 3; 0: off)")
    ap.add_argument("--price-in", type=float, default=None, metavar="P",
                    help="money per million prompt tokens: the run's cost in metrics.json and report.md")
    ap.add_argument("--price-out", type=float, default=None, metavar="P", help="money per million completion tokens")
    ap.add_argument("--max-cost", type=float, default=None, metavar="M",
                    help="send no request that would take the money spent past M (the run ends cleanly, exit 1; "
                         "rerun with a higher limit to resume)")
    ap.add_argument("--dry-run", action="store_true",
                    help="send nothing, write nothing: print the requests to make, those the cache answers, and "
                         "an estimate of their tokens and money: counted from the media sent (as a Qwen-Omni "
                         "model counts them) before any answer, scaled from the answers cached once some are")
    add_client_args(ap, cache="eval/cache")
    ap.add_argument("--name", default=None, metavar="RUN", help="the run's folder in DIR/eval (default: from the "
                                                                  "model and the condition)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    ap.set_defaults(run=run)
