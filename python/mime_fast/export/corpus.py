"""A built corpus as the export reads it: the manifest's built outputs, one :class:`Sample` per
clip and subset, with the clip's label, its 16 kHz wav where the subset has audio, and the
Chain-of-Emotion of ``coe.jsonl`` where there is one (:func:`read_corpus`).

Everything is checked here, before anything is written: the manifest is there, every output it
lists is on disk with the size it recorded, and ``coe.jsonl`` is there when only the accepted
chains are asked for.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..coe import COE_JSONL, read_coe
from ..manifest import EMOTIONS, MANIFEST_JSONL, compact, read_rows
from ..spec import CODES
from .options import ExportError, ExportOptions

__all__ = ["COE_FIELDS", "BuiltCorpus", "Sample", "read_corpus"]

#: The Chain-of-Emotion fields a sample carries (``coe.jsonl``'s ``status`` as ``coe_status``, its
#: ``reason`` as ``coe_reason``); all ``None`` where no chain was made for it.
COE_FIELDS = ("coe_status", "coe_reason", "predicted_emotion", "emotion_cues", "scene_understanding",
              "emotional_analysis", "coe")


@dataclass(frozen=True)
class Sample:
    """One built output: ``path`` and ``audio_path`` relative to the corpus folder (POSIX), ``audio_path``
    the clip's 16 kHz wav where the output has audio (else ``None``); ``coe`` the fields of
    :data:`COE_FIELDS`."""

    clip_id: str
    subset: str
    path: str
    label: str | None
    dataset: str | None
    duration_s: float | None
    has_audio: bool
    kernel: int | None
    blur_level: str | None
    audio_path: str | None
    coe: dict[str, Any]


@dataclass
class BuiltCorpus:
    """The samples of a corpus in the MIME subset order, each subset's by clip id; the distinct
    build settings of its outputs (JSON objects); whether it has a ``coe.jsonl``."""

    root: Path
    samples: list[Sample]
    settings: list[dict[str, Any]]
    has_coe: bool
    #: per subset, the built outputs before ``coe_accepted`` kept only the accepted ones
    built: dict[str, int] = field(default_factory=dict)

    def by_subset(self) -> dict[str, list[Sample]]:
        """The samples of each subset that has any, in the MIME order."""
        out: dict[str, list[Sample]] = {}
        for s in self.samples:
            out.setdefault(s.subset, []).append(s)
        return out

    def label_counts(self) -> dict[str, Counter]:
        """Per subset: samples per label (``"(none)"`` for an unlabelled clip)."""
        return {code: Counter(s.label or "(none)" for s in rows) for code, rows in self.by_subset().items()}


def _coe_fields(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return dict.fromkeys(COE_FIELDS)
    return {"coe_status": row["status"], "coe_reason": row["reason"],
            **{k: row[k] for k in COE_FIELDS[2:]}}


def read_corpus(corpus_dir: Path, options: ExportOptions) -> BuiltCorpus:
    """The samples of the corpus built in ``corpus_dir`` (``ExportError`` for a folder that is not
    one, an output missing or changed on disk, or ``coe_accepted`` without ``coe.jsonl``)."""
    root = Path(corpus_dir)
    if not root.is_dir():
        raise ExportError(f"{root}: no such folder")
    if not (root / MANIFEST_JSONL).is_file():
        raise ExportError(f"{root}: no {MANIFEST_JSONL} (not an output folder of mime-fast build): build the corpus "
                          "first (mime-fast build)")
    has_coe = (root / COE_JSONL).is_file()
    if options.coe_accepted and not has_coe:
        raise ExportError(f"{root}: no {COE_JSONL}, which --coe-accepted (coe_accepted) reads: make the "
                          "Chain-of-Emotion first (mime-fast coe)")
    rows = [r for r in compact(read_rows(root)) if r["status"] == "ok"]
    wavs = {r["clip_id"]: r["path"] for r in rows if r["subset"] == "audio"}
    chains = {(r["clip_id"], r["subset"]): r for r in read_coe(root)} if has_coe else {}
    samples, settings = [], {}
    order = {c: i for i, c in enumerate(CODES)}
    for r in sorted((r for r in rows if r["subset"] in order), key=lambda r: (order[r["subset"]], r["clip_id"])):
        _check_file(root, r["path"], r["bytes"])
        audio = wavs.get(r["clip_id"]) if r["has_audio"] else None
        if audio is not None:
            _check_file(root, audio, None)
        if r["settings"] is not None:
            settings.setdefault(r["settings"], json.loads(r["settings"]))
        if r["label"] is not None and r["label"] not in EMOTIONS:
            raise ExportError(f"clip {r['clip_id']}: label {r['label']!r} is none of the seven emotions "
                              f"({', '.join(EMOTIONS)}): fix it in the clip list and rebuild")
        samples.append(Sample(r["clip_id"], r["subset"], r["path"], r["label"], r["dataset"], r["duration_s"],
                              bool(r["has_audio"]), r["kernel"], r["blur_level"], audio,
                              _coe_fields(chains.get((r["clip_id"], r["subset"])))))
    if not samples:
        raise ExportError(f"{root}: no built output in its {MANIFEST_JSONL} (every clip failed or was skipped)")
    built = dict(Counter(s.subset for s in samples))
    if options.coe_accepted:
        samples = [s for s in samples if s.coe["coe_status"] == "ok"]
        if not samples:
            raise ExportError(f"{root}: no accepted Chain-of-Emotion in its {COE_JSONL}: nothing to export with "
                              "--coe-accepted")
    return BuiltCorpus(root, samples, [settings[k] for k in sorted(settings)], has_coe, built)


def _check_file(root: Path, rel: str, size: int | None) -> None:
    path = root / rel
    if not path.is_file():
        raise ExportError(f"{path}: listed in the {MANIFEST_JSONL} but missing: rebuild the corpus (mime-fast build "
                          f"{root} ...)")
    if size is not None and path.stat().st_size != size:
        raise ExportError(f"{path}: {path.stat().st_size} bytes, the {MANIFEST_JSONL} says {size}: changed since it "
                          f"was built; rebuild the corpus (mime-fast build {root} ...)")
