"""The corpora's release layouts: a root recognised (:func:`recognise`) and its clips listed with
their labels as the release gives them (:func:`read_root`), one :class:`Clip` per video file.

Each layout reader handles the doubts of ``docs/curate.md`` explicitly: DFEW's unpadded names
(``1.mp4`` for ``00001.mp4``; both present: the padded one is the clip, the other excluded), its
``single-labeled`` spelling, its annotation spreadsheet zipped; MAFW's list lines in another encoding;
FERV39k's label in its setup lists and in its folder (a disagreement is excluded); CAER's split
folders with or without a ``CAER/`` folder above them.  Votes and label names are
:mod:`~mime_fast.curate.labels`' job; here only where things are.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..corpus.inputs import VIDEO_EXTENSIONS
from . import labels

__all__ = ["LAYOUTS", "Clip", "UnknownLayout", "read_root", "recognise"]

#: The layouts known, as ``--dataset NAME=ROOT`` names them (any case), with what recognises them.
LAYOUTS = {
    "DFEW": "Clip/original/NNNNN.mp4 and EmoLabel_DataSplit/",
    "MAFW": "data/clips/NNNNN.mp4 and 'Train & Test Set/'",
    "FERV39k": "0_7_LabelClips/<Scene>/<Emotion>/NNNN.mp4",
    "CAER": "{train,validation,test}/<Emotion>/NNNN.avi",
}


class UnknownLayout(ValueError):
    """A root that matches no layout known (one line: the root and the layouts)."""


@dataclass
class Clip:
    """One video file of a corpus and what the curation decides about it."""

    path: Path
    dataset: str
    clip_id: str
    raw_label: str | None = None  #: the label as the release writes it (``"4"``, ``"anger"``, ``"Angry"``)
    emotion: str | None = None  #: one of MIME's seven, once mapped
    agreement: float | None = None  #: the share of annotators for the label, where votes exist
    reason: str | None = None  #: why the clip is excluded (``None``: still in)
    rule: str | None = None  #: the rule that excluded it (``label``, ``ambiguity``, ``unreadable``, ...)

    def exclude(self, rule: str, reason: str) -> None:
        if self.reason is None:
            self.rule, self.reason = rule, reason


def _videos(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames.sort()
        out.extend(Path(dirpath) / f for f in sorted(filenames)
                   if not f.startswith(".") and Path(f).suffix.lower() in VIDEO_EXTENSIONS)
    return out


def _safe(text: str) -> str:
    """A folder name as part of a clip id (no separators, no spaces)."""
    return re.sub(r"[\s/\\]+", "-", text.strip()) or "x"


def recognise(root: Path) -> str | None:
    """The layout of ``root`` (a key of :data:`LAYOUTS`), ``None`` when it matches none."""
    if (root / "Clip" / "original").is_dir() or (root / "EmoLabel_DataSplit").is_dir():
        return "DFEW"
    if (root / "data" / "clips").is_dir() or (root / "Train & Test Set").is_dir():
        return "MAFW"
    if (root / "0_7_LabelClips").is_dir():
        return "FERV39k"
    if _caer_base(root) is not None:
        return "CAER"
    return None


def _caer_base(root: Path) -> Path | None:
    for base in (root, root / "CAER"):
        splits = [base / s for s in ("train", "validation", "test") if (base / s).is_dir()]
        if splits and any(labels.mime_emotion(d.name) for s in splits for d in s.iterdir() if d.is_dir()):
            return base
    return None


def read_root(root: Path, layout: str, name: str | None = None) -> list[Clip]:
    """The clips of ``root`` read as ``layout`` (a key of :data:`LAYOUTS`, any case, or any other
    name: ``<Emotion>/...`` folders), each with its dataset (``name``, else the layout's), its
    prefixed clip id and its raw label (or the exclusion that the release's labels decide)."""
    key = next((k for k in LAYOUTS if k.lower() == layout.lower()), None)
    dataset = name or key or layout
    reader = {"DFEW": _dfew, "MAFW": _mafw, "FERV39k": _ferv, "CAER": _caer}.get(key or "", _folders)
    clips = reader(root, dataset)
    if not clips:
        raise UnknownLayout(f"{root}: read as {key or layout} ({LAYOUTS.get(key or '', '<Emotion>/<clip> folders')})"
                            ", no clip found there")
    return clips


def _dfew(root: Path, dataset: str) -> list[Clip]:
    split_labels, conflicts = labels.dfew_split_labels(root)
    votes = labels.dfew_votes(root)
    by_number: dict[int, Clip] = {}
    clips: list[Clip] = []
    for path in _videos(root / "Clip" / "original"):
        clip = Clip(path, dataset, f"{dataset}_{path.stem}")
        clips.append(clip)
        if not path.stem.isdigit():
            clip.exclude("layout", f"not a DFEW clip name (NNNNN{path.suffix}: the clip number)")
            continue
        number = int(path.stem)
        clip.clip_id = f"{dataset}_{number:05d}"
        other = by_number.get(number)
        if other is not None:  # 1.mp4 beside 00001.mp4: the padded name (the release's) is the clip
            padded, extra = (clip, other) if len(path.stem) > len(other.path.stem) else (other, clip)
            extra.exclude("layout", f"clip number {number} again (unpadded copy of {padded.path.name}, which is kept)")
            if extra is clip:
                continue
        by_number[number] = clip
        if number in conflicts:
            clip.exclude("label", f"conflicting labels in EmoLabel_DataSplit ({conflicts[number]})")
            continue
        vote = votes.get(number)
        raw = split_labels.get(number)
        if raw is None and vote is not None and vote.label:
            raw = vote.label  # in the annotation, not in a split list
        if vote is not None and vote.label == 0:
            clip.raw_label = raw
            clip.exclude("ambiguity", "DFEW label 0 in Annotation/annotation.xlsx (not single-labelled)")
            continue
        if raw is None:
            clip.exclude("label", "no label (in no EmoLabel_DataSplit single-labelled set, not single-labelled "
                                  "in Annotation/annotation.xlsx)")
            continue
        clip.raw_label = str(raw)
        if vote is not None:
            clip.agreement = vote.share(raw)
    return clips


def _mafw(root: Path, dataset: str) -> list[Clip]:
    single, compound = labels.mafw_set_labels(root)
    votes = labels.mafw_votes(root)
    clips = []
    for path in _videos(root / "data" / "clips"):
        clip = Clip(path, dataset, f"{dataset}_{path.stem}")
        clips.append(clip)
        key = path.stem.zfill(5) if path.stem.isdigit() else path.stem
        clip.clip_id = f"{dataset}_{key}"
        vote = votes.get(key)
        if vote is not None and vote.invalid:
            clip.exclude("ambiguity", "marked invalid in MAFW's Labels/annotation.xlsx")
            continue
        raw = single.get(key)
        if raw is None:
            why = f"compound label {compound[key]}" if key in compound else "in no single/ list of 'Train & Test Set'"
            clip.exclude("label", f"no single label ({why})")
            continue
        clip.raw_label = raw
        if vote is not None:
            clip.agreement = vote.share(raw)
    return clips


def _ferv(root: Path, dataset: str) -> list[Clip]:
    listed = labels.ferv_setup_labels(root)
    base = root / "0_7_LabelClips"
    clips = []
    for path in _videos(base):
        rel = path.relative_to(base)
        clip = Clip(path, dataset, f"{dataset}_{'_'.join(_safe(p) for p in rel.with_suffix('').parts)}")
        clips.append(clip)
        if len(rel.parts) != 3:
            clip.exclude("layout", "not at 0_7_LabelClips/<Scene>/<Emotion>/<clip>")
            continue
        folder = rel.parts[1]
        given = listed.get(rel.with_suffix("").as_posix())
        if given is not None and given.lower() != folder.lower():
            clip.exclude("label", f"4_setups lists it as {given}, its folder says {folder}")
            continue
        clip.raw_label = given or folder
    return clips


def _caer(root: Path, dataset: str) -> list[Clip]:
    base = _caer_base(root) or root
    clips = []
    for split in ("train", "validation", "test"):
        for path in _videos(base / split):
            rel = path.relative_to(base)
            clip = Clip(path, dataset, f"{dataset}_{'_'.join(_safe(p) for p in rel.with_suffix('').parts)}")
            clips.append(clip)
            if len(rel.parts) != 3:
                clip.exclude("layout", f"not at {split}/<Emotion>/<clip>")
                continue
            clip.raw_label = rel.parts[1]
    return clips


def _folders(root: Path, dataset: str) -> list[Clip]:
    """Any other corpus: the emotion is the nearest folder above the clip that names one."""
    clips = []
    for path in _videos(root):
        rel = path.relative_to(root)
        clip = Clip(path, dataset, f"{dataset}_{'_'.join(_safe(p) for p in rel.with_suffix('').parts)}")
        clips.append(clip)
        named = [p for p in reversed(rel.parts[:-1]) if labels.mime_emotion(p)]
        if not named:
            clip.exclude("label", "no folder above it names an emotion")
            continue
        clip.raw_label = named[0]
    return clips
