"""warp_affine: bit-exact against OpenCV 4.x cv2.warpAffine (INTER_LINEAR, BORDER_CONSTANT 0) and
against the torch emulation it replaces (mime_fast.detect.torch_models.warp_affine_u8)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import mime_fast
from conftest import assert_images_equal
from mime_fast import ops

OPENCV_4 = int(cv2.__version__.split(".")[0]) < 5
needs_opencv4 = pytest.mark.skipif(
    not OPENCV_4, reason=f"OpenCV {cv2.__version__}: warpAffine rounds differently from 5.0 on; the op is OpenCV 4.x's"
)


def cv_warp(frame: np.ndarray, M: np.ndarray, size: int) -> np.ndarray:
    return cv2.warpAffine(frame, M, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0)


def random_matrices(rng: np.random.Generator, n: int, H: int, W: int, size: int) -> np.ndarray:
    """Frame -> crop similarity / affine matrices: crops around a random centre (inside, on an edge,
    or off the frame), rotated, scaled from 1/8 to 8x, sometimes sheared or mirrored."""
    out = []
    for i in range(n):
        a = rng.uniform(-np.pi, np.pi)
        s = float(np.exp(rng.uniform(np.log(1 / 8), np.log(8))))
        A = s * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        if i % 5 == 1:
            A = A @ np.array([[1.0, rng.uniform(-0.5, 0.5)], [rng.uniform(-0.5, 0.5), 1.0]])
        if i % 7 == 2:
            A[:, 0] *= -1
        kind = i % 4
        if kind == 0:  # inside
            c = rng.uniform([0, 0], [W, H])
        elif kind == 1:  # across an edge or corner
            c = rng.choice([0.0, 1.0], 2) * [W, H] + rng.normal(0, 20, 2)
        elif kind == 2:  # anywhere near
            c = rng.uniform([-W / 2, -H / 2], [1.5 * W, 1.5 * H])
        else:  # integer-ish and half-pixel positions (rounding ties of the fixed point)
            c = np.round(rng.uniform([0, 0], [W, H]) * 2) / 2
            if i % 8 == 3:
                A = np.round(A * 4) / 4
        t = np.array([size / 2, size / 2]) - A @ c
        out.append(np.concatenate([A, t[:, None]], 1))
    return np.array(out)


@pytest.fixture(scope="module")
def frame720() -> np.ndarray:
    rng = np.random.default_rng(7)
    f = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    return cv2.GaussianBlur(f, (5, 5), 0) ^ rng.integers(0, 16, f.shape, dtype=np.uint8)  # texture + noise


@needs_opencv4
@pytest.mark.parametrize("size", [112, 192, 37])
def test_equals_opencv_rgb(frame720: np.ndarray, size: int) -> None:
    rng = np.random.default_rng(size)
    Ms = random_matrices(rng, 120, *frame720.shape[:2], size)
    crops = ops.warp_affine(frame720, Ms, size)
    assert crops.shape == (len(Ms), size, size, 3) and crops.dtype == np.uint8
    for k, M in enumerate(Ms):
        assert_images_equal(crops[k], cv_warp(frame720, M, size))


@needs_opencv4
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_equals_opencv_channels_and_odd_frames(channels: int) -> None:
    rng = np.random.default_rng(channels)
    for H, W, size in [(97, 131, 64), (1, 9, 5), (8, 1, 3), (33, 33, 1), (250, 201, 111)]:
        shape = (H, W) if channels == 1 else (H, W, channels)
        f = rng.integers(0, 256, shape, dtype=np.uint8)
        Ms = random_matrices(rng, 25, H, W, size)
        crops = ops.warp_affine(f, Ms, size)
        assert crops.shape == (len(Ms), size, size) + shape[2:]
        for k, M in enumerate(Ms):
            expected = cv_warp(f, M, size)
            assert_images_equal(crops[k], expected.reshape(crops[k].shape))


@needs_opencv4
def test_equals_opencv_edge_cases(frame720: np.ndarray) -> None:
    size = 48
    cases = [
        [[1, 0, 0], [0, 1, 0]],  # identity: the top-left corner
        [[1, 0, -1280 + 24], [0, 1, -720 + 24]],  # the bottom-right corner, half outside
        [[1, 0, 1e6], [0, 1, -1e6]],  # far outside (OpenCV's int16 map saturates)
        [[1, 0, 5000], [0, 1, 0]],
        [[0, 0, 3], [0, 0, 4]],  # singular: OpenCV's inverse is all zeros
        [[1e-3, 0, 0], [0, 1e-3, 0]],  # huge minification
        [[64, 0, -64 * 640], [0, 64, -64 * 360]],  # 64x magnification
        [[0.5, 0.25, -0.25], [-0.25, 0.5, 0.125]],  # exact binary fractions (rounding ties)
        [[2, 0, 0.5], [0, 2, 0.5]],
    ]
    for M in np.array(cases, np.float64):
        assert_images_equal(ops.warp_affine(frame720, M, size)[0], cv_warp(frame720, M, size))


def test_batch_equals_single_calls(frame720: np.ndarray) -> None:
    rng = np.random.default_rng(3)
    Ms = random_matrices(rng, 9, *frame720.shape[:2], 192)
    batch = ops.warp_affine(frame720, Ms, 192)
    for k, M in enumerate(Ms):
        assert_images_equal(batch[k], ops.warp_affine(frame720, M, 192)[0])
    assert ops.warp_affine(frame720, np.zeros((0, 2, 3)), 192).shape == (0, 192, 192, 3)
    assert ops.warp_affine(frame720, Ms.astype(np.float32), 16).shape == (9, 16, 16, 3)  # converted, as cv2 does
    assert ops.warp_affine(frame720, Ms[0].tolist(), 16).shape == (1, 16, 16, 3)


def test_equals_torch_emulation(frame720: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    from mime_fast.detect.torch_models import warp_affine_u8

    H, W = frame720.shape[:2]
    for size in (112, 192):
        Ms = random_matrices(np.random.default_rng(size + 1), 40, H, W, size)
        buf = torch.from_numpy(np.concatenate([frame720.reshape(-1), np.zeros(3, np.uint8)]))
        ref = warp_affine_u8(buf, [0] * len(Ms), [(H, W)] * len(Ms), [(0, 0)] * len(Ms), list(Ms), size)
        ref = ref.permute(0, 2, 3, 1).to(torch.uint8).numpy()
        assert_images_equal(ops.warp_affine(frame720, Ms, size), ref)


def test_bad_arguments(frame720: np.ndarray) -> None:
    M = np.eye(2, 3)
    with pytest.raises(TypeError, match="frame"):
        ops.warp_affine(frame720.astype(np.float32), M, 8)
    with pytest.raises(TypeError, match="frame"):
        ops.warp_affine([[1, 2]], M, 8)
    with pytest.raises(ValueError, match="contiguous"):
        ops.warp_affine(frame720[:, ::2], M, 8)
    with pytest.raises(ValueError, match="channels"):
        ops.warp_affine(np.zeros((4, 4, 5), np.uint8), M, 8)
    with pytest.raises(ValueError, match="Ms"):
        ops.warp_affine(frame720, np.eye(3), 8)
    with pytest.raises(ValueError, match="non-finite"):
        ops.warp_affine(frame720, [[1, 0, np.nan], [0, 1, 0]], 8)
    with pytest.raises(ValueError, match="size"):
        ops.warp_affine(frame720, M, 0)
    with pytest.raises(TypeError, match="size"):
        ops.warp_affine(frame720, M, 8.0)
    with pytest.raises(ValueError, match="device"):
        ops.warp_affine(frame720, M, 8, device="tpu")


def test_cuda_unavailable_is_a_clear_error(frame720: np.ndarray) -> None:
    if mime_fast.cuda_available():
        pytest.skip("a CUDA device is available here")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ops.warp_affine(frame720, np.eye(2, 3), 8, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_cuda_equals_cpu(frame720: np.ndarray, channels: int) -> None:
    f = np.ascontiguousarray(frame720[:, :, 0] if channels == 1 else
                             np.dstack([frame720, frame720[:, :, :1]])[:, :, :channels])
    for size in (112, 192, 37):
        Ms = random_matrices(np.random.default_rng(size), 60, *f.shape[:2], size)
        assert_images_equal(ops.warp_affine(f, Ms, size, device="cuda"), ops.warp_affine(f, Ms, size), "cuda")


@pytest.mark.cuda
def test_cuda_device_pointers_equal_cpu(frame720: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from mime_fast import _core

    Ms = random_matrices(np.random.default_rng(5), 7, *frame720.shape[:2], 192)
    frame = torch.from_numpy(frame720).cuda()
    big = torch.zeros((720, 1344, 3), dtype=torch.uint8, device="cuda")  # padded rows: stride 1344 x 3 bytes
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the frame written on a side stream right before the call
        big[:, :1280].copy_(frame)
        out = torch.empty((len(Ms), 192, 192, 3), dtype=torch.uint8, device="cuda")
        _core.cuda_warp_affine(big.data_ptr(), 720, 1280, 3, big.stride(0), out.data_ptr(), Ms, 192,
                               stream.cuda_stream)
    expected = ops.warp_affine(frame720, Ms, 192)
    assert_images_equal(out.cpu().numpy(), expected, "cuda")
    out2 = torch.zeros_like(out)  # on the default stream, as torch_models calls it
    _core.cuda_warp_affine(frame.data_ptr(), 720, 1280, 3, 1280 * 3, out2.data_ptr(), Ms, 192)
    assert_images_equal(out2.cpu().numpy(), expected, "cuda")


def test_torch_model_crops_equal_emulation(frame720: np.ndarray) -> None:
    """torch_models._crops (the face mesh's and SFace's crops): numpy frames and a CPU tensor through
    the core's operator give what warp_affine_u8 gives; frames without faces are skipped."""
    torch = pytest.importorskip("torch")
    from mime_fast.detect.torch_ops import _crops, warp_affine_u8

    frames = [frame720, np.ascontiguousarray(frame720[::-1]), np.ascontiguousarray(frame720[:, ::-1])]
    rng = np.random.default_rng(11)
    Ms = [list(random_matrices(rng, 2, 720, 1280, 192)), [], list(random_matrices(rng, 1, 720, 1280, 192))]
    flat = [M for mats in Ms for M in mats]
    base = [0, 0, 2 * 720 * 1280 * 3]
    buf = torch.from_numpy(np.concatenate([np.stack(frames).reshape(-1), np.zeros(3, np.uint8)]))
    ref = warp_affine_u8(buf, base, [(720, 1280)] * 3, [(0, 0)] * 3, flat, 192)
    for got in (_crops(frames, Ms, 192, "cpu"), _crops(torch.from_numpy(np.stack(frames)), Ms, 192, "cpu")):
        assert got.shape == (3, 3, 192, 192) and got.dtype == torch.float32
        assert torch.equal(got, ref)
    assert _crops(frames, [[], [], []], 112, "cpu").shape == (0, 3, 112, 112)
