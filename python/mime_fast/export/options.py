"""What an export is asked to do (:class:`ExportOptions`, checked when made) and the error a bad
request or a bad corpus raises (:class:`ExportError`: one line naming the item and the reason)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FORMATS", "ExportError", "ExportOptions"]

#: The release formats: a Hugging Face ``datasets`` folder, an lmms-eval task folder.
FORMATS = ("hf", "lmms-eval")


class ExportError(ValueError):
    """A request or a corpus that cannot be exported: the message names the item, the reason and,
    where there is one, the fix.  Raised before anything is written."""


@dataclass(frozen=True)
class ExportOptions:
    """format
        ``"hf"`` or ``"lmms-eval"`` (:data:`FORMATS`).
    coe_accepted
        Keep only the samples whose Chain-of-Emotion was accepted (``coe.jsonl`` status ``ok``),
        per subset: MIME's final benchmark.  Needs ``coe.jsonl``.
    link
        Hard-link the media files instead of copying them (a symbolic link where the two folders
        are on different file systems)."""

    format: str = "hf"
    coe_accepted: bool = False
    link: bool = False

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ExportError(f"unknown export format {self.format!r}; expected one of {', '.join(FORMATS)}")
