"""The clips of a corpus run: folders, video files and CSV/JSONL lists found (:func:`find_inputs`,
:func:`discover`) and validated, each problem recorded on its clip (:attr:`ClipSpec.error`).

Folders that hold a mime-fast build (:func:`is_build_folder`) are never searched for clips: a
corpus's earlier output folder kept inside its input folder would otherwise be built again from its
own outputs (and every clip id would be a duplicate)."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..media.outputs import clip_id_problem
from ..manifest import EMOTIONS, MANIFEST_JSONL, utf8_text
from ..spec import CODES

__all__ = ["EMOTION_ALIASES", "VIDEO_EXTENSIONS", "ClipSpec", "Inputs", "clip_id_problem", "discover", "find_inputs",
           "is_build_folder"]

#: The file extensions taken as videos (compared in lower case): the containers FFmpeg reads that
#: cameras, phones, broadcast and the web write.  Still images (a JPEG, PNG, GIF) and audio files
#: (``.ogg``, ``.wav``, ...) are not here: a folder's other files are skipped and listed, and a
#: misnamed file still fails its clip with a plain reason (:func:`mime_fast.media.probe`).
VIDEO_EXTENSIONS = frozenset({
    ".mp4", ".m4v", ".mov", ".qt", ".mkv", ".webm", ".avi", ".divx", ".wmv", ".asf", ".flv", ".f4v",
    ".3gp", ".3g2",  # phones
    ".mpg", ".mpeg", ".mpe", ".m1v", ".m2v", ".vob",  # MPEG program streams, DVD
    ".ts", ".mts", ".m2ts", ".m2t",  # MPEG transport streams (AVCHD cameras: .MTS)
    ".mxf", ".dv",  # broadcast and camcorder
    ".ogv", ".nut", ".y4m", ".rm", ".rmvb",
})
#: The folders a build writes beside its manifest (:func:`is_build_folder`).
_BUILD_SUBFOLDERS = (*CODES, "audio")
#: The names the corpora MIME draws on give its seven emotions (any case): the canonical ones,
#: FERV39k's and DFEW's adjectives ("Angry"), MAFW's nouns ("happiness", "sadness"), and a few
#: common variants.  Other labels (MAFW's contempt, anxiety, ...) are not MIME's: the clip fails.
EMOTION_ALIASES: dict[str, str] = {
    **{e.lower(): e for e in EMOTIONS},
    "angry": "Anger", "disgusted": "Disgust", "disgusting": "Disgust", "fearful": "Fear", "afraid": "Fear",
    "scared": "Fear", "happiness": "Happy", "joy": "Happy", "sadness": "Sad", "surprised": "Surprise",
    "surprising": "Surprise", "neutrality": "Neutral",
}


@dataclass
class ClipSpec:
    """One clip of a corpus. ``error`` is set when the clip cannot be processed as listed."""

    clip_id: str
    path: Path
    label: str | None = None
    dataset: str | None = None
    landmarks: Path | None = None
    error: str | None = None
    #: the path of the clip that has this clip's id, when this one is a duplicate (``error`` says so)
    duplicate_of: Path | None = None


def _sidecar_landmarks(video: Path) -> Path | None:
    for ext in (".npz", ".json"):
        p = video.with_suffix(ext)
        if p.is_file():
            return p
    return None


def is_build_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a mime-fast build: a ``manifest.jsonl`` whose first row is a
    manifest row (a JSON object with ``clip_id``, ``subset`` and ``status``), or an empty one (a run
    killed before its first clip finished) beside a subset or ``audio`` folder; or ``folder`` is one
    of the subset folders of such a build.  Its files are outputs, never inputs."""
    if folder.name in _BUILD_SUBFOLDERS and _holds_manifest(folder.parent):
        return True
    return _holds_manifest(folder)


def _holds_manifest(folder: Path) -> bool:
    manifest = folder / MANIFEST_JSONL
    if not manifest.is_file():
        return False
    try:
        with open(manifest, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), None)
    except (OSError, UnicodeDecodeError):
        return False
    if first is None:
        return any((folder / name).is_dir() for name in _BUILD_SUBFOLDERS)
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and {"clip_id", "subset", "status"} <= row.keys()


def _inside(path: Path, folder: Path) -> bool:
    """Whether the resolved ``path`` is the resolved ``folder`` or lies in it (compared as text,
    as pathlib compares them: a 40k-clip corpus walked each clip's parents)."""
    p, f = os.path.normcase(str(path)), os.path.normcase(str(folder))
    return p == f or p.startswith(f if f.endswith(os.sep) else f + os.sep)


class _Resolver:
    """``Path.resolve()`` of many files, each folder resolved once: a file that is not a link is
    its folder's real path and its name (one ``lstat``, not one per part of the path and a
    ``stat``); a link, or a name that is ``..``, is resolved in full."""

    def __init__(self) -> None:
        self._folders: dict[Path, str] = {}

    def __call__(self, path: Path) -> Path:
        name = path.name
        if name in ("", ".", "..") or os.path.islink(path):
            return path.resolve()
        parent = path.parent
        real = self._folders.get(parent)
        if real is None:
            real = self._folders[parent] = str(parent.resolve())
        return Path(os.path.join(real, name))


def _from_folder(root: Path, exclude: Path | None) -> Inputs:
    """The clips of a folder, its other files (hidden files and landmark sidecars aside), the
    folders in it that hold a mime-fast build (not searched: :func:`is_build_folder`), the links
    in it that lead nowhere, each with why (a missing target, a loop), what in it cannot be read
    (a folder that cannot be listed, a FIFO, socket or device), each with why, and the videos in
    the folder ``exclude`` (the output folder) when it is inside: not inputs, but not our outputs
    either (the build folders in it are, and are not searched).  Linked folders are
    followed (``corpus/DFEW -> /data/DFEW/clips``) once the folder's own tree is searched, each
    real folder once: a link back to a folder it is in is a loop, and one to a folder searched by
    another path (its own, first) is that folder, searched already."""
    files, builds, links, in_out, unreadable = [], [], [], [], []

    def cannot_list(exc: OSError) -> None:
        unreadable.append((Path(exc.filename), f"a folder that cannot be read: {exc.strerror or exc}"))
    searched: set[str] = set()  # the real paths of the folders searched
    tops, followed = [root], 0
    while followed < len(tops):  # the folder, then the linked folders it holds, in the order met
        top = tops[followed]
        followed += 1
        searched.add(os.path.realpath(top))
        linked = []
        for dirpath, dirnames, filenames in os.walk(top, onerror=cannot_list):  # (links to folders: in dirnames, not entered)
            folder = Path(dirpath)
            if exclude is not None and _inside(folder.resolve(), exclude):
                # never take our own outputs as inputs, nor the videos beside them (told, not built)
                dirnames[:] = sorted(n for n in dirnames
                                     if not (folder / n).is_symlink() and not is_build_folder(folder / n))
                in_out.extend(folder / n for n in filenames
                              if not n.startswith(".") and Path(n).suffix.lower() in VIDEO_EXTENSIONS)
                continue
            if is_build_folder(folder):
                builds.append(folder)
                dirnames[:] = []
                continue
            here = os.path.realpath(folder)
            searched.add(here)
            for name in dirnames:
                if (folder / name).is_symlink():
                    linked.append((folder / name, here))
            dirnames[:] = sorted(n for n in dirnames if not (folder / n).is_symlink())
            files.extend(folder / n for n in filenames if not n.startswith("."))
        for link, here in sorted(linked):
            real = os.path.realpath(link)
            if real == here or here.startswith(real.rstrip(os.sep) + os.sep):
                links.append((link, f"a link loop: it leads back to {real}, a folder it is in"))
            elif real not in searched and all(os.path.realpath(t) != real for t in tops[followed:]):
                tops.append(link)
    specs, others = [], []
    for p in sorted(files):  # the order of the clips (the first of a duplicate id keeps it)
        if not p.is_file():
            if p.is_symlink() and not p.exists():
                links.append((p, _broken_link(p)))
            elif p.exists():
                unreadable.append((p, "not a regular file (a FIFO, socket or device)"))
            continue
        if p.suffix.lower() in VIDEO_EXTENSIONS:
            specs.append(ClipSpec(p.stem, p, landmarks=_sidecar_landmarks(p)))
        else:
            others.append(p)
    sidecars = {s.landmarks for s in specs}
    return Inputs(specs, [p for p in others if p not in sidecars], sorted(builds), sorted(links), sorted(in_out),
                  sorted(unreadable))


def _broken_link(link: Path) -> str:
    """Why the link ``link`` leads to no file or folder."""
    try:
        link.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a link loop: {os.readlink(link)} leads back to itself"
        if exc.errno == errno.ENOENT:
            return f"a link to nothing: {os.readlink(link)} does not exist"
        return f"a link that cannot be followed: {os.strerror(exc.errno) if exc.errno else exc}"
    return "a link to something that is not a file"


#: The columns of a list whose values are text (a clip id may also be a number: it is named by its text).
_TEXT_COLUMNS = ("path", "emotion", "label", "dataset", "landmarks")


def _list_records(list_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The records of a CSV or JSONL list, each with where it is (``"<list> row <n>"``: the n-th
    row under a CSV's header; ``"<list> line <n>"``: a JSONL's line).  Read as ``utf-8-sig``: a
    list saved as Excel's "CSV UTF-8" starts with a byte order mark, which would otherwise be part
    of the first column's name.  A JSONL line that is not a JSON object is ``ValueError`` naming
    the file and line: the list itself is broken, as when a line is not JSON at all; so is a list
    that is not UTF-8 text (saved as Latin-1, ...)."""
    raw = list_path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:  # a list saved as Latin-1, Windows-1252, GBK, ...
        at = exc.start + (len(raw) - len(exc.object))  # (the byte order mark is not in exc.object)
        line = raw[:at].count(b"\n") + 1
        raise ValueError(f"{list_path}:{line}: not UTF-8 text (byte 0x{raw[at]:02x}); a list "
                         'of clips must be saved as UTF-8 (Excel: "CSV UTF-8"; iconv -f latin1 -t utf-8 converts '
                         "a Latin-1 one)") from None
    if list_path.suffix.lower() == ".csv":
        rows = csv.DictReader(io.StringIO(text, newline=""))
        return [(f"{list_path} row {n}", rec) for n, rec in enumerate(rows, 1)]
    records = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{list_path}:{line_no}: not a JSON object ({exc})") from exc
        if not isinstance(rec, dict):
            raise ValueError(f"{list_path}:{line_no}: not a JSON object (a JSON {_json_type(rec)}); each line "
                             'is one clip, e.g. {"path": "clip.mp4"}')
        records.append((f"{list_path} line {line_no}", rec))
    return records


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def _from_list(list_path: Path) -> list[ClipSpec]:
    """The clips of a list; a record that cannot be a clip (no path, a value that is not text) is a
    clip with its ``error`` (a failed row naming the list and the row), as a missing file is."""
    base = list_path.parent
    specs = []
    for n, (where, rec) in enumerate(_list_records(list_path), 1):
        rec = {str(k).strip().lower(): (v.strip() if isinstance(v, str) else v) for k, v in rec.items() if k}
        raw = rec.get("path")
        clip_id = rec.get("clip_id")
        if clip_id in (None, ""):  # the file's name, else the row's number
            clip_id = Path(raw).stem if isinstance(raw, str) and raw else f"row{n}"
        clip_id = str(clip_id)
        if raw in (None, ""):
            specs.append(ClipSpec(clip_id, list_path, error=f"{where}: no path"))
            continue
        wrong = next((c for c in _TEXT_COLUMNS if rec.get(c) is not None and not isinstance(rec[c], str)), None)
        if wrong is not None:
            specs.append(ClipSpec(clip_id, list_path,
                                  error=f"{where}: {wrong} must be text, got {json.dumps(rec[wrong])}"))
            continue
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        lmk = rec.get("landmarks")
        specs.append(ClipSpec(
            clip_id=clip_id,
            path=path,
            label=rec.get("emotion") or rec.get("label") or None,
            dataset=rec.get("dataset") or None,
            landmarks=(Path(lmk) if Path(lmk).is_absolute() else base / lmk) if lmk else _sidecar_landmarks(path),
        ))
    return specs


@dataclass
class Inputs:
    """What :func:`find_inputs` found: the clips, the files of the folders searched that are
    not videos (hidden files and the landmarks beside clips aside), which are skipped, the
    folders in them that hold a mime-fast build (:func:`is_build_folder`), not searched, the
    links in them that lead nowhere, the videos in the output folder kept inside them, and what
    in them cannot be read."""

    clips: list[ClipSpec]
    skipped: list[Path]
    builds: list[Path] = field(default_factory=list)
    #: links in the folders searched that lead nowhere (a missing target, a loop), each with why
    links: list[tuple[Path, str]] = field(default_factory=list)
    #: videos in the output folder (``exclude``) where it is inside an input folder: not inputs
    in_out: list[Path] = field(default_factory=list)
    #: what in the folders searched cannot be read (a folder that cannot be listed, a FIFO), with why
    unreadable: list[tuple[Path, str]] = field(default_factory=list)


def find_inputs(sources: str | os.PathLike | Iterable[str | os.PathLike], *,
                exclude: str | os.PathLike | None = None) -> Inputs:
    """The clips of one or more inputs -- folders, video files, CSV/JSONL lists -- validated: each
    problem is recorded on its clip (``error``), never raised, except for an input that is none of
    these (``ValueError``).  ``exclude``: a folder whose files are never inputs (the output folder;
    the videos in it that are not its outputs are :attr:`Inputs.in_out`, skipped, and so is a video
    given by name or in a list that lies there: its outputs could replace it);
    nor are those of a folder that holds a mime-fast build (:func:`is_build_folder`), an earlier
    output folder kept inside an input folder.  A file reached twice (a clip given and also inside
    a folder given) is taken once."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = [Path(s) for s in sources]
    if not sources:
        raise ValueError("no input given")
    excluded = Path(exclude).resolve() if exclude else None
    specs: list[ClipSpec] = []
    found_all = Inputs([], [])
    found: set[Path] = set()
    resolved = _Resolver()
    for source in sources:
        suffix = source.suffix.lower()
        if source.is_dir():
            inner = _from_folder(source, excluded)
            clips, others = inner.clips, inner.skipped
            found_all.builds.extend(inner.builds)
            found_all.links.extend(inner.links)
            found_all.unreadable.extend(inner.unreadable)
            known = set(found_all.in_out)  # (a set: the output folder may hold thousands of videos)
            found_all.in_out.extend(p for p in inner.in_out if p not in known)
        elif source.is_file() and suffix in (".csv", ".jsonl"):
            specs.extend(_from_list(source))
            continue
        elif source.is_file() and suffix in VIDEO_EXTENSIONS:
            clips, others = [ClipSpec(source.stem, source, landmarks=_sidecar_landmarks(source))], []
        elif not source.exists():
            raise ValueError(f"{source}: no such file or folder")
        else:
            raise ValueError(f"{source}: not a folder, a video or a .csv/.jsonl list of clips (videos are told by "
                             f"their extension, {suffix or 'none'} is not one of .mp4, .mov, .mkv, .avi, .webm, .ts "
                             f"and {len(VIDEO_EXTENSIONS) - 6} more; a list may name a video of any extension)")
        for spec in clips:
            key = resolved(spec.path)
            if key not in found:
                found.add(key)
                specs.append(spec)
        found_all.skipped.extend(others)
    if excluded is not None:  # a clip given by name or listed, in the output folder: never built
        known = set(found_all.in_out)
        inside = {id(s) for s in specs if s.error is None and _inside(resolved(s.path), excluded)}
        found_all.in_out.extend(s.path for s in specs if id(s) in inside and s.path not in known)
        specs = [s for s in specs if id(s) not in inside]
    _validate(specs)
    found_all.clips = specs
    return found_all


def discover(*sources: str | os.PathLike, exclude: str | os.PathLike | None = None) -> list[ClipSpec]:
    """The clips of folders, video files and CSV/JSONL lists (:func:`find_inputs`)."""
    return find_inputs(sources, exclude=exclude).clips


def _validate(specs: list[ClipSpec]) -> None:
    """Make each clip id valid UTF-8 text (:func:`mime_fast.manifest.utf8_text`: a file name that
    is not UTF-8 gives the id its undecodable bytes as ``%XX``, which names the clip's outputs and
    its manifest rows; its ``path`` stays the file's) and record on each clip what makes it
    unusable as listed (``error``)."""
    seen: dict[str, Path] = {}
    for s in specs:
        s.clip_id = utf8_text(s.clip_id)
        if s.error:
            continue
        s.error = clip_id_problem(s.clip_id)
        if s.error:
            continue
        if s.clip_id in seen:
            s.error = f"duplicate clip id {s.clip_id!r}: {s.path} (also {seen[s.clip_id]}, which keeps the id)"
            s.duplicate_of = seen[s.clip_id]
            continue
        seen[s.clip_id] = s.path
        if s.label is not None:
            canonical = EMOTION_ALIASES.get(str(s.label).strip().lower())
            if canonical is None:
                s.error = (f"unknown emotion label {s.label!r}; expected one of {', '.join(EMOTIONS)} (any case; "
                           "also Angry, happiness, sadness, ...: mime_fast.corpus.inputs.EMOTION_ALIASES)")
                continue
            s.label = canonical
        if not s.path.exists():
            s.error = f"input file not found: {s.path}"
        elif not os.access(s.path, os.R_OK):
            s.error = f"input file not readable: {s.path}"
        elif s.landmarks is not None and not s.landmarks.is_file():
            s.error = f"landmarks file not found: {s.landmarks}"
