"""``mime_fast.evaluate``: a multimodal model's emotion recognition on a built corpus, subset by subset.

Over 400 lines on purpose: :func:`evaluate` is one run -- questions, pre-run checks, requests
through the cache, the judge, the dry run, metrics -- whose closures share its settings; the prompts,
answer rules, statistics, tasks, cost and outputs are apart in :mod:`mime_fast.evaluation`.

Reads only the manifest (and ``coe.jsonl``, ``audit.parquet`` where a task or a measure needs
them). Each ``ok`` clip x subset with a ground-truth label is one request (task ``recognize``,
prompt condition ``direct``, ``cot``, ``tom`` or ``coe``: :mod:`.prompts`; ``pairs`` and
``statements`` ask yes/no questions, :mod:`.pairs`, :mod:`.statements`) to an
OpenAI-compatible endpoint through the CoE client (:class:`mime_fast.coe.client.ChatClient`:
concurrency, retries with backoff, ``Retry-After``), each reply kept in the CoE reply cache
(:class:`mime_fast.coe.cache.ReplyCache`) as it arrives, so a rerun -- or a run resumed after Ctrl-C
or a kill -- repeats no answered request.

What is sent (:func:`media_of`): the subset's mp4 (``transport="video"``, a ``video_url`` data URL)
or ``frames`` JPEG frames (``"frames"``), plus the clip's 16 kHz wav as ``input_audio`` where the
subset has audio (:attr:`mime_fast.spec.SubsetSpec.has_audio`) and ``audio="auto"``: FDAM, FSAM and
AMM never carry audio; VMM carries its black picture (or none) and its audio.

Outputs in ``DIR/eval/<run>/`` (:func:`~.report.write_outputs`): ``predictions.jsonl`` and
``predictions.parquet`` (:data:`~.report.PREDICTION_COLUMNS`), ``metrics.json``, ``report.md`` and
``degradation.png``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Iterable

from ..coe.cache import ReplyCache, request_key
from ..coe.client import (DEFAULT_QSCALE, ChatClient, ClientOptions, EndpointUnreachable, Media, MediaOptions,
                          Stopped, jpeg_size, media_parts)
from ..coe.driver import describe_error, drive, os_error_text, scrub_secret  # (its error wording, its driver)
from ..coe.outputs import COE_JSONL, read_coe
from ..corpus import RunStopped, sha256_file
from ..manifest import EMOTIONS, MANIFEST_JSONL, compact, read_rows
from ..spec import CODES, spec as subset_spec
from .answers import extract_emotion
from .cost import Budget, TokenRule, estimate, money
from .hallucination import facial_cue_rates
from .pairs import extract_yes_no, make_pair, pair_metrics
from .prompts import render, render_judge, render_question
from .report import PREDICTION_COLUMNS, metrics, write_outputs
from .statements import make_statements, statement_metrics
from .transport import check_frames_keep_blur

__all__ = ["AUDIO_MODES", "EvalResult", "PREDICTION_COLUMNS", "TASKS", "TRANSPORTS", "evaluate", "media_of", "run_name"]

TRANSPORTS = ("video", "frames")
TASKS = ("recognize", "pairs", "statements")
AUDIO_MODES = ("auto", "none")


@dataclass
class EvalResult:
    """What :func:`evaluate` did: the predictions (one per clip x subset), the metrics, the
    output folder, requests made, replies from the cache and tokens used."""

    predictions: list[dict[str, Any]]
    metrics: dict[str, Any]
    out_dir: Path
    requests: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    elapsed_s: float
    dry_run: dict[str, Any] | None = None


def run_name(model: str, condition: str, transport: str = "video") -> str:
    """The run's folder name: model and condition (and the transport when not ``video``),
    filesystem-safe (``Qwen/Qwen3-Omni`` -> ``Qwen_Qwen3-Omni``)."""
    raw = f"{model}__{condition}" + ("" if transport == "video" else f"__{transport}")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("._") or "run"


class _NotSent(Exception):
    """A request the spending limit keeps back."""


class _SampleError(Exception):
    """No request can be made for a sample (the reason is the message)."""


def media_of(corpus: Path, row: dict[str, Any], audio_row: dict[str, Any] | None, audio: str,
             black_picture: bool = True) -> list[Media]:
    """The media one request about manifest ``row`` carries: its video -- not a black one (VMM's)
    with ``black_picture=False`` -- and the clip's 16 kHz wav where the subset has audio (the
    subset table, :func:`mime_fast.spec.spec`) and the file does, unless ``audio="none"``."""
    def media(kind: str, r: dict[str, Any]) -> Media:
        path = corpus / r["path"]
        if not path.is_file():
            raise _SampleError(f"{r['path']} is missing from the corpus folder")
        return Media(kind, path, r["path"], r.get("sha256") or sha256_file(path), r.get("frames"))

    s = subset_spec(row["subset"])
    out = [media("video", row)] if black_picture or s.video != "black" else []
    if audio == "auto" and s.has_audio and row.get("has_audio"):
        if audio_row is None:
            raise _SampleError(f"{row['path']} has audio but the manifest has no 16 kHz audio row for its clip")
        out.append(media("audio", audio_row))
    if not out:
        raise _SampleError(f"{row['path']}: nothing to send (no picture asked, and no audio)")
    return out


def media_prompt_tokens(row: dict[str, Any], media: list[Media], sent: MediaOptions, text: str,
                        rule: TokenRule = TokenRule()) -> tuple[int, bool]:
    """(prompt tokens of one request about manifest ``row`` by ``rule``, whether its picture's
    size was known): the ``text`` of its prompt, its video -- as a video, or as ``sent.frames``
    JPEGs of :func:`~mime_fast.coe.client.jpeg_size` -- and its audio, of the clip's duration."""
    w, h, seconds = int(row.get("width") or 0), int(row.get("height") or 0), float(row.get("duration_s") or 0.0)
    tokens, sized = rule.text(len(text)), True
    for m in media:
        if m.kind == "audio":
            tokens += rule.audio(seconds)
        elif not (w and h):
            sized = False
        elif sent.mode == "frames":
            tokens += sent.frames * rule.image(*jpeg_size(w, h, sent.frame_size))
        else:
            tokens += rule.video(w, h, seconds)
    return tokens, sized


#: A manifest row and its clip's audio row.
Sample = tuple[dict[str, Any], dict[str, Any] | None]


def _samples(corpus: Path, subsets: Iterable[str] | None, clips: Iterable[str] | None,
             limit: int | None) -> tuple[list[Sample], int]:
    """(manifest row, its clip's audio row) per clip x subset to ask about, and the clips left out
    for want of a ground-truth label."""
    if not (corpus / MANIFEST_JSONL).is_file():
        raise FileNotFoundError(f"no {MANIFEST_JSONL} in {corpus}: build the corpus first (mime-fast build)")
    wanted = list(CODES) if subsets is None else [str(s).upper() for s in subsets]
    bad = [s for s in wanted if s not in CODES]
    if bad or not wanted:
        raise ValueError(f"unknown subset(s) {bad}; expected some of {CODES}" if bad else "no subsets requested")
    keep = None if clips is None else set(clips)
    by_clip: dict[str, dict[str, dict[str, Any]]] = {}
    for r in compact(read_rows(corpus)):
        if r["status"] == "ok" and r["subset"] is not None and (keep is None or r["clip_id"] in keep):
            by_clip.setdefault(r["clip_id"], {})[r["subset"]] = r
    if keep is not None and keep - set(by_clip):
        raise ValueError(f"unknown clip id(s) {', '.join(sorted(keep - set(by_clip)))}: no ok row in the manifest")
    unlabelled = [c for c, rows in by_clip.items() if next(iter(rows.values()))["label"] not in EMOTIONS]
    ids = [c for c in by_clip if c not in unlabelled][:limit]
    return [(by_clip[c][s], by_clip[c].get("audio")) for c in ids for s in CODES
            if s in wanted and s in by_clip[c]], len(unlabelled)


def _coe_accepted(corpus: Path, samples: list[Sample], model: str) -> tuple[list[Sample], dict[str, Any]]:
    """The samples the Chain-of-Emotion accepted (``coe.jsonl``), and how many with a warning
    when ``model`` made the CoE."""
    coe_rows = read_coe(corpus)
    if not coe_rows:
        raise FileNotFoundError(f"no {COE_JSONL} in {corpus}: run mime-fast coe first (or drop --coe-accepted)")
    kept = {(r["clip_id"], r["subset"]) for r in coe_rows if r["status"] == "ok"}
    samples = [s for s in samples if (s[0]["clip_id"], s[0]["subset"]) in kept]
    own = model in {r["model"] for r in coe_rows} | {r["text_model"] for r in coe_rows}
    return samples, {"accepted": len(samples), "warning": f"{model} is the model that made the Chain-of-Emotion: it "
                     "chose the accepted clips, so its scores on them are biased upward" if own else None}


def _questions(corpus: Path, task: str, samples: list[Sample]) -> list[tuple[Any, ...]]:
    """(manifest row, audio row, kind, question, the right answer) per request: ``recognize`` one
    per sample (no question text: the condition's prompt), ``pairs`` and ``statements`` theirs."""
    if task == "recognize":
        return [(row, audio_row, None, None, row["label"]) for row, audio_row in samples]
    coe_rows = read_coe(corpus)
    if task == "statements" and not coe_rows:
        raise FileNotFoundError(f"no {COE_JSONL} in {corpus}: task statements is made from the CoE (mime-fast coe)")
    coe_of = {(r["clip_id"], r["subset"]): r for r in coe_rows}
    accepted: dict[str, list[dict[str, Any]]] = {}
    for r in coe_rows:
        if r["status"] == "ok":
            accepted.setdefault(r["subset"], []).append(r)

    def asked(row: dict[str, Any]) -> list[tuple[str, str, str]]:
        coe_row = coe_of.get((row["clip_id"], row["subset"]))
        if task == "pairs":
            return make_pair(row, coe_row)
        return make_statements(row, coe_row, accepted.get(row["subset"], []))

    return [(row, audio_row, kind, q, truth) for row, audio_row in samples for kind, q, truth in asked(row)]


class _Progress:
    """On a terminal, a progress bar (tqdm) of the requests with the counts; otherwise (a log, a
    pipe) a line every ``every`` seconds and at the end; ``stream=None``: nothing."""

    def __init__(self, total: int, stream: IO[str] | None, every: float = 2.0):
        self.total, self.stream, self.every = total, stream, every
        self.done = self.cached = self.failed = self.unparseable = 0
        self.t0 = time.monotonic()
        self.last = 0.0
        self.lock = threading.Lock()
        self.bar = None
        if stream is not None and stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=stream, desc="eval", unit="answer", dynamic_ncols=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __call__(self, rec: dict[str, Any], client: ChatClient) -> None:
        with self.lock:
            self.done += 1
            self.cached += bool(rec["cached"])
            self.failed += rec["status"] == "failed"
            self.unparseable += rec["status"] == "ok" and rec["answer"] is None
            if self.bar is not None:
                self.bar.set_postfix(cached=self.cached, unparseable=self.unparseable, failed=self.failed,
                                     tokens_in=client.prompt_tokens, refresh=False)
                self.bar.update(1)
                return
            now = time.monotonic()
            if self.stream is None or (now - self.last < self.every and self.done < self.total):
                return
            self.last = now
            eta = int((now - self.t0) / self.done * (self.total - self.done))
            print(f"eval: {self.done}/{self.total} answers ({self.cached} cached, {self.unparseable} unparseable, "
                  f"{self.failed} failed) | {client.requests} requests | tokens {client.prompt_tokens} in, "
                  f"{client.completion_tokens} out | ETA {eta // 3600}:{eta % 3600 // 60:02d}:{eta % 60:02d}",
                  file=self.stream, flush=True)


def evaluate(
    out_dir: str | os.PathLike,
    client: ClientOptions,
    *,
    task: str = "recognize",
    judge_model: str | None = None,
    condition: str = "direct",
    transport: str = "video",
    subsets: Iterable[str] | None = None,
    clips: Iterable[str] | None = None,
    limit: int | None = None,
    audio: str = "auto",
    vmm_picture: str = "black",
    frames: int = 8,
    fps: float | None = None,
    frame_size: int = 448,
    frame_quality: int = DEFAULT_QSCALE,
    name: str | None = None,
    coe_accepted: bool = False,
    check_transport: int = 3,
    price_in: float | None = None,
    price_out: float | None = None,
    max_cost: float | None = None,
    progress: IO[str] | None = sys.stderr,
) -> EvalResult:
    """Ask ``client.model`` at ``client.endpoint`` (:class:`~mime_fast.coe.client.ClientOptions`) for the emotion of every ``ok`` clip x subset of the corpus in
    ``out_dir`` (the subsets ``subsets``, the clips ``clips``, the first ``limit`` labelled clips)
    and write ``out_dir/eval/<run>/`` (``<run>``: ``name``, default :func:`run_name`).

    ``task``: ``"recognize"`` (one of the seven emotions), ``"pairs"`` (two yes/no questions per
    sample, :mod:`.pairs`) or ``"statements"`` (is this statement from the CoE right? yes/no,
    :mod:`.statements`); ``condition`` applies to ``recognize`` only. ``judge_model``: a text model
    asked to read the answers no rule reads (:func:`~.prompts.render_judge`; ``judged`` in the
    predictions); what it cannot read either stays unparseable. ``condition``: the prompt
    (:data:`~.prompts.CONDITIONS`); ``transport``: ``"video"`` (the mp4 as a data URL) or
    ``"frames"`` (``frames`` JPEG frames per clip -- or, with ``fps``, the clip's duration x ``fps``
    -- longest side ``frame_size`` px, quantiser ``frame_quality``); ``audio``: ``"auto"`` (the
    16 kHz wav with the subsets that have audio) or ``"none"``; ``vmm_picture``: ``"black"`` (VMM's
    black video, default) or ``"none"`` (its audio alone). ``coe_accepted``: only the clip x
    subset samples the Chain-of-Emotion kept (status ``ok`` in ``coe.jsonl``: MIME's final
    benchmark), with a warning when ``model`` is the CoE's own
    (it chose those clips). With ``"frames"``, before any request, the face detail of FM and FDM
    is compared on the pictures that would be sent for the first ``check_transport`` clips that
    have both (:func:`~.transport.check_frames_keep_blur`; ``0``: not checked):
    ``metrics["transport_check"]``, and a warning on ``progress`` when the pictures lose FDM's
    blur. The client's API key is never written. Replies are cached in the client's ``cache_dir``
    (default ``out_dir/eval/cache``; ``use_cache=False``: none).

    ``price_in``/``price_out``: money per million prompt/completion tokens (``metrics["cost"]``);
    ``max_cost``: no request is sent that would take the money past it (:class:`~.cost.Budget`; the
    run ends cleanly, ``metrics["not_sent"]`` says how many were left: rerun with a higher limit).
    ``dry_run``: nothing is sent or written; ``EvalResult.dry_run`` holds the requests to make, those
    the cache answers, and an estimate of their tokens and money (:func:`~.cost.estimate`: from
    the media sent by :func:`media_prompt_tokens` before any answer, from the answers cached once
    some are; a judge's requests are not counted).

    A request that still fails after ``retries`` is a ``failed`` prediction (left out of ``n``); an
    answer no rule reads is unparseable (wrong, counted). An endpoint that cannot be reached before
    it has answered once, or a cache that cannot be written, stops the run
    (:class:`~mime_fast.corpus.RunStopped`); Ctrl-C sends no further request and raises
    ``KeyboardInterrupt``: a rerun resumes from the cache.
    """
    corpus = Path(out_dir)
    options = client  # the options; ``client`` from the request on: what sends the requests
    model, dry_run, max_tokens, concurrency = options.model, options.dry_run, options.max_tokens, options.concurrency
    if fps is not None and not fps > 0:
        raise ValueError(f"fps must be > 0, not {fps}")
    if vmm_picture not in ("black", "none"):
        raise ValueError(f"vmm_picture must be 'black' or 'none', not {vmm_picture!r}")
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    if audio not in AUDIO_MODES:
        raise ValueError(f"audio must be one of {AUDIO_MODES}, not {audio!r}")
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, not {task!r}")
    sys_user = system, user = render(condition, transport)
    samples, unlabelled = _samples(corpus, subsets, clips, limit)
    coe = None
    if coe_accepted:
        samples, coe = _coe_accepted(corpus, samples, model)
        if coe["warning"] and progress is not None:
            print(f"eval: warning: {coe['warning']}", file=progress, flush=True)
    questions = _questions(corpus, task, samples)
    opts = MediaOptions(mode=transport, frames=frames, frame_size=frame_size, quality=frame_quality)
    secret = options.secret()
    stop = threading.Event()
    client = options.chat_client(stop)  # type: ignore[assignment]
    if max_cost is not None and price_in is None and price_out is None:
        raise ValueError("max_cost needs a price (price_in and/or price_out, per million tokens)")
    run_dir = corpus / "eval" / (name or run_name(model, condition if task == "recognize" else task, transport))
    cache = ReplyCache(None if not options.use_cache else (options.cache_dir or corpus / "eval" / "cache"))
    if not dry_run:
        try:
            cache.check_writable()
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStopped(f"{exc.filename or cache.root} cannot be written ({os_error_text(exc)}): "
                             "no request was sent")
    check = None
    if transport == "frames" and check_transport > 0:
        rows: dict[str, dict[str, dict[str, Any]]] = {}
        for row, _ in samples:
            rows.setdefault(row["clip_id"], {})[row["subset"]] = row
        pairs = [(r["FM"], r["FDM"]) for r in rows.values() if "FM" in r and "FDM" in r][:check_transport]
        if pairs:
            check = check_frames_keep_blur(corpus, pairs, opts)
            if check["warning"] and progress is not None:
                print(f"eval: warning: {check['warning']}", file=progress, flush=True)
    budget = Budget(max_cost, price_in, price_out) if max_cost is not None else None
    prog = _Progress(len(questions), progress)
    preds: list[dict[str, Any]] = []
    lock = threading.Lock()
    t0 = time.monotonic()

    def prepare(question: tuple[Any, ...]) -> tuple[dict[str, Any], list[Media], str, str, MediaOptions]:
        """The question's prediction record (its cache key set), its media ([]: failed, the reason
        set), its prompt and how its media are sent (``fps``: frames by the clip's duration)."""
        row, audio_row, kind, text, expected = question
        system, user = (sys_user if text is None else render_question(text, transport))
        rec: dict[str, Any] = dict.fromkeys(PREDICTION_COLUMNS)
        rec.update(clip_id=row["clip_id"], subset=row["subset"], dataset=row.get("dataset"), label=row["label"],
                   task=task, kind=kind, question=text, expected=expected, correct=False, status="ok",
                   video=row["path"], prompt_tokens=0, completion_tokens=0, cached=False)
        sent = opts if fps is None or transport != "frames" else replace(
            opts, frames=max(1, round(float(row.get("duration_s") or 0.0) * fps)))
        try:
            media = media_of(corpus, row, audio_row, audio, black_picture=vmm_picture == "black")
        except _SampleError as exc:
            rec.update(status="failed", reason=str(exc))
            return rec, [], system, user, sent
        rec["audio"] = next((m.ref for m in media if m.kind == "audio"), None)
        rec["video"] = next((m.ref for m in media if m.kind == "video"), None)
        parts = dict(system=system, user=user, model=model, media=[[m.kind, m.sha256] for m in media],
                     media_options=sent.key(), params=client.params())
        rec["key"] = (request_key(task="recognize", condition=condition, **parts) if text is None
                      else request_key(task=task, **parts))
        return rec, media, system, user, sent

    def obtain(key: str, name: str, messages: list[dict[str, Any]],
               refs: list[str]) -> tuple[dict[str, Any] | None, bool, str | None]:
        """(the reply as a cache entry, whether from the cache, why it failed): from the cache,
        else asked of ``name`` and written to the cache. :class:`_NotSent` over the spending limit."""
        entry = cache.get(key)
        if entry is not None:
            return entry, True, None
        reserved = budget.reserve() if budget is not None else 0.0
        if reserved is None:
            raise _NotSent()
        t = time.perf_counter()
        c = failure = None
        try:
            c = client.complete(name, messages, stage=task)
        except EndpointUnreachable as exc:  # (raised first, it is the error the run raises)
            raise RunStopped(f"{exc} and has answered no request: the run stops here (start the server or "
                             "fix the endpoint's URL, then rerun)") from exc
        except (Stopped, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - still failing after the retries: a failed prediction
            failure = scrub_secret(describe_error(exc), secret)
        finally:
            if budget is not None:
                budget.settle(reserved, *((c.prompt_tokens, c.completion_tokens) if c is not None else (0, 0)))
        if c is None:
            return None, False, failure
        entry = {"task": task, "model": name, "text": c.text, "prompt_tokens": c.prompt_tokens,
                 "completion_tokens": c.completion_tokens, "latency_s": time.perf_counter() - t,
                 "media": refs, "created": time.time()}
        try:
            cache.put(key, entry)
        except OSError as exc:
            raise RunStopped(f"the reply cache cannot be written ({os_error_text(exc)}): the run stops here "
                             "(fix the cache folder or make room, then rerun: it resumes)") from exc
        return entry, False, None

    extract = extract_emotion if task == "recognize" else extract_yes_no

    def judged(text: str, rec: dict[str, Any]) -> str | None:
        """The judge model's reading of an answer the rules could not read (its tokens counted in ``rec``)."""
        jsystem, juser = render_judge(task, text)
        key = request_key(task="judge", of=task, system=jsystem, user=juser, model=judge_model, params=client.params())
        messages = [{"role": "system", "content": jsystem}, {"role": "user", "content": juser}]
        entry, _, _ = obtain(key, str(judge_model), messages, [])
        if entry is None:
            return None
        rec["prompt_tokens"] += entry["prompt_tokens"]
        rec["completion_tokens"] += entry["completion_tokens"]
        return extract(entry["text"])[0]

    def one(question: tuple[Any, ...]) -> None:
        rec, media, system, user, sent = prepare(question)
        entry = None
        try:
            if media:
                content = [*media_parts(media, sent), {"type": "text", "text": user}]
                messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
                entry, rec["cached"], failure = obtain(rec["key"], model, messages, [m.ref for m in media])
                if failure:
                    rec.update(status="failed", reason=failure)
            if entry is not None:
                answer, why = extract(entry["text"])
                rec.update(reply=entry["text"], prompt_tokens=entry["prompt_tokens"],
                           completion_tokens=entry["completion_tokens"], latency_s=entry.get("latency_s"),
                           judged=False)
                if answer is None and judge_model:
                    answer = judged(entry["text"], rec)
                    rec["judged"] = answer is not None
                    why = None if answer is not None else f"{why}; the judge read no answer either"
                rec.update(answer=answer, reason=why, correct=answer == rec["expected"])
        except _NotSent:
            return  # over the spending limit: not sent (counted by the budget)
        with lock:
            preds.append(rec)
        prog(rec, client)

    if dry_run:
        pending: list[tuple[str, float, int]] = []
        answered: list[tuple[str, float, int, int]] = []
        unsized = 0
        for question in questions:
            rec, media, system, user, sent_opts = prepare(question)
            row = question[0]
            entry = cache.get(rec["key"]) if media else None
            seconds = float(row.get("duration_s") or 0.0)
            if entry is not None:
                answered.append((row["subset"], seconds, entry["prompt_tokens"], entry["completion_tokens"]))
            elif media:
                tokens, sized = media_prompt_tokens(row, media, sent_opts, system + user)
                pending.append((row["subset"], seconds, tokens))
                unsized += not sized
        plan = estimate(pending, answered, price_in, price_out, max_tokens)
        if unsized:
            plan["unsized"] = unsized  # requests whose picture size the manifest does not give (not counted)
        return EvalResult([], {}, run_dir, 0, len(answered), 0, 0, time.monotonic() - t0, dry_run=plan)
    try:
        drive(questions, concurrency, one, stop)
    finally:
        prog.close()
    order = {s: i for i, s in enumerate(CODES)}
    preds.sort(key=lambda r: (str(r["clip_id"]), order[r["subset"]], r["kind"] != "basic"))
    shown = (system, user) if task == "recognize" else render_question("<question>", transport)
    sent = {"transport": transport, "audio": audio, "vmm_picture": vmm_picture,
            "condition": condition if task == "recognize" else None, "system": shown[0], "user": shown[1],
            **({"frames": frames, "fps": fps, "frame_size": frame_size, "frame_quality": frame_quality}
               if transport == "frames" else {})}
    m = metrics(preds, model=model, sent=sent, unlabelled=unlabelled, transport_check=check, coe_accepted=coe)
    if task != "recognize":
        m.update(task=task, subsets=(pair_metrics if task == "pairs" else statement_metrics)(preds), steps=[],
                 indices={}, confusion={}, datasets={})
    if price_in is not None or price_out is not None:
        m["cost"] = {"price_in": price_in, "price_out": price_out, "max_cost": max_cost,
                     "money": money(m["tokens"]["prompt"], m["tokens"]["completion"], price_in, price_out),
                     "subsets": {c: money(s["prompt_tokens"], s["completion_tokens"], price_in, price_out)
                                 for c, s in m["subsets"].items()}}
    if budget is not None:
        m["not_sent"] = budget.refused
    m["facial_cue_rate"] = None if condition == "direct" or task != "recognize" else facial_cue_rates(preds, corpus)
    write_outputs(run_dir, preds, m)
    return EvalResult(preds, m, run_dir, client.requests, prog.cached, client.prompt_tokens, client.completion_tokens,
                      time.monotonic() - t0)
