"""mime_fast.ops.blur_in_mask: fused masked blur, several kernel sizes in one pass."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import _core, ops

LEVELS = [15, 35, 55]


def composite_reference(src: np.ndarray, blur: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The documented rounding: round((src * (255 - m) + blur * m) / 255), exact in integers."""
    m = mask.astype(np.int64)[..., None] if src.ndim == 3 else mask.astype(np.int64)
    num = src.astype(np.int64) * (255 - m) + blur.astype(np.int64) * m
    return ((2 * num + 255) // 510).astype(np.uint8)


def test_division_formula_is_exact_rounding() -> None:
    # kernels/blur_in_mask.cuh rounds with ((x + 128) + ((x + 128) >> 8)) >> 8.
    x = np.arange(255 * 255 + 1, dtype=np.int64)
    t = x + 128
    assert np.array_equal((t + (t >> 8)) >> 8, (2 * x + 255) // 510)


def test_every_mask_value_composites_exactly(astronaut: np.ndarray) -> None:
    # A mask whose columns take every value 0..255 checks the composite for all weights.
    img = np.ascontiguousarray(astronaut[100:356, 100:356])
    mask = np.tile(np.arange(256, dtype=np.uint8), (256, 1))
    outs = ops.blur_in_mask(img, mask, LEVELS)
    for k, out in zip(LEVELS, outs):
        assert_images_equal(out, composite_reference(img, cv2.GaussianBlur(img, (k, k), 0), mask))


def test_real_face_hull(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    mask, bbox = ops.hull_mask(astronaut_face_points, astronaut.shape)
    outs = ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox)
    assert len(outs) == 3
    inside, outside = mask == 255, mask == 0
    assert inside.sum() > 10000 and outside.sum() > 100000
    for k, out in zip(LEVELS, outs):
        blurred = cv2.GaussianBlur(astronaut, (k, k), 0)
        assert_images_equal(out[inside], blurred[inside])
        assert_images_equal(out[outside], astronaut[outside])
        assert_images_equal(out, composite_reference(astronaut, blurred, mask))
    # The heavier the kernel, the further the face is from the original inside the mask.
    err = [np.abs(o[inside].astype(int) - astronaut[inside]).mean() for o in outs]
    assert err[0] < err[1] < err[2]


def test_bbox_omitted_equals_given(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    mask, bbox = ops.hull_mask(astronaut_face_points, astronaut.shape, feather=6)
    a = ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox)
    b = ops.blur_in_mask(astronaut, mask, LEVELS)
    for x, y in zip(a, b):
        assert_images_equal(x, y)


def test_mask_outside_given_bbox_is_ignored(astronaut: np.ndarray) -> None:
    mask = np.zeros(astronaut.shape[:2], np.uint8)
    mask[50:100, 50:100] = 255
    mask[300:350, 300:350] = 255
    out = ops.blur_in_mask(astronaut, mask, 35, bbox=(40, 40, 70, 70))[0]
    blurred = cv2.GaussianBlur(astronaut, (35, 35), 0)
    assert_images_equal(out[50:100, 50:100], blurred[50:100, 50:100])
    assert_images_equal(out[300:350, 300:350], astronaut[300:350, 300:350])


def test_mask_touching_frame_corners(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (181, 243, 3), dtype=np.uint8)
    pts = np.array([[-30.0, -20.0], [90.0, -10.0], [60.0, 70.0], [-10.0, 95.0]])
    for offset in ([0.0, 0.0], [200.0, 140.0]):
        mask, bbox = ops.hull_mask(pts + offset, img.shape, feather=5)
        for k, out in zip(LEVELS, ops.blur_in_mask(img, mask, LEVELS, bbox=bbox)):
            assert_images_equal(out, composite_reference(img, cv2.GaussianBlur(img, (k, k), 0), mask))


def test_levels_in_one_call_equal_separate_calls(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    mask, bbox = ops.hull_mask(astronaut_face_points, astronaut.shape)
    together = ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox)
    for k, out in zip(LEVELS, together):
        assert_images_equal(out, ops.blur_in_mask(astronaut, mask, [k], bbox=bbox)[0])


def test_gpu_tile_code_on_cpu_equals_fast_path(rng: np.random.Generator, astronaut: np.ndarray,
                                               astronaut_face_points: np.ndarray) -> None:
    # blur_in_mask_reference runs the CUDA kernel's tile functions (kernels/blur_tile.cuh) serially:
    # tiling, padding, reflection at frame edges, empty-tile skipping and the composite store.
    cases = [(astronaut, astronaut_face_points)]
    img = rng.integers(0, 256, (181, 243, 3), dtype=np.uint8)
    cases.append((img, np.array([[-30.0, -20.0], [90.0, -10.0], [60.0, 70.0], [-10.0, 95.0]])))
    cases.append((img, np.array([[150.0, 100.0], [260.0, 150.0], [200.0, 200.0], [140.0, 190.0]])))
    for frame, pts in cases:
        mask, bbox = ops.hull_mask(pts, frame.shape, feather=5)
        fast = ops.blur_in_mask(frame, mask, LEVELS, bbox=bbox)
        tiled = _core.blur_in_mask_reference(frame, mask, LEVELS, bbox)
        for f, t in zip(fast, tiled):
            assert_images_equal(t, f)


def test_empty_mask_returns_copies(astronaut: np.ndarray) -> None:
    outs = ops.blur_in_mask(astronaut, np.zeros(astronaut.shape[:2], np.uint8), LEVELS)
    for out in outs:
        assert_images_equal(out, astronaut)
        assert not np.shares_memory(out, astronaut)


def test_out_frames_are_written_in_place(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    mask, bbox = ops.hull_mask(astronaut_face_points, astronaut.shape)
    out = [np.zeros_like(astronaut) for _ in LEVELS]
    returned = ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox, out=out)
    expected = ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox)
    for r, o, e in zip(returned, out, expected):
        assert r is o
        assert_images_equal(o, e)


def test_frames_smaller_than_kernel(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    mask, bbox = ops.hull_mask(np.array([[1.0, 1.0], [11.0, 2.0], [6.0, 8.0]]), img.shape, feather=1)
    for k, out in zip(LEVELS, ops.blur_in_mask(img, mask, LEVELS, bbox=bbox)):
        assert_images_equal(out, composite_reference(img, cv2.GaussianBlur(img, (k, k), 0), mask))


def test_concurrent_calls_from_threads(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    # The operators release the GIL; calls from several threads share one worker pool.
    from concurrent.futures import ThreadPoolExecutor

    shifts = [(float(dx), float(dy)) for dx in (-60, 0, 60) for dy in (0, 40)]
    expected = []
    for dx, dy in shifts:
        mask, bbox = ops.hull_mask(astronaut_face_points + [dx, dy], astronaut.shape)
        expected.append(ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox))

    def job(i: int) -> list[np.ndarray]:
        dx, dy = shifts[i % len(shifts)]
        mask, bbox = ops.hull_mask(astronaut_face_points + [dx, dy], astronaut.shape)
        return ops.blur_in_mask(astronaut, mask, LEVELS, bbox=bbox)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(job, range(24)))
    for i, outs in enumerate(results):
        for out, exp in zip(outs, expected[i % len(shifts)]):
            assert_images_equal(out, exp)


def test_gray_frames(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (90, 130), dtype=np.uint8)
    mask, _ = ops.hull_mask(np.array([[20.0, 10.0], [110.0, 30.0], [70.0, 80.0]]), img.shape, feather=3)
    out = ops.blur_in_mask(img, mask, 15)[0]
    assert out.shape == img.shape
    assert_images_equal(out, composite_reference(img, cv2.GaussianBlur(img, (15, 15), 0), mask))


def test_inputs_are_not_modified(astronaut: np.ndarray, astronaut_face_points: np.ndarray) -> None:
    img = astronaut.copy()
    mask, bbox = ops.hull_mask(astronaut_face_points, img.shape)
    mask_copy = mask.copy()
    ops.blur_in_mask(img, mask, LEVELS, bbox=bbox)
    assert np.array_equal(img, astronaut) and np.array_equal(mask, mask_copy)


def test_bad_arguments(astronaut: np.ndarray) -> None:
    mask = np.zeros(astronaut.shape[:2], np.uint8)
    with pytest.raises(ValueError, match="mask shape"):
        ops.blur_in_mask(astronaut, mask[:-1], 15)
    with pytest.raises(ValueError, match="2-D"):
        ops.blur_in_mask(astronaut, np.zeros(astronaut.shape, np.uint8), 15)
    with pytest.raises(TypeError, match="uint8"):
        ops.blur_in_mask(astronaut, mask.astype(np.float32), 15)
    with pytest.raises(ValueError, match="at least one"):
        ops.blur_in_mask(astronaut, mask, [])
    with pytest.raises(ValueError, match="kernel size"):
        ops.blur_in_mask(astronaut, mask, [15, 20])
    with pytest.raises(ValueError, match="bbox"):
        ops.blur_in_mask(astronaut, mask, 15, bbox=(500, 500, 20, 20))
    with pytest.raises(ValueError, match="one frame per kernel size"):
        ops.blur_in_mask(astronaut, mask, [15, 35], out=[np.zeros_like(astronaut)])
    with pytest.raises(ValueError, match="shaped like frame"):
        ops.blur_in_mask(astronaut, mask, 15, out=[np.zeros((10, 10, 3), np.uint8)])
    with pytest.raises(ValueError, match="share memory"):
        ops.blur_in_mask(astronaut, mask, 15, out=[astronaut])
    shared = np.zeros_like(astronaut)
    with pytest.raises(ValueError, match="share memory"):
        ops.blur_in_mask(astronaut, mask, [15, 35], out=[shared, shared])
