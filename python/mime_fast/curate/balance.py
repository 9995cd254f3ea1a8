"""Balanced resampling against the long tail (:func:`draw`): ``per_class`` clips of each emotion
where there are that many, drawn stratified by corpus and seeded.

Stratified: an emotion's ``per_class`` places are shared among the corpora in proportion to the
clips each has of it (largest remainders, ties to the corpus named first), a corpus with fewer
clips than its share giving the rest to the others; within a corpus the clips are drawn at random
with ``random.Random(f"{seed}:{emotion}:{corpus}")`` from the list sorted by clip id, so the same
seed gives the same draw whatever order the clips were found in.  An emotion with fewer clips than
``per_class`` keeps them all: its shortfall is reported.
"""

from __future__ import annotations

import random

__all__ = ["allocate", "draw"]


def allocate(available: dict[str, int], places: int) -> dict[str, int]:
    """``places`` shared among the corpora of ``available`` (corpus -> clips) in proportion, no
    corpus given more than it has."""
    share = {c: 0 for c in available}
    left = min(places, sum(available.values()))
    while left > 0:
        open_ = {c: n - share[c] for c, n in available.items() if n > share[c]}
        total = sum(open_.values())
        exact = {c: left * n / total for c, n in open_.items()}
        given = {c: min(open_[c], int(exact[c])) for c in open_}
        rest = left - sum(given.values())
        for c in sorted(open_, key=lambda c: (-(exact[c] - int(exact[c])), c)):
            if rest <= 0:
                break
            if given[c] < open_[c]:
                given[c] += 1
                rest -= 1
        for c, g in given.items():
            share[c] += g
        left -= sum(given.values())
    return share


def draw(pool: dict[str, dict[str, list[str]]], per_class: int | None, seed: int) -> tuple[set[str], dict[str, int]]:
    """The clip ids drawn from ``pool`` (emotion -> corpus -> clip ids) and each emotion's shortfall
    (places it could not fill; ``per_class`` ``None``: every clip, no shortfall)."""
    chosen: set[str] = set()
    shortfall: dict[str, int] = {}
    for emotion in sorted(pool):
        corpora = pool[emotion]
        if per_class is None:
            chosen.update(i for ids in corpora.values() for i in ids)
            continue
        counts = {c: len(ids) for c, ids in sorted(corpora.items())}
        if sum(counts.values()) < per_class:
            shortfall[emotion] = per_class - sum(counts.values())
        for corpus, n in allocate(counts, per_class).items():
            ids = sorted(corpora[corpus])
            chosen.update(random.Random(f"{seed}:{emotion}:{corpus}").sample(ids, n))
    return chosen, shortfall
