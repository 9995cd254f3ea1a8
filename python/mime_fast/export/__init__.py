"""``mime-fast export``: a built corpus and its Chain-of-Emotion as a release that the field's
tools load -- a Hugging Face ``datasets`` folder (:mod:`.hf`) or an lmms-eval task folder
(:mod:`.lmms`).

>>> from mime_fast.export import ExportOptions, export
>>> export("mime_out", "mime_hf", ExportOptions(format="hf", coe_accepted=True))

:mod:`.corpus` reads and checks the corpus, :mod:`.files` the destination and the media files
(copied or linked, a rerun completing a partial export), :mod:`.run` drives an export.
"""

from __future__ import annotations

from .options import FORMATS, ExportError, ExportOptions
from .run import ExportResult, export

__all__ = ["FORMATS", "ExportError", "ExportOptions", "ExportResult", "export"]
