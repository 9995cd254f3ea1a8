"""Machine facts for the CUDA device: workers chosen for --device cuda, GPUs shared among the
worker processes, and what ``mime-fast info`` says."""

from __future__ import annotations

import os

import pytest

from mime_fast import devices
from mime_fast.corpus import pool, workers


def test_auto_workers() -> None:
    assert devices.auto_workers("cpu", cores=16, gpus=1) == 1
    assert devices.auto_workers("cuda", cores=16, gpus=1) == 8
    assert devices.auto_workers("cuda", cores=64, gpus=1) == 8  # at most 8 per GPU
    assert devices.auto_workers("cuda", cores=64, gpus=4) == 32
    assert devices.auto_workers("cuda", cores=2, gpus=1) == 1
    assert devices.auto_workers("cuda", cores=1, gpus=0) == 1


@pytest.mark.parametrize("visible", [None, "3,5"])
def test_workers_are_spread_over_the_gpus(monkeypatch, visible) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(pool.signal, "signal", lambda *a: None)
    seen = []
    for index in range(5):
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
        else:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        pool._worker_setup(index, 2)
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    ids = ["0", "1"] if visible is None else ["3", "5"]
    assert seen == [ids[i % 2] for i in range(5)]


def test_one_gpu_leaves_the_environment_alone(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(pool.signal, "signal", lambda *a: None)
    pool._worker_setup(0, 1)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_info_reports_the_devices(capsys) -> None:
    from mime_fast.cli import main

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CUDA:" in out and "GPUs:" in out and "NVDEC decode:" in out and "NVENC encode:" in out
    assert "encoder: libx264 on the CPU (PyAV " in out and "output revision" in out
    if not devices.gpu_count():  # said without asking PyNvVideoCodec
        assert "NVDEC decode: not used: no CUDA device" in out and "NVENC encode: absent (no CUDA device)" in out


def test_info_says_whether_the_face_models_replay_cuda_graphs(monkeypatch) -> None:
    monkeypatch.setattr(devices, "gpu_count", lambda: 1)
    monkeypatch.setattr(devices, "nvdec_available", lambda: None)
    monkeypatch.setattr(devices, "nvenc_status", lambda: "absent")
    monkeypatch.delenv("MIME_FAST_CUDA_GRAPHS", raising=False)
    assert ("CUDA graphs (face models)", "on (MIME_FAST_CUDA_GRAPHS=0 turns them off)") in devices.report()
    monkeypatch.setenv("MIME_FAST_CUDA_GRAPHS", "0")
    assert ("CUDA graphs (face models)", "off (MIME_FAST_CUDA_GRAPHS=0)") in devices.report()


def test_workers_share_the_cores(monkeypatch) -> None:
    assert workers.worker_threads(8, cores=16) == 2
    assert workers.worker_threads(3, cores=16) == 5
    assert workers.worker_threads(32, cores=16) == 1
    import mime_fast

    for name in workers._THREAD_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pool.signal, "signal", lambda *a: None)
    before = mime_fast.num_threads()
    try:
        pool._worker_setup(0, 0, 3)
        assert all(os.environ[name] == "3" for name in workers._THREAD_ENV)
        assert mime_fast.num_threads() == 3
    finally:
        mime_fast.set_num_threads(before)
        for name in workers._THREAD_ENV:
            os.environ.pop(name, None)


def test_no_gpu_or_driver_is_said_as_such(monkeypatch) -> None:
    """Where the machine has no NVIDIA GPU or driver, the CUDA runtime says "CUDA driver version is
    insufficient for CUDA runtime version" (a version mismatch, it reads): ``cuda_status`` says
    that no NVIDIA GPU or driver was found first (issue 52), its words after; other states pass."""
    import mime_fast

    runtime = "no usable CUDA device: CUDA driver version is insufficient for CUDA runtime version"
    monkeypatch.setattr(mime_fast._core, "cuda_status", lambda: runtime)
    assert mime_fast.cuda_status() == f"no NVIDIA GPU or driver found on this machine ({runtime})"
    monkeypatch.setattr(mime_fast._core, "cuda_status", lambda: "no usable CUDA device: no CUDA-capable device is detected")
    assert mime_fast.cuda_status().startswith("no NVIDIA GPU or driver found on this machine (")
    for other in ("CPU-only build (compiled without CUDA)", "NVIDIA H200 (sm_90)"):
        monkeypatch.setattr(mime_fast._core, "cuda_status", lambda: other)
        assert mime_fast.cuda_status() == other
