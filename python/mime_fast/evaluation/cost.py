"""What an evaluation costs: money from tokens (prices per million), a spending limit that stops
the run before it is exceeded, and a dry run's estimate.

:class:`Budget` (``max_cost``): before each request it reserves the most one request has cost so
far in the run (the first requests, whose cost nothing tells yet, reserve nothing: at most
``concurrency`` of them are in flight); a request that would take the money spent and reserved
past ``max_cost`` is not sent, and neither is any after it. The limit is on what the run spends:
answers from the cache were paid by an earlier run. A rerun with a higher limit resumes from the
cache.

:func:`estimate` (the dry run): the requests not answered yet, scaled from the answered ones (the
cache's): prompt tokens per second of clip -- a clip's media tokens grow with its duration -- per
subset (all subsets where a subset has none answered), completion tokens per answer. With no answer
to scale from, no token estimate: ask a few first (``--limit 5``).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Budget", "estimate", "money"]


def money(prompt_tokens: float, completion_tokens: float, price_in: float | None, price_out: float | None) -> Any:
    """The cost of the tokens at ``price_in`` / ``price_out`` per million, ``None`` without prices."""
    if price_in is None and price_out is None:
        return None
    return (prompt_tokens * (price_in or 0.0) + completion_tokens * (price_out or 0.0)) / 1e6


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


def estimate(pending: list[tuple[str, float]], answered: list[tuple[str, float, int, int]],
             price_in: float | None, price_out: float | None) -> dict[str, Any]:
    """``pending``: (subset, clip seconds) of the requests to make; ``answered``: (subset, clip
    seconds, prompt tokens, completion tokens) of the answers in the cache."""
    out: dict[str, Any] = {"requests": len(pending), "media_s": sum(d for _, d in pending), "answered": len(answered),
                           "prompt_tokens": None, "completion_tokens": None, "money": None}
    if not answered or not pending:
        if not pending:
            out.update(prompt_tokens=0, completion_tokens=0, money=money(0, 0, price_in, price_out))
        return out

    def rate(rows: list[tuple[str, float, int, int]]) -> float:
        seconds = sum(r[1] for r in rows)
        return sum(r[2] for r in rows) / seconds if seconds > 0 else 0.0

    overall = rate(answered)
    by_subset = {s: rate([r for r in answered if r[0] == s]) for s in {r[0] for r in answered}}
    prompt = sum(by_subset.get(s, overall) * d for s, d in pending)
    completion = sum(r[3] for r in answered) / len(answered) * len(pending)
    out.update(prompt_tokens=round(prompt), completion_tokens=round(completion),
               money=money(prompt, completion, price_in, price_out))
    return out
