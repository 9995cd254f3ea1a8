"""The CUDA device: the same bytes as the CPU path (skipped without a GPU, unless
MIME_FAST_REQUIRE_CUDA=1), and a clear error where CUDA is unavailable."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import mime_fast
from conftest import assert_images_equal
from mime_fast import ops


def test_cuda_unavailable_is_a_clear_error() -> None:
    if mime_fast.cuda_available():
        pytest.skip("a CUDA device is available here")
    img = np.zeros((32, 32, 3), np.uint8)
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.gaussian_blur(img, 15, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.hull_mask(np.array([[1.0, 1.0], [20.0, 2.0], [5.0, 25.0]]), (32, 32), device="cuda")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.blur_in_mask(img, np.zeros((32, 32), np.uint8), 15, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.rgb_to_yuv420(img, device="cuda")
    assert mime_fast.cuda_status()


@pytest.mark.cuda
@pytest.mark.parametrize("k", [15, 35, 55, 255])
def test_cuda_gaussian_blur_bit_exact(astronaut: np.ndarray, k: int) -> None:
    img = np.ascontiguousarray(astronaut[:301, :257])
    full = cv2.GaussianBlur(img, (k, k), 0)
    assert_images_equal(ops.gaussian_blur(img, k, device="cuda"), full, "cuda")
    for roi in [(0, 0, 25, 25), (200, 250, 57, 51), (100, 0, 1, 301)]:
        x, y, w, h = roi
        assert_images_equal(ops.gaussian_blur(img, k, roi=roi, device="cuda"), full[y : y + h, x : x + w], "cuda")


@pytest.mark.cuda
def test_cuda_hull_mask_equals_cpu(rng: np.random.Generator) -> None:
    for trial in range(50):
        pts = rng.uniform(-60, 360, 2) + rng.normal(size=(int(rng.integers(3, 110)), 2)) * rng.uniform(1, 150)
        feather = None if trial % 2 else float(rng.uniform(0, 20))
        a, ba = ops.hull_mask(pts, (240, 320), feather=feather, margin=2.0, device="cuda")
        b, bb = ops.hull_mask(pts, (240, 320), feather=feather, margin=2.0)
        assert_images_equal(a, b, "cuda")
        assert ba == bb


@pytest.mark.cuda
def test_cuda_blur_in_mask_equals_cpu(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    mask, bbox = ops.hull_mask(astronaut_face_points, astronaut.shape)
    gpu = ops.blur_in_mask(astronaut, mask, [15, 35, 55], bbox=bbox, device="cuda")
    cpu = ops.blur_in_mask(astronaut, mask, [15, 35, 55], bbox=bbox)
    for g, c in zip(gpu, cpu):
        assert_images_equal(g, c, "cuda")


@pytest.mark.cuda
def test_cuda_rgb_to_yuv420_equals_cpu(astronaut: np.ndarray) -> None:
    for img in (astronaut, np.ascontiguousarray(astronaut[:301, :257])):
        for g, c in zip(ops.rgb_to_yuv420(img, device="cuda"), ops.rgb_to_yuv420(img)):
            assert_images_equal(g, c, "cuda")
        # region: only the covering 2x2 blocks are written, the rest of the planes is kept
        cpu = [np.full(p.shape, 7, np.uint8) for p in ops.rgb_to_yuv420(img)]
        gpu = [p.copy() for p in cpu]
        ops.rgb_to_yuv420(img, cpu, roi=(31, 17, 101, 77))
        ops.rgb_to_yuv420(img, gpu, roi=(31, 17, 101, 77), device="cuda")
        for g, c in zip(gpu, cpu):
            assert_images_equal(g, c, "cuda")
        # mask: only selected samples are written, the rest keeps the caller's values
        mask = np.zeros(img.shape[:2], np.uint8)
        mask[40:90, 50:120] = 200
        mask[41, 51] = 0
        cpu = [np.full(p.shape, 7, np.uint8) for p in cpu]
        gpu = [p.copy() for p in cpu]
        ops.rgb_to_yuv420(img, cpu, roi=(31, 17, 101, 77), mask=mask)
        ops.rgb_to_yuv420(img, gpu, roi=(31, 17, 101, 77), mask=mask, device="cuda")
        for g, c in zip(gpu, cpu):
            assert_images_equal(g, c, "cuda")


@pytest.mark.cuda
def test_cuda_yuv420_to_rgb_equals_cpu(astronaut: np.ndarray) -> None:
    from mime_fast.frames import yuv420_frame, yuv420_planes

    for img in (astronaut, np.ascontiguousarray(astronaut[:301, :257])):
        for matrix in ("bt601", "bt709"):
            y, u, v = ops.rgb_to_yuv420(img, matrix=matrix)
            vf = yuv420_frame(np.ascontiguousarray(img[:, :250]), matrix=matrix)
            padded = yuv420_planes(vf)  # row-padded planes
            assert_images_equal(ops.yuv420_to_rgb(*padded, matrix=matrix, device="cuda"),
                                ops.yuv420_to_rgb(*padded, matrix=matrix), "cuda")
            assert_images_equal(ops.yuv420_to_rgb(y, u, v, matrix=matrix, device="cuda"),
                                ops.yuv420_to_rgb(y, u, v, matrix=matrix), "cuda")
            for roi in [(31, 17, 101, 77), (0, 0, 1, 1), (img.shape[1] - 3, img.shape[0] - 2, 3, 2)]:
                assert_images_equal(ops.yuv420_to_rgb(y, u, v, roi=roi, matrix=matrix, device="cuda"),
                                    ops.yuv420_to_rgb(y, u, v, roi=roi, matrix=matrix), "cuda")


@pytest.mark.cuda
def test_cuda_threads_that_come_and_go_reuse_workspaces(astronaut: np.ndarray) -> None:
    """Each thread takes a workspace (stream, grow-only buffers, weights) from the core's pool and
    gives it back when it ends, as each decode pass's prefetch thread does. The next threads get
    those back, with buffers sized by another thread's frames and weights of other kernels: the
    bytes must not care, and after the first wave the device memory must not grow."""
    import threading

    crops = [np.ascontiguousarray(astronaut[:h, :w]) for h, w in ((512, 512), (301, 257), (97, 413), (64, 64))]
    want = {(i, k): cv2.GaussianBlur(c, (k, k), 0) for i, c in enumerate(crops) for k in (15, 35, 55)}
    failures: list[str] = []

    def work(shift: int) -> None:
        try:
            for j in range(len(crops)):
                i = (j + shift) % len(crops)  # each thread its own order of sizes: buffers grow, then are reused
                for k in (15, 35, 55)[shift % 3:] + (15, 35, 55)[:shift % 3]:
                    got = ops.gaussian_blur(crops[i], k, device="cuda")
                    if not np.array_equal(got, want[i, k]):
                        failures.append(f"thread {shift}: crop {i} k={k}")
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(f"thread {shift}: {exc!r}")

    def wave() -> None:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    free = []
    for _ in range(4):
        wave()
        try:
            import torch

            free.append(torch.cuda.mem_get_info()[0])
        except (ImportError, RuntimeError):
            pass
    assert not failures, failures
    if free:  # waves after the first reuse the pooled workspaces: nothing more taken from the device
        assert min(free[1:]) >= free[1] - (8 << 20), [f >> 20 for f in free]
