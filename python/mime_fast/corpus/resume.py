"""Resuming a corpus run: whether the output folder was built with the same settings
(:func:`check_same_settings`), which clips are complete on disk (the manifest's rows, sizes and
SHA-256 checked), the temporaries a killed run left behind, and the clips a run that built them in
its own process was building when it died (:class:`InProgress`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from stat import S_ISREG
from typing import Any, Iterable

from ..manifest import MANIFEST_JSONL
from ..options import Settings
from ..spec import OUTPUT_REVISION, SUBSETS

__all__ = ["sha256_file", "clean_stale_temporaries", "clip_temporaries", "InProgress", "clips_of_dead_runs",
           "SettingsChanged", "check_same_settings", "settings_record"]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(rows: list[dict[str, Any]], out_dir: Path, subsets: Iterable[str], faces: str = "subject",
              verify: bool = False) -> bool:
    """A clip is complete when its latest rows cover every requested subset without failure, its
    face-blurred rows were made with the ``faces`` policy asked for (rows without the column:
    ``"subject"``), and every file they name is on disk with the recorded size and, where its
    modification time is not the recorded one (or none was recorded, or ``verify``), the recorded
    SHA-256 (a rerun of a 40k-clip corpus reads no output file unless one changed, as rsync and make
    decide)."""
    by_subset = {r["subset"]: r for r in rows}
    for code in subsets:
        r = by_subset.get(code)
        if r is None or r["status"] == "failed":
            return False
        if SUBSETS[code].face and r["status"] == "ok" and (r.get("faces") or "subject") != faces:
            return False
    out = os.fspath(out_dir)
    for r in rows:
        if r["status"] != "ok" or r["subset"] is None:
            continue
        p = _output_path(out, out_dir, r["path"])
        try:
            st = os.stat(p)
        except OSError:
            return False
        if not S_ISREG(st.st_mode) or st.st_size != r["bytes"]:  # (one stat per file: 40k clips hold 280k)
            return False
        if not verify and r.get("mtime_ns") is not None and st.st_mtime_ns == r["mtime_ns"]:
            continue
        if sha256_file(p) != r["sha256"]:
            return False
    return True


def _output_path(out: str, out_dir: Path, relative: str) -> str | Path:
    """``out_dir / relative``, the file a row names: as text joined to ``out`` (``out_dir``'s),
    which names the same file for every path but one ending in ``/`` or ``/.`` (``pathlib`` drops
    those; the system would ask for a folder): a 40k-clip corpus's 280k rows are checked in a
    fraction of the time pathlib takes to build them."""
    if isinstance(relative, str) and relative and not relative.endswith(("/", "/.", os.sep)) and relative != ".":
        return os.path.join(out, relative)
    return out_dir / relative


class SettingsChanged(ValueError):
    """A run into an output folder whose clips were built with other settings: its message is the
    one line that names the options that differ (old -> new) and the remedy."""


#: Options a rerun may change although they change outputs: resume rebuilds what they touch
#: (``faces``: the face subsets made with the other policy are not complete, :func:`_complete`).
_REBUILT_ON_CHANGE = frozenset({"faces"})


#: What the message calls a recorded key that is not an option.
_LABELS = {"output_revision": "mime_fast output revision"}


def settings_record(settings: Settings) -> str:
    """The manifest's ``settings`` column for ``settings``: the options that change the outputs
    (:meth:`~mime_fast.options.Settings.output_settings`) and the engine's
    :data:`~mime_fast.spec.OUTPUT_REVISION` (``output_revision``), as compact JSON text."""
    return json.dumps({**settings.output_settings(), "output_revision": OUTPUT_REVISION}, separators=(",", ":"))


def check_same_settings(rows: Iterable[dict[str, Any]], settings: Settings, out_dir: Path) -> None:
    """Raise :class:`SettingsChanged` when the clips built in ``out_dir`` (its compacted manifest
    ``rows`` that are not failed) were built with other values of an option that changes the
    outputs than ``settings``, or by an engine of another output revision
    (:data:`~mime_fast.spec.OUTPUT_REVISION`): resuming would mix two settings in one corpus and
    skip the complete clips as if they had these.  Options that do not change the bytes
    (:data:`~mime_fast.options.BYTE_NEUTRAL`: queue size, kept frames, device, NVDEC) and the
    subsets asked for (a rerun that asks for more builds them: the clips are not complete) may
    change; so may ``faces``, whose face subsets a rerun rebuilds.  Rows without the column
    (manifests written before it), and options a row does not record or no longer exist, are
    accepted: nothing is known against them.  Failed clips built nothing, so they never refuse."""
    new = json.loads(settings_record(settings))
    old: dict[str, list[Any]] = {}
    seen: set[str] = set()  # (a text read once: the rows of a 40k-clip corpus hold one or a few)
    for r in rows:
        if r["status"] == "failed" or not r.get("settings"):
            continue
        if isinstance(r["settings"], str):
            if r["settings"] in seen:
                continue
            seen.add(r["settings"])
        try:
            recorded = json.loads(r["settings"])
        except (TypeError, ValueError):
            continue
        if not isinstance(recorded, dict):
            continue
        for key, value in recorded.items():
            if key in new and key not in _REBUILT_ON_CHANGE and _canonical(value) != _canonical(new[key]) \
                    and value not in old.setdefault(key, []):
                old[key].append(value)
    changed = [f"{_LABELS.get(key, key)} {'/'.join(_shown(v) for v in values)} -> {_shown(new[key])}"
               for key, values in old.items() if values]
    if changed:
        raise SettingsChanged(
            f"{out_dir} was built with other settings ({', '.join(changed)}): its clips would be skipped as "
            f"complete; build into another output folder (--out), or delete {out_dir / MANIFEST_JSONL} (or the "
            "folder) to rebuild every clip with these")


def _canonical(value: Any) -> Any:
    """A recorded value as compared: numbers as floats (``0`` and ``0.0``), numbers written as text
    too (``fsm_kernel`` ``"55"`` and ``55``)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return json.dumps(value, sort_keys=True)


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


_TEMP = re.compile(r"^\..+\.(?:tmp|scratch)-(\d+)(?:\.[A-Za-z0-9]+)?$")


def _runs(pid: int) -> bool:
    """Whether process ``pid`` runs (signal 0 only asks).  A zombie -- a process that has ended but
    whose parent has not collected it yet, as a run killed with its process group (``kill -9``)
    stays for a moment -- answers signal 0 too, but writes nothing any more: it counts as ended
    (its state in ``/proc/<pid>/stat``, where there is a ``/proc``), so that an immediate rerun
    removes its temporaries."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``/proc`` says process ``pid`` has ended (state Z, zombie, or X, dead); False where
    it cannot tell."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except OSError:  # no /proc (macOS): taken as running, as before
        return False
    # "<pid> (<command, which may hold spaces and parentheses>) <state> ...": the state follows the last ")"
    fields = stat[stat.rfind(")") + 1:].split()
    return bool(fields) and fields[0] in ("Z", "X")


class InProgress:
    """The clips this process is building in ``out_dir``, in ``.in-progress-<pid>.json`` (rewritten
    whole, atomically, when they change; removed by :meth:`close` at the end of the run, also an
    interrupted one).  A run that builds clips in its own process leaves the file behind only when
    the process dies -- ``kill -9``, the out-of-memory killer, a crash in a native decoder or model
    library -- and the next run builds those clips in a worker process of their own
    (:func:`clips_of_dead_runs`): a clip that crashes whatever builds it then costs itself a failed
    row instead of ending every run that reaches it."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / f".in-progress-{os.getpid()}.json"
        self.ids: tuple[str, ...] = ()
        self.last_moved = time.monotonic()  # when they last made progress (or changed)

    def moved(self) -> None:
        """The clips in progress made progress (a source frame)."""
        self.last_moved = time.monotonic()

    def set(self, clip_ids: Iterable[str]) -> None:
        ids = tuple(clip_ids)
        if ids == self.ids:
            return
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(ids))
        os.replace(tmp, self.path)
        self.ids, self.last_moved = ids, time.monotonic()

    def close(self) -> None:
        self.path.unlink(missing_ok=True)
        self.ids = ()


_IN_PROGRESS = re.compile(r"^\.in-progress-(\d+)\.json$")


def clips_of_dead_runs(out_dir: Path) -> set[str]:
    """The clips that runs which died were building (:class:`InProgress`); their files are removed."""
    ids: set[str] = set()
    if not out_dir.exists():
        return ids
    for p in out_dir.glob(".in-progress-*.json"):
        m = _IN_PROGRESS.match(p.name)
        if not m or _runs(int(m.group(1))):
            continue
        try:
            ids.update(str(i) for i in json.loads(p.read_text()))
        except (OSError, ValueError, TypeError):  # unreadable: no clip known
            pass
        p.unlink(missing_ok=True)
    return ids


def clip_temporaries(out_dir: Path, clip_id: str, pid: int) -> list[Path]:
    """The temporaries that process ``pid`` wrote for clip ``clip_id`` (``.<clip_id>.tmp-<pid>…``,
    ``.<clip_id>.<code>.scratch-<pid>…``): what it left when it was killed building that clip.
    Told by name and pid, not by whether ``pid`` runs here, so it holds for a process that ran on
    another machine of a cluster."""
    if not out_dir.exists():
        return []
    mine = re.compile(r"^\." + re.escape(clip_id) + r"\.(?:[A-Za-z0-9]+\.)?(?:tmp|scratch)-" + str(int(pid))
                      + r"(?:\.[A-Za-z0-9]+)?$")
    return [p for p in out_dir.rglob(".*") if mine.match(p.name) and p.is_file()]


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
        if not _runs(pid) or (mine and pid == os.getpid()):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
