"""Requests to an OpenAI-compatible chat endpoint through the official ``openai`` client: the
media parts of a message, and completions with a concurrency limit and retries with backoff.

Media (:class:`MediaOptions`):

- ``mode="video"`` (default): the video as a ``video_url`` part (a ``data:video/mp4;base64`` URL,
  or ``base_url`` + its path in the corpus where the server reads the corpus itself, e.g. vLLM's
  ``--allowed-local-media-path`` behind ``file://``), plus the clip's 16 kHz wav as an
  ``input_audio`` part (``audio_url`` with ``base_url``) -- what vLLM and SGLang accept for
  Qwen3-Omni;
- ``mode="frames"``: for endpoints without video input, ``frames`` frames sampled evenly over the
  clip as JPEG ``image_url`` parts (longest side at most ``frame_size`` px), plus the audio.

A video whose subset has no audio (FDAM, FSAM, AMM) is sent without any audio part.
"""

from __future__ import annotations

import base64
import os
import random
import socket
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["DEFAULT_QSCALE", "ChatClient", "ClientOptions", "Completion", "EndpointUnreachable", "MIN_FRAME_SIZE", "Media",
           "MediaOptions",
           "RETRYABLE_STATUS", "Stopped", "elide", "encode_jpeg", "jpeg_frames", "jpeg_size", "media_parts",
           "sample_frames"]

#: The smallest ``frame_size`` (longest side of a frame, px) of ``mode="frames"``.
MIN_FRAME_SIZE = 16

#: The JPEG frames' default quantiser scale (``MediaOptions.quality``).
DEFAULT_QSCALE = 3

#: HTTP statuses retried with backoff (besides timeouts and connection errors).
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Media:
    """One file sent with a request: ``kind`` ``"video"`` or ``"audio"``, its absolute ``path``,
    ``ref`` (its path in the corpus, what the records show) and content ``sha256``."""

    kind: str
    path: Path
    ref: str
    sha256: str
    frames: int | None = None  # the video's frame count (frames mode picks from it)


@dataclass(frozen=True)
class MediaOptions:
    mode: str = "video"
    frames: int = 8
    frame_size: int = 448
    base_url: str | None = None
    quality: int = DEFAULT_QSCALE  # the JPEG frames' quantiser scale (FFmpeg's qscale: 2 best .. 31 worst)

    def __post_init__(self) -> None:
        if self.mode not in ("video", "frames"):
            raise ValueError(f"media mode must be 'video' or 'frames', not {self.mode!r}")
        if self.frames < 1 or self.frame_size < MIN_FRAME_SIZE:
            raise ValueError(f"frames must be >= 1 and frame_size >= {MIN_FRAME_SIZE}")
        if not 2 <= self.quality <= 31:
            raise ValueError(f"the JPEG quality (qscale) must be 2..31, not {self.quality}")

    def key(self) -> dict[str, Any]:
        """What changes the bytes sent (part of the cache key; the default quality is left out, so
        the keys of caches written before it could be chosen stay the same)."""
        if self.mode == "frames":
            q = {} if self.quality == DEFAULT_QSCALE else {"quality": self.quality}
            return {"mode": "frames", "frames": self.frames, "frame_size": self.frame_size, **q}
        return {"mode": "video", "by": "url" if self.base_url else "data"}


def _url(opts: MediaOptions, ref: str) -> str:
    assert opts.base_url is not None
    return opts.base_url.rstrip("/") + "/" + quote(ref)


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def sample_frames(path: Path, count: int, total: int | None) -> list[Any]:
    """``count`` frames (PyAV ``VideoFrame``) sampled evenly over the video: the centre of
    ``count`` equal spans (``total``: the video's frame count, where known)."""
    import av
    from ..media import av_path

    with av.open(av_path(path)) as c:
        stream = c.streams.video[0]
        n = total or stream.frames
        if not n:
            n = sum(1 for _ in c.decode(stream))
            c.seek(0)
        wanted = sorted({min(n - 1, int((i + 0.5) * n / count)) for i in range(count)})
        picked = []
        for i, frame in enumerate(c.decode(stream)):
            if i in wanted:
                picked.append(frame)
                if len(picked) == len(wanted):
                    break
    return picked


def encode_jpeg(frame: Any, frame_size: int, quality: int = DEFAULT_QSCALE) -> bytes:
    """A PyAV ``VideoFrame`` as the JPEG sent: longest side at most ``frame_size`` px (even sides),
    quantiser scale ``quality``."""
    import av

    w, h = jpeg_size(frame.width, frame.height, frame_size)
    enc = av.CodecContext.create("mjpeg", "w")
    enc.width, enc.height, enc.pix_fmt, enc.time_base = w, h, "yuvj420p", Fraction(1, 25)
    enc.options = {"qscale": str(quality)}
    packets = enc.encode(frame.reformat(w, h, "yuvj420p")) + enc.encode(None)
    return b"".join(bytes(p) for p in packets)


def jpeg_size(width: int, height: int, frame_size: int) -> tuple[int, int]:
    """(width, height) of the JPEG :func:`encode_jpeg` makes of a ``width`` x ``height`` frame."""
    scale = min(1.0, frame_size / max(width, height))
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)


def jpeg_frames(path: Path, count: int, frame_size: int, total: int | None,
                quality: int = DEFAULT_QSCALE) -> list[bytes]:
    """``count`` frames sampled evenly over the video (:func:`sample_frames`), as JPEG (:func:`encode_jpeg`)."""
    return [encode_jpeg(f, frame_size, quality) for f in sample_frames(path, count, total)]


def media_parts(media: list[Media], opts: MediaOptions) -> list[dict[str, Any]]:
    """The content parts of ``media`` (videos first, then audio), encoded as ``opts`` says."""
    parts: list[dict[str, Any]] = []
    for m in sorted(media, key=lambda m: m.kind != "video"):
        if m.kind == "video" and opts.mode == "frames":
            for jpeg in jpeg_frames(m.path, opts.frames, opts.frame_size, m.frames, opts.quality):
                parts.append({"type": "image_url", "image_url": {"url": _data_url("image/jpeg", jpeg)}})
        elif m.kind == "video":
            url = _url(opts, m.ref) if opts.base_url else _data_url("video/mp4", m.path.read_bytes())
            parts.append({"type": "video_url", "video_url": {"url": url}})
        elif m.kind == "audio" and opts.base_url:
            parts.append({"type": "audio_url", "audio_url": {"url": _url(opts, m.ref)}})
        elif m.kind == "audio":
            data = base64.b64encode(m.path.read_bytes()).decode("ascii")
            parts.append({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}})
        else:
            raise ValueError(f"unknown media kind {m.kind!r}")
    return parts


def elide(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every inline media payload replaced by its size (for printing)."""
    def short(s: str) -> str:
        if s.startswith("data:") and ";base64," in s:
            head, data = s.split(",", 1)
            return f"{head},<{len(data) * 3 // 4} bytes>"
        return s

    out = []
    for msg in messages:
        content = msg["content"]
        if isinstance(content, list):
            parts = []
            for p in content:
                p = {k: (dict(v) if isinstance(v, dict) else v) for k, v in p.items()}
                for v in p.values():
                    if isinstance(v, dict):
                        for k in ("url", "data"):
                            if isinstance(v.get(k), str):
                                v[k] = short(v[k]) if k == "url" else f"<{len(v[k]) * 3 // 4} bytes>"
                parts.append(p)
            content = parts
        out.append(dict(msg, content=content))
    return out


class Stopped(Exception):
    """The run is stopping (Ctrl-C, or an error that ends it): no request is sent after it."""


class EndpointUnreachable(Exception):
    """No connection could be made to the endpoint (refused, host not found, connect timeout) and
    it has answered no request yet: every request would meet the same, so none is retried."""


def _connect_failure(exc: BaseException) -> BaseException | None:
    """The innermost error under ``exc`` where ``exc`` is a failure to connect (the ``openai``
    client wraps httpx's ``ConnectError``/``ConnectTimeout``, which wrap the socket's error)."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    if any(type(e).__name__ in ("ConnectError", "ConnectTimeout") or isinstance(e, (ConnectionRefusedError,
                                                                                       socket.gaierror))
           for e in chain):
        return chain[-1]
    return None


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    requests: int  # HTTP requests made (1 + retries)


@dataclass(frozen=True)
class ClientOptions:
    """How a run talks to its endpoint, the same for the Chain-of-Emotion (:func:`mime_fast.coe.run`)
    and the evaluation (:func:`mime_fast.evaluate`), and for their commands' shared flags.

    ``endpoint``: an OpenAI-compatible base URL (``http://host:8000/v1``); ``model``: the model asked;
    the API key is ``api_key`` or the environment variable ``api_key_env`` (:meth:`secret`), never
    written anywhere; ``concurrency`` .. ``extra_body``: :class:`ChatClient`'s; replies cached in
    ``cache_dir`` (``None``: the run's own folder; ``use_cache=False``: none); ``dry_run``: no
    request is sent and nothing is written (what each run returns instead: its docstring)."""

    endpoint: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 300.0
    temperature: float | None = 0.0
    max_tokens: int | None = 2048
    extra_body: dict[str, Any] | None = None
    cache_dir: str | os.PathLike | None = None
    use_cache: bool = True
    dry_run: bool = False

    def secret(self) -> str:
        """The API key: ``api_key``, else the variable ``api_key_env`` (empty when unset)."""
        return self.api_key if self.api_key is not None else os.environ.get(self.api_key_env, "")

    def chat_client(self, stop: threading.Event) -> ChatClient:
        """A :class:`ChatClient` on these options, stopped by ``stop``."""
        return ChatClient(self.endpoint, self.secret(), concurrency=self.concurrency, retries=self.retries,
                          backoff=self.backoff, timeout=self.timeout, temperature=self.temperature,
                          max_tokens=self.max_tokens, extra_body=self.extra_body, stop=stop)


@dataclass
class ChatClient:
    """Chat completions against ``endpoint`` (an OpenAI-compatible ``.../v1`` base URL): at most
    ``concurrency`` requests in flight; 429, 5xx, timeouts and connection errors retried up to
    ``retries`` times, waiting the server's ``Retry-After`` or ``backoff`` x 2^n seconds (with
    jitter, at most ``max_backoff``). The API key is held by the ``openai`` client only. Once
    ``stop`` is set, no request (nor retry) is started: :class:`Stopped` is raised instead, and a
    retry's wait ends at once. Until the endpoint has answered once (``answered``), a failure to
    connect raises :class:`EndpointUnreachable` at once, without retries."""

    endpoint: str
    api_key: str
    concurrency: int = 4
    retries: int = 5
    backoff: float = 1.0
    max_backoff: float = 60.0
    timeout: float = 300.0
    temperature: float | None = 0.0
    max_tokens: int | None = 2048
    extra_body: dict[str, Any] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    requests: int = field(default=0, init=False)
    prompt_tokens: int = field(default=0, init=False)
    completion_tokens: int = field(default=0, init=False)
    answered: bool = field(default=False, init=False)  # an HTTP response came, an error status or not

    def __post_init__(self) -> None:
        import openai

        if self.concurrency < 1 or self.retries < 0:
            raise ValueError("concurrency must be >= 1 and retries >= 0")
        if not self.timeout > 0 or (self.max_tokens is not None and self.max_tokens < 1):
            raise ValueError("timeout must be > 0 and max_tokens >= 1 (or None)")
        self._client = openai.OpenAI(base_url=self.endpoint, api_key=self.api_key or "EMPTY", max_retries=0,
                                     timeout=self.timeout)
        self._slots = threading.Semaphore(self.concurrency)
        self._lock = threading.Lock()

    def params(self) -> dict[str, Any]:
        """The sampling parameters (part of the cache key)."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "extra_body": self.extra_body}

    def _wait(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        after = response.headers.get("retry-after") if response is not None else None
        try:
            if after is not None:
                return min(self.max_backoff, max(0.0, float(after)))
        except ValueError:
            pass
        return min(self.max_backoff, self.backoff * 2 ** attempt * (0.5 + random.random()))

    def complete(self, model: str, messages: list[dict[str, Any]], *, stage: str = "") -> Completion:
        import openai

        kwargs: dict[str, Any] = {}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        attempt = 0
        while True:
            with self._slots:
                if self.stop.is_set():
                    raise Stopped()
                with self._lock:
                    self.requests += 1
                try:
                    resp = self._client.chat.completions.create(model=model, messages=messages, **kwargs)
                    error = None
                    self.answered = True
                except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                    cause = None if self.answered else _connect_failure(exc)
                    if cause is not None:
                        raise EndpointUnreachable(f"the endpoint {self.endpoint} cannot be reached ({cause})") from exc
                    error = exc
                except openai.APIStatusError as exc:
                    self.answered = True
                    if exc.status_code not in RETRYABLE_STATUS:
                        exc.mime_fast_requests = attempt + 1  # type: ignore[attr-defined]
                        raise
                    error = exc
            if error is None:
                break
            if attempt >= self.retries:
                error.mime_fast_requests = attempt + 1  # type: ignore[attr-defined]  # counted by the caller
                raise error
            if self.stop.wait(self._wait(attempt, error)):
                raise Stopped()
            attempt += 1
        text = resp.choices[0].message.content if resp.choices else None
        usage = resp.usage
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        with self._lock:
            self.prompt_tokens += pt
            self.completion_tokens += ct
        return Completion(text=text or "", prompt_tokens=pt, completion_tokens=ct, requests=attempt + 1)
