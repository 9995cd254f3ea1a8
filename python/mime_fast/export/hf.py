"""The Hugging Face ``datasets`` format: one folder per subset (its videos and a
``metadata.jsonl``), and a dataset card (``README.md``) whose YAML ``configs`` make each subset a
config, ``FM`` ... ``AMM``, with one split, ``test``.

``datasets.load_dataset(DEST, "FSM")`` reads it as a video folder: ``file_name`` (the video's path
relative to its ``metadata.jsonl``) becomes the ``video`` column (decoding a video needs
``torchcodec``; ``cast_column("video", Video(decode=False))`` gives its path), every other field a
column of its own.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ..manifest import EMOTIONS
from ..spec import CODES
from ..spec import spec as subset_spec
from .corpus import COE_FIELDS, BuiltCorpus, Sample
from .layout import Layout

__all__ = ["COLUMNS", "SPLIT", "hf_layout", "metadata_row"]

#: The split every config has (a benchmark: all of it is for testing).
SPLIT = "test"
#: The columns of each ``metadata.jsonl``; the Chain-of-Emotion's (:data:`COE_FIELDS`) follow where
#: the corpus has a ``coe.jsonl``.
COLUMNS = ("file_name", "clip_id", "label", "dataset", "duration", "has_audio", "kernel", "blur_level")


def metadata_row(sample: Sample, with_coe: bool) -> dict[str, Any]:
    """The ``metadata.jsonl`` row of ``sample``."""
    row = {"file_name": sample.path.split("/", 1)[1], "clip_id": sample.clip_id, "label": sample.label,
           "dataset": sample.dataset, "duration": sample.duration_s, "has_audio": sample.has_audio,
           "kernel": sample.kernel, "blur_level": sample.blur_level}
    if with_coe:
        row.update(sample.coe)
    return row


def hf_layout(corpus: BuiltCorpus, coe_accepted: bool) -> Layout:
    layout = Layout()
    for code, samples in corpus.by_subset().items():
        layout.media += [(s.path, s.path) for s in samples]
        layout.texts[f"{code}/metadata.jsonl"] = "".join(
            json.dumps(metadata_row(s, corpus.has_coe), ensure_ascii=False) + "\n" for s in samples)
        layout.counts[code] = len(samples)
    missing = [c for c in CODES if c not in layout.counts]
    if missing:
        layout.notes.append(f"no sample of {', '.join(missing)}: no config for {'it' if len(missing) == 1 else 'them'}")
    layout.texts["README.md"] = card(corpus, layout.counts, coe_accepted)
    return layout


def _yaml_configs(counts: dict[str, int]) -> str:
    lines = ["configs:"]
    for i, code in enumerate(counts):
        lines += [f"- config_name: {code}", "  data_files:", f"  - split: {SPLIT}", f"    path: {code}/*"]
        if i == 0:
            lines.append("  default: true")
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def card(corpus: BuiltCorpus, counts: dict[str, int], coe_accepted: bool) -> str:
    """The dataset card: the configs (YAML), what each subset is, the samples per subset and
    label, the Chain-of-Emotion's counts, the build settings, the columns and how to load it."""
    labels = corpus.label_counts()
    names = [e for e in (*EMOTIONS, "(none)") if any(e in c for c in labels.values())]
    subsets = _table(["config", "subset", "video", "audio", "blur kernel", "samples"], [
        [code, subset_spec(code).name, subset_spec(code).description, "yes" if subset_spec(code).has_audio else "no",
         _kernels(corpus, code), counts[code]] for code in counts])
    per_label = _table(["config", *names, "total"], [
        [code, *(labels[code].get(e, 0) for e in names), counts[code]] for code in counts])
    parts = ["---", _yaml_configs(counts), "task_categories:", "- video-classification", "tags:",
             "- emotion-recognition", "- multimodal", "- privacy", "- mime", "pretty_name: MIME", "---", "",
             "# MIME: Missing Information in Multimodal Emotion", "",
             ("Emotion clips degraded seven ways, one config per subset, built by mime_fast (`mime-fast build`) and "
             "exported by `mime-fast export --format hf`. Each clip is labelled with one of seven emotions: "
             f"{', '.join(EMOTIONS)}."), "", "## Subsets", "", subsets, "",
             ("FDAM, FSAM and AMM carry the video of FDM, FSM and FM without its audio; VMM is black frames with "
             "the clip's audio."), "", "## Samples per label", "", per_label, ""]
    if corpus.has_coe:
        status = {code: Counter(s.coe["coe_status"] or "not made" for s in corpus.samples if s.subset == code)
                  for code in CODES}
        parts += ["## Chain-of-Emotion", "",
                  ("Each sample carries its Chain-of-Emotion (`mime-fast coe`, the MIME paper's four stages): "
                  "`coe_status` (ok: accepted; rejected: stage III predicted another emotion; failed), "
                  "`scene_understanding`, `emotional_analysis`, `predicted_emotion`, `emotion_cues`, and `coe` "
                  "(stage IV's JSON)."), ""]
        if coe_accepted:
            parts += [(f"Only the accepted chains are exported (`--coe-accepted`: MIME's final benchmark); of the "
                      f"{sum(corpus.built.values())} samples built, {len(corpus.samples)} were accepted."), ""]
        else:
            parts += [_table(["config", "ok", "rejected", "failed", "not made"],
                             [[code, *(status[code].get(k, 0) for k in ("ok", "rejected", "failed", "not made"))]
                              for code in counts]), ""]
    parts += ["## Build settings", "", ("The settings every output was built with (`mime-fast build`; "
              "`output_revision`: the engine's revision of what it makes of a clip):"), ""]
    for settings in corpus.settings or [{}]:
        parts += ["```json", json.dumps(settings, sort_keys=True, indent=1), "```", ""]
    columns = [["video (`file_name`)", "the clip's mp4, relative to its config's folder"],
               ["clip_id", "the clip's id, the same in every config"], ["label", "the emotion (ground truth)"],
               ["dataset", "the source dataset, where given"], ["duration", "seconds"],
               ["has_audio", "whether the mp4 has an audio track (16 kHz)"],
               ["kernel", "the Gaussian kernel of the face blur (FDM, FSM, FDAM, FSAM)"],
               ["blur_level", "none, light or heavy"]]
    if corpus.has_coe:
        columns += [[c, "Chain-of-Emotion"] for c in COE_FIELDS]
    parts += ["## Columns", "", _table(["column", "what"], columns), "", "## Loading", "", "```python",
              "import datasets", "", f'ds = datasets.load_dataset("path/to/this/folder", "FSM", split="{SPLIT}")',
              'ds = ds.cast_column("video", datasets.Video(decode=False))  # paths; decoding needs torchcodec',
              "```", ""]
    return "\n".join(parts)


def _kernels(corpus: BuiltCorpus, code: str) -> str:
    kernels = sorted({s.kernel for s in corpus.samples if s.subset == code and s.kernel is not None})
    return ", ".join(str(k) for k in kernels) or "-"
