"""Labels: the corpora's label names mapped to MIME's seven emotions (:func:`to_mime`), the split
lists and vote spreadsheets read (DFEW, MAFW, FERV39k), and the ambiguity rule (:func:`ambiguity`).

Doubts handled (``docs/curate.md``): DFEW's ``single_labeled`` / ``single-labeled`` folders, its
``video_name`` written ``1``, ``00001`` or ``00001.mp4``, a clip given two labels by two lists
(excluded, both named), its ``annotation.xlsx`` inside a zip; MAFW's lists read as UTF-8 with
undecodable bytes replaced (the ``with_caption`` lists are not UTF-8: only their first two fields
are read, and only where no ``no_caption`` list exists); MAFW without its lists, its labels then
from ``Labels/single-set.xlsx``; MAFW's class columns holding annotator counts (out of 11) or
shares (0..1).  Spreadsheets are read with openpyxl (the ``curate`` extra).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..corpus.inputs import EMOTION_ALIASES
from ..manifest import EMOTIONS

__all__ = [
    "DFEW_LABELS",
    "MAFW_CLASSES",
    "Votes",
    "ambiguity",
    "dfew_split_labels",
    "dfew_votes",
    "ferv_setup_labels",
    "mafw_set_labels",
    "mafw_votes",
    "mime_emotion",
    "to_mime",
]

#: DFEW's label numbers (``label`` of the split lists and of ``annotation.xlsx``; 0 = not single-labelled).
DFEW_LABELS = {1: "Happy", 2: "Sad", 3: "Neutral", 4: "Anger", 5: "Surprise", 6: "Disgust", 7: "Fear"}
#: MAFW's eleven single classes in order; the first seven are MIME's.
MAFW_CLASSES = ("anger", "disgust", "fear", "happiness", "neutral", "sadness", "surprise", "contempt", "anxiety",
                "helplessness", "disappointment")
#: MAFW's annotators per clip (its class columns count them where the values exceed 1).
MAFW_ANNOTATORS = 11


def mime_emotion(name: str) -> str | None:
    """MIME's name of an emotion label name (any case; ``Angry``, ``happiness``, ...), or ``None``."""
    return EMOTION_ALIASES.get(str(name).strip().lower())


def to_mime(raw: str, dataset_layout: str) -> str | None:
    """MIME's emotion of a raw label: DFEW's numbers 1..7, else a name."""
    text = str(raw).strip()
    if dataset_layout == "DFEW" and text.isdigit():
        return DFEW_LABELS.get(int(text))
    return mime_emotion(text)


@dataclass
class Votes:
    """One clip's votes: annotators per MIME emotion (or shares), its label, whether marked invalid."""

    counts: dict[str, float]
    label: int | None = None  #: DFEW's ``label`` column (0: not single-labelled)
    invalid: bool = False
    total: float | None = None  #: the annotators (``None``: the sum of the counts)

    def share(self, raw: str) -> float | None:
        emotion = to_mime(raw, "DFEW") if str(raw).isdigit() else mime_emotion(raw)
        total = self.total if self.total is not None else sum(self.counts.values())
        if emotion is None or not total:
            return None
        return round(float(self.counts.get(emotion, 0.0)) / float(total), 4)


def ambiguity(share: float | None, min_agreement: float) -> str | None:
    """The reason a clip's label is ambiguous (its annotators' share below ``min_agreement``), or ``None``."""
    if share is None or share >= min_agreement:
        return None
    return f"ambiguous label: {share:.2f} of the annotators chose it, below --min-agreement {min_agreement:g}"


def _number(text) -> int | None:
    m = re.fullmatch(r"\s*0*(\d+)(?:\.0)?(?:\.\w+)?\s*", str(text))
    return int(m.group(1)) if m else None


def dfew_split_labels(root: Path) -> tuple[dict[int, str], dict[int, str]]:
    """DFEW's single-labelled split lists: clip number -> label number (as text), and the clips two
    lists label differently -> both labels."""
    out: dict[int, str] = {}
    source: dict[int, str] = {}
    conflicts: dict[int, str] = {}
    base = root / "EmoLabel_DataSplit"
    lists = sorted(p for p in base.glob("*/set_*.csv") if "single" in p.parent.name.lower()) if base.is_dir() else []
    for path in lists:
        rows = csv.reader(io.StringIO(path.read_text("utf-8-sig", errors="replace")))
        where = f"{path.parent.name}/{path.name}"
        for row in rows:
            if len(row) < 2:
                continue
            number, label = _number(row[0]), _number(row[1])
            if number is None or label is None:  # the header (video_name,label)
                continue
            if number in out and out[number] != str(label):
                conflicts[number] = f"{out[number]} in {source[number]}, {label} in {where}"
            if number not in out:
                out[number], source[number] = str(label), where
    return out, conflicts


def _open_xlsx(path: Path, zipped_name: str):
    """An xlsx file's rows (openpyxl), or of the first ``zipped_name`` in a zip beside it; ``None``: none."""
    import openpyxl  # the curate extra

    if path.is_file():
        source = path
    else:
        zips = sorted(path.parent.glob("*.zip")) + sorted(path.parent.parent.glob(f"{path.parent.name}*.zip"))
        source = None
        for z in zips:
            with zipfile.ZipFile(z) as zf:
                name = next((n for n in zf.namelist() if n.lower().endswith(zipped_name)), None)
                if name is not None:
                    source = io.BytesIO(zf.read(name))
                    break
        if source is None:
            return None
    book = openpyxl.load_workbook(source, read_only=True, data_only=True)
    try:
        return [list(r) for r in book.worksheets[0].iter_rows(values_only=True)]
    finally:
        book.close()


def _header(rows: list[list]) -> tuple[int, list[str]]:
    for i, row in enumerate(rows[:10]):
        names = [str(c).strip().lower() if c is not None else "" for c in row]
        if any(n in ("order", "clip", "video_name", "label", "single_label") for n in names):
            return i, names
    return -1, []


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def dfew_votes(root: Path) -> dict[int, Votes]:
    """DFEW's ``Annotation/annotation.xlsx`` (or inside a zip there): clip number -> votes."""
    rows = _open_xlsx(root / "Annotation" / "annotation.xlsx", "annotation.xlsx")
    if not rows:
        return {}
    start, names = _header(rows)
    vote_cols = {}
    for j, n in enumerate(names):
        m = re.fullmatch(r"[1-7]?\s*[_.]?\s*([a-z]+)", n)
        if m and mime_emotion(m.group(1)):
            vote_cols[j] = mime_emotion(m.group(1))
    order = next((j for j, n in enumerate(names) if n in ("order", "video_name", "clip")), None)
    label = next((j for j, n in enumerate(names) if n == "label"), None)
    if order is None:
        return {}
    out = {}
    for row in rows[start + 1:]:
        number = _number(row[order]) if order < len(row) and row[order] is not None else None
        if number is None:
            continue
        counts = {e: _float(row[j]) for j, e in vote_cols.items() if j < len(row)}
        lab = _number(row[label]) if label is not None and label < len(row) and row[label] is not None else None
        out[number] = Votes(counts, label=lab)
    return out


def _read_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text("utf-8", errors="replace").splitlines() if line.strip()]


def mafw_set_labels(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """MAFW's lists: clip number (5 digits) -> single class name, and -> compound label."""
    base = root / "Train & Test Set"
    single_dir = base / "single" / "no_caption"
    if not single_dir.is_dir():
        single_dir = base / "single"
    single: dict[str, str] = {}
    for path in sorted(single_dir.rglob("*.txt")) if single_dir.is_dir() else []:
        for fields in _read_lines(path):
            if len(fields) >= 2:
                single.setdefault(Path(fields[0]).stem.zfill(5), fields[1].lower())
    if not single:  # no list: Labels/single-set.xlsx (clip, single_label 1..11)
        single.update(_mafw_single_set(root))
    compound: dict[str, str] = {}
    comp_dir = base / "compound"
    for path in sorted(comp_dir.rglob("*.txt")) if comp_dir.is_dir() else []:
        for fields in _read_lines(path):
            if len(fields) >= 2:
                compound.setdefault(Path(fields[0]).stem.zfill(5), fields[1].lower())
    return single, compound


def _clip_key(value) -> str:
    """MAFW's clip as the spreadsheets write it (``25``, ``00025``, ``00025.mp4``) -> ``00025``."""
    key = Path(str(value).strip()).stem
    return key.zfill(5) if key.isdigit() else key


def _mafw_single_set(root: Path) -> dict[str, str]:
    rows = _open_xlsx(root / "Labels" / "single-set.xlsx", "single-set.xlsx")
    if not rows:
        return {}
    start, names = _header(rows)
    clip = next((j for j, n in enumerate(names) if n in ("clip", "video_name", "order")), None)
    label = next((j for j, n in enumerate(names) if n in ("single_label", "label")), None)
    if clip is None or label is None:
        return {}
    out = {}
    for row in rows[start + 1:]:
        if max(clip, label) < len(row) and row[clip] is not None:
            number = _number(row[label]) if row[label] is not None else None
            if number is not None and 1 <= number <= len(MAFW_CLASSES):
                out.setdefault(_clip_key(row[clip]), MAFW_CLASSES[number - 1])
    return out


def mafw_votes(root: Path) -> dict[str, Votes]:
    """MAFW's ``Labels/annotation.xlsx``: clip (5 digits) -> votes of its class columns."""
    rows = _open_xlsx(root / "Labels" / "annotation.xlsx", "annotation.xlsx")
    if not rows:
        return {}
    start, names = _header(rows)
    clip = next((j for j, n in enumerate(names) if n in ("clip", "video_name", "order")), None)
    invalid = next((j for j, n in enumerate(names) if n == "invalid"), None)
    cols = {j: mime_emotion(n) for j, n in enumerate(names) if n in MAFW_CLASSES}
    if clip is None or not cols:
        return {}
    out = {}
    for row in rows[start + 1:]:
        if clip >= len(row) or row[clip] is None:
            continue
        key = _clip_key(row[clip])
        values = {j: _float(row[j]) for j in cols if j < len(row)}
        counts: dict[str, float] = {}
        for j, v in values.items():
            if cols[j] is not None:
                counts[cols[j]] = v
        shares = max(values.values(), default=0.0) <= 1.0
        out[key] = Votes(counts, invalid=bool(invalid is not None and invalid < len(row) and _float(row[invalid])),
                         total=1.0 if shares else float(MAFW_ANNOTATORS))
    return out


def ferv_setup_labels(root: Path) -> dict[str, str]:
    """FERV39k's setup lists: ``Scene/Emotion/NNNN`` -> the emotion written after it."""
    out: dict[str, str] = {}
    base = root / "4_setups"
    for path in sorted(base.rglob("*.csv")) if base.is_dir() else []:
        for fields in _read_lines(path):
            fields = [f for part in fields for f in part.split(",") if f]
            if len(fields) >= 2:
                out.setdefault(str(Path(fields[0]).with_suffix("")) if Path(fields[0]).suffix.lower() in (".mp4",)
                               else fields[0], fields[-1])
    return out


assert set(DFEW_LABELS.values()) == set(EMOTIONS)
