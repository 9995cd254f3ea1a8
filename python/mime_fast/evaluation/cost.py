"""What an evaluation costs: money from tokens (prices per million), a spending limit that stops
the run before it is exceeded, and a dry run's estimate.

:class:`Budget` (``max_cost``): before each request it reserves the most one request has cost so
far in the run (the first requests, whose cost nothing tells yet, reserve nothing: at most
``concurrency`` of them are in flight); a request that would take the money spent and reserved
past ``max_cost`` is not sent, and neither is any after it. The limit is on what the run spends:
answers from the cache were paid by an earlier run. A rerun with a higher limit resumes from the
cache.

:func:`estimate` (the dry run): the prompt tokens of the requests not answered yet, and their money.
Two bases:

- ``"answers"`` -- once some requests of this run are in the cache: scaled from them, prompt
  tokens per second of clip (a clip's media tokens grow with its duration) per subset (all subsets
  where a subset has none answered), completion tokens per answer;
- ``"media"`` -- before any answer: counted from the media each request carries, the way a
  Qwen-Omni model (the paper's Chain-of-Emotion model family) counts them (:class:`TokenRule`:
  pictures in 28 x 28 px cells, a video sampled at 2 fps with two frames to one set of cells, 25
  audio tokens a second, about 4 characters a text token). Completion tokens cannot be told from
  the media: the estimate gives their upper bound, ``max_tokens`` per request
  (``completion_tokens_max``, ``money_max``). Other models count otherwise (an API that tiles
  pictures, one that samples video at 1 fps): ask a few first (``--limit 5``) and the dry run
  scales from their answers.

The media count (``media_prompt_tokens``) is always reported beside, so the two can be compared.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Budget", "TokenRule", "estimate", "money"]


def money(prompt_tokens: float, completion_tokens: float, price_in: float | None, price_out: float | None) -> Any:
    """The cost of the tokens at ``price_in`` / ``price_out`` per million, ``None`` without prices."""
    if price_in is None and price_out is None:
        return None
    return (prompt_tokens * (price_in or 0.0) + completion_tokens * (price_out or 0.0)) / 1e6


@dataclass(frozen=True)
class TokenRule:
    """How a Qwen-Omni model counts the prompt tokens of what it is sent (the processors of
    Qwen2.5-VL, Qwen2.5-Omni and Qwen3-Omni): a picture is resized to a multiple of ``cell`` px on
    each side within ``image_pixels`` and costs one token a cell; a video is sampled at
    ``video_fps`` (at least ``video_min_frames`` frames, an even count), each frame resized within
    ``frame_pixels``, and ``temporal_patch`` frames share one set of cells; audio costs
    ``audio_per_s`` tokens a second; text about one token per ``chars_per_token`` characters."""

    cell: int = 28  # 14 px patches merged 2 x 2
    image_pixels: tuple[int, int] = (4 * 28 * 28, 16384 * 28 * 28)
    video_fps: float = 2.0
    video_min_frames: int = 4
    frame_pixels: tuple[int, int] = (128 * 28 * 28, 768 * 28 * 28)
    temporal_patch: int = 2
    audio_per_s: float = 25.0
    chars_per_token: float = 4.0

    def cells(self, width: int, height: int, pixels: tuple[int, int]) -> int:
        """Token cells of a ``width`` x ``height`` picture resized as the model's processor does."""
        f = self.cell
        h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
        if h * w > pixels[1]:
            beta = math.sqrt(height * width / pixels[1])
            h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
        elif h * w < pixels[0]:
            beta = math.sqrt(pixels[0] / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return (h // f) * (w // f)

    def image(self, width: int, height: int) -> int:
        return self.cells(width, height, self.image_pixels)

    def video(self, width: int, height: int, seconds: float) -> int:
        t = self.temporal_patch
        frames = max(self.video_min_frames, math.floor(seconds * self.video_fps / t) * t)
        return frames // t * self.cells(width, height, self.frame_pixels)

    def audio(self, seconds: float) -> int:
        return math.ceil(seconds * self.audio_per_s)

    def text(self, chars: int) -> int:
        return math.ceil(chars / self.chars_per_token)


class Budget:
    """Money spent and reserved against ``max_cost`` (see the module's docstring)."""

    def __init__(self, max_cost: float, price_in: float | None, price_out: float | None):
        self.max_cost, self.price_in, self.price_out = max_cost, price_in, price_out
        self.spent = self.reserved = self.per_request = 0.0
        self.refused = 0
        self.exhausted = False
        self._lock = threading.Lock()

    def reserve(self) -> float | None:
        """The amount reserved for one request, or ``None``: not sent (nor any later one)."""
        with self._lock:
            if self.exhausted or self.spent + self.reserved + self.per_request > self.max_cost:
                self.exhausted = True
                self.refused += 1
                return None
            self.reserved += self.per_request
            return self.per_request

    def settle(self, reserved: float, prompt_tokens: int, completion_tokens: int) -> None:
        cost = money(prompt_tokens, completion_tokens, self.price_in, self.price_out) or 0.0
        with self._lock:
            self.reserved -= reserved
            self.spent += cost
            self.per_request = max(self.per_request, cost)


def estimate(pending: list[tuple[str, float, int]], answered: list[tuple[str, float, int, int]],
             price_in: float | None, price_out: float | None, max_tokens: int | None = None) -> dict[str, Any]:
    """``pending``: (subset, clip seconds, prompt tokens counted from its media by
    :class:`TokenRule`) of the requests to make; ``answered``: (subset, clip seconds, prompt
    tokens, completion tokens) of the answers in the cache; ``max_tokens``: the completion limit of
    a request (the bound on completion tokens before any answer)."""
    media_prompt = sum(p[2] for p in pending)
    out: dict[str, Any] = {"requests": len(pending), "media_s": sum(p[1] for p in pending), "answered": len(answered),
                           "basis": "answers" if answered else "media", "media_prompt_tokens": media_prompt,
                           "prompt_tokens": media_prompt, "completion_tokens": None, "money": None}
    if not pending:
        out.update(prompt_tokens=0, completion_tokens=0, money=money(0, 0, price_in, price_out))
        return out
    if not answered:
        bound = None if max_tokens is None else max_tokens * len(pending)
        out.update(completion_tokens_max=bound, money_prompt=money(media_prompt, 0, price_in, price_out),
                   money_max=None if bound is None else money(media_prompt, bound, price_in, price_out))
        return out

    def rate(rows: list[tuple[str, float, int, int]]) -> float:
        seconds = sum(r[1] for r in rows)
        return sum(r[2] for r in rows) / seconds if seconds > 0 else 0.0

    overall = rate(answered)
    by_subset = {s: rate([r for r in answered if r[0] == s]) for s in {r[0] for r in answered}}
    prompt = sum(by_subset.get(p[0], overall) * p[1] for p in pending)
    completion = sum(r[3] for r in answered) / len(answered) * len(pending)
    out.update(prompt_tokens=round(prompt), completion_tokens=round(completion),
               money=money(prompt, completion, price_in, price_out))
    return out
