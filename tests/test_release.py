"""The release chain end to end, through the CLI, on generated corpora: ``mime-fast curate`` ->
``mime-fast build`` -> ``mime-fast coe`` (the scripted endpoint of tests/coe_server.py) ->
``mime-fast export`` (hf and lmms-eval, ``--coe-accepted``).

Two small releases in two layouts (DFEW and MAFW), clips with a face and their landmarks beside
them (``samples.make_clip``'s ``<stem>.npz``: build reads them, no detector needed), among them
clips curate must exclude: one in no DFEW list, one labelled MAFW's contempt, a byte copy of a DFEW
clip in MAFW (a duplicate), and two Anger clips of which ``--per-class 1`` keeps one.  What the
exports hold is compared with curate's selected.csv: the same clip ids, the same emotions, nothing
curate excluded, and the one chain the endpoint rejects left out under ``--coe-accepted``.  Each
link is needed: export reads build's manifest, build reads curate's list, and coe's chains decide
what ``--coe-accepted`` keeps.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # (read when datasets is imported: nothing from the hub)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets")
pytest.importorskip("openai")
pytest.importorskip("jinja2")
pytest.importorskip("jsonschema")
pytest.importorskip("openpyxl")
pytest.importorskip("cv2")
pytest.importorskip("matplotlib")

from coe_server import FakeChatServer, Reply, Request, default_reply, media_index
from mime_fast import samples
from mime_fast.cli import main
from mime_fast.manifest import read_rows
from mime_fast.spec import CODES

SIZE = (96, 72)
GATES = ["--min-height", "48", "--min-duration", "0.3"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _clip(path: Path, seed: int) -> None:
    """A short clip with a face, its landmarks beside it (``<stem>.npz``)."""
    samples.make_clip(path, duration=0.4, fps=25, size=SIZE, seed=seed)
    assert path.with_suffix(".npz").is_file()


def make_dfew(root: Path) -> None:
    clips = root / "Clip" / "original"
    _clip(clips / "00001.mp4", 1)  # Happy
    _clip(clips / "00002.mp4", 2)  # Sad
    _clip(clips / "00003.mp4", 3)  # in no list: no label
    _write(root / "EmoLabel_DataSplit" / "train(single_labeled)" / "set_1.csv", "video_name,label\n1,1\n2,2\n")


def make_mafw(root: Path, dfew: Path) -> None:
    clips = root / "data" / "clips"
    _clip(clips / "00001.mp4", 11)  # anger
    _clip(clips / "00002.mp4", 12)  # contempt: not one of MIME's seven
    _clip(clips / "00003.mp4", 13)  # anger: --per-class 1 keeps one of the two
    for ext in (".mp4", ".npz"):  # DFEW's 00001, copied: a duplicate
        shutil.copyfile(dfew / "Clip" / "original" / f"00001{ext}", clips / f"00004{ext}")
    _write(root / "Train & Test Set" / "single" / "no_caption" / "set_1" / "train.txt",
           "00001.mp4 anger\n00002.mp4 contempt\n00003.mp4 anger\n00004.mp4 happiness\n")


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text("utf-8"), newline="")))


def load(dest: Path, config: str, cache: Path):
    ds = datasets.load_dataset(str(dest), config, split="test", cache_dir=str(cache))
    return ds.cast_column("video", datasets.Video(decode=False))  # (paths: no video decoder needed)


def test_curate_build_coe_export_on_generated_corpora(tmp_path: Path, capsys) -> None:
    dfew, mafw = tmp_path / "DFEW", tmp_path / "MAFW"
    make_dfew(dfew)
    make_mafw(mafw, dfew)

    # curate: the selection, balanced to one clip per emotion
    curated = tmp_path / "curated"
    assert main(["curate", str(dfew), str(mafw), "--out", str(curated), "--per-class", "1", "--seed", "3",
                 *GATES, "-q"]) == 0
    selected = {r["clip_id"]: r for r in read_csv(curated / "selected.csv")}
    excluded = {Path(r["path"]).relative_to(tmp_path).as_posix(): r["reason"]
                for r in read_csv(curated / "excluded.csv")}
    emotions = {cid: r["emotion"] for cid, r in selected.items()}
    found = {"DFEW_00001": "DFEW/Clip/original/00001.mp4", "DFEW_00002": "DFEW/Clip/original/00002.mp4",
             "DFEW_00003": "DFEW/Clip/original/00003.mp4", "MAFW_00001": "MAFW/data/clips/00001.mp4",
             "MAFW_00002": "MAFW/data/clips/00002.mp4", "MAFW_00003": "MAFW/data/clips/00003.mp4",
             "MAFW_00004": "MAFW/data/clips/00004.mp4"}
    never = set(found) - set(selected)  # what curate excluded, by clip id
    assert {Path(r["path"]).relative_to(tmp_path).as_posix() for r in selected.values()} == {
        found[c] for c in selected}
    assert set(excluded) == {found[c] for c in never}  # every clip found: selected or excluded, once
    # one clip per emotion: the Sad one, one of the two Angers (MAFW's "anger"), and DFEW's Happy
    # clip or its copy in MAFW (MAFW's "happiness"), the other excluded as its duplicate
    assert sorted(emotions.values()) == ["Anger", "Happy", "Sad"] and emotions["DFEW_00002"] == "Sad"
    anger, happy = (next(c for c, e in emotions.items() if e == x) for x in ("Anger", "Happy"))
    assert anger in ("MAFW_00001", "MAFW_00003") and happy in ("DFEW_00001", "MAFW_00004")
    assert excluded[found[({"DFEW_00001", "MAFW_00004"} - {happy}).pop()]].startswith("duplicate of ")
    assert "--per-class" in excluded[found[({"MAFW_00001", "MAFW_00003"} - {anger}).pop()]]
    assert "no label" in excluded[found["DFEW_00003"]]
    assert excluded[found["MAFW_00002"]] == "label 'contempt' is not one of MIME's seven emotions"

    # build: curate's list, its landmarks found beside each clip
    built = tmp_path / "built"
    assert main(["build", str(curated / "selected.csv"), "--out", str(built), *GATES, "--workers", "1", "-q"]) == 0
    rows = read_rows(built)
    assert {r["status"] for r in rows} == {"ok"}
    assert {r["clip_id"] for r in rows if r["subset"] == "audio"} == set(selected)
    rows = [r for r in rows if r["subset"] != "audio"]
    assert {(r["clip_id"], r["subset"]) for r in rows} == {(c, s) for c in selected for s in CODES}
    assert {r["clip_id"]: r["label"] for r in rows} == emotions
    assert {r["clip_id"]: r["dataset"] for r in rows} == {c: r["dataset"] for c, r in selected.items()}

    # coe: the scripted endpoint, which rejects the Sad clip's FSM chain (stage III says Happy)
    rejected = ("DFEW_00002", "FSM")

    def reject_one(req: Request) -> Reply:
        if req.stage == "stage3" and f"stage2_heavy on FSM/{rejected[0]}.mp4" in req.user_text:
            return Reply(content=json.dumps({"predicted_emotion": "happy", "emotion_cues": "smiling voice"}))
        return default_reply(req)

    with FakeChatServer(media_index(built), script=reject_one) as server:
        assert main(["coe", str(built), "--endpoint", server.url, "--model", "omni", "--text-model", "text",
                     "--concurrency", "2", "--backoff", "0.001", "-q"]) == 0
    chains = [json.loads(line) for line in (built / "coe.jsonl").read_text().splitlines()]
    status = {(c["clip_id"], c["subset"]): c["status"] for c in chains}
    assert status == {**{(c, s): "ok" for c in selected for s in CODES}, rejected: "rejected"}

    # export: the accepted chains, as a Hugging Face datasets folder and as lmms-eval tasks
    hf, tasks = tmp_path / "hf", tmp_path / "tasks"
    for fmt, dest in (("hf", hf), ("lmms-eval", tasks)):
        assert main(["export", str(built), "--format", fmt, "--out", str(dest), "--coe-accepted", "-q"]) == 0
    capsys.readouterr()
    exported: set[tuple[str, str]] = set()
    for code in CODES:
        expect = sorted(c for c in selected if (c, code) != rejected)
        ds = load(hf, code, tmp_path / "cache")
        assert sorted(ds["clip_id"]) == expect, code
        assert all(r["label"] == emotions[r["clip_id"]] and r["coe_status"] == "ok" for r in ds)
        assert all(json.loads(r["coe"])["predicted_emotion"] == r["label"] for r in ds)
        assert sorted(p.name for p in (hf / code).glob("*.mp4")) == [f"{c}.mp4" for c in expect]
        for r in ds:
            assert Path(r["video"]["path"]).read_bytes() == (built / code / f"{r['clip_id']}.mp4").read_bytes()
        docs = [json.loads(line) for line in (tasks / "data" / f"{code}.jsonl").read_text().splitlines()]
        assert sorted(d["clip_id"] for d in docs) == expect
        assert all(d["label"] == emotions[d["clip_id"]] for d in docs)
        assert sorted(p.name for p in (tasks / "media" / code).glob("*.mp4")) == [f"{c}.mp4" for c in expect]
        exported |= {(c, code) for c in ds["clip_id"]}
    assert exported == {(c, s) for c in selected for s in CODES} - {rejected}
    # nothing curate left out reaches the exports, under any name
    for dest in (hf, tasks):
        names = " ".join(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
        text = " ".join(p.read_text("utf-8", "replace") for p in dest.rglob("*")
                        if p.is_file() and p.suffix in (".jsonl", ".md", ".yaml", ".json"))
        for cid in never:
            assert cid not in names and cid not in text, (dest.name, cid)
