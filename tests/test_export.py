"""``mime-fast export`` (mime_fast.export): a built corpus and its Chain-of-Emotion as a Hugging Face
``datasets`` folder that ``datasets.load_dataset`` loads, config by config, and as an lmms-eval task
folder; files copied or linked, a rerun completing a partial export, the refusals.

The corpus: two generated clips (c1 Anger, c2 Sad), all seven subsets, built once (mime-fast build),
its Chain-of-Emotion made by ``mime-fast coe`` against the scripted endpoint of tests/coe_server.py,
which rejects c1's FSM chain (stage III predicts Happy).  The lmms-eval tasks' own functions
(``utils.py``) are tested here directly, and through lmms-eval 0.7.3's real TaskManager: lmms-eval is
installed with --no-deps (README's test command) and runs in a subprocess (tests/lmms_probe.py) where
tests/lmms_stubs stands in for torch, transformers, accelerate and sacrebleu, which it imports but
the TaskManager does not use.  That test skips where lmms_eval is not installed, except in CI
(``CI=true``), where it fails.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # (read when datasets is imported: nothing from the hub)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets")
pytest.importorskip("openai")
pytest.importorskip("jinja2")
pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")

from coe_server import FakeChatServer, Reply, Request, default_reply, media_index  # noqa: E402

from mime_fast import samples  # noqa: E402
from mime_fast.cli import COMMANDS, main  # noqa: E402
from mime_fast.corpus import discover, run_corpus  # noqa: E402
from mime_fast.evaluation.answers import extract_emotion  # noqa: E402
from mime_fast.evaluation.metrics import scores  # noqa: E402
from mime_fast.evaluation.prompts import render  # noqa: E402
from mime_fast.export import ExportError, ExportOptions, export, files  # noqa: E402
from mime_fast.manifest import read_rows  # noqa: E402
from mime_fast.spec import CODES, spec  # noqa: E402

LABELS = {"c1": "Anger", "c2": "Sad"}
TASKS = [f"mime_{c.lower()}" for c in CODES]


def reject_c1_fsm(req: Request) -> Reply:
    """The scripted endpoint, except that stage III of c1's FSM chain predicts another emotion."""
    if req.stage == "stage3" and "stage2_heavy on FSM/c1.mp4" in req.user_text:
        return Reply(content=json.dumps({"predicted_emotion": "happy", "emotion_cues": "smiling voice"}))
    return default_reply(req)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """build -> coe: two labelled clips, all seven subsets, and their Chain-of-Emotion (c1's FSM
    rejected), made by the commands."""
    root = tmp_path_factory.mktemp("export")
    with open(root / "list.jsonl", "w") as f:
        for i, (clip, emotion) in enumerate(LABELS.items()):
            samples.make_clip(root / "in" / f"{clip}.mp4", duration=0.5 + 0.1 * i, fps=25, size=(192, 144),
                              seed=i + 1)
            f.write(json.dumps({"path": str(root / "in" / f"{clip}.mp4"), "emotion": emotion,
                                "landmarks": str(root / "in" / f"{clip}.npz")}) + "\n")
    assert run_corpus(discover(root / "list.jsonl"), root / "out", min_height=0, min_duration=0).ok
    shutil.copytree(root / "out", root / "plain")  # the corpus without its Chain-of-Emotion
    with FakeChatServer(media_index(root / "out"), script=reject_c1_fsm) as server:
        assert main(["coe", str(root / "out"), "--endpoint", server.url, "--model", "omni", "--text-model", "text",
                     "--concurrency", "1", "--backoff", "0.001", "-q"]) == 0
    return root / "out"


@pytest.fixture
def plain(built: Path) -> Path:
    return built.parent / "plain"


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def digest(root: Path) -> str:
    return hashlib.sha256(json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in tree(root).items()})
                          .encode()).hexdigest()


def load(dest: Path, config: str, cache: Path):
    ds = datasets.load_dataset(str(dest), config, split="test", cache_dir=str(cache))
    return ds.cast_column("video", datasets.Video(decode=False))  # (paths: no video decoder needed)


def manifest_rows(corpus: Path) -> dict[tuple[str, str], dict]:
    return {(r["clip_id"], r["subset"]): r for r in read_rows(corpus) if r["status"] == "ok"}


# ------------------------------------------------------------------------------------------ hf


def test_hf_datasets_loads_all_seven_configs_with_their_rows_and_files(built: Path, tmp_path: Path) -> None:
    dest = tmp_path / "hf"
    res = export(built, dest, ExportOptions(format="hf"))
    assert res.counts == dict.fromkeys(CODES, 2) and res.placed.copied == 14
    assert datasets.get_dataset_config_names(str(dest)) == list(CODES)
    rows = manifest_rows(built)
    for code in CODES:
        ds = load(dest, code, tmp_path / "cache")
        assert ds.num_rows == 2 and ds["clip_id"] == ["c1", "c2"] and ds["label"] == ["Anger", "Sad"]
        for r in ds:
            m = rows[(r["clip_id"], code)]
            video = Path(r["video"]["path"])
            assert video == dest / code / f"{r['clip_id']}.mp4"
            assert video.read_bytes() == (built / m["path"]).read_bytes()  # the built file, copied
            assert r["has_audio"] is spec(code).has_audio and r["kernel"] == m["kernel"]
            assert r["duration"] == m["duration_s"] and r["blur_level"] == m["blur_level"]
            # the Chain-of-Emotion of coe.jsonl: c1's FSM rejected, every other chain accepted
            rejected = (r["clip_id"], code) == ("c1", "FSM")
            assert r["coe_status"] == ("rejected" if rejected else "ok")
            assert (r["scene_understanding"] is None) == rejected
            assert rejected or json.loads(r["coe"])["predicted_emotion"] == r["label"]
        assert not (built / code / "metadata.jsonl").exists()  # the corpus is never written


def test_hf_coe_accepted_keeps_only_the_accepted_chains_per_subset(built: Path, tmp_path: Path) -> None:
    dest = tmp_path / "hf"
    res = export(built, dest, ExportOptions(format="hf", coe_accepted=True))
    assert res.counts == {**dict.fromkeys(CODES, 2), "FSM": 1}
    assert load(dest, "FSM", tmp_path / "cache")["clip_id"] == ["c2"]
    assert load(dest, "FDM", tmp_path / "cache")["clip_id"] == ["c1", "c2"]
    assert sorted(p.name for p in (dest / "FSM").iterdir()) == ["c2.mp4", "metadata.jsonl"]
    assert "of the 14 samples built, 13 were accepted" in (dest / "README.md").read_text()


def test_hf_card_names_each_subset_the_settings_and_the_counts(built: Path, plain: Path, tmp_path: Path) -> None:
    export(built, tmp_path / "hf", ExportOptions(format="hf"))
    text = (tmp_path / "hf" / "README.md").read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in front["configs"]] == list(CODES)
    assert front["configs"][2] == {"config_name": "FSM", "data_files": [{"split": "test", "path": "FSM/*"}]}
    for code in CODES:
        assert f"| {code} | {spec(code).name} | {spec(code).description} |" in text
        assert f"| {code} | 1 | 1 | 2 |" in text  # Anger, Sad, total
    settings = json.loads(read_rows(built)[0]["settings"])
    assert f'"crf": {settings["crf"]}' in text and f'"output_revision": {settings["output_revision"]}' in text
    assert "| FSM | 1 | 1 | 0 | 0 |" in text  # the chains: ok, rejected, failed, not made
    # without coe.jsonl: no Chain-of-Emotion column, section or flag
    export(plain, tmp_path / "plain_hf", ExportOptions(format="hf"))
    assert "Chain-of-Emotion" not in (tmp_path / "plain_hf" / "README.md").read_text()
    assert "coe_status" not in load(tmp_path / "plain_hf", "FM", tmp_path / "cache").column_names


def test_same_corpus_same_bytes_and_the_corpus_untouched(built: Path, tmp_path: Path) -> None:
    before = digest(built)
    for fmt in ("hf", "lmms-eval"):
        export(built, tmp_path / f"{fmt}1", ExportOptions(format=fmt))
        export(built, tmp_path / f"{fmt}2", ExportOptions(format=fmt, link=True))
        assert tree(tmp_path / f"{fmt}1") == tree(tmp_path / f"{fmt}2")
    assert digest(built) == before


# -------------------------------------------------------------------------- files: link, resume


def test_link_hard_links_or_symlinks_across_file_systems(built: Path, tmp_path: Path, monkeypatch) -> None:
    res = export(built, tmp_path / "hard", ExportOptions(format="hf", link=True))
    assert res.placed.linked == 14 and res.placed.copied == 0
    assert os.path.samefile(tmp_path / "hard" / "FSM" / "c1.mp4", built / "FSM" / "c1.mp4")

    def no_hard_link(src, dst, **kw):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_hard_link)
    export(built, tmp_path / "soft", ExportOptions(format="hf", link=True))
    link = tmp_path / "soft" / "FSM" / "c1.mp4"
    assert link.is_symlink() and os.readlink(link) == str((built / "FSM" / "c1.mp4").resolve())
    assert load(tmp_path / "soft", "FSM", tmp_path / "cache").num_rows == 2  # datasets follows the links
    # a copy asked for where a link is: replaced by a copy
    res = export(built, tmp_path / "soft", ExportOptions(format="hf"))
    assert res.placed.copied == 14 and not link.is_symlink() and link.read_bytes() == (built / "FSM/c1.mp4").read_bytes()


def test_rerun_completes_a_partial_export(built: Path, tmp_path: Path, monkeypatch) -> None:
    dest = tmp_path / "hf"
    copies = []
    real_copy = shutil.copy2

    def copy_then_fail(src, dst, **kw):
        if len(copies) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        copies.append(dst)
        return real_copy(src, dst, **kw)

    monkeypatch.setattr(shutil, "copy2", copy_then_fail)
    with pytest.raises(OSError):
        export(built, dest, ExportOptions(format="hf"))
    # five files in place, no half-written one, and no card: it does not load as a complete export
    assert len(list(dest.rglob("*.mp4"))) == 5 and not list(dest.rglob(".*.tmp-*"))
    assert not (dest / "README.md").exists()
    monkeypatch.setattr(shutil, "copy2", real_copy)
    first = (dest / "FM" / "c1.mp4").stat().st_ino
    (dest / "FM" / "stray.mp4").write_bytes(b"x")  # no longer part of the export: removed
    res = export(built, dest, ExportOptions(format="hf"))
    assert (res.placed.kept, res.placed.copied, res.removed) == (5, 9, 1)
    assert (dest / "FM" / "c1.mp4").stat().st_ino == first  # kept, not copied again
    export(built, tmp_path / "fresh", ExportOptions(format="hf"))
    assert tree(dest) == tree(tmp_path / "fresh")
    res = export(built, dest, ExportOptions(format="hf"))  # complete: nothing to do
    assert (res.placed.kept, res.placed.copied, res.removed) == (14, 0, 0)


def test_a_changed_corpus_file_is_placed_again(built: Path, tmp_path: Path) -> None:
    corpus = Path(shutil.copytree(built, tmp_path / "corpus"))
    export(corpus, tmp_path / "hf", ExportOptions(format="hf"))
    os.utime(corpus / "FM" / "c2.mp4", ns=(1, 1))  # same size, another time: rebuilt since
    res = export(corpus, tmp_path / "hf", ExportOptions(format="hf"))
    assert (res.placed.kept, res.placed.copied) == (13, 1)


# ------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("where", ["inside", "same", "holds"])
def test_dest_inside_the_corpus_is_refused(built: Path, where: str, capsys) -> None:
    dest = {"inside": built / "release", "same": built, "holds": built.parent}[where]
    before = digest(built)
    assert main(["export", str(built), "--format", "hf", "--out", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(dest) in err
    assert ("holds the corpus folder" if where == "holds" else "inside the corpus folder") in err
    assert digest(built) == before and not (built / "release").exists()


def test_refusals_name_the_item_and_write_nothing(built: Path, plain: Path, tmp_path: Path, capsys) -> None:
    def refused(args: list[str], *expect: str) -> None:
        assert main(["export", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(e in err for e in expect), err

    dest = tmp_path / "dest"
    refused([str(plain), "--format", "hf", "--out", str(dest), "--coe-accepted"],
            "no coe.jsonl", "--coe-accepted", "mime-fast coe")
    (tmp_path / "empty").mkdir()
    refused([str(tmp_path / "empty"), "--format", "hf", "--out", str(dest)], "no manifest.jsonl", "mime-fast build")
    refused([str(built), "--format", "parquet", "--out", str(dest)], "--format", "hf", "lmms-eval")
    assert not dest.exists()
    # a folder that holds other files, and an export in another format or of another corpus
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    refused([str(built), "--format", "hf", "--out", str(tmp_path / "other")], "not empty and not an export")
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["notes.txt"]
    export(built, tmp_path / "hf", ExportOptions(format="hf"))
    refused([str(built), "--format", "lmms-eval", "--out", str(tmp_path / "hf")], "a hf export")
    refused([str(plain), "--format", "hf", "--out", str(tmp_path / "hf")], "the export of another corpus")
    # an output the manifest lists, missing or changed: before anything is written
    corpus = Path(shutil.copytree(plain, tmp_path / "corpus"))
    (corpus / "FSAM" / "c2.mp4").unlink()
    refused([str(corpus), "--format", "hf", "--out", str(dest)], str(corpus / "FSAM" / "c2.mp4"), "missing",
            "mime-fast build")
    (corpus / "FSAM" / "c2.mp4").write_bytes(b"short")
    refused([str(corpus), "--format", "hf", "--out", str(dest)], "5 bytes", "changed since it was built")
    assert not dest.exists()
    with pytest.raises(ExportError, match="unknown export format"):
        ExportOptions(format="webdataset")


def test_cli_export_is_registered_and_reports(built: Path, tmp_path: Path, capsys) -> None:
    assert "export" in COMMANDS
    assert main(["export", str(built), "--format", "hf", "--out", str(tmp_path / "hf"), "--link"]) == 0
    out = capsys.readouterr().out
    assert "exported 14 samples (FM 2, FDM 2, FSM 2, VMM 2, FDAM 2, FSAM 2, AMM 2)" in out
    assert "0 copied, 14 linked, 0 already there" in out
    assert main(["export", str(built), "--format", "hf", "--out", str(tmp_path / "hf"), "--link"]) == 0
    assert "0 copied, 0 linked, 14 already there" in capsys.readouterr().out


# ----------------------------------------------------------------------------------- lmms-eval

#: The keys lmms-eval 0.7.3 reads from a task's YAML (lmms_eval/api/task.py, ``TaskConfig``'s
#: fields) and ``include``, which lmms_eval.utils.load_yaml_config resolves; a group's
#: (lmms_eval/api/group.py, ``GroupConfig``).
TASK_KEYS = {
    "task", "task_alias", "tag", "group", "group_alias", "dataset_path", "dataset_name", "dataset_kwargs",
    "training_split", "validation_split", "test_split", "fewshot_split", "full_docs", "process_results_use_image",
    "process_docs", "doc_to_visual", "doc_to_text", "doc_to_target", "doc_to_choice", "doc_to_messages",
    "process_results", "use_prompt", "description", "target_delimiter", "fewshot_delimiter", "fewshot_config",
    "num_fewshot", "metric_list", "output_type", "generation_kwargs", "repeats", "filter_list",
    "should_decontaminate", "doc_to_decontamination_query", "cluster_key", "score_key", "metadata",
    "lmms_eval_specific_kwargs", "model_specific_generation_kwargs", "model_specific_target_kwargs",
    "reasoning_tags", "auto_strip_thinking", "include"}
GROUP_KEYS = {"group", "group_alias", "task", "aggregate_metric_list", "metadata"}


class _Function(str):
    """A ``!function module.name`` of a task YAML, as read here."""


def _yaml(path: Path) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: _Function(loader.construct_scalar(node)))
    return yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 - SafeLoader with one tag added


def task_config(dest: Path, name: str) -> dict:
    """A task's YAML with its ``include`` merged, as lmms_eval.utils.load_yaml_config merges it."""
    own = _yaml(dest / f"{name}.yaml")
    return {**_yaml(dest / own.pop("include")), **own}


def utils_module(dest: Path):
    """The task folder's utils.py, imported as lmms-eval imports it (from its file)."""
    spec_ = importlib.util.spec_from_file_location("utils", dest / "utils.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lmms(built: Path, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("lmms") / "tasks"
    export(built, dest, ExportOptions(format="lmms-eval", coe_accepted=True))
    return dest


def test_lmms_task_folder_matches_lmms_evals_task_schema(lmms: Path, built: Path) -> None:
    group = _yaml(lmms / "mime.yaml")
    assert set(group) <= GROUP_KEYS and group["group"] == "mime" and group["task"] == TASKS
    source = (lmms / "utils.py").read_text()
    for code, name in zip(CODES, TASKS):
        config = task_config(lmms, name)
        assert set(config) <= TASK_KEYS, set(config) - TASK_KEYS
        assert config["task"] == name and config["dataset_path"] == "json" and config["test_split"] == "test"
        # lmms-eval resolves a local builder's data_files against the YAML's folder
        data = lmms / config["dataset_kwargs"]["data_files"]["test"]
        docs = [json.loads(line) for line in data.read_text().splitlines()]
        assert [d["clip_id"] for d in docs] == (["c2"] if code == "FSM" else ["c1", "c2"])  # accepted chains
        assert all(d["label"] == LABELS[d["clip_id"]] for d in docs)
        functions = [v for v in config.values() if isinstance(v, _Function)]
        functions += [m["aggregation"] for m in config["metric_list"]]
        assert [m["metric"] for m in config["metric_list"]] == ["accuracy", "uar", "waf"]
        for f in functions:
            module, fn = f.split(".")
            assert module == "utils" and f"\ndef {fn}(" in source, f
    datasets.load_dataset("json", data_files={"test": str(lmms / "data" / "FM.jsonl")})  # the JSON data loads


def test_lmms_utils_runs_without_mime_fast_and_agrees_with_it(lmms: Path, tmp_path: Path, monkeypatch) -> None:
    # standalone: the standard library alone, not mime_fast
    probe = ("import sys, runpy; runpy.run_path(sys.argv[1]); "
             "assert not [m for m in sys.modules if m.startswith(('mime_fast', 'numpy'))], 'imported'")
    subprocess.run([sys.executable, "-S", "-c", probe, str(lmms / "utils.py")], check=True, cwd=tmp_path,
                   env={"PATH": os.environ.get("PATH", "")})
    utils = utils_module(lmms)
    replies = ["Anger", "I think the person is **sad**.", "{'emotion': 'fear'}", "Answer: Surprise",
               "I'm sorry, I cannot tell.", "happy or sad", "", "<answer>Disgust</answer>", "joy!"]
    assert [utils.extract_emotion(r) for r in replies] == [extract_emotion(r) for r in replies]
    truth = ["Anger", "Sad", "Fear", "Sad", "Happy", "Anger", "Neutral", "Disgust", "Happy"]
    docs = [{"clip_id": f"c{i}", "label": t} for i, t in enumerate(truth)]
    items = [utils.mime_process_results(d, [r]) for d, r in zip(docs, replies)]
    assert items[1]["uar"] == {"clip_id": "c1", "label": "Sad", "pred": "Sad"} and items[4]["waf"]["pred"] is None
    expected = scores(truth, [extract_emotion(r)[0] for r in replies])
    for metric in ("accuracy", "uar", "waf"):
        got = getattr(utils, f"mime_{metric}")([i[metric] for i in items])
        assert got == pytest.approx(expected[metric]) and 0 < got < 1
    system, prompt = render("direct", "video")
    assert utils.mime_doc_to_text(docs[0]) == f"{system} {prompt}"
    assert utils.mime_doc_to_text(docs[0], {"pre_prompt": "<v>", "post_prompt": "!"}) == f"<v>{system} {prompt}!"
    for code in CODES:
        for doc in (json.loads(line) for line in (lmms / "data" / f"{code}.jsonl").read_text().splitlines()):
            visuals = utils.mime_doc_to_visual(doc)
            assert visuals[0] == str(lmms / "media" / code / f"{doc['clip_id']}.mp4")
            # the wav with the subsets that have audio, none with the others
            assert visuals[1:] == ([str(lmms / "media" / "audio" / f"{doc['clip_id']}.wav")]
                                   if spec(code).has_audio else [])
            assert all(Path(v).is_file() for v in visuals) and utils.mime_doc_to_target(doc) == doc["label"]
            monkeypatch.setenv("MIME_LMMS_AUDIO", "0")  # a model that takes videos alone
            assert utils.mime_doc_to_visual(doc) == visuals[:1]
            monkeypatch.delenv("MIME_LMMS_AUDIO")


LMMS_STUBS = Path(__file__).parent / "lmms_stubs"


def in_ci() -> bool:
    """CI runs .ci/run with CI=true: tests that must run there fail instead of skipping."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.mark.slow
def test_lmms_evals_task_manager_finds_the_group_and_its_seven_tasks(lmms: Path, tmp_path: Path) -> None:
    """lmms-eval 0.7.3's own TaskManager finds the group and its seven tasks, and ``get_task_dict``
    builds them: their documents load (lmms-eval's datasets call on the JSON data) and the task's
    doc_to_visual / doc_to_text / doc_to_target / process_results and the aggregations run on one.
    In a subprocess (tests/lmms_probe.py) whose PYTHONPATH puts tests/lmms_stubs first, so the
    stand-ins for torch, transformers, accelerate and sacrebleu never reach this session."""
    out = tmp_path / "found.json"
    path = os.pathsep.join([str(LMMS_STUBS), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path,
           "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "USE_TORCH": "0"}  # datasets and evaluate: no torch (the stand-in is not one to use)
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "lmms_probe.py"), str(lmms), str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode == 3:
        reason = ("lmms_eval is not installed (pip install --no-deps lmms-eval==0.7.3, as README's test "
                  "command does)")
        if in_ci():
            pytest.fail(f"{reason}: CI (CI=true) must run this test", pytrace=False)
        pytest.skip(f"{reason}; the task YAMLs are still checked against lmms-eval 0.7.3's TaskConfig by "
                    "test_lmms_task_folder_matches_lmms_evals_task_schema")
    assert proc.returncode == 0, proc.stderr[-6000:]
    found = json.loads(out.read_text())
    assert found["all_groups"] == ["mime"] and found["all_subtasks"] == sorted(TASKS), found
    assert found["all_tasks"] == sorted(["mime", *TASKS])
    assert list(found["groups"]) == ["mime"] and sorted(found["groups"]["mime"]) == sorted(TASKS)
    utils = utils_module(lmms)
    for code, name in zip(CODES, TASKS):
        task = found["groups"]["mime"][name]
        docs = [json.loads(line) for line in (lmms / "data" / f"{code}.jsonl").read_text().splitlines()]
        assert task["class"] == "ConfigurableTask" and task["task"] == name
        assert task["docs"] == docs and [d["clip_id"] for d in docs] == (["c2"] if code == "FSM" else ["c1", "c2"])
        doc = docs[0]
        assert task["visual"] == utils.mime_doc_to_visual(doc) and all(Path(v).is_file() for v in task["visual"])
        assert task["text"] == utils.mime_doc_to_text(doc) == " ".join(render("direct", "video"))
        assert task["target"] == doc["label"] == LABELS[doc["clip_id"]]
        assert task["results"] == utils.mime_process_results(doc, [f"The person is {doc['label'].lower()}."])
        assert task["results"]["accuracy"]["pred"] == doc["label"]
        assert task["scores"] == dict.fromkeys(("accuracy", "uar", "waf"), 1.0)
        assert task["higher_is_better"] == dict.fromkeys(("accuracy", "uar", "waf"), True)


def test_lmms_unlabelled_clips_are_left_out(built: Path, tmp_path: Path) -> None:
    corpus = Path(shutil.copytree(built, tmp_path / "corpus"))
    rows = [json.loads(line) for line in (corpus / "manifest.jsonl").read_text().splitlines()]
    for r in rows:
        r["label"] = None if r["clip_id"] == "c2" else r["label"]
    (corpus / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = export(corpus, tmp_path / "tasks", ExportOptions(format="lmms-eval"))
    assert res.counts == dict.fromkeys(CODES, 1) and "1 clip(s) without a label left out" in res.notes[0]
    assert not (tmp_path / "tasks" / "media" / "FM" / "c2.mp4").exists()
    assert export(corpus, tmp_path / "hf", ExportOptions(format="hf")).counts == dict.fromkeys(CODES, 2)
    (corpus / "manifest.jsonl").write_text("".join(json.dumps({**r, "label": None}) + "\n" for r in rows))
    with pytest.raises(ExportError, match="no clip has a label"):
        export(corpus, tmp_path / "none", ExportOptions(format="lmms-eval"))
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------------------------------ end to end


def test_end_to_end_build_coe_export_both_formats(built: Path, tmp_path: Path, capsys) -> None:
    """build -> coe (scripted endpoint) -> export: MIME's final benchmark (the accepted chains)
    loads with datasets, and the same samples are the lmms-eval tasks' documents."""
    hf, tasks = tmp_path / "hf", tmp_path / "tasks"
    for fmt, dest in (("hf", hf), ("lmms-eval", tasks)):
        assert main(["export", str(built), "--format", fmt, "--out", str(dest), "--coe-accepted", "-q"]) == 0
    assert "exported 13 samples" in capsys.readouterr().out
    for code in CODES:
        ds = load(hf, code, tmp_path / "cache")
        assert set(ds["coe_status"]) == {"ok"} and all(Path(v["path"]).is_file() for v in ds["video"])
        docs = [json.loads(line) for line in (tasks / "data" / f"{code}.jsonl").read_text().splitlines()]
        assert [d["clip_id"] for d in docs] == ds["clip_id"] and [d["label"] for d in docs] == ds["label"]
    assert files.MARKER in os.listdir(hf)


def test_export_help(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith("usage: mime-fast export")
    for option in ("--format", "--out", "--coe-accepted", "--link"):
        assert option in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "\n    export " in capsys.readouterr().out
