"""What a curation is asked for (:class:`CurateOptions`), checked when made, and what it decided
(:class:`Curation`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..options import GateOptions
from .layouts import Clip

__all__ = ["WATERMARK_MODES", "CurateOptions", "Curation"]

WATERMARK_MODES = ("drop", "report")


@dataclass(frozen=True)
class CurateOptions:
    """``per_class``: clips drawn per emotion (``None``: every clip that passes); ``seed``: the
    draw's; ``min_agreement``: the share of annotators a label needs where votes exist;
    ``min_height``, ``min_duration``: the shorter displayed side and the seconds of video a clip
    needs (``mime-fast build``'s gate and its defaults: a clip selected is one build accepts);
    ``watermarks``: ``"drop"`` severe ones or only ``"report"`` them; ``workers``: probing processes;
    ``progress``: a progress bar over the probes (on a terminal)."""

    per_class: int | None = None
    seed: int = 0
    min_agreement: float = 0.5
    min_height: int = GateOptions.min_height
    min_duration: float = GateOptions.min_duration
    watermarks: str = "drop"
    workers: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        if self.per_class is not None and int(self.per_class) < 1:
            raise ValueError(f"per_class must be >= 1, got {self.per_class}")
        if not 0.0 <= float(self.min_agreement) <= 1.0:
            raise ValueError(f"min_agreement must be between 0 and 1, got {self.min_agreement}")
        if int(self.min_height) < 0:
            raise ValueError(f"min_height must be >= 0, got {self.min_height}")
        if float(self.min_duration) < 0:
            raise ValueError(f"min_duration must be >= 0, got {self.min_duration}")
        if self.watermarks not in WATERMARK_MODES:
            raise ValueError(f"watermarks must be one of {', '.join(WATERMARK_MODES)}, got {self.watermarks!r}")
        if int(self.workers) < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")


@dataclass
class Curation:
    """What :func:`mime_fast.curate.curate` decided: every clip found, the selected ones, each
    emotion's shortfall, the overlays found (clip id -> blobs) and the outputs written."""

    clips: list[Clip]
    selected: list[Clip]
    shortfall: dict[str, int]
    overlays: dict[str, list[dict]] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)
