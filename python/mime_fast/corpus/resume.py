"""Resuming a corpus run: which clips are complete on disk (the manifest's rows, sizes and
SHA-256 checked) and the temporaries a killed run left behind."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Iterable

from ..spec import SUBSETS

__all__ = ["sha256_file", "clean_stale_temporaries"]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(rows: list[dict[str, Any]], out_dir: Path, subsets: Iterable[str], faces: str = "subject") -> bool:
    """A clip is complete when its latest rows cover every requested subset without failure, its
    face-blurred rows were made with the ``faces`` policy asked for (rows without the column:
    ``"subject"``), and every file they name is on disk with the recorded size and hash."""
    by_subset = {r["subset"]: r for r in rows}
    for code in subsets:
        r = by_subset.get(code)
        if r is None or r["status"] == "failed":
            return False
        if SUBSETS[code].face and r["status"] == "ok" and (r.get("faces") or "subject") != faces:
            return False
    for r in rows:
        if r["status"] != "ok" or r["subset"] is None:
            continue
        p = out_dir / r["path"]
        if not p.is_file() or p.stat().st_size != r["bytes"] or sha256_file(p) != r["sha256"]:
            return False
    return True


_TEMP = re.compile(r"^\..+\.(?:tmp|scratch)-(\d+)(?:\.[A-Za-z0-9]+)?$")


def clean_stale_temporaries(out_dir: Path, *, mine: bool = False) -> list[Path]:
    """Remove temporaries (``.<name>.tmp-<pid>…``, ``….scratch-<pid>…``) of processes that no longer
    run: what a killed run leaves behind; with ``mine``, also this process's (once it writes no
    more: after an interrupted run). Returns the removed paths."""
    removed = []
    if not out_dir.exists():
        return removed
    for p in out_dir.rglob(".*"):
        m = _TEMP.match(p.name)
        if not m or not p.is_file():
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the process exists
            alive = not (mine and pid == os.getpid())
        except ProcessLookupError:
            alive = False
        except PermissionError:  # exists, owned by someone else
            alive = True
        if not alive:
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
