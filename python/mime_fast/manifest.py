"""The corpus manifest: one row per output file, read by the Chain-of-Emotion pipeline.

Files in the output folder:

- ``manifest.jsonl``: one JSON object per line. During a run rows are *appended* (and flushed to
  disk) as each clip finishes, so a run killed at any moment loses at most the clip in progress; a
  torn last line is ignored when reading. At the end of a run the file is rewritten, atomically,
  with one row per ``(clip_id, subset)`` (the latest wins), so reruns never duplicate rows; a run
  that appended nothing to a file that is already exactly that (and its parquet written after it)
  leaves both files as they are (a rerun of a finished 40k-clip corpus rewrote ~0.4 GB).
- ``manifest.parquet``: the same compacted rows (written atomically at the end of each run).

Both load as they are with ``pandas.read_json(path, lines=True)``, ``pandas.read_parquet(path)`` or
Hugging Face ``datasets.load_dataset("json" | "parquet", data_files=path)``.

Columns (:data:`COLUMNS`; ``None`` where not applicable).  Columns are only ever added: rows written
before a column existed read back with ``None`` in it (:func:`read_rows`), and readers that know
only the older columns (the Chain-of-Emotion pipeline) are unaffected:

=====================  =========================================================================
clip_id                the clip's id (unique within a corpus); a file name that is not UTF-8
                       gives it its undecodable bytes as ``%XX`` (:func:`utf8_text`)
subset                 FM, FDM, FSM, VMM, FDAM, FSAM or AMM; ``"audio"`` for the 16 kHz wav;
                       ``None`` for a clip that failed before any output was written
path                   the output file, relative to the output folder (for a failed clip: the
                       input file as given)
clear_path             for the face-blurred subsets: the clip's clear version, what the CoE
                       pipeline's stage I reads (Algorithm 1's Get_Clear_Version,
                       :data:`CLEAR_VERSION`): FM for FDM and FSM (clear video with audio),
                       AMM for FDAM and FSAM (the clear video without audio: the clear
                       version of an audio-less output has no audio either, so no audio cue
                       can enter its chain); ``None`` otherwise, and where that clear output
                       was not built (e.g. ``--subsets FDAM`` without AMM)
blur_level             ``"none"``, ``"light"`` (FDM, FDAM) or ``"heavy"`` (FSM, FSAM)
kernel                 Gaussian kernel size of the face blur (15, 35 or 55), else ``None``
duration_s, fps        output duration (seconds) and frame rate
frames                 output frames
width, height          output frame size
has_audio              whether the file carries an audio track (16 kHz)
bytes, sha256          size and SHA-256 of the file (used to verify completed clips on resume)
mtime_ns               the file's modification time (ns since the epoch) when its row was written: a
                       rerun trusts a file of the recorded size and time without reading it
                       (``--verify``: every file hashed); ``None`` in older manifests (hashed)
label                  emotion label (Anger, Disgust, Fear, Happy, Neutral, Sad, Surprise) or None
dataset                source dataset name (e.g. DFEW, MAFW, FERV39k, CAER) or None
source                 the input file (a path that is not UTF-8 as :func:`utf8_text` writes it,
                       as every text of the manifest is)
tracking_status        ``"ok"`` or ``"no subject"`` when the subject was found automatically
                       (no landmarks given), else ``None``
tracking_frames_*      source frames in which the subject was detected, interpolated between
                       detections, held from a nearby detection, masked at his head followed by
                       its motion while his face was not detected (``head``, added with the head
                       estimate: ``None`` in older manifests), or absent (left unmasked);
                       ``tracking_frames_undecided``: frames where a face that could be his is
                       masked beside him because nothing could tell whether it is (after the
                       decision over the whole clip: ``mime_fast.subject.decision``; before output
                       revision 8, every face the forward pass could not tell apart; ``None``
                       before revision 3); ``tracking_frames_undecided_pass1``: the frames where
                       the forward pass could not tell which face is his (``None`` before
                       revision 8)
tracking_tracks        the face tracks the forward pass left undecided, as decided over the whole
                       clip, as JSON text: a list of ``{"track", "shot", "frames": [first, last],
                       "decision": "subject" | "other" | "undecided", "rule", "at", "cos", "best",
                       "z", "cohort", "views", "embeddings"}`` (the rule that decided, and the
                       identity evidence: ``mime_fast.subject.decision.TrackDecision``); ``None``
                       when there was none, or before revision 8
tracking_shots         camera shots found in the clip (hard cuts and dissolves split it)
tracking_shot_frames   per shot, in order, ``[frames, frames with the subject masked]`` as JSON
                       text, e.g. ``"[[45, 45], [30, 0], [25, 25]]"`` (a shot without him: 0)
fm_video               for FM and AMM: ``"copy"`` when FM's video is the source's own H.264
                       packets (the source already met FM's standard, ``fm_copy.fm_copy_reason``),
                       ``"encode"`` when it was encoded; ``None`` for other rows and for
                       manifests written before this column existed
fm_video_reason        with ``"encode"``: why the source could not be copied (e.g. "codec mpeg4,
                       not H.264", "fm_copy is off"), else ``None``
decoder                what decoded the clip: ``"nvdec"`` (the GPU's video engine, ``device="cuda"``)
                       or ``"pyav"`` (FFmpeg); ``None`` for rows without a decode and for
                       manifests written before this column existed
decoder_reason         with ``device="cuda"`` and ``"pyav"``: why not NVDEC, else ``None``
faces                  whose faces the face-blurred subsets blur (``Settings.faces``, CLI
                       ``--faces``): ``"subject"`` (MIME: the tracked subject only) or ``"all"``
                       (every detected face); on every row of a clip that was built, ``None`` for a
                       failed clip and for manifests written before this column existed (which
                       were all ``"subject"``)
face_tracks            with ``"all"``: the face tracks the masks come from (detected: every face
                       followed inside a shot, the subject's included; a face lost for longer than
                       the hold or cut away from starts a new track; landmarks given: the faces
                       that appear in some frame), else ``None``
status                 ``"ok"``, ``"skipped"`` or ``"failed"``
reason                 why, for anything but a plain success, in plain words (e.g. "not a media
                       file", "truncated: ...", "corrupt video stream: ...", "below the quality
                       gate: too short ...", "no subject: ...")
detail                 for a failed clip: FFmpeg's own message (or the error's type), else ``None``;
                       :data:`DUPLICATE` for a file given the id of another clip (see :func:`compact`)
run                    id of the run that wrote the row (UTC time and process id)
settings               the settings the outputs were built with, as JSON text: every option that
                       changes the outputs' bytes by its flat keyword
                       (:meth:`mime_fast.options.Settings.output_settings`) and the engine's
                       ``output_revision`` (:data:`mime_fast.spec.OUTPUT_REVISION`), e.g.
                       ``{"fps": 30, "crf": 18, ..., "output_revision": 2}``; on every row a
                       corpus run writes.  A rerun
                       into the folder with other values refuses to start
                       (:func:`mime_fast.corpus.resume.check_same_settings`); ``None`` in manifests
                       written before this column existed, which are accepted as they are
=====================  =========================================================================
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any, Callable, Iterable

from . import spec

__all__ = [
    "BLUR_LEVEL",
    "CLEAR_VERSION",
    "COLUMNS",
    "RUN_VOLATILE",
    "without_volatile",
    "DUPLICATE",
    "EMOTIONS",
    "MANIFEST_JSONL",
    "MANIFEST_PARQUET",
    "ManifestWriter",
    "atomic_write",
    "compact",
    "name_bytes",
    "ManifestRead",
    "read_manifest",
    "read_rows",
    "utf8_text",
    "write_compacted",
    "write_jsonl",
    "write_parquet",
]

MANIFEST_JSONL = "manifest.jsonl"
MANIFEST_PARQUET = "manifest.parquet"

#: The seven emotion categories of MIME.
EMOTIONS = ("Anger", "Disgust", "Fear", "Happy", "Neutral", "Sad", "Surprise")

#: Blur level of each subset (:attr:`mime_fast.spec.SubsetSpec.blur_level`) and of the audio row, as
#: the CoE pipeline's Get_Blur_Level reads it.
BLUR_LEVEL = {**{c.value: level for c, level in spec.BLUR_LEVEL.items()}, "audio": "none"}

#: The clear version of each face-blurred subset (Algorithm 1's Get_Clear_Version,
#: :data:`mime_fast.spec.CLEAR_VERSION`): the same video without the blur and with the same audio,
#: or none: FDAM and FSAM read AMM, not FM.
CLEAR_VERSION = {c.value: clear.value for c, clear in spec.CLEAR_VERSION.items()}

#: The order of a clip's rows: the subsets in the MIME order, then its audio.
_ROW_ORDER = (*spec.CODES, "audio")

COLUMNS: tuple[str, ...] = (
    "clip_id", "subset", "path", "clear_path", "blur_level", "kernel", "duration_s", "fps", "frames", "width",
    "height", "has_audio", "bytes", "sha256", "mtime_ns", "label", "dataset", "source", "tracking_status",
    "tracking_frames_detected", "tracking_frames_interpolated", "tracking_frames_held", "tracking_frames_head",
    "tracking_frames_without_subject", "tracking_frames_undecided", "tracking_frames_undecided_pass1",
    "tracking_shots", "tracking_shot_frames", "tracking_tracks",
    "fm_video", "fm_video_reason",
    "decoder", "decoder_reason", "faces", "face_tracks", "status", "reason", "detail", "run", "settings",
)

#: Columns that differ between two runs that made the same bytes: the run id and the output files'
#: modification times.
RUN_VOLATILE: tuple[str, ...] = ("run", "mtime_ns")


def without_volatile(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` without :data:`RUN_VOLATILE`: what two runs of the same clip and settings agree on."""
    return {k: v for k, v in row.items() if k not in RUN_VOLATILE}


#: The ``detail`` of the failed row of a clip whose id another clip of the run already has (a
#: second ``a.mp4`` in a subfolder): that row is the second file's, not the clip's (:func:`compact`).
DUPLICATE = "duplicate clip id"


def utf8_text(text: str) -> str:
    """``text`` as valid UTF-8 text, the form every clip id and every text of the manifest has.

    A file name that is not valid UTF-8 (a GBK or Latin-1 name unzipped on Linux) reaches Python
    with each byte it could not decode as a lone surrogate (``surrogateescape``: U+DC80..U+DCFF),
    which no UTF-8 file can hold: each becomes ``%XX``, the byte in upper-case hex (80 to FF):
    ``clip_\\xb1\\xed.mp4`` -> ``clip_%B1%ED.mp4``.  Replacing each ``%XX`` from ``%80`` to ``%FF``
    by its byte gives the name back (:func:`name_bytes`), unless the name also held such a ``%XX``
    as text.  Any other lone surrogate (only a JSON ``\\u`` escape makes one) becomes U+FFFD.
    Text that is valid UTF-8 is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"%{code - 0xDC00:02X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def name_bytes(text: str) -> bytes:
    """The bytes of the file name (or path) that :func:`utf8_text` wrote as ``text``:
    ``os.fsdecode(name_bytes(row["source"]))`` is the path to open."""
    return re.sub(rb"%([89A-F][0-9A-F])", lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))


_COLUMN_SET = frozenset(COLUMNS)


def _row(values: dict[str, Any]) -> dict[str, Any]:
    """A manifest row: every column, in order; its texts valid UTF-8 (:func:`utf8_text`: a source
    path or a reason naming a file whose name is not UTF-8)."""
    unknown = values.keys() - _COLUMN_SET
    if unknown:
        raise ValueError(f"unknown manifest columns {sorted(unknown)}")
    return {c: utf8_text(v) if isinstance(v, str) else v for c, v in ((c, values.get(c)) for c in COLUMNS)}


class ManifestWriter:
    """Appends rows to ``out_dir/manifest.jsonl``, flushed and fsynced per clip.  ``known``: the
    manifest as this run read it before (:func:`read_manifest`); while the file changes only by
    this writer's appends, :meth:`rows` gives its rows without reading it again."""

    def __init__(self, out_dir: Path, known: ManifestRead | None = None):
        self.path = Path(out_dir) / MANIFEST_JSONL
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repaired = self._repair_torn_tail()
        self._f = open(self.path, "a", encoding="utf-8")
        #: the rows this writer appended, as :func:`read_rows` reads them back
        self.appended: list[dict[str, Any]] = []
        self._rows: list[dict[str, Any]] | None = None  # the file's rows, while only this writer changes it
        self._at: tuple[int, ...] = ()  # the file's (inode, size, times) after this writer's last change
        if known is not None:
            st = os.fstat(self._f.fileno())
            before = known.stat
            if before is None and st.st_size == 0 and not known.rows:
                self._rows = []
            elif before is not None and (st.st_ino, st.st_dev) == (before.st_ino, before.st_dev) \
                    and st.st_size == before.st_size + repaired and (repaired or st.st_mtime_ns == before.st_mtime_ns):
                self._rows = list(known.rows)  # (a torn last line, ended: read as it was)
            self._at = _identity(st)

    def _repair_torn_tail(self) -> int:
        # A run killed mid-write can leave a last line without its newline: end it so the next
        # appended row starts on a line of its own (the torn line is then skipped by read_rows).
        # Returns the bytes written (0 or 1).
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
                    return 1
        return 0

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        lines = [json.dumps(_row(r), ensure_ascii=False) + "\n" for r in rows]
        text = "".join(lines)
        self._f.write(text)
        self._f.flush()
        os.fsync(self._f.fileno())
        back = [row for row, _ in (_read_line(part.strip()) for line in lines for part in line.splitlines()
                                   if part.strip())  # (as read_rows reads them back)
                if row is not None]
        self.appended.extend(back)
        if self._rows is not None:
            self._rows.extend(back)
            self._at = _identity(os.fstat(self._f.fileno()))

    def rows(self) -> list[dict[str, Any]] | None:
        """The rows of the manifest now, as :func:`read_rows` would read them, when the file has
        changed only by this writer's appends since ``known`` was read (its inode, size and times
        are those it had after the last); else ``None`` (another process wrote it, or nothing was
        known): read it again."""
        if self._rows is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return list(self._rows) if _identity(st) == self._at else None

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "ManifestWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_rows(out_dir: Path) -> list[dict[str, Any]]:
    """Every well-formed row of ``out_dir/manifest.jsonl`` in file order (torn lines skipped)."""
    return read_manifest(out_dir).rows


@dataclass
class ManifestRead:
    """``manifest.jsonl`` as :func:`read_manifest` read it."""

    #: every well-formed row, in file order (:func:`read_rows`)
    rows: list[dict[str, Any]]
    #: the file's stat when read (``None``: there was none)
    stat: os.stat_result | None = None
    #: every line of the file is a row with exactly :data:`COLUMNS`, in order, and the file ends with
    #: a newline: no torn, blank or foreign line, nothing written before a column existed
    canonical: bool = True

    def compacted_on_disk(self, compacted: list[dict[str, Any]], out_dir: Path) -> bool:
        """Whether the manifest as read is already exactly what :func:`write_compacted` writes for
        ``compacted`` (``compact(self.rows)``): its lines are those rows in that order, and
        ``manifest.parquet`` was written after the jsonl last changed (its modification time later
        than the jsonl's status change: a compaction writes the parquet after replacing the jsonl;
        an append, an edit or a restored copy of the jsonl comes later)."""
        if self.stat is None or not self.canonical or len(compacted) != len(self.rows) \
                or any(a is not b for a, b in zip(compacted, self.rows)):
            return False
        try:
            parquet = os.stat(Path(out_dir) / MANIFEST_PARQUET)
        except OSError:
            return False
        return S_ISREG(parquet.st_mode) and parquet.st_mtime_ns > self.stat.st_ctime_ns


def _read_line(line: str) -> tuple[dict[str, Any] | None, bool]:
    """The row of one line (``None``: not a row) and whether the line is one with exactly
    :data:`COLUMNS`, in order."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return None, False  # torn by a kill during a write
    if not isinstance(obj, dict) or "clip_id" not in obj:
        return None, False
    # (read from UTF-8 text: _row's cleaning not needed; the keys are the constants of COLUMNS, one
    # set for every row, not the parser's copies: a 40k-clip corpus's rows take ~0.8 GB less)
    return {c: obj.get(c) for c in COLUMNS}, tuple(obj) == COLUMNS


def read_manifest(out_dir: Path) -> ManifestRead:
    """``out_dir/manifest.jsonl`` read: its rows (:func:`read_rows`), its stat, and whether it is
    made only of rows as this module writes them (:class:`ManifestRead`)."""
    path = Path(out_dir) / MANIFEST_JSONL
    try:
        with open(path, encoding="utf-8", newline="") as f:  # (as it is: its lines are the same, split below)
            st = os.fstat(f.fileno())
            text = f.read()
    except FileNotFoundError:
        return ManifestRead([])
    lines = text.splitlines()
    # (no line broken but by "\n": not "\r\n", nor a U+2028 that splits a line in two)
    canonical = (text.endswith("\n") or not text) and len(lines) == text.count("\n") and "\r" not in text
    del text
    rows = []
    for line in lines:
        stripped = line.strip()
        if stripped != line:
            canonical = False
            if not stripped:
                continue
            line = stripped
        row, exact = _read_line(line)
        if row is not None:
            rows.append(row)
        canonical = canonical and exact
    return ManifestRead(rows, st, canonical)


def compact(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of each clip's latest run (a rerun, failed or not, supersedes older rows of that
    clip), one per subset, ordered by clip_id and then the MIME subset order.

    The failed rows of a duplicate clip id (``detail`` :data:`DUPLICATE`: another file given an id
    that a clip of the run has) are the other file's, not the clip's: they never supersede the
    clip's rows -- a rerun that skips the complete clip and fails its duplicate again keeps the
    clip's outputs -- and follow them, one per file, those of the latest run that met the
    duplicate; a later rebuild of the clip without it drops them (runs compared by their ids,
    which start with the UTC time)."""
    rows = list(rows)
    own = [r for r in rows if r["detail"] != DUPLICATE]
    duplicates = [r for r in rows if r["detail"] == DUPLICATE]
    last_run = {r["clip_id"]: r["run"] for r in own}
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in own:
        if r["run"] == last_run[r["clip_id"]]:
            latest[(r["clip_id"], r["subset"])] = r
    last_duplicate_run = {r["clip_id"]: r["run"] for r in duplicates}
    for r in duplicates:
        clip_run = last_run.get(r["clip_id"])
        if r["run"] == last_duplicate_run[r["clip_id"]] and (clip_run is None or str(r["run"]) >= str(clip_run)):
            latest[(r["clip_id"], DUPLICATE, r["source"] or r["path"])] = r
    order = {s: i for i, s in enumerate(_ROW_ORDER)}
    return sorted(latest.values(), key=lambda r: (r["clip_id"], r["detail"] == DUPLICATE, order.get(r["subset"], -1),
                                                  str(r["source"])))


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """Make ``path`` by ``write(tmp)`` into a temporary name beside it (``.<name>.tmp-<pid>``, which
    :mod:`mime_fast.corpus.resume` knows as a leftover), then rename it into place: ``path`` is never
    left half-written, and the temporary is removed whatever fails."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_parquet(table, path: Path) -> None:
    """Write the pyarrow ``table`` to the local file ``path`` through a file object: given a path
    string, pyarrow reads it as a URI, and a folder named like ``o:x`` becomes a filesystem scheme
    it does not know."""
    import pyarrow.parquet as pq

    with open(path, "wb") as f:
        pq.write_table(table, f)


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path) -> None:
    """Write ``rows`` to ``path`` as JSON Lines (UTF-8, one object per line), flushed to the disk
    before it returns (for :func:`atomic_write`: the file renamed into place is complete)."""
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def write_compacted(out_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Rewrite manifest.jsonl with exactly ``rows`` and write manifest.parquet, both atomically."""
    out_dir = Path(out_dir)

    rows = [_row(r) for r in rows]  # (once, for both files)

    def parquet(tmp: Path) -> None:
        import pyarrow as pa

        schema = pa.schema([
            (c, pa.int64() if c in ("kernel", "frames", "width", "height", "bytes", "mtime_ns", "tracking_shots", "face_tracks")
             or c.startswith("tracking_frames")
             else pa.float64() if c in ("duration_s", "fps")
             else pa.bool_() if c == "has_audio"
             else pa.string())
            for c in COLUMNS
        ])
        write_parquet(pa.Table.from_pylist(rows, schema=schema), tmp)

    atomic_write(out_dir / MANIFEST_JSONL, lambda tmp: write_jsonl(rows, tmp))
    atomic_write(out_dir / MANIFEST_PARQUET, parquet)
