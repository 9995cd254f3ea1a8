"""mime-fast curate: the four corpus layouts read from generated releases (names, splits, lists,
spreadsheets), each exclusion with its reason, duplicates across a re-encode and a letterboxed copy,
the outputs, the probe cache, and selected.csv read by mime-fast build's list reader."""

from __future__ import annotations

import csv
import io
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("openpyxl")
pytest.importorskip("cv2")
pytest.importorskip("matplotlib")

from curate_fixtures import (
    DFEW_VOTE_HEADER,
    background,
    letterboxed,
    resized,
    write_clip,
    write_xlsx,
)
from mime_fast.cli import main
from mime_fast.corpus import find_inputs
from mime_fast.curate import CurateOptions, curate, probe, resolve_roots

OPTS = CurateOptions(min_height=48, progress=False)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_dfew(root: Path) -> None:
    clips = root / "Clip" / "original"
    write_clip(clips / "00001.mp4", background(1))  # Happy, 8 of 10 votes: selected
    write_clip(clips / "2.mp4", background(2))  # unpadded name, Angry: selected as DFEW_00002
    write_clip(clips / "00003.mp4", background(3))  # label 0 in the annotation
    write_clip(clips / "00004.mp4", background(4))  # Sad with 4 of 10 votes
    write_clip(clips / "00005.mp4", background(5))  # in no list
    write_clip(clips / "00006.mp4", background(6))  # Fear, padded
    write_clip(clips / "6.mp4", background(6))  # its unpadded copy
    write_clip(clips / "00007.mp4", resized(background(7), 96, 32))  # too small
    write_clip(clips / "00008.mp4", background(8))  # two lists, two labels
    split = root / "EmoLabel_DataSplit"
    _write(split / "train(single_labeled)" / "set_1.csv", "video_name,label\n1,1\n4,2\n6,7\n7,3\n8,1\n")
    _write(split / "test(single-labeled)" / "set_1.csv", "video_name,label\n00002,4\n")  # the hyphen, padded
    _write(split / "test(single-labeled)" / "set_2.csv", "video_name,label\n8,2\n")
    xlsx = write_xlsx(root / "tmp" / "annotation.xlsx", [
        DFEW_VOTE_HEADER, [1, 8, 1, 1, 0, 0, 0, 0, 1], [3, 3, 3, 4, 0, 0, 0, 0, 0], [4, 0, 4, 3, 3, 0, 0, 0, 2]])
    (root / "Annotation").mkdir()
    with zipfile.ZipFile(root / "Annotation" / "annotation.zip", "w") as z:  # the release zips it
        z.write(xlsx, "annotation.xlsx")
    xlsx.unlink()
    xlsx.parent.rmdir()


def make_mafw(root: Path) -> None:
    clips = root / "data" / "clips"
    write_clip(clips / "00001.mp4", background(11))  # anger, 9 of 11: selected
    write_clip(clips / "00002.mp4", background(12))  # contempt
    write_clip(clips / "00003.mp4", background(13))  # compound only
    write_clip(clips / "00004.mp4", background(14))  # happiness, 4 of 11
    write_clip(clips / "00005.mp4", background(15))  # invalid
    write_clip(clips / "00006.mp4", resized(background(1), 80, 60), crf=34)  # DFEW 00001 again, smaller
    sets = root / "Train & Test Set"
    _write(sets / "single" / "no_caption" / "set_1" / "train.txt",
           "00001.mp4 anger\n00002.mp4 contempt\n00004.mp4 happiness\n")
    _write(sets / "single" / "no_caption" / "set_1" / "test.txt", "00005.mp4 sadness\n00006.mp4 happiness\n")
    _write(sets / "compound" / "no_caption" / "set_1" / "train.txt", "00003.mp4 anger_disgust\n")
    header = ["clip", "invalid", "anger", "disgust", "fear", "happiness", "neutral", "sadness", "surprise",
              "contempt", "anxiety", "helplessness", "disappointment"]
    write_xlsx(root / "Labels" / "annotation.xlsx", [
        header, ["00001", 0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0], ["00004", 0, 0, 0, 0, 4, 4, 3, 0, 0, 0, 0, 0],
        [5, 1, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0]])


def make_ferv(root: Path) -> None:
    base = root / "0_7_LabelClips"
    write_clip(base / "Street" / "Happy" / "0001.mp4", background(21))
    write_clip(base / "Street" / "Sad" / "0002.mp4", background(22))  # the setup list says Angry
    write_clip(base / "Home" / "Surprise" / "0001.mp4", background(23))
    _write(root / "4_setups" / "All_scenes" / "train_All.csv", "Street/Happy/0001 Happy\nStreet/Sad/0002 Angry\n")
    _write(root / "4_setups" / "All_scenes" / "test_All.csv", "Home/Surprise/0001 Surprise\n")


def make_caer(root: Path) -> None:
    base = root / "CAER"
    write_clip(base / "train" / "Anger" / "0001.avi", background(31))
    write_clip(base / "test" / "Disgust" / "0001.avi", background(32))
    write_clip(base / "validation" / "Fear" / "0002.avi", letterboxed(background(2), 80, 80))  # DFEW 2, letterboxed
    (base / "train" / "Happy").mkdir(parents=True)
    (base / "train" / "Happy" / "0003.avi").write_bytes(b"RIFF" + bytes(range(256)) * 8)  # unreadable


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("corpora")
    roots = {"DFEW": base / "dfew", "MAFW": base / "mafw", "FERV39k": base / "ferv", "CAER": base / "caer"}
    make_dfew(roots["DFEW"])
    make_mafw(roots["MAFW"])
    make_ferv(roots["FERV39k"])
    make_caer(roots["CAER"])
    return roots


@pytest.fixture(scope="module")
def curated(corpora, tmp_path_factory):
    out = tmp_path_factory.mktemp("curated")
    result = curate(resolve_roots(list(corpora.values())), out, OPTS)
    return result, out


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text("utf-8"), newline="")))


def excluded_reasons(out: Path) -> dict[str, str]:
    return {Path(r["path"]).relative_to(Path(r["path"]).parents[3]).as_posix(): r["reason"]
            for r in read_csv(out / "excluded.csv")}


def test_layouts_recognised(corpora) -> None:
    roots = resolve_roots(list(corpora.values()))
    assert [(r.layout, r.dataset) for r in roots] == [("DFEW", "DFEW"), ("MAFW", "MAFW"), ("FERV39k", "FERV39k"),
                                                      ("CAER", "CAER")]


def test_selected_clips_their_ids_and_emotions(curated) -> None:
    _result, out = curated
    rows = read_csv(out / "selected.csv")
    assert list(rows[0]) == ["path", "clip_id", "emotion", "dataset"]
    got = {r["clip_id"]: (r["emotion"], r["dataset"]) for r in rows}
    assert got == {
        "DFEW_00001": ("Happy", "DFEW"), "DFEW_00002": ("Anger", "DFEW"), "DFEW_00006": ("Fear", "DFEW"),
        "MAFW_00001": ("Anger", "MAFW"),
        "FERV39k_Street_Happy_0001": ("Happy", "FERV39k"), "FERV39k_Home_Surprise_0001": ("Surprise", "FERV39k"),
        "CAER_train_Anger_0001": ("Anger", "CAER"), "CAER_test_Disgust_0001": ("Disgust", "CAER"),
    }
    assert Path(next(r["path"] for r in rows if r["clip_id"] == "DFEW_00002")).name == "2.mp4"


def test_each_exclusion_with_its_reason(curated, corpora) -> None:
    _, out = curated
    rows = read_csv(out / "excluded.csv")
    assert list(rows[0]) == ["path", "dataset", "reason"]
    reason = {(r["dataset"], Path(r["path"]).name if r["dataset"] != "FERV39k" and r["dataset"] != "CAER"
               else Path(r["path"]).relative_to(corpora[r["dataset"]]).as_posix()): r["reason"] for r in rows}
    assert "DFEW label 0" in reason[("DFEW", "00003.mp4")]
    assert "ambiguous label: 0.40" in reason[("DFEW", "00004.mp4")]
    assert "--min-agreement 0.5" in reason[("DFEW", "00004.mp4")]
    assert "no label" in reason[("DFEW", "00005.mp4")]
    assert "unpadded copy of 00006.mp4" in reason[("DFEW", "6.mp4")]
    assert reason[("DFEW", "00007.mp4")] == "low resolution: 96x32, shorter side 32 below --min-height 48"
    assert reason[("DFEW", "00008.mp4")] == ("conflicting labels in EmoLabel_DataSplit (2 in test(single-labeled)/set_2.csv, "
                                             "1 in train(single_labeled)/set_1.csv)")
    assert reason[("MAFW", "00002.mp4")] == "label 'contempt' is not one of MIME's seven emotions"
    assert "compound label anger_disgust" in reason[("MAFW", "00003.mp4")]
    assert "ambiguous label: 0.36" in reason[("MAFW", "00004.mp4")]
    assert "invalid" in reason[("MAFW", "00005.mp4")]
    assert "4_setups lists it as Angry, its folder says Sad" in reason[("FERV39k", "0_7_LabelClips/Street/Sad/0002.mp4")]
    assert reason[("CAER", "CAER/train/Happy/0003.avi")].startswith("unreadable: ")
    assert len(rows) == 14  # every clip found is selected or excluded, once
    assert len(rows) + len(read_csv(out / "selected.csv")) == 22


def test_duplicates_across_a_reencode_and_a_letterbox(curated) -> None:
    _, out = curated
    reason = {Path(r["path"]).name + "@" + r["dataset"]: r["reason"] for r in read_csv(out / "excluded.csv")}
    # MAFW's copy of DFEW 00001: re-encoded smaller at CRF 34; CAER's of DFEW 2: letterboxed, smaller
    assert reason["00006.mp4@MAFW"].startswith("duplicate of DFEW_00001 (")
    assert reason["00006.mp4@MAFW"].endswith("00001.mp4), which is kept")
    assert reason["0002.avi@CAER"].startswith("duplicate of DFEW_00002 (")
    assert "labelled Fear here, Anger there" in reason["0002.avi@CAER"]


def test_report_counts_rules_and_png(curated) -> None:
    _result, out = curated
    report = (out / "report.md").read_text("utf-8")
    # CAER DFEW FERV39k MAFW; before: by the label the release gives (MAFW's copy of DFEW 00001 is a Happy)
    assert "| Happy | 1 -> 0 | 1 -> 1 | 1 -> 1 | 2 -> 0 | 5 -> 2 |" in report
    assert "| Sad | 0 -> 0 | 1 -> 0 | 0 -> 0 | 0 -> 0 | 1 -> 0 |" in report  # ambiguous
    assert "| (other or no label) | 0 -> 0 | 4 -> 0 | 1 -> 0 | 3 -> 0 | 8 -> 0 |" in report
    assert "| duplicate | 1 | 0 | 0 | 1 | 2 |" in report
    assert "| label | 0 | 2 | 1 | 2 | 5 |" in report
    assert "| ambiguity | 0 | 2 | 0 | 2 | 4 |" in report
    assert "| resolution | 0 | 1 | 0 | 0 | 1 |" in report
    png = (out / "balance.png").read_bytes()
    assert png.startswith(b"\x89PNG") and b"Software" not in png and b"matplotlib" not in png.lower()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left
    assert "None found." in report  # no overlay: the letterboxed copy's bars are not one


def test_selected_list_is_read_by_build(curated) -> None:
    result, out = curated
    inputs = find_inputs([out / "selected.csv"])
    assert [(s.clip_id, s.label, s.dataset, s.error) for s in inputs.clips] == [
        (c.clip_id, c.emotion, c.dataset, None) for c in result.selected]
    assert all(s.path == c.path.resolve() or s.path == c.path for s, c in zip(inputs.clips, result.selected))


def test_same_seed_same_bytes_and_the_probe_cache(curated, corpora, tmp_path, monkeypatch) -> None:
    _, first = curated
    # a rerun into the same folder reads every probe from the cache: probing again would fail
    monkeypatch.setattr(probe, "probe_clip", lambda path: pytest.fail(f"probed again: {path}"))
    curate(resolve_roots(list(corpora.values())), first, OPTS)
    second = tmp_path / "again"
    second.mkdir()
    (second / probe.CACHE_NAME).write_bytes((first / probe.CACHE_NAME).read_bytes())
    curate(resolve_roots(list(corpora.values())), second, OPTS)
    for name in ("selected.csv", "excluded.csv", "report.md", "balance.png", probe.CACHE_NAME):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_a_changed_clip_is_probed_again(tmp_path) -> None:
    root = tmp_path / "corpus"
    clip = write_clip(root / "Happy" / "a.mp4", background(41))
    out = tmp_path / "out"
    roots = resolve_roots([], [("mine", root)])
    curate(roots, out, OPTS)
    write_clip(clip, resized(background(41), 96, 32))  # now too small
    curate(roots, out, OPTS)
    assert "shorter side 32" in read_csv(out / "excluded.csv")[0]["reason"]


def test_nothing_of_a_corpus_is_written(corpora, curated) -> None:
    stamp = {p: (p.stat().st_size, p.stat().st_mtime_ns) for r in corpora.values() for p in r.rglob("*")}
    curate(resolve_roots(list(corpora.values())), curated[1], OPTS)
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for r in corpora.values() for p in r.rglob("*")} == stamp


def test_out_inside_a_corpus_is_refused(corpora, capsys) -> None:
    assert main(["curate", str(corpora["FERV39k"]), "--out", str(corpora["FERV39k"] / "curated")]) == 2
    assert "inside the corpus" in capsys.readouterr().err
    assert not (corpora["FERV39k"] / "curated").exists()


def test_unknown_root_is_one_line_naming_the_layouts(tmp_path, capsys) -> None:
    (tmp_path / "stuff").mkdir()
    assert main(["curate", str(tmp_path / "stuff"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "stuff") in err
    assert all(name in err for name in ("DFEW", "MAFW", "FERV39k", "CAER", "--dataset"))


def test_bad_options_are_usage_errors(corpora, tmp_path, capsys) -> None:
    assert main(["curate", str(corpora["FERV39k"]), "--out", str(tmp_path / "o"), "--per-class", "0"]) == 2
    assert "--per-class" in capsys.readouterr().err
    assert main(["curate", str(corpora["FERV39k"]), "--out", str(tmp_path / "o"), "--min-agreement", "2"]) == 2
    assert main(["curate", str(corpora["FERV39k"]), "--out", str(tmp_path / "o"), "--dataset", "nonsense"]) == 2


def test_cli_curates_with_workers(corpora, tmp_path, capsys, curated) -> None:
    out = tmp_path / "cli"
    assert main(["curate", "--dataset", f"FERV39k={corpora['FERV39k']}", "--out", str(out), "--min-height", "48",
                 "--workers", "2", "-q"]) == 0
    assert {r["clip_id"] for r in read_csv(out / "selected.csv")} == {"FERV39k_Street_Happy_0001",
                                                                    "FERV39k_Home_Surprise_0001"}
    cached = {line for line in (out / probe.CACHE_NAME).read_text().splitlines()}
    assert cached <= set((curated[1] / probe.CACHE_NAME).read_text().splitlines())  # workers probe the same


def test_dataset_names_and_missing_roots(tmp_path, capsys) -> None:
    assert main(["curate", "--dataset", f"a/b={tmp_path}", "--out", str(tmp_path / "o")]) == 2
    assert "no path separator" in capsys.readouterr().err
    assert main(["curate", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert f"{tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err


def test_mafw_without_its_no_caption_lists(tmp_path) -> None:
    # labels from Labels/single-set.xlsx where no list exists; from a with_caption list (not UTF-8) where
    # it is the only one
    spread = tmp_path / "spread"
    write_clip(spread / "data" / "clips" / "00001.mp4", background(111))
    write_clip(spread / "data" / "clips" / "00002.mp4", background(112))
    write_xlsx(spread / "Labels" / "single-set.xlsx", [["clip", "single_label"], ["00001", 4], [2, 8]])
    captioned = tmp_path / "captioned"
    write_clip(captioned / "data" / "clips" / "00003.mp4", background(113))
    lst = captioned / "Train & Test Set" / "single" / "with_caption" / "set_1" / "train.txt"
    lst.parent.mkdir(parents=True)
    lst.write_bytes("00003.mp4 sadness 他很难过 he is sad\n".encode("gbk"))
    result = curate(resolve_roots([], [("MAFW", spread), ("mafw", captioned)]), tmp_path / "out", OPTS)
    assert [(c.clip_id, c.emotion) for c in result.selected] == [("MAFW_00001", "Happy"), ("MAFW_00003", "Sad")]
    assert read_csv(tmp_path / "out" / "excluded.csv")[0]["reason"] == (
        "label 'contempt' is not one of MIME's seven emotions")


def test_interrupted_probes_are_kept_for_the_rerun(tmp_path, monkeypatch, capsys) -> None:
    root = tmp_path / "c"
    for i in range(3):
        write_clip(root / "Happy" / f"{i}.mp4", background(120 + i))
    real, calls = probe.probe_clip, []

    def interrupted_at_the_third(path):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(probe, "probe_clip", interrupted_at_the_third)
    args = ["curate", "--dataset", f"c={root}", "--out", str(tmp_path / "out"), "--min-height", "48", "-q"]
    assert main(args) == 130
    assert "interrupted, rerun to resume" in capsys.readouterr().err
    assert not (tmp_path / "out" / "selected.csv").exists()  # no partial output
    calls.clear()
    monkeypatch.setattr(probe, "probe_clip", lambda path: calls.append(path) or real(path))
    assert main(args) == 0
    assert calls == [str(root / "Happy" / "2.mp4")]  # the two probed before are cached


def test_a_progress_bar_over_the_probes(tmp_path, monkeypatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    root = tmp_path / "c"
    for i in range(2):
        write_clip(root / "Sad" / f"{i}.mp4", background(130 + i))
    monkeypatch.setattr("sys.stderr", Terminal())
    curate(resolve_roots([], [("c", root)]), tmp_path / "out", CurateOptions(min_height=48))
    shown = sys.stderr.getvalue()
    assert "probing:" in shown and "0/2 [" in shown  # a bar over the 2 clips to probe
    monkeypatch.setattr("sys.stderr", Terminal())
    curate(resolve_roots([], [("c", root)]), tmp_path / "quiet", CurateOptions(min_height=48, progress=False))
    assert sys.stderr.getvalue() == ""
