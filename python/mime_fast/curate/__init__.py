"""``mime-fast curate``: MIME's first step, clips chosen from corpus releases (CAER, DFEW, MAFW,
FERV39k, or ``<Emotion>/`` folders): labels mapped to MIME's seven emotions, ambiguous labels, low
resolutions, severe watermarks and duplicates excluded with their reasons, and a balanced draw
against the long tail (``docs/curate.md``).

One job per module, one way: :mod:`.labels` (label names, split lists, votes, ambiguity) ->
:mod:`.layouts` (the releases' layouts) ; :mod:`.watermark` (static overlays) and :mod:`.dedup`
(the video hash, copies) -> :mod:`.probe` (one sampled decode per clip, in parallel, cached);
:mod:`.balance` (the draw); :mod:`.options`; :mod:`.report` (the outputs) -> :mod:`.run`
(:func:`curate`).
"""

from __future__ import annotations

from .layouts import LAYOUTS, Clip, UnknownLayout
from .options import CurateOptions, Curation
from .run import Root, curate, resolve_roots

__all__ = ["LAYOUTS", "Clip", "CurateOptions", "Curation", "Root", "UnknownLayout", "curate", "resolve_roots"]
