"""mime_fast.ops.gaussian_blur: bit-exact with cv2.GaussianBlur(img, (k, k), 0) on 8-bit images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import _core, ops

MIME_KERNELS = (15, 35, 55)


def cv_blur(img: np.ndarray, k: int) -> np.ndarray:
    return cv2.GaussianBlur(img, (k, k), 0)


@pytest.mark.parametrize("k", MIME_KERNELS)
def test_real_face_image_bit_exact(astronaut: np.ndarray, k: int) -> None:
    assert_images_equal(ops.gaussian_blur(astronaut, k), cv_blur(astronaut, k))


@pytest.mark.parametrize("k", MIME_KERNELS)
@pytest.mark.parametrize("shape", [(720, 1280, 3), (121, 157, 3), (97, 203), (64, 33, 4), (50, 61, 1)])
def test_random_frames_bit_exact(rng: np.random.Generator, k: int, shape: tuple[int, ...]) -> None:
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    out = ops.gaussian_blur(img, k)
    expected = cv_blur(img, k).reshape(shape)  # cv2 drops a trailing channel axis of 1
    assert_images_equal(out, expected)


def test_every_odd_kernel_size_matches_opencv_weights(rng: np.random.Generator) -> None:
    # Catches any weight off by one 1/256 step (error-diffusion rounding, sigma formula, small tables).
    img = rng.integers(0, 256, (23, 300), dtype=np.uint8)
    for k in range(1, 256, 2):
        assert_images_equal(ops.gaussian_blur(img, k), cv_blur(img, k))
        w = ops.gaussian_weights(k)
        assert w.sum() == 256 and np.array_equal(w, w[::-1])


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 9, 3), (9, 1), (5, 7, 3), (2, 2)])
def test_frames_smaller_than_kernel(rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    # Reflect-101 wraps several times when the frame is smaller than the kernel radius.
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    for k in MIME_KERNELS:
        assert_images_equal(ops.gaussian_blur(img, k), cv_blur(img, k).reshape(shape))


def roi_cases(h: int, w: int) -> list[tuple[int, int, int, int]]:
    return [
        (w // 3, h // 3, w // 4, h // 5),  # middle
        (0, h // 3, 40, 30),  # left edge
        (w - 40, h // 3, 40, 30),  # right edge
        (w // 3, 0, 30, 40),  # top edge
        (w // 3, h - 40, 30, 40),  # bottom edge
        (0, 0, 25, 25),
        (w - 25, 0, 25, 25),
        (0, h - 25, 25, 25),
        (w - 25, h - 25, 25, 25),  # corners
        (w // 2, h // 2, 1, 1),  # one pixel
        (0, h // 2, w, 1),  # one full row
        (w // 2, 0, 1, h),  # one full column
        (0, 0, w, h),  # whole frame
    ]


@pytest.mark.parametrize("k", MIME_KERNELS)
def test_roi_equals_same_pixels_of_full_blur(astronaut: np.ndarray, k: int) -> None:
    img = np.ascontiguousarray(astronaut[:301, :257])  # odd size
    full = cv_blur(img, k)
    for x, y, w, h in roi_cases(*img.shape[:2]):
        out = ops.gaussian_blur(img, k, roi=(x, y, w, h))
        assert_images_equal(out, full[y : y + h, x : x + w])


def test_gpu_structured_reference_bit_exact(astronaut: np.ndarray) -> None:
    # The per-sample path with the CUDA kernel's structure (reflected tile, vertical_sum,
    # horizontal_sum) runs the GPU arithmetic on the CPU.
    img = np.ascontiguousarray(astronaut[100:260, 150:371])
    for k in MIME_KERNELS:
        full = cv_blur(img, k)
        for x, y, w, h in roi_cases(*img.shape[:2])[::3]:
            assert_images_equal(_core.gaussian_blur_reference(img, k, (x, y, w, h)), full[y : y + h, x : x + w])


def test_levels_in_one_pass_equal_single_calls(astronaut: np.ndarray) -> None:
    roi = (150, 40, 200, 230)
    outs = ops.gaussian_blur_levels(astronaut, list(MIME_KERNELS), roi=roi)
    assert len(outs) == len(MIME_KERNELS)
    x, y, w, h = roi
    for k, out in zip(MIME_KERNELS, outs):
        assert_images_equal(out, cv_blur(astronaut, k)[y : y + h, x : x + w])
    with pytest.raises(ValueError, match="at least one"):
        ops.gaussian_blur_levels(astronaut, [])
    with pytest.raises(ValueError, match="kernel size"):
        ops.gaussian_blur_levels(astronaut, [15, 4])


def test_input_is_not_modified(astronaut: np.ndarray) -> None:
    img = astronaut.copy()
    ops.gaussian_blur(img, 55, roi=(10, 10, 100, 100))
    assert np.array_equal(img, astronaut)


@pytest.mark.parametrize("k", [0, -3, 2, 16, 257, 1001])
def test_bad_kernel_size(astronaut: np.ndarray, k: int) -> None:
    with pytest.raises(ValueError, match="kernel size must be an odd integer"):
        ops.gaussian_blur(astronaut, k)


def test_bad_frames() -> None:
    with pytest.raises(TypeError, match="uint8"):
        ops.gaussian_blur(np.zeros((10, 10, 3), np.float32), 15)
    with pytest.raises(TypeError, match="uint8"):
        ops.gaussian_blur(np.zeros((10, 10, 3), np.int8), 15)
    with pytest.raises(TypeError, match="numpy array"):
        ops.gaussian_blur([[1, 2], [3, 4]], 15)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="C-contiguous"):
        ops.gaussian_blur(np.zeros((10, 20, 3), np.uint8)[:, ::2], 15)
    with pytest.raises(ValueError, match="empty"):
        ops.gaussian_blur(np.zeros((0, 10, 3), np.uint8), 15)
    with pytest.raises(ValueError, match="channels"):
        ops.gaussian_blur(np.zeros((10, 10, 5), np.uint8), 15)
    with pytest.raises(ValueError, match="dimensions"):
        ops.gaussian_blur(np.zeros((2, 10, 10, 3), np.uint8), 15)
    with pytest.raises(TypeError, match="ksize"):
        ops.gaussian_blur(np.zeros((10, 10), np.uint8), 15.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("roi", [(-1, 0, 5, 5), (0, 0, 11, 5), (3, 3, 0, 4), (5, 9, 5, 2)])
def test_bad_roi(roi: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="roi"):
        ops.gaussian_blur(np.zeros((10, 10, 3), np.uint8), 15, roi=roi)


def test_roi_must_be_integers() -> None:
    with pytest.raises(TypeError, match="roi"):
        ops.gaussian_blur(np.zeros((10, 10, 3), np.uint8), 15, roi=(0.5, 0, 5, 5))  # type: ignore[arg-type]


def test_unknown_device() -> None:
    with pytest.raises(ValueError, match="device"):
        ops.gaussian_blur(np.zeros((10, 10, 3), np.uint8), 15, device="tpu")  # type: ignore[arg-type]
