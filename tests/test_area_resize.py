"""area_resize: bit-exact against OpenCV 4.x cv2.resize(..., INTER_AREA) on its general path, the
CPU fast path against the shared per-pixel body the CUDA kernel runs, and the detector's
downscale (detect.interface._downscale) and the shot thumbnails, which use it, unchanged."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import mime_fast
from conftest import assert_images_equal
from mime_fast import _core, ops

OPENCV_4 = int(cv2.__version__.split(".")[0]) < 5
needs_opencv4 = pytest.mark.skipif(not OPENCV_4, reason=f"OpenCV {cv2.__version__}: the op reproduces 4.x, the reference here")


def cv_area(src: np.ndarray, w: int, h: int) -> np.ndarray:
    return cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA)


def random_image(rng: np.random.Generator, h: int, w: int, c: int) -> np.ndarray:
    shape = (h, w) if c == 1 else (h, w, c)
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    if rng.random() < 0.4:  # few distinct values: sums that land on .5 (rounding ties) and on 0 / 255
        img = (img // 85 * 85).astype(np.uint8)
    return img


@pytest.fixture(scope="module")
def frame720() -> np.ndarray:
    rng = np.random.default_rng(11)
    f = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    return cv2.GaussianBlur(f, (5, 5), 0) ^ rng.integers(0, 16, f.shape, dtype=np.uint8)


def test_equals_opencv_and_the_shared_body_random_sizes() -> None:
    """The threaded CPU path against the per-pixel body the CUDA kernel runs (everywhere) and
    against OpenCV 4.x (where it is installed)."""
    rng = np.random.default_rng(0)
    compared = 0
    for _ in range(600):
        c = int(rng.choice([1, 2, 3, 4]))
        h, w = int(rng.integers(1, 160)), int(rng.integers(1, 160))
        dh, dw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        if not ops.area_supported(w, h, dw, dh):
            continue
        img = random_image(rng, h, w, c)
        got = ops.area_resize(img, dw, dh)
        assert_images_equal(_core.area_resize_reference(img, dw, dh), got, f"reference {w}x{h}x{c} -> {dw}x{dh}")
        if OPENCV_4:
            assert_images_equal(got, cv_area(img, dw, dh), f"{w}x{h}x{c} -> {dw}x{dh}")
        compared += 1
    assert compared > 500


@needs_opencv4
@pytest.mark.parametrize("src, dst", [((1280, 720), (384, 216)), ((640, 360), (384, 216)), ((480, 270), (384, 216)),
                                      ((960, 540), (640, 360)), ((275, 155), (64, 36)), ((1279, 719), (383, 215)),
                                      ((1280, 720), (1279, 1)), ((1280, 720), (1, 719))])
def test_equals_opencv_pipeline_sizes(frame720: np.ndarray, src, dst) -> None:
    """The sizes the tracker asks for: the last step to the detector's 384 px from 720p and 1080p,
    the person detector's 640 px, the shot thumbnails; odd sizes, a one-pixel row and column."""
    img = np.ascontiguousarray(cv2.resize(frame720, src, interpolation=cv2.INTER_LINEAR))
    assert_images_equal(ops.area_resize(img, *dst), cv_area(img, *dst), f"{src} -> {dst}")


def test_thread_counts_give_the_same_bytes(frame720: np.ndarray) -> None:
    expected = ops.area_resize(frame720, 383, 217)
    try:
        for n in (1, 2, 3, 7):
            mime_fast.set_num_threads(n)
            assert_images_equal(ops.area_resize(frame720, 383, 217), expected, f"{n} threads")
    finally:
        mime_fast.set_num_threads(0)


@needs_opencv4
def test_exact_halving_equals_opencv() -> None:
    """The 2:1 shrink (OpenCV's fast path, (a + b + c + d + 2) >> 2), both implementations."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        c = int(rng.choice([1, 2, 3, 4]))
        h, w = 2 * int(rng.integers(1, 90)), 2 * int(rng.integers(1, 90))
        img = random_image(rng, h, w, c)
        expected = cv_area(img, w // 2, h // 2)
        assert_images_equal(ops.area_resize(img, w // 2, h // 2), expected, f"{w}x{h}x{c}")
        assert_images_equal(_core.area_resize_reference(img, w // 2, h // 2), expected, f"reference {w}x{h}x{c}")


def test_supported_shrinks_and_bad_arguments(frame720: np.ndarray) -> None:
    assert ops.area_supported(1280, 720, 640, 360) and ops.area_supported(1280, 720, 384, 216)
    assert not ops.area_supported(1280, 720, 320, 180)  # 4:1: OpenCV's other whole-number path
    assert not ops.area_supported(1280, 720, 640, 720)  # 2:1 x 1:1
    assert not ops.area_supported(1280, 720, 1281, 720) and not ops.area_supported(1280, 720, 0, 720)
    with pytest.raises(ValueError, match="whole-number ratio"):
        ops.area_resize(frame720, 320, 180)
    with pytest.raises(ValueError, match="shrinks"):
        ops.area_resize(frame720, 1281, 700)
    with pytest.raises(ValueError, match="shrinks"):
        ops.area_resize(frame720, 0, 700)
    with pytest.raises(TypeError, match="uint8"):
        ops.area_resize(frame720.astype(np.float32), 384, 216)
    with pytest.raises(ValueError, match="C-contiguous"):
        ops.area_resize(frame720[:, ::2], 384, 216)
    with pytest.raises(TypeError, match="integer"):
        ops.area_resize(frame720, 384.0, 216)


@needs_opencv4
def test_downscale_and_shot_thumbnails_unchanged(frame720: np.ndarray) -> None:
    """The detector's downscale and the shot thumbnails, now all in the core, give what OpenCV 4.x
    alone gave."""
    from mime_fast.detect.interface import _area, _downscale

    def opencv_downscale(frame, max_size):
        H, W = frame.shape[:2]
        if max(H, W) <= max_size:
            return frame
        s = max_size / max(H, W)
        tw, th = max(1, round(W * s)), max(1, round(H * s))
        img = frame
        while img.shape[1] // 2 >= tw and img.shape[0] // 2 >= th:
            h2, w2 = img.shape[0] // 2, img.shape[1] // 2
            img = cv_area(img[: 2 * h2, : 2 * w2], w2, h2)
        return img if img.shape[:2] == (th, tw) else cv_area(img, tw, th)

    for size in [(1280, 720), (1920, 1080), (340, 256), (853, 480), (720, 1280)]:
        f = np.ascontiguousarray(cv2.resize(frame720, size, interpolation=cv2.INTER_LINEAR))
        for max_size in (384, 640, 160):
            got, _ = _downscale(f, max_size)
            assert_images_equal(got, opencv_downscale(f, max_size), f"{size} to {max_size}")
    sub = frame720[::7, ::7]  # the shot detector's strided view
    assert_images_equal(_area(sub, 64, 36), cv_area(np.ascontiguousarray(sub), 64, 36), "strided view")
    assert_images_equal(_area(frame720[:10, :10], 64, 36), cv_area(frame720[:10, :10].copy(), 64, 36), "enlargement")


def test_halvings_use_opencv_only_where_it_halves_as_the_core(frame720: np.ndarray, monkeypatch) -> None:
    """The probe behind _area's choice: true for this OpenCV 4.x; an OpenCV that halves otherwise
    leaves every step to the core, with the same bytes."""
    from mime_fast.detect import interface

    expected = interface._downscale(frame720, 384)[0]
    if OPENCV_4:
        assert interface._opencv_halves_as_core()
    real = cv2.resize

    def otherwise(img, size, interpolation=None):  # an OpenCV whose 2:1 shrink rounds down
        if interpolation == cv2.INTER_AREA and 2 * size[0] == img.shape[1]:
            return (real(img, size, interpolation=cv2.INTER_AREA).astype(np.int16) - 1).clip(0, 255).astype(np.uint8)
        return real(img, size, interpolation=interpolation)

    monkeypatch.setattr(cv2, "resize", otherwise)
    interface._opencv_halves_as_core.cache_clear()
    try:
        assert not interface._opencv_halves_as_core()
        assert_images_equal(interface._downscale(frame720, 384)[0], expected, "core halvings")
    finally:
        interface._opencv_halves_as_core.cache_clear()


def test_cuda_unavailable_is_a_clear_error(frame720: np.ndarray) -> None:
    if mime_fast.cuda_available():
        pytest.skip("a CUDA device is available here")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.area_resize(frame720, 384, 216, device="cuda")


#: Shrinks of a 1280x720 frame the device is checked on: the detector's, odd sizes, a single row or
#: column, and the exact halving (its own kernel).  Every one is a shrink ``area_resize`` takes
#: (checked here, so that the list cannot hold one the CPU refuses: a whole-number ratio on both
#: axes, e.g. 64x36, is OpenCV's other code path and refused).
CUDA_SIZES = [(384, 216), (383, 215), (1000, 700), (64, 35), (1, 7), (3, 1), (1279, 1), (1, 719), (640, 360)]


def test_the_sizes_checked_on_the_device_are_taken() -> None:
    assert all(ops.area_supported(1280, 720, dw, dh) for dw, dh in CUDA_SIZES)


@pytest.mark.cuda
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_cuda_equals_cpu(frame720: np.ndarray, channels: int) -> None:
    f = np.ascontiguousarray(frame720[:, :, 0] if channels == 1 else
                             np.dstack([frame720, frame720[:, :, :1]])[:, :, :channels])
    for dw, dh in CUDA_SIZES:
        assert_images_equal(ops.area_resize(f, dw, dh, device="cuda"), ops.area_resize(f, dw, dh), f"cuda {dw}x{dh}")


@pytest.mark.cuda
def test_cuda_device_pointers_equal_cpu(frame720: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    frame = torch.from_numpy(frame720).cuda()
    big = torch.zeros((720, 1344, 3), dtype=torch.uint8, device="cuda")  # padded rows
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the image written on a side stream right before the call
        big[:, :1280].copy_(frame)
        out = torch.zeros((216, 400, 3), dtype=torch.uint8, device="cuda")  # padded output rows
        _core.cuda_area_resize(big.data_ptr(), 720, 1280, 3, big.stride(0), out.data_ptr(), 384, 216, out.stride(0),
                               stream.cuda_stream)
    assert_images_equal(out[:, :384].cpu().numpy(), ops.area_resize(frame720, 384, 216), "cuda")
    assert not out[:, 384:].any()  # the output's padding is left alone
    with torch.cuda.stream(stream):  # the exact halving (its own kernel) from and into padded rows
        half = torch.zeros((360, 672, 3), dtype=torch.uint8, device="cuda")
        _core.cuda_area_resize(big.data_ptr(), 720, 1280, 3, big.stride(0), half.data_ptr(), 640, 360, half.stride(0),
                               stream.cuda_stream)
    stream.synchronize()
    assert_images_equal(half[:, :640].cpu().numpy(), ops.area_resize(frame720, 640, 360), "cuda halving")
    assert not half[:, 640:].any()
    # a batch in one launch (the torch detector's input): three frames, each its own bytes
    frames = torch.stack([frame, frame.flip(0), frame.flip(1)]).contiguous()
    for dw, dh in ((384, 216), (640, 360)):
        outs = torch.zeros((3, dh, dw, 3), dtype=torch.uint8, device="cuda")
        _core.cuda_area_resize(frames.data_ptr(), 720, 1280, 3, 1280 * 3, outs.data_ptr(), dw, dh, dw * 3, 0, 3,
                               720 * 1280 * 3, dh * dw * 3)
        for k in range(3):
            expected = ops.area_resize(np.ascontiguousarray(frames[k].cpu().numpy()), dw, dh)
            assert_images_equal(outs[k].cpu().numpy(), expected, f"cuda batch {k} {dw}x{dh}")
    # a batch whose images lie apart (a gap between them), two channels, into padded output rows
    gap = 4096
    flat = torch.zeros(3 * (720 * 1280 * 2 + gap), dtype=torch.uint8, device="cuda")
    two = frames[..., :2].contiguous()
    for k in range(3):
        start = k * (720 * 1280 * 2 + gap)
        flat[start:start + 720 * 1280 * 2].copy_(two[k].reshape(-1))
    outs = torch.zeros((3, 216, 400, 2), dtype=torch.uint8, device="cuda")
    _core.cuda_area_resize(flat.data_ptr(), 720, 1280, 2, 1280 * 2, outs.data_ptr(), 384, 216, 400 * 2, 0, 3,
                           720 * 1280 * 2 + gap, 216 * 400 * 2)
    for k in range(3):
        expected = ops.area_resize(np.ascontiguousarray(two[k].cpu().numpy()), 384, 216)
        assert_images_equal(outs[k, :, :384].cpu().numpy(), expected, f"cuda gapped batch {k}")
    assert not outs[:, :, 384:].any()
    # a host address: refused before any launch, unless this GPU reads pageable host memory (HMM),
    # where the kernel reads it; the device is usable after either way
    host = torch.from_numpy(frame720.copy())
    host_out = torch.zeros((216, 384, 3), dtype=torch.uint8)
    want = ops.area_resize(frame720, 384, 216)
    out.zero_()
    for src, dst, got in ((host, out, lambda: out[:, :384].cpu().numpy()), (frame, host_out, host_out.numpy)):
        if _core.cuda_pageable_memory_access():
            _core.cuda_area_resize(src.data_ptr(), 720, 1280, 3, 1280 * 3, dst.data_ptr(), 384, 216, dst.stride(0))
            assert_images_equal(got(), want, "cuda, a host address read through HMM")
        else:
            with pytest.raises(ValueError, match="must point to device memory"):
                _core.cuda_area_resize(src.data_ptr(), 720, 1280, 3, 1280 * 3, dst.data_ptr(), 384, 216,
                                       dst.stride(0))
    out.zero_()
    _core.cuda_area_resize(frame.data_ptr(), 720, 1280, 3, 1280 * 3, out.data_ptr(), 384, 216, out.stride(0))
    assert_images_equal(out[:, :384].cpu().numpy(), want, "cuda after a refusal")
