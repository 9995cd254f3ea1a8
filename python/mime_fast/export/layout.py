"""What a writer makes of a corpus: the media files to place and the texts to write, by their
paths relative to the destination (POSIX), and notes for the person exporting."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Layout"]


@dataclass
class Layout:
    #: (source relative to the corpus folder, target relative to the destination)
    media: list[tuple[str, str]] = field(default_factory=list)
    #: target relative to the destination -> its text
    texts: dict[str, str] = field(default_factory=dict)
    #: per subset, the samples exported
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
