"""Algorithm 1 of the MIME paper for one sample: its chain of four stages (:func:`run_chain`), the
requests it makes through its :class:`Caller` (cached, shared within the clip), and the media each
stage reads.

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
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..corpus import RunStopped, sha256_file
from ..manifest import CLEAR_VERSION, EMOTIONS
from ..spec import spec as subset_spec
from .cache import ReplyCache, request_key
from .client import (
    Completion,
    EndpointUnreachable,
    Media,
    MediaOptions,
    Stopped,
    elide,
    media_parts,
)
from .driver import describe_error, os_error_text
from .outputs import COLUMNS
from .prompts import LEVEL, SUBSET_NAMES, render, render_retry, template_hash
from .schema import parse_reply, stage3_schema, stage4_schema

__all__ = ["Caller", "ChainFailed", "ChainSettings", "DryClient", "Reply", "Sample", "media_of", "run_chain"]


class ChainFailed(Exception):
    """Ends a sample's chain with status ``failed`` (the message is the reason)."""


@dataclass
class Reply:
    """One stage's reply: its text, cache key and what it cost."""

    text: str
    key: str
    prompt_tokens: int
    completion_tokens: int
    requests: int  # HTTP requests this call made here (0: from the cache or another sample's call)


@dataclass
class Sample:
    """One chain's input: the manifest row of its clip x subset, and its clip's other rows."""

    row: dict[str, Any]
    rows: dict[str, dict[str, Any]]  # the clip's ok rows by subset ("audio" included)

    @property
    def subset(self) -> str:
        return self.row["subset"]


class DryClient:
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


class Caller:
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
            history: list[tuple[str, str]], emotion: str, sample: tuple[str, str]) -> Reply:
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
                raise ChainFailed(describe_error(exc)) from exc
            return Reply(got.text, key, got.prompt_tokens, got.completion_tokens, 0)
        try:
            entry = None if self.dry_run else self.cache.get(key)
            if entry is not None:
                with self._lock:
                    self.cached += 1
                reply = Reply(entry["text"], key, entry["prompt_tokens"], entry["completion_tokens"], 0)
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
                reply = Reply(c.text, key, c.prompt_tokens, c.completion_tokens, c.requests)
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
class ChainSettings:
    """What every chain of a run shares: the corpus, the models, the media options, the retries of
    an invalid reply, the prompt templates and the run's id."""

    corpus: Path
    model: str
    text_model: str
    media: MediaOptions
    schema_retries: int
    templates: Path
    run_id: str


def media_of(corpus: Path, sample: Sample, row: dict[str, Any]) -> list[Media]:
    """The video of ``row`` and, where it has audio, the clip's 16 kHz wav."""
    def media(kind: str, r: dict[str, Any]) -> Media:
        path = corpus / r["path"]
        if not path.is_file():
            raise ChainFailed(f"{r['path']} is missing from the corpus folder")
        if not r.get("sha256"):
            r = dict(r, sha256=sha256_file(path))
        return Media(kind, path, r["path"], r["sha256"], r.get("frames"))

    out = [media("video", row)]
    if row.get("has_audio"):
        audio = sample.rows.get("audio")
        if audio is None:
            raise ChainFailed(f"{row['path']} has audio but the manifest has no 16 kHz audio row for its clip")
        out.append(media("audio", audio))
    return out


def run_chain(sample: Sample, s: ChainSettings, caller: Caller) -> dict[str, Any]:
    """The row (:data:`~.outputs.COLUMNS`) of ``sample``'s chain: its four stages (module docstring)."""
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
            history: list[tuple[str, str]] | None = None) -> Reply:
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
                 schema: dict[str, Any]) -> tuple[dict[str, Any], Reply, int]:
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
        raise ChainFailed(f"invalid reply after {attempt} attempt{'s' if attempt > 1 else ''}: {error}")

    try:
        if emotion not in EMOTIONS:
            raise ChainFailed(f"no ground-truth emotion for clip {row['clip_id']} (manifest label {emotion!r})")
        # Stage I: the target for FM and VMM (and AMM, its own clear version), else the clear version.
        clear_code = CLEAR_VERSION.get(subset, subset)
        clear_row = sample.rows.get(clear_code)
        if clear_row is None:
            raise ChainFailed(f"the clear version {clear_code} of clip {row['clip_id']} is not in the manifest "
                          f"(build it: --subsets {clear_code},...)")
        t = time.perf_counter()
        m1 = media_of(s.corpus, sample, clear_row)
        system, user = render("stage1", s.templates, **slots(m1, clear_row))
        r1 = ask("stage1", "stage1", s.model, system, user, m1)
        rec.update(stage1_video=m1[0].ref, stage1_audio=m1[1].ref if len(m1) > 1 else None, stage1_key=r1.key,
                   stage1_output=r1.text, stage1_s=time.perf_counter() - t)
        oracle = r1.text
        # Stage II: face-blurred subsets, light or heavy prompt from the manifest's blur level.
        stage = "II"
        if subset in CLEAR_VERSION:
            if blur not in ("light", "heavy"):
                raise ChainFailed(f"blur level {blur!r} of a face-blurred subset in the manifest")
            t = time.perf_counter()
            m2 = media_of(s.corpus, sample, row)
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
        m4 = media_of(s.corpus, sample, row)
        system, user = render("stage4", s.templates, verified_cues=verified, emotion_cues=emotion_cues, **slots(m4))
        obj4, r4, n4 = ask_json("stage4", s.model, system, user, m4, stage4_schema(emotion))
        rec.update(stage4_video=m4[0].ref, stage4_audio=m4[1].ref if len(m4) > 1 else None, stage4_key=r4.key,
                   stage4_output=r4.text, stage4_attempts=n4, scene_understanding=obj4["scene_understanding"],
                   emotional_analysis=obj4["emotional_analysis"], coe=json.dumps(obj4, ensure_ascii=False),
                   stage4_s=time.perf_counter() - t)
        rec.update(status="ok")
    except Stopped:
        raise  # the run is stopping: no row (a rerun makes this sample again)
    except ChainFailed as exc:
        rec.update(status="failed", reason=f"stage {stage}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the endpoint's error, after retries: recorded, the run goes on
        rec.update(status="failed", reason=f"stage {stage}: {describe_error(exc)}")
    finally:
        rec["seconds"] = time.perf_counter() - started
    return rec


# ---------------------------------------------------------------------------------------- outputs


