"""The curation of corpus releases (:func:`curate`): their clips read (:mod:`.layouts`), the rules
applied in order -- label, ambiguity, unreadable, resolution, duration, watermark, duplicate, balance -- each
excluded clip with the rule and its reason, and the outputs written (:mod:`.report`).

Duplicates are looked for among the clips the earlier rules kept; of a group of copies the one
kept is the one whose picture (without black bars) has the largest shorter side, then the one of
the corpus first in :data:`KEEP_ORDER` (DFEW before MAFW: MAFW took its copies from DFEW), then the
one of the smallest clip id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import balance, dedup, labels, layouts, report, watermark
from .layouts import Clip, UnknownLayout
from .options import CurateOptions, Curation
from .probe import probe_all

__all__ = ["KEEP_ORDER", "Curation", "Root", "curate", "resolve_roots"]

KEEP_ORDER = ("DFEW", "MAFW", "FERV39k", "CAER")


@dataclass(frozen=True)
class Root:
    """A corpus release: its folder, the layout it is read as, the dataset name its clips carry."""

    path: Path
    layout: str
    dataset: str


def resolve_roots(roots: list[Path], datasets: list[tuple[str, Path]] = ()) -> list[Root]:
    """The roots given, each with its layout: recognised (:func:`layouts.recognise`), or named by
    ``datasets`` (NAME, ROOT): a layout's name reads ROOT as that layout, any other name as
    ``<Emotion>/`` folders.  Raises :class:`UnknownLayout` (one line) for a root that matches none."""
    named = {Path(p).resolve(): n for n, p in datasets}
    out: list[Root] = []
    seen: set[Path] = set()
    for path in [*roots, *(Path(p) for _, p in datasets)]:
        path = Path(path)
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        if not path.exists():
            raise UnknownLayout(f"{path}: no such folder")
        if not path.is_dir():
            raise UnknownLayout(f"{path}: not a folder (a corpus release is a folder)")
        if real in named:
            name = named[real]
            layout = next((k for k in layouts.LAYOUTS if k.lower() == name.lower()), None)
            out.append(Root(path, layout or "folders", layout or name))
            continue
        layout = layouts.recognise(path)
        if layout is None:
            known = "; ".join(f"{k}: {v}" for k, v in layouts.LAYOUTS.items())
            raise UnknownLayout(f"{path}: matches no corpus layout known ({known}); name it with "
                                f"--dataset NAME={path} (NAME a layout above, or another name to read "
                                "<Emotion>/ folders)")
        out.append(Root(path, layout, layout))
    return out


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def curate(roots: list[Root], out: Path, options: CurateOptions | None = None) -> Curation:
    """Curate the clips of ``roots`` into ``out`` (``selected.csv``, ``excluded.csv``, ``report.md``,
    ``balance.png``; the probes' cache ``probes.jsonl``).  Nothing under a root is written."""
    options = options if options is not None else CurateOptions()
    out = Path(out)
    for r in roots:
        if _inside(out, r.path):
            raise ValueError(f"--out {out}: inside the corpus {r.path}, which is never written: choose a folder "
                             "outside it")
    clips: list[Clip] = []
    for r in roots:
        clips.extend(layouts.read_root(r.path, r.layout, r.dataset))
    layout_of = {r.dataset: r.layout for r in roots}
    taken: dict[str, Clip] = {}
    for c in clips:  # clip ids unique across corpora (the dataset's prefix; a corpus given twice)
        first = taken.setdefault(c.clip_id, c)
        if first is not c:
            c.exclude("layout", f"clip id {c.clip_id} taken by {first.path}")
    for c in clips:
        if c.reason is None:
            c.emotion = labels.to_mime(c.raw_label, layout_of.get(c.dataset, ""))
            if c.emotion is None:
                c.exclude("label", f"label {c.raw_label!r} is not one of MIME's seven emotions")
        if c.reason is None:
            why = labels.ambiguity(c.agreement, options.min_agreement)
            if why:
                c.exclude("ambiguity", why)
    out.mkdir(parents=True, exist_ok=True)
    live = [c for c in clips if c.reason is None]
    probes = probe_all([c.path for c in live], out, workers=options.workers, progress=options.progress)
    overlays: dict[str, list[dict]] = {}
    for c in live:
        p = probes[c.path]
        if "error" in p:
            c.exclude("unreadable", p["error"])
            continue
        side = min(p["width"], p["height"])
        if side < options.min_height:
            c.exclude("resolution", f"low resolution: {p['width']}x{p['height']}, shorter side {side} below "
                                    f"--min-height {options.min_height}")
            continue
        if p["duration"] < options.min_duration:
            c.exclude("duration", f"too short: {p['duration']:.2f} s of video, below --min-duration "
                                  f"{options.min_duration:g} (mime-fast build's gate)")
            continue
        if watermark.reportable(p["overlays"]):
            overlays[c.clip_id] = watermark.reportable(p["overlays"])
        severe = watermark.judge(p["overlays"])
        if severe and options.watermarks == "drop":
            c.exclude("watermark", severe)
    _duplicates([c for c in live if c.reason is None], probes)
    pool: dict[str, dict[str, list[str]]] = {e: {} for e in labels.DFEW_LABELS.values()}
    passing = [c for c in clips if c.reason is None]
    for c in passing:
        pool[c.emotion].setdefault(c.dataset, []).append(c.clip_id)
    chosen, shortfall = balance.draw(pool, options.per_class, options.seed)
    for c in passing:
        if c.clip_id not in chosen:
            c.exclude("balance", f"not drawn: {options.per_class} {c.emotion} clips drawn (--per-class, seed "
                                 f"{options.seed})")
    selected = sorted((c for c in clips if c.reason is None), key=lambda c: (c.emotion, c.dataset, c.clip_id))
    result = Curation(clips, selected, shortfall, overlays)
    result.outputs = report.write_all(out, result, options)
    return result


def _duplicates(clips: list[Clip], probes: dict[Path, dict]) -> None:
    by_id = {c.clip_id: c for c in clips}
    items = [(c.clip_id, float(probes[c.path]["duration"]), bytes.fromhex(probes[c.path]["hash"]),
              list(probes[c.path]["flat"])) for c in sorted(clips, key=lambda c: c.clip_id)]

    def rank(c: Clip):
        p = probes[c.path]
        order = KEEP_ORDER.index(c.dataset) if c.dataset in KEEP_ORDER else len(KEEP_ORDER)
        return (-min(p["content"]), order, c.clip_id)

    for group in dedup.duplicate_groups(items):
        members = sorted((by_id[k] for k in group), key=rank)
        kept = members[0]
        for c in members[1:]:
            same = "" if c.emotion == kept.emotion else f"; labelled {c.emotion} here, {kept.emotion} there"
            c.exclude("duplicate", f"duplicate of {kept.clip_id} ({os.fspath(kept.path)}), which is kept{same}")
