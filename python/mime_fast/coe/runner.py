"""Algorithm 1 of the MIME paper over a built corpus: one chain per clip x subset.

Over 400 lines on purpose: the four stages of a chain (:func:`_chain`) and the run that drives
them over the manifest share the sample, caller and settings types private to this module, and the
stages' rules are documented once, below; the endpoint client, reply cache, prompts and schemas
are already apart in :mod:`mime_fast.coe`.

Per sample (a manifest row of subset S, its clip's ground truth E):

- Stage I (MLLM): cues for E, from the target video for FM and VMM (subsets 1 and 4), else from
  the clear version (:data:`mime_fast.manifest.CLEAR_VERSION`): FM for FDM and FSM, AMM for FDAM
  and FSAM -- the clear version of an audio-less video is the audio-less clear video, so no audio
  cue enters those chains -- and AMM for itself (it is its own clear version). Requests with the
  same inputs are made once: FM, FDM and FSM share one stage I, AMM, FDAM and FSAM another.
- Stage II (MLLM), FDM/FSM/FDAM/FSAM only: the degraded video plus the stage I cues, with the
  light prompt for blur level "light" (FDM, FDAM) and the heavy one for "heavy" (FSM, FSAM), as
  the manifest's ``blur_level`` says; otherwise the verified cues are the stage I cues.
- Stage III (text model), all but FM: blind inference from the verified cues; a prediction other
  than E ends the chain with status ``rejected`` (the row is kept, with the prediction). For FM
  the emotion cues are the verified cues.
- Stage IV (MLLM): the target video with the verified cues, the emotion cues, E and the blur
  level; the reply must match :func:`~mime_fast.coe.schema.stage4_schema`. An invalid JSON reply
  of stage III or IV is asked again with the validation error (``schema_retries`` times), then the
  sample is ``failed`` with the reason.

The target's manifest row decides the media: its video, and the clip's 16 kHz wav only where the
video the stage reads has audio. The manifest's own ``clear_path`` is not read: older manifests
gave FM for FDAM/FSAM, and the rule above is the one every manifest written now states.

The run (:func:`run`) drives the chains on daemon threads (:func:`drive`) with one stop event,
checked before every request, retry and stage: Ctrl-C sets it, and so does an error that every
later request would meet too -- the reply cache not writable, the endpoint unreachable before it
has answered once -- which the run then raises (:class:`~mime_fast.corpus.RunStopped`) instead
of failing sample after sample. A stopped chain writes no row; a rerun makes it from the cache.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import IO, Any, Callable, Iterable, NoReturn

from ..corpus import RunStopped, sha256_file
from ..manifest import (CLEAR_VERSION, EMOTIONS, MANIFEST_JSONL, atomic_write, compact, read_rows, write_jsonl,
                        write_parquet)
from ..spec import CODES, spec as subset_spec
from .cache import ReplyCache, request_key
from .client import ChatClient, Completion, EndpointUnreachable, Media, MediaOptions, Stopped, elide, media_parts
from .prompts import LEVEL, SUBSET_NAMES, TEMPLATE_DIR, render, render_retry, template_hash
from .schema import parse_reply, stage3_schema, stage4_schema

__all__ = ["COE_JSONL", "COE_PARQUET", "COE_SUMMARY", "COLUMNS", "CoEResult", "SUBSETS", "read_coe", "run",
           "summary_counts", "summary_table",
           # shared with mime_fast.evaluation, which drives its requests the same way
           "describe_error", "drive", "os_error_text", "scrub_secret"]

COE_JSONL = "coe.jsonl"
COE_PARQUET = "coe.parquet"
COE_SUMMARY = "coe_summary.csv"
SUBSETS = CODES  # the MIME order (mime_fast.spec)
_NUMBER = {s: i + 1 for i, s in enumerate(SUBSETS)}

#: The columns of coe.jsonl / coe.parquet (``None`` where a stage did not run).
COLUMNS: tuple[str, ...] = (
    "clip_id", "subset", "label", "dataset", "status", "reason", "model", "text_model",
    "video", "blur_level", "kernel", "media_mode",
    "stage1_video", "stage1_audio", "stage1_key", "stage1_output", "stage1_s",
    "stage2_prompt", "stage2_video", "stage2_audio", "stage2_key", "stage2_output", "stage2_s",
    "stage3_key", "stage3_output", "stage3_attempts", "predicted_emotion", "emotion_cues", "stage3_s",
    "stage4_video", "stage4_audio", "stage4_key", "stage4_output", "stage4_attempts", "scene_understanding",
    "emotional_analysis", "coe", "stage4_s",
    "prompt_tokens", "completion_tokens", "requests", "cached_replies", "seconds", "run",
)
_INT = {"kernel", "stage3_attempts", "stage4_attempts", "prompt_tokens", "completion_tokens", "requests",
        "cached_replies"}
_FLOAT = {"stage1_s", "stage2_s", "stage3_s", "stage4_s", "seconds"}


class _Failed(Exception):
    """Ends a sample's chain with status ``failed`` (the message is the reason)."""


@dataclass
class _Reply:
    text: str
    key: str
    prompt_tokens: int
    completion_tokens: int
    requests: int  # HTTP requests this call made here (0: from the cache or another sample's call)


@dataclass
class _Sample:
    row: dict[str, Any]
    rows: dict[str, dict[str, Any]]  # the clip's ok rows by subset ("audio" included)

    @property
    def subset(self) -> str:
        return self.row["subset"]


class _DryClient:
    """Answers every request with a placeholder that lets the chain go on, and records it."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.prompt_tokens = self.completion_tokens = 0
        self._lock = threading.Lock()

    def params(self) -> dict[str, Any]:
        return {}

    def complete(self, model: str, messages: list[dict[str, Any]], *, stage: str = "", emotion: str = "",
                 sample: tuple[str, str] = ("", "")) -> Completion:
        with self._lock:
            n = len(self.requests) + 1
            self.requests.append({"clip_id": sample[0], "subset": sample[1], "stage": stage, "model": model,
                                  "messages": elide(messages)})
        if stage == "stage3":
            text = json.dumps({"predicted_emotion": emotion, "confidence": "High",
                               "emotion_cues": "<stage III emotion cues>", "reasoning": "<stage III reasoning>"})
        elif stage == "stage4":
            text = json.dumps({"scene_understanding": "<scene understanding>",
                               "emotional_analysis": "<emotional analysis>", "predicted_emotion": emotion})
        else:
            text = f"<{stage} output of request {n}>"
        return Completion(text=text, prompt_tokens=0, completion_tokens=0, requests=1)


class _Caller:
    """One place every request goes through: cache key, the cache, in-run sharing of identical
    requests (one request, however many samples need it), and the client. Once ``stop`` is set,
    every call raises :class:`~mime_fast.coe.client.Stopped`: no chain goes on to its next stage.
    An error that every later request would meet too (the cache cannot be written, the endpoint
    cannot be reached) is kept in ``fatal`` and stops the run.

    A reply is shared while it is in flight, and once answered for as long as a clip that asked
    for it has samples under way (:meth:`release` ends that): the samples of a clip share their
    stage I whatever the cache, and the replies kept are those of the clips under way, not of the
    whole run. An identical request after that is read from the cache (with no cache -- a dry run,
    ``use_cache=False`` -- it is made again)."""

    def __init__(self, client: Any, cache: ReplyCache, media: MediaOptions, templates: Path, dry_run: bool,
                 stop: threading.Event):
        self.client, self.cache, self.media, self.templates, self.dry_run = client, cache, media, templates, dry_run
        self.stop = stop
        self.fatal: RunStopped | None = None
        self._shared: dict[str, Future] = {}  # by request key: in flight, or answered for a clip under way
        self._asked: dict[str, set[str]] = {}  # by clip id: the keys its samples asked for
        self._lock = threading.Lock()
        self.cached = 0

    def ask(self, stage: str, template: str, model: str, system: str, user: str, media: list[Media],
            history: list[tuple[str, str]], emotion: str, sample: tuple[str, str]) -> _Reply:
        if self.stop.is_set():
            raise Stopped()
        key = request_key(template=template_hash(template, self.templates), model=model,
                          media=[[m.kind, m.sha256] for m in media], media_options=self.media.key() if media else None,
                          system=system, user=user, history=history, params=self.client.params())
        with self._lock:
            fut = self._shared.get(key)
            owner = fut is None
            if owner:
                fut = self._shared[key] = Future()
            self._asked.setdefault(sample[0], set()).add(key)
        if not owner:
            try:
                got = fut.result()
            except Stopped:
                raise
            except Exception as exc:  # the sample that made the request counts it; here only the reason
                raise _Failed(describe_error(exc)) from exc
            return _Reply(got.text, key, got.prompt_tokens, got.completion_tokens, 0)
        try:
            entry = None if self.dry_run else self.cache.get(key)
            if entry is not None:
                with self._lock:
                    self.cached += 1
                reply = _Reply(entry["text"], key, entry["prompt_tokens"], entry["completion_tokens"], 0)
            else:
                content: Any = user
                if media:
                    content = [*media_parts(media, self.media), {"type": "text", "text": user}]
                messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
                messages += [{"role": role, "content": text} for role, text in history]
                kwargs = {"emotion": emotion, "sample": sample} if self.dry_run else {}
                try:
                    c = self.client.complete(model, messages, stage=stage, **kwargs)
                except EndpointUnreachable as exc:
                    self.halt(RunStopped(f"{exc} and has answered no request: the run stops here (start the "
                                         "server or fix the endpoint's URL, then rerun)"))
                reply = _Reply(c.text, key, c.prompt_tokens, c.completion_tokens, c.requests)
                if not self.dry_run:
                    try:
                        self.cache.put(key, {"stage": stage, "model": model, "text": c.text,
                                             "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                                             "media": [m.ref for m in media], "created": time.time()})
                    except OSError as exc:  # the disk full, the folder read-only: so would every reply be
                        self.halt(RunStopped(f"the reply cache cannot be written ({os_error_text(exc)}): the run stops "
                                             "here (fix the cache folder or make room, then rerun: it resumes)"))
        except BaseException as exc:
            with self._lock:
                self._shared.pop(key, None)  # a later sample asks again
            fut.set_exception(exc)
            raise
        fut.set_result(reply)
        return reply

    def release(self, clip_id: str) -> None:
        """The samples of ``clip_id`` have all ended: the replies it asked for are no longer kept,
        except those that another clip under way asked for too."""
        with self._lock:
            keys = self._asked.pop(clip_id, set())
            if keys:
                keys -= set().union(*self._asked.values())
            for key in keys:
                self._shared.pop(key, None)

    def halt(self, error: RunStopped) -> NoReturn:
        """Stop the run with ``error`` (the first one given is the one raised by :func:`run`)."""
        with self._lock:
            if self.fatal is None:
                self.fatal = error
        self.stop.set()
        raise Stopped() from error


@dataclass
class _Settings:
    corpus: Path
    model: str
    text_model: str
    media: MediaOptions
    schema_retries: int
    templates: Path
    run_id: str


def os_error_text(exc: OSError) -> str:
    """An ``OSError`` in a user's words: the file, then why (``strerror``), without errno noise."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def describe_error(exc: BaseException) -> str:
    """A failed request's reason as a row records it: the HTTP status where the client gives one,
    the exception's type and message."""
    status = getattr(exc, "status_code", None)
    return f"{'HTTP %s: ' % status if status else ''}{type(exc).__name__}: {exc}"


def _media_of(corpus: Path, sample: _Sample, row: dict[str, Any]) -> list[Media]:
    """The video of ``row`` and, where it has audio, the clip's 16 kHz wav."""
    def media(kind: str, r: dict[str, Any]) -> Media:
        path = corpus / r["path"]
        if not path.is_file():
            raise _Failed(f"{r['path']} is missing from the corpus folder")
        if not r.get("sha256"):
            r = dict(r, sha256=sha256_file(path))
        return Media(kind, path, r["path"], r["sha256"], r.get("frames"))

    out = [media("video", row)]
    if row.get("has_audio"):
        audio = sample.rows.get("audio")
        if audio is None:
            raise _Failed(f"{row['path']} has audio but the manifest has no 16 kHz audio row for its clip")
        out.append(media("audio", audio))
    return out


def _chain(sample: _Sample, s: _Settings, caller: _Caller) -> dict[str, Any]:
    row, subset = sample.row, sample.subset
    emotion = row["label"]
    rec: dict[str, Any] = {c: None for c in COLUMNS}
    rec.update(clip_id=row["clip_id"], subset=subset, label=emotion, dataset=row.get("dataset"),
               model=s.model, video=row["path"], blur_level=row["blur_level"], kernel=row.get("kernel"),
               media_mode=s.media.mode, run=s.run_id, prompt_tokens=0, completion_tokens=0, requests=0,
               cached_replies=0)
    blur = row["blur_level"] or "none"
    started = time.perf_counter()
    stage = "I"

    def slots(media: list[Media], of: dict[str, Any] = row) -> dict[str, Any]:
        """The template slots for a stage reading ``media``, the video of manifest row ``of`` (stage I:
        the clear version, so its prompt depends on that video alone and is shared)."""
        level = of["blur_level"] or "none"
        return dict(emotion=emotion, emotions=list(EMOTIONS), subset=of["subset"],
                    subset_name=SUBSET_NAMES[of["subset"]], blur_level=level, level=LEVEL[level],
                    has_audio=any(m.kind == "audio" for m in media), black_video=subset_spec(of["subset"]).video == "black")

    def ask(name: str, template: str, model: str, system: str, user: str, media: list[Media],
            history: list[tuple[str, str]] | None = None) -> _Reply:
        try:
            r = caller.ask(name, template, model, system, user, media, history or [], emotion, (row["clip_id"], subset))
        except Exception as exc:
            rec["requests"] += getattr(exc, "mime_fast_requests", 0)
            raise
        rec["prompt_tokens"] += r.prompt_tokens
        rec["completion_tokens"] += r.completion_tokens
        rec["requests"] += r.requests
        rec["cached_replies"] += 0 if r.requests else 1
        return r

    def ask_json(name: str, model: str, system: str, user: str, media: list[Media],
                 schema: dict[str, Any]) -> tuple[dict[str, Any], _Reply, int]:
        history: list[tuple[str, str]] = []
        error = ""
        for attempt in range(1, s.schema_retries + 2):
            r = ask(name, name, model, system, user, media, history)
            obj, error = parse_reply(r.text, schema)
            if obj is not None:
                return obj, r, attempt
            history += [("assistant", r.text),
                        ("user", render_retry(error, json.dumps(schema), directory=s.templates))]
        rec[f"stage{name[-1]}_output"], rec[f"stage{name[-1]}_key"] = r.text, r.key
        rec[f"stage{name[-1]}_attempts"] = attempt
        raise _Failed(f"invalid reply after {attempt} attempt{'s' if attempt > 1 else ''}: {error}")

    try:
        if emotion not in EMOTIONS:
            raise _Failed(f"no ground-truth emotion for clip {row['clip_id']} (manifest label {emotion!r})")
        # Stage I: the target for FM and VMM (and AMM, its own clear version), else the clear version.
        clear_code = CLEAR_VERSION.get(subset, subset)
        clear_row = sample.rows.get(clear_code)
        if clear_row is None:
            raise _Failed(f"the clear version {clear_code} of clip {row['clip_id']} is not in the manifest "
                          f"(build it: --subsets {clear_code},...)")
        t = time.perf_counter()
        m1 = _media_of(s.corpus, sample, clear_row)
        system, user = render("stage1", s.templates, **slots(m1, clear_row))
        r1 = ask("stage1", "stage1", s.model, system, user, m1)
        rec.update(stage1_video=m1[0].ref, stage1_audio=m1[1].ref if len(m1) > 1 else None, stage1_key=r1.key,
                   stage1_output=r1.text, stage1_s=time.perf_counter() - t)
        oracle = r1.text
        # Stage II: face-blurred subsets, light or heavy prompt from the manifest's blur level.
        stage = "II"
        if subset in CLEAR_VERSION:
            if blur not in ("light", "heavy"):
                raise _Failed(f"blur level {blur!r} of a face-blurred subset in the manifest")
            t = time.perf_counter()
            m2 = _media_of(s.corpus, sample, row)
            name = f"stage2_{blur}"
            system, user = render(name, s.templates, cues=oracle, **slots(m2))
            r2 = ask(name, name, s.model, system, user, m2)
            rec.update(stage2_prompt=blur, stage2_video=m2[0].ref, stage2_audio=m2[1].ref if len(m2) > 1 else None,
                       stage2_key=r2.key, stage2_output=r2.text, stage2_s=time.perf_counter() - t)
            verified = r2.text
        else:
            verified = oracle
        # Stage III: blind inference with the text model (FM: direct mapping).
        stage = "III"
        if subset != "FM":
            t = time.perf_counter()
            rec["text_model"] = s.text_model
            system, user = render("stage3", s.templates, verified_cues=verified, **slots([]))  # text only
            obj3, r3, n3 = ask_json("stage3", s.text_model, system, user, [], stage3_schema())
            rec.update(stage3_key=r3.key, stage3_output=r3.text, stage3_attempts=n3,
                       predicted_emotion=obj3["predicted_emotion"], emotion_cues=obj3["emotion_cues"],
                       stage3_s=time.perf_counter() - t)
            if obj3["predicted_emotion"] != emotion:
                rec.update(status="rejected", reason=f"stage III predicted {obj3['predicted_emotion']}, "
                                                      f"the ground truth is {emotion}")
                return rec
            emotion_cues = obj3["emotion_cues"]
        else:
            emotion_cues = verified
            rec["emotion_cues"] = emotion_cues
        # Stage IV: the structured CoE from the target video.
        stage = "IV"
        t = time.perf_counter()
        m4 = _media_of(s.corpus, sample, row)
        system, user = render("stage4", s.templates, verified_cues=verified, emotion_cues=emotion_cues, **slots(m4))
        obj4, r4, n4 = ask_json("stage4", s.model, system, user, m4, stage4_schema(emotion))
        rec.update(stage4_video=m4[0].ref, stage4_audio=m4[1].ref if len(m4) > 1 else None, stage4_key=r4.key,
                   stage4_output=r4.text, stage4_attempts=n4, scene_understanding=obj4["scene_understanding"],
                   emotional_analysis=obj4["emotional_analysis"], coe=json.dumps(obj4, ensure_ascii=False),
                   stage4_s=time.perf_counter() - t)
        rec.update(status="ok")
    except Stopped:
        raise  # the run is stopping: no row (a rerun makes this sample again)
    except _Failed as exc:
        rec.update(status="failed", reason=f"stage {stage}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the endpoint's error, after retries: recorded, the run goes on
        rec.update(status="failed", reason=f"stage {stage}: {describe_error(exc)}")
    finally:
        rec["seconds"] = time.perf_counter() - started
    return rec


# ---------------------------------------------------------------------------------------- outputs


#: The shortest API key searched for in error messages: a shorter one ("none", "EMPTY", "x") is a
#: placeholder that local servers ignore, not a secret, and it is found in ordinary words.
MIN_SECRET = 8


def scrub_secret(text: str | None, secret: str) -> str | None:
    """``text`` -- an error message, where servers quote the key they were given -- with the API key
    ``secret`` replaced by ``***``. Only there: the model's replies and the row's own fields are
    written as they are (a key like ``none`` or ``FM`` is a word of theirs)."""
    if text and len(secret) >= MIN_SECRET and secret in text:
        return text.replace(secret, "***")
    return text


def read_coe(corpus_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of ``corpus_dir/coe.jsonl``, one per (clip, subset), the latest of each (torn lines
    of a killed run skipped)."""
    path = Path(corpus_dir) / COE_JSONL
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "clip_id" in obj:
                latest[(obj["clip_id"], obj.get("subset"))] = {c: obj.get(c) for c in COLUMNS}
    order = {s: i for i, s in enumerate(SUBSETS)}
    return sorted(latest.values(), key=lambda r: (str(r["clip_id"]), order.get(r["subset"], 99)))


def _write_outputs(corpus: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    def parquet(tmp: Path) -> None:
        schema = pa.schema([(c, pa.int64() if c in _INT else pa.float64() if c in _FLOAT else pa.string())
                            for c in COLUMNS])
        write_parquet(pa.Table.from_pylist(rows, schema=schema), tmp)

    def summary(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("subset,emotion,accepted,rejected,failed\n")
            for (subset, emotion), c in summary_counts(rows).items():
                f.write(f"{subset},{emotion},{c['ok']},{c['rejected']},{c['failed']}\n")

    atomic_write(corpus / COE_JSONL, lambda tmp: write_jsonl(rows, tmp))
    atomic_write(corpus / COE_PARQUET, parquet)
    atomic_write(corpus / COE_SUMMARY, summary)


def summary_counts(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (subset, emotion): samples accepted (``ok``), ``rejected`` and ``failed``."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        key = (r["subset"], r["label"] or "(none)")
        c = counts.setdefault(key, {"ok": 0, "rejected": 0, "failed": 0})
        c[r["status"]] = c.get(r["status"], 0) + 1
    order = {s: i for i, s in enumerate(SUBSETS)}
    emo = {e: i for i, e in enumerate(EMOTIONS)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 99), emo.get(kv[0][1], 99))))


def summary_table(rows: Iterable[dict[str, Any]]) -> str:
    """The paper's filtering statistics: accepted/rejected per emotion (rows) and subset (columns),
    then the failures, which are neither."""
    rows = list(rows)
    counts = summary_counts(rows)
    labels = [e for e in (*EMOTIONS, "(none)") if any(k[1] == e for k in counts)]
    width = max([len("emotion"), len("total")] + [len(e) for e in labels])
    cell = lambda c: f"{c['ok']}/{c['rejected']}"  # noqa: E731
    lines = ["accepted/rejected per subset and emotion",
             f"{'emotion':<{width}} " + " ".join(f"{s:>9}" for s in SUBSETS)]
    zero = {"ok": 0, "rejected": 0, "failed": 0}
    for e in labels:
        lines.append(f"{e:<{width}} " + " ".join(f"{cell(counts.get((s, e), zero)):>9}" for s in SUBSETS))
    totals = {s: {k: sum(c[k] for (ss, _), c in counts.items() if ss == s) for k in zero} for s in SUBSETS}
    lines.append(f"{'total':<{width}} " + " ".join(f"{cell(totals[s]):>9}" for s in SUBSETS))
    failed = sum(t["failed"] for t in totals.values())
    if failed:
        lines.append(f"failed: {failed} (see the reason column of {COE_JSONL})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- running


@dataclass
class CoEResult:
    """What :func:`run` did: the rows of this run, the output files' rows (all runs), HTTP
    requests made, replies from the cache, tokens used, and for ``dry_run`` the requests."""

    rows: list[dict[str, Any]]
    all_rows: list[dict[str, Any]]
    requests: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    elapsed_s: float
    dry_run_requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "rejected": 0, "failed": 0}
        for r in self.rows:
            out[r["status"]] += 1
        return out


class _Progress:
    def __init__(self, total: int, client: Any, caller: _Caller, stream: IO[str] | None, every: float = 2.0):
        self.total, self.client, self.caller, self.stream, self.every = total, client, caller, stream, every
        self.done = 0
        self.counts = {"ok": 0, "rejected": 0, "failed": 0}
        self.t0 = time.monotonic()
        self.last = 0.0
        self._lock = threading.Lock()

    def __call__(self, rec: dict[str, Any]) -> None:
        with self._lock:
            self.done += 1
            self.counts[rec["status"]] += 1
            now = time.monotonic()
            if self.stream is None or (now - self.last < self.every and self.done < self.total):
                return
            self.last = now
            elapsed = now - self.t0
            eta = int(elapsed / self.done * (self.total - self.done))
            c = self.counts
            print(f"coe: {self.done}/{self.total} samples (ok {c['ok']}, rejected {c['rejected']}, failed "
                  f"{c['failed']}) | {self.client.requests} requests, {self.caller.cached} cached | tokens "
                  f"{self.client.prompt_tokens} in, {self.client.completion_tokens} out | elapsed "
                  f"{int(elapsed)} s, ETA {eta // 3600}:{eta % 3600 // 60:02d}:{eta % 60:02d}",
                  file=self.stream, flush=True)


def unknown_clips(corpus_dir: str | os.PathLike, clips: Iterable[str]) -> list[str]:
    """The ids of ``clips`` that no row of the manifest in ``corpus_dir`` has, in the order given
    (no clip given: the manifest is not read)."""
    clips = list(dict.fromkeys(clips))
    return _unknown(clips, read_rows(Path(corpus_dir))) if clips else []


def _unknown(clips: Iterable[str], rows: Iterable[dict[str, Any]]) -> list[str]:
    """The ids of ``clips`` (each once, in the order given) that no row of ``rows`` has."""
    known = {r["clip_id"] for r in rows}
    return [c for c in dict.fromkeys(clips) if c not in known]


def _samples(corpus: Path, subsets: Iterable[str] | None, clips: Iterable[str] | None) -> list[_Sample]:
    if not (corpus / MANIFEST_JSONL).is_file():
        raise FileNotFoundError(f"no {MANIFEST_JSONL} in {corpus}: build the corpus first (mime-fast build)")
    wanted = list(SUBSETS) if subsets is None else [str(s).upper() for s in subsets]
    bad = [s for s in wanted if s not in SUBSETS]
    if bad or not wanted:
        raise ValueError(f"unknown subset(s) {bad}; expected some of {SUBSETS}" if bad else "no subsets requested")
    clips = None if clips is None else list(clips)
    rows_read = read_rows(corpus)  # (once: a 40k-clip corpus's manifest is hundreds of MB)
    unknown = _unknown(clips or [], rows_read)
    if unknown:
        raise ValueError(f"unknown clip id(s) {', '.join(unknown)}: not in the {MANIFEST_JSONL} of {corpus}")
    keep = set(clips) if clips is not None else None
    by_clip: dict[str, dict[str, dict[str, Any]]] = {}
    for r in compact(rows_read):
        if r["status"] == "ok" and r["subset"] is not None and (keep is None or r["clip_id"] in keep):
            by_clip.setdefault(r["clip_id"], {})[r["subset"]] = r
    return [_Sample(rows[s], rows) for clip, rows in by_clip.items() for s in SUBSETS
            if s in wanted and s in rows]


#: After Ctrl-C, or an error that stops the run, how long the requests in flight are waited for
#: (a reply that comes is cached, a sample it ends is kept) before they are abandoned.
STOP_GRACE_S = 2.0


def drive(samples: list[_Sample], workers: int, one: Callable[[_Sample], None], stop: threading.Event) -> None:
    """``one(sample)`` for each sample, in order, on ``workers`` daemon threads (a thread waiting on
    a slow request cannot hold the process at exit). Once ``stop`` is set -- by Ctrl-C here, an
    error raised by ``one``, or the caller -- no sample is started, the samples under way are given
    :data:`STOP_GRACE_S` to end, and the interrupt or the first error is raised."""
    todo = iter(samples)
    cond = threading.Condition()
    alive = workers
    errors: list[BaseException] = []

    def work() -> None:
        nonlocal alive
        try:
            while not stop.is_set():
                with cond:
                    sample = next(todo, None)
                if sample is None:
                    break
                one(sample)
        except BaseException as exc:  # noqa: BLE001 - raised in the driving thread
            with cond:
                errors.append(exc)
                stop.set()
        finally:
            with cond:
                alive -= 1
                cond.notify_all()

    def settle() -> None:
        with cond:
            cond.wait_for(lambda: alive == 0, timeout=STOP_GRACE_S)

    for i in range(workers):
        threading.Thread(target=work, name=f"coe-{i}", daemon=True).start()
    try:
        with cond:
            cond.wait_for(lambda: alive == 0 or stop.is_set())
    except BaseException:  # Ctrl-C
        stop.set()
        settle()
        raise
    settle()
    if errors:
        raise errors[0]


def run(
    corpus_dir: str | os.PathLike,
    *,
    endpoint: str,
    model: str,
    text_model: str | None = None,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    subsets: Iterable[str] | None = None,
    clips: Iterable[str] | None = None,
    limit: int | None = None,
    media: str = "video",
    frames: int = 8,
    frame_size: int = 448,
    media_base_url: str | None = None,
    concurrency: int = 4,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: float = 300.0,
    schema_retries: int = 1,
    temperature: float | None = 0.0,
    max_tokens: int | None = 2048,
    extra_body: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    dry_run: bool = False,
    templates: str | os.PathLike = TEMPLATE_DIR,
    progress: IO[str] | None = sys.stderr,
    on_sample: Callable[[dict[str, Any]], None] | None = None,
) -> CoEResult:
    """Run Algorithm 1 over every ``ok`` row of the corpus manifest in ``corpus_dir`` (the subsets
    ``subsets``, the clips ``clips``, the first ``limit`` clips), writing ``coe.jsonl`` (a row
    appended as each sample ends), then ``coe.jsonl`` compacted to one row per (clip, subset),
    ``coe.parquet`` and ``coe_summary.csv`` beside the manifest.

    ``endpoint``: an OpenAI-compatible base URL (``http://host:8000/v1``); ``model``: the MLLM
    (stages I, II, IV); ``text_model``: stage III's (default ``model``). The API key is ``api_key``
    or the environment variable ``api_key_env``; it is never written anywhere. Replies are cached
    in ``cache_dir`` (default ``corpus_dir/coe_cache``; ``use_cache=False``: none), so a rerun or a
    resumed run asks nothing already answered. ``dry_run``: no request is sent and nothing is
    written; the requests of the first clip that makes one are returned (``dry_run_requests``,
    media elided), and ``rows`` are the samples of the clips tried: ``failed`` ones say why no
    request could be made for them (no ground-truth label, a video missing).

    A reply cache that cannot be written raises :class:`~mime_fast.corpus.RunStopped` before any
    request, or as soon as an entry cannot be written (the disk full): the run stops there instead
    of paying for replies it cannot keep. So does an endpoint that cannot be reached (connection
    refused, unknown host) before it has answered a request; once it has, a request that fails to
    connect is retried like any other, and fails its sample alone.

    Ctrl-C (``KeyboardInterrupt``): no request is sent after it, the requests in flight are given
    :data:`STOP_GRACE_S`, the samples ended so far are kept in the outputs, and the interrupt is
    raised; a rerun resumes. A run that ends no sample writes no output file.
    """
    corpus = Path(corpus_dir)
    samples = _samples(corpus, subsets, clips)
    if limit is not None and not dry_run:
        first = set(list(dict.fromkeys(s.row["clip_id"] for s in samples))[:max(0, limit)])
        samples = [s for s in samples if s.row["clip_id"] in first]
    opts = MediaOptions(mode=media, frames=frames, frame_size=frame_size, base_url=media_base_url)
    secret = api_key if api_key is not None else os.environ.get(api_key_env, "")
    stop = threading.Event()
    client: Any = _DryClient() if dry_run else ChatClient(
        endpoint, secret, concurrency=concurrency, retries=retries, backoff=backoff, timeout=timeout,
        temperature=temperature, max_tokens=max_tokens, extra_body=extra_body, stop=stop)
    cache = ReplyCache(None if not use_cache or dry_run else (cache_dir or corpus / "coe_cache"))
    caller = _Caller(client, cache, opts, Path(templates), dry_run, stop)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    settings = _Settings(corpus, model, text_model or model, opts, schema_retries, Path(templates), run_id)
    try:
        cache.check_writable()
    except OSError as exc:
        raise RunStopped(f"the reply cache {cache.root} cannot be written ({os_error_text(exc)}): no request was sent "
                         "(fix it, or give another cache folder)") from exc
    prog = _Progress(len(samples), client, caller, None if dry_run else progress)
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    lock = threading.Lock()
    existed = (corpus / COE_JSONL).exists()
    out = None if dry_run else open(corpus / COE_JSONL, "a", encoding="utf-8")
    closed = False
    left = Counter(s.row["clip_id"] for s in samples)  # the samples of each clip not yet ended

    def one(sample: _Sample) -> None:
        clip = sample.row["clip_id"]
        try:
            rec = _chain(sample, settings, caller)
        except Stopped:
            return
        finally:
            with lock:
                left[clip] -= 1
                ended = not left[clip]
                if ended:
                    del left[clip]
            if ended:
                caller.release(clip)
        rec["reason"] = scrub_secret(rec["reason"], secret)
        with lock:
            if closed:  # ended after the run stopped waiting for it: its replies are cached
                return
            rows.append(rec)
            if out is not None:
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                out.flush()
                os.fsync(out.fileno())
        if stop.is_set():
            return
        prog(rec)
        if on_sample is not None:
            on_sample(rec)

    try:
        if dry_run:  # clip after clip, up to the first that makes a request
            for _, clip in groupby(samples, key=lambda s: s.row["clip_id"]):
                drive(list(clip), 1, one, stop)
                if client.requests:
                    break
        else:
            drive(samples, concurrency, one, stop)
        if caller.fatal is not None:
            raise caller.fatal
    finally:
        if out is not None:
            with lock:
                closed = True
                out.close()
            if existed or rows:
                _write_outputs(corpus, read_coe(corpus))
            else:  # stopped before any sample ended (or none to run): no empty outputs
                (corpus / COE_JSONL).unlink()
    order = {s: i for i, s in enumerate(SUBSETS)}
    rows.sort(key=lambda r: (str(r["clip_id"]), order[r["subset"]]))
    return CoEResult(rows=rows, all_rows=[] if dry_run else read_coe(corpus), requests=0 if dry_run else client.requests,
                     cached=caller.cached, prompt_tokens=client.prompt_tokens,
                     completion_tokens=client.completion_tokens, elapsed_s=time.monotonic() - t0,
                     dry_run_requests=client.requests if dry_run else [])
