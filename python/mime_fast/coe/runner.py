"""The CoE run over a built corpus (:func:`run`): Algorithm 1's chain (:mod:`.chain`) for every
``ok`` row of the manifest, driven on daemon threads (:func:`~.driver.drive`) with one stop event,
checked before every request, retry and stage: Ctrl-C sets it, and so does an error that every
later request would meet too -- the reply cache not writable, the endpoint unreachable before it
has answered once -- which the run then raises (:class:`~mime_fast.corpus.RunStopped`) instead
of failing sample after sample. A stopped chain writes no row; a rerun makes it from the cache.
Its outputs: :mod:`.outputs`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from itertools import groupby
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from ..corpus import RunStopped
from ..manifest import MANIFEST_JSONL, compact, read_rows
from .cache import ReplyCache
from .chain import Caller, ChainSettings, DryClient, Sample, run_chain
from .client import ClientOptions, MediaOptions, Stopped
from .driver import drive, os_error_text, scrub_secret
from .outputs import COE_JSONL, SUBSETS, CoEResult, read_coe, write_coe_outputs
from .prompts import TEMPLATE_DIR

__all__ = ["run", "unknown_clips"]


class _Progress:
    def __init__(self, total: int, client: Any, caller: Caller, stream: IO[str] | None, every: float = 2.0):
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


def _samples(corpus: Path, subsets: Iterable[str] | None, clips: Iterable[str] | None) -> list[Sample]:
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
    return [Sample(rows[s], rows) for clip, rows in by_clip.items() for s in SUBSETS
            if s in wanted and s in rows]



def run(
    corpus_dir: str | os.PathLike,
    client: ClientOptions,
    *,
    text_model: str | None = None,
    subsets: Iterable[str] | None = None,
    clips: Iterable[str] | None = None,
    limit: int | None = None,
    media: str = "video",
    frames: int = 8,
    frame_size: int = 448,
    media_base_url: str | None = None,
    schema_retries: int = 1,
    templates: str | os.PathLike = TEMPLATE_DIR,
    progress: IO[str] | None = sys.stderr,
    on_sample: Callable[[dict[str, Any]], None] | None = None,
) -> CoEResult:
    """Run Algorithm 1 over every ``ok`` row of the corpus manifest in ``corpus_dir`` (the subsets
    ``subsets``, the clips ``clips``, the first ``limit`` clips), writing ``coe.jsonl`` (a row
    appended as each sample ends), then ``coe.jsonl`` compacted to one row per (clip, subset),
    ``coe.parquet`` and ``coe_summary.csv`` beside the manifest.

    ``client`` (:class:`~mime_fast.coe.client.ClientOptions`): the endpoint, its model -- the MLLM
    (stages I, II, IV) -- and how it is asked; ``text_model``: stage III's (default the client's
    ``model``). The API key is never written anywhere. Replies are cached in the client's
    ``cache_dir`` (default ``corpus_dir/coe_cache``; ``use_cache=False``: none), so a rerun or a
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
    dry_run = client.dry_run
    if limit is not None and not dry_run:
        first = set(list(dict.fromkeys(s.row["clip_id"] for s in samples))[:max(0, limit)])
        samples = [s for s in samples if s.row["clip_id"] in first]
    opts = MediaOptions(mode=media, frames=frames, frame_size=frame_size, base_url=media_base_url)
    secret = client.secret()
    stop = threading.Event()
    options = client  # the options; ``client`` from here on: what sends the requests
    client = DryClient() if dry_run else options.chat_client(stop)  # type: ignore[assignment]
    cache = ReplyCache(None if not options.use_cache or dry_run else (options.cache_dir or corpus / "coe_cache"))
    caller = Caller(client, cache, opts, Path(templates), dry_run, stop)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    settings = ChainSettings(corpus, options.model, text_model or options.model, opts, schema_retries, Path(templates),
                         run_id)
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

    def one(sample: Sample) -> None:
        clip = sample.row["clip_id"]
        try:
            rec = run_chain(sample, settings, caller)
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
            drive(samples, options.concurrency, one, stop)
        if caller.fatal is not None:
            raise caller.fatal
    finally:
        if out is not None:
            with lock:
                closed = True
                out.close()
            if existed or rows:
                write_coe_outputs(corpus, read_coe(corpus))
            else:  # stopped before any sample ended (or none to run): no empty outputs
                (corpus / COE_JSONL).unlink()
    order = {s: i for i, s in enumerate(SUBSETS)}
    rows.sort(key=lambda r: (str(r["clip_id"]), order[r["subset"]]))
    return CoEResult(rows=rows, all_rows=[] if dry_run else read_coe(corpus), requests=0 if dry_run else client.requests,
                     cached=caller.cached, prompt_tokens=client.prompt_tokens,
                     completion_tokens=client.completion_tokens, elapsed_s=time.monotonic() - t0,
                     dry_run_requests=client.requests if dry_run else [])

