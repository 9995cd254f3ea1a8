"""The clips of a corpus run: folders, video files and CSV/JSONL lists found (:func:`find_inputs`,
:func:`discover`) and validated, each problem recorded on its clip (:attr:`ClipSpec.error`)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..manifest import EMOTIONS

__all__ = ["VIDEO_EXTENSIONS", "ClipSpec", "Inputs", "discover", "find_inputs"]

VIDEO_EXTENSIONS = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv",
                              ".wmv", ".3gp"})
_EMOTION_BY_LOWER = {e.lower(): e for e in EMOTIONS}


@dataclass
class ClipSpec:
    """One clip of a corpus. ``error`` is set when the clip cannot be processed as listed."""

    clip_id: str
    path: Path
    label: str | None = None
    dataset: str | None = None
    landmarks: Path | None = None
    error: str | None = None


def _sidecar_landmarks(video: Path) -> Path | None:
    for ext in (".npz", ".json"):
        p = video.with_suffix(ext)
        if p.is_file():
            return p
    return None


def _valid_id(clip_id: str) -> str | None:
    if not clip_id or clip_id in (".", "..") or "/" in clip_id or "\\" in clip_id or clip_id.startswith("."):
        return f"clip id {clip_id!r} cannot name a file (empty, hidden or containing a path separator)"
    return None


def _from_folder(root: Path, exclude: Path | None) -> tuple[list[ClipSpec], list[Path]]:
    """The clips of a folder, and its other files (hidden files and landmark sidecars aside)."""
    specs, others = [], []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if exclude is not None and exclude in p.resolve().parents:
            continue  # never take our own outputs as inputs
        if p.suffix.lower() in VIDEO_EXTENSIONS:
            specs.append(ClipSpec(p.stem, p, landmarks=_sidecar_landmarks(p)))
        else:
            others.append(p)
    sidecars = {s.landmarks for s in specs}
    return specs, [p for p in others if p not in sidecars]


def _from_list(list_path: Path) -> list[ClipSpec]:
    base = list_path.parent
    if list_path.suffix.lower() == ".csv":
        with open(list_path, newline="", encoding="utf-8") as f:
            records = list(csv.DictReader(f))
    else:
        records = []
        for n, line in enumerate(list_path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{list_path}:{n}: not a JSON object ({exc})") from exc
    specs = []
    for n, rec in enumerate(records, 1):
        rec = {str(k).strip().lower(): (v.strip() if isinstance(v, str) else v) for k, v in rec.items() if k}
        raw = rec.get("path")
        if not raw:
            specs.append(ClipSpec(str(rec.get("clip_id") or f"row{n}"), list_path, error=f"{list_path} row {n}: no path"))
            continue
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        lmk = rec.get("landmarks")
        specs.append(ClipSpec(
            clip_id=str(rec.get("clip_id") or path.stem),
            path=path,
            label=rec.get("emotion") or rec.get("label") or None,
            dataset=rec.get("dataset") or None,
            landmarks=(Path(lmk) if Path(lmk).is_absolute() else base / lmk) if lmk else _sidecar_landmarks(path),
        ))
    return specs


@dataclass
class Inputs:
    """What :func:`find_inputs` found: the clips, and the files of the folders searched that are
    not videos (hidden files and the landmarks beside clips aside), which are skipped."""

    clips: list[ClipSpec]
    skipped: list[Path]


def find_inputs(sources: str | os.PathLike | Iterable[str | os.PathLike], *,
                exclude: str | os.PathLike | None = None) -> Inputs:
    """The clips of one or more inputs -- folders, video files, CSV/JSONL lists -- validated: each
    problem is recorded on its clip (``error``), never raised, except for an input that is none of
    these (``ValueError``).  ``exclude``: a folder whose files are never inputs (the output folder).
    A file reached twice (a clip given and also inside a folder given) is taken once."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = [Path(s) for s in sources]
    if not sources:
        raise ValueError("no input given")
    excluded = Path(exclude).resolve() if exclude else None
    specs: list[ClipSpec] = []
    skipped: list[Path] = []
    found: set[Path] = set()
    for source in sources:
        suffix = source.suffix.lower()
        if source.is_dir():
            clips, others = _from_folder(source, excluded)
        elif source.is_file() and suffix in (".csv", ".jsonl"):
            specs.extend(_from_list(source))
            continue
        elif source.is_file() and suffix in VIDEO_EXTENSIONS:
            clips, others = [ClipSpec(source.stem, source, landmarks=_sidecar_landmarks(source))], []
        elif not source.exists():
            raise ValueError(f"{source}: no such file or folder")
        else:
            raise ValueError(f"{source}: not a folder, a video ({', '.join(sorted(VIDEO_EXTENSIONS))}) or a "
                             ".csv/.jsonl list of clips")
        for spec in clips:
            key = spec.path.resolve()
            if key not in found:
                found.add(key)
                specs.append(spec)
        skipped.extend(others)
    _validate(specs)
    return Inputs(specs, skipped)


def discover(*sources: str | os.PathLike, exclude: str | os.PathLike | None = None) -> list[ClipSpec]:
    """The clips of folders, video files and CSV/JSONL lists (:func:`find_inputs`)."""
    return find_inputs(sources, exclude=exclude).clips


def _validate(specs: list[ClipSpec]) -> None:
    """Record on each clip what makes it unusable as listed (``error``)."""
    seen: dict[str, Path] = {}
    for s in specs:
        if s.error:
            continue
        s.error = _valid_id(s.clip_id)
        if s.error:
            continue
        if s.clip_id in seen:
            s.error = f"duplicate clip id {s.clip_id!r} (also {seen[s.clip_id]})"
            continue
        seen[s.clip_id] = s.path
        if s.label is not None:
            canonical = _EMOTION_BY_LOWER.get(str(s.label).lower())
            if canonical is None:
                s.error = f"unknown emotion label {s.label!r}; expected one of {', '.join(EMOTIONS)}"
                continue
            s.label = canonical
        if not s.path.exists():
            s.error = f"input file not found: {s.path}"
        elif not os.access(s.path, os.R_OK):
            s.error = f"input file not readable: {s.path}"
        elif s.landmarks is not None and not s.landmarks.is_file():
            s.error = f"landmarks file not found: {s.landmarks}"
