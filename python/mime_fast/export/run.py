"""One export: the corpus read and checked, the destination checked, then the media placed and
the texts written (:func:`export`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import read_corpus
from .files import Placed, check_destination, mark, place, prune, write_text
from .hf import hf_layout
from .layout import Layout
from .lmms import lmms_layout
from .options import ExportOptions

__all__ = ["ExportResult", "export"]


@dataclass
class ExportResult:
    """What an export wrote: ``counts`` per subset (the samples exported), the media files
    ``placed`` (copied, linked, or kept from an earlier run), files ``removed`` that were no longer
    part of the export, and ``notes`` for the person exporting."""

    dest: Path
    format: str
    counts: dict[str, int]
    placed: Placed
    removed: int = 0
    notes: list[str] = field(default_factory=list)


def export(corpus_dir: str | os.PathLike, dest: str | os.PathLike, options: ExportOptions | None = None,
           progress: Callable[[int, int], None] | None = None) -> ExportResult:
    """Export the corpus built in ``corpus_dir`` to the folder ``dest`` in ``options.format``.

    Everything is checked before anything is written (:class:`~mime_fast.export.ExportError`, one
    line). A rerun into the same folder completes a partial export (the files already placed are
    kept) and brings it up to date (what is no longer part of it is removed); the texts are written
    last, so that an interrupted export does not load as a complete one.  ``progress(done, total)``
    after each media file."""
    options = options or ExportOptions()
    corpus_dir, dest = Path(corpus_dir), Path(dest)
    corpus = read_corpus(corpus_dir, options)
    check_destination(corpus_dir, dest, options.format)
    layout: Layout = (hf_layout(corpus, options.coe_accepted) if options.format == "hf"
                      else lmms_layout(corpus, options.coe_accepted))
    mark(corpus_dir, dest, options.format)
    # (the texts too: written last, so that an interrupted export never loads as a complete one)
    removed = prune(dest, {target for _, target in layout.media}, set(layout.texts))
    placed = Placed()
    for i, (source, target) in enumerate(layout.media):
        place(corpus_dir / source, dest / target, options.link, placed)
        if progress is not None:
            progress(i + 1, len(layout.media))
    for target, text in layout.texts.items():
        write_text(dest / target, text)
    return ExportResult(dest, options.format, layout.counts, placed, removed, layout.notes)
