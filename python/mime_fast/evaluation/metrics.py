"""The evaluation's statistics, with numpy and ``math`` alone (no scipy): per-subset scores, a
bootstrap interval, the exact McNemar test, Holm's correction, and the MIME indices.

A prediction is a label or ``None`` (an unparseable answer): ``None`` is wrong, counts against the
recall of its true class and in no class's precision.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["BOOTSTRAP", "SEED", "bootstrap_ci", "confusion", "holm", "mcnemar_exact", "scores"]

#: Bootstrap resamples and the seed that makes the interval the same on every run.
BOOTSTRAP = 2000
SEED = 20240601


def scores(truth: Sequence[str], pred: Sequence[str | None]) -> dict[str, Any]:
    """``n``, ``accuracy`` (WAR), ``uar`` (mean recall over the classes present in ``truth``) and
    ``waf`` (F1 weighted by support over those classes); ``None`` for an empty sample."""
    n = len(truth)
    if n == 0:
        return {"n": 0, "accuracy": None, "uar": None, "waf": None}
    right = [t == p for t, p in zip(truth, pred)]
    recalls, waf = [], 0.0
    for c in sorted(set(truth)):
        support = sum(t == c for t in truth)
        tp = sum(t == c and p == c for t, p in zip(truth, pred))
        fp = sum(t != c and p == c for t, p in zip(truth, pred))
        fn = support - tp
        recalls.append(tp / support)
        waf += support * (2 * tp / (2 * tp + fp + fn))
    return {"n": n, "accuracy": sum(right) / n, "uar": sum(recalls) / len(recalls), "waf": waf / n}


def bootstrap_ci(correct: Sequence[bool], *, resamples: int = BOOTSTRAP, seed: int = SEED) -> list[float] | None:
    """95% percentile interval of the accuracy, resampling clips with replacement (fixed seed:
    the same interval on every run); ``None`` for no clip."""
    x = np.asarray(correct, dtype=np.float64)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return [float(lo), float(hi)]


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar test: ``2 P(X <= min(b, c))`` for ``X ~ Binomial(b + c, 1/2)``,
    at most 1 (``b + c = 0``: 1)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``ps`` (``None`` entries are not tests: kept ``None``)."""
    idx = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])  # type: ignore[arg-type]
    m = len(idx)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))  # type: ignore[operator]
        out[i] = running
    return out


def confusion(truth: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]) -> dict[str, dict[str, int]]:
    """``{true label: {predicted label or "unparseable": count}}`` over the labels present."""
    out: dict[str, dict[str, int]] = {}
    for t, p in zip(truth, pred):
        row = out.setdefault(t, {})
        key = p if p is not None else "unparseable"
        row[key] = row.get(key, 0) + 1
    order = {label: i for i, label in enumerate((*labels, "unparseable"))}
    return {t: dict(sorted(r.items(), key=lambda kv: order.get(kv[0], 99)))
            for t, r in sorted(out.items(), key=lambda kv: order.get(kv[0], 99))}
