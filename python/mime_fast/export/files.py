"""The destination folder of an export: whether it may be written (not inside the corpus, empty or
an earlier export of the same corpus and format), the media files copied or linked into it -- each
complete or absent, never half-written, so that a rerun completes a partial export -- and what is
no longer part of the export removed.

The folder is marked as an export by :data:`MARKER` (the format and a hash of the corpus's path:
nothing that names the machine's folders travels with a release).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..manifest import atomic_write
from .options import ExportError

__all__ = ["MARKER", "Placed", "check_destination", "mark", "place", "prune", "write_text"]

#: The file that marks a folder as an export (hidden: not part of either format).
MARKER = ".mime-fast-export.json"

#: Why a hard link could not be made where a symbolic link can: another file system, or one
#: without hard links.
_NO_HARD_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


@dataclass
class Placed:
    """Media files copied, linked, and found complete from an earlier run."""

    copied: int = 0
    linked: int = 0
    kept: int = 0


def _record(corpus: Path, fmt: str) -> dict[str, str]:
    return {"format": fmt, "corpus": hashlib.sha256(str(corpus.resolve()).encode("utf-8", "surrogateescape"))
            .hexdigest()[:16]}


def check_destination(corpus: Path, dest: Path, fmt: str) -> None:
    """``ExportError`` unless ``dest`` may receive the export: outside the corpus folder (and not
    holding it), and new, empty, or an earlier export of this corpus in this format."""
    c, d = Path(corpus).resolve(), Path(dest).resolve()
    if d == c or c in d.parents:
        raise ExportError(f"{dest}: inside the corpus folder {corpus}: write the export outside it (e.g. beside it)")
    if d in c.parents:
        raise ExportError(f"{dest}: holds the corpus folder {corpus}: write the export to a folder of its own")
    if not d.exists():
        return
    if not d.is_dir():
        raise ExportError(f"{dest}: not a folder")
    if not any(d.iterdir()):
        return
    marker = d / MARKER
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ExportError(f"{dest}: not empty and not an export of mime-fast: choose a new or empty folder") from None
    if record != _record(corpus, fmt):
        what = f"a {record.get('format')} export" if record.get("format") != fmt else "the export of another corpus"
        raise ExportError(f"{dest}: {what}, not the {fmt} export of {corpus}: choose another folder (or remove it)")


def mark(corpus: Path, dest: Path, fmt: str) -> None:
    """Create ``dest`` and mark it as the ``fmt`` export of ``corpus``."""
    dest.mkdir(parents=True, exist_ok=True)
    write_text(dest / MARKER, json.dumps(_record(corpus, fmt), sort_keys=True) + "\n")


def write_text(path: Path, text: str) -> None:
    """``path`` made (atomically) with ``text`` as UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    atomic_write(path, write)


def _complete(src: Path, dst: Path, link: bool) -> bool:
    """Whether ``dst`` is already ``src`` as asked: the same file (a hard link) or a symbolic link
    to it; a copy (not a link) of its size and modification time (``copy2`` keeps it)."""
    if not os.path.lexists(dst):
        return False
    if dst.is_symlink():
        return link and os.readlink(dst) == str(src.resolve())
    same = os.path.samefile(src, dst)
    if link or same:
        return link and same
    s, d = src.stat(), dst.stat()
    return s.st_size == d.st_size and s.st_mtime_ns == d.st_mtime_ns


def place(src: Path, dst: Path, link: bool, placed: Placed) -> None:
    """``dst`` made a copy of ``src`` (its times kept) or, with ``link``, a hard link to it (a
    symbolic link to its absolute path where a hard link cannot be made); nothing done where it
    already is one.  Made under a temporary name and renamed: never half there."""
    if _complete(src, dst, link):
        placed.kept += 1
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    try:
        if link:
            try:
                os.link(src, tmp)
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINK:
                    raise
                os.symlink(src.resolve(), tmp)
            placed.linked += 1
        else:
            shutil.copy2(src, tmp)
            placed.copied += 1
        os.replace(tmp, dst)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def prune(dest: Path, keep: set[str], rewritten: set[str] = frozenset()) -> int:
    """Remove every file under ``dest`` whose path (relative, POSIX) is not in ``keep`` -- the
    marker aside -- and the folders left empty; returns the files removed that are not in
    ``rewritten`` either (those the export writes again).  Links are removed, never followed."""
    removed = 0
    for root, dirs, files in os.walk(dest, topdown=False):
        rel = Path(root).relative_to(dest)
        for name in files:
            path = rel / name
            if path.as_posix() not in keep and path.as_posix() != MARKER:
                os.unlink(Path(root) / name)
                removed += path.as_posix() not in rewritten
        for name in dirs:
            full = Path(root) / name
            if full.is_symlink():
                if (rel / name).as_posix() not in keep:
                    os.unlink(full)
                    removed += 1
            elif not any(full.iterdir()):
                full.rmdir()
    return removed
