"""ops.yuv420_to_rgb: limited-range YUV 4:2:0 -> RGB in fixed point, checked against an independent
numpy transcription of the formulas, the CUDA kernel's per-pixel code (run on the CPU) over every
(Y, U, V) triple, OpenCV's I420 converter, and round trips through ops.rgb_to_yuv420."""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import _core, ops
from mime_fast.frames import yuv420_planes

MATRICES = {  # Q16 coefficients: cy, crv, cgu, cgv, cbu
    "bt601": (76309, 104597, -25675, -53279, 132201),
    "bt709": (76309, 117489, -13975, -34925, 138438),
}
KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


def reference(y: np.ndarray, u: np.ndarray, v: np.ndarray, matrix: str = "bt601") -> np.ndarray:
    """The documented formulas, in int64 numpy, chroma replicated over each 2x2 block."""
    cy, crv, cgu, cgv, cbu = MATRICES[matrix]
    h, w = y.shape
    yy = y.astype(np.int64) - 16
    uu = u.astype(np.int64).repeat(2, 0).repeat(2, 1)[:h, :w] - 128
    vv = v.astype(np.int64).repeat(2, 0).repeat(2, 1)[:h, :w] - 128
    r = (cy * yy + crv * vv + (1 << 15)) >> 16  # numpy's >> on int64 is the floor division
    g = (cy * yy + cgu * uu + cgv * vv + (1 << 15)) >> 16
    b = (cy * yy + cbu * uu + (1 << 15)) >> 16
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def random_planes(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ch, cw = ops.yuv420_shapes(h, w)[1]
    return (rng.integers(0, 256, (h, w), dtype=np.uint8), rng.integers(0, 256, (ch, cw), dtype=np.uint8),
            rng.integers(0, 256, (ch, cw), dtype=np.uint8))


def test_coefficients_are_the_rounded_inverse_matrices() -> None:
    for name, (cy, crv, cgu, cgv, cbu) in MATRICES.items():
        kr, kb = KR_KB[name]
        kg = 1 - kr - kb
        c = 255 / 224 * 65536
        assert cy == round(255 / 219 * 65536)
        assert (crv, cbu) == (round(2 * (1 - kr) * c), round(2 * (1 - kb) * c))
        assert (cgu, cgv) == (round(-2 * (1 - kb) * kb / kg * c), round(-2 * (1 - kr) * kr / kg * c))


SIZES = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 5), (6, 9), (17, 31), (64, 33), (720, 1280)]


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_equals_the_formulas_and_the_cuda_body(rng: np.random.Generator, size, matrix) -> None:
    y, u, v = random_planes(rng, *size)
    got = ops.yuv420_to_rgb(y, u, v, matrix=matrix)
    assert got.shape == (*size, 3) and got.dtype == np.uint8 and got.flags.c_contiguous
    assert_images_equal(got, reference(y, u, v, matrix))
    assert_images_equal(got, _core.yuv420_to_rgb_reference(y, u, v, matrix=matrix))


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
def test_every_yuv_triple(matrix: str) -> None:
    # All 2^24 (Y, U, V): the fast path (16-bit split arithmetic, csrc/ops/yuv420_to_rgb.cpp)
    # against the shared per-pixel body and, on a slice, the numpy formulas. Chroma sample q of the
    # 1024 x 16384 frame holds (U, V) = divmod(q // 64, 256) and its four pixels Y = 4 (q % 64) + 0..3.
    q = np.arange(512 * 8192, dtype=np.int64).reshape(512, 8192)
    u = (q >> 14).astype(np.uint8)
    v = ((q >> 6) & 255).astype(np.uint8)
    k = (q & 63).astype(np.uint8)
    y = np.empty((1024, 16384), np.uint8)
    for dy in range(2):
        for dx in range(2):
            y[dy::2, dx::2] = 4 * k + 2 * dy + dx
    got = ops.yuv420_to_rgb(y, u, v, matrix=matrix)
    assert_images_equal(got, _core.yuv420_to_rgb_reference(y, u, v, matrix=matrix))
    assert_images_equal(got[:64], reference(y[:64], u[:32], v[:32], matrix))


def rois(h: int, w: int, rng: np.random.Generator) -> list[tuple[int, int, int, int]]:
    fixed = [(0, 0, w, h), (0, 0, 1, 1), (1, 1, 1, 1), (w - 1, h - 1, 1, 1), (1, 0, w - 1, h), (0, 1, w, h - 1),
             (1, 1, w - 2, h - 2), (3, 2, 5, 7), (2, 3, 6, 4), (5, 5, 2, 1), (w - 4, 0, 4, h), (0, h - 3, w, 3),
             (w - 3, h - 2, 3, 2), (7, 0, 1, h), (0, 9, w, 1)]
    for _ in range(40):
        x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
        fixed.append((x, y, int(rng.integers(1, w - x + 1)), int(rng.integers(1, h - y + 1))))
    return fixed


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
@pytest.mark.parametrize("size", [(17, 31), (73, 90), (40, 101)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_region_equals_the_same_pixels_of_the_whole_frame(rng: np.random.Generator, size, matrix) -> None:
    y, u, v = random_planes(rng, *size)
    full = reference(y, u, v, matrix)
    for roi in rois(*size, rng):
        x0, y0, w, h = roi
        want = full[y0 : y0 + h, x0 : x0 + w]
        assert_images_equal(ops.yuv420_to_rgb(y, u, v, roi=roi, matrix=matrix), want)
        assert_images_equal(_core.yuv420_to_rgb_reference(y, u, v, roi=roi, matrix=matrix), want)


def test_empty_region(rng: np.random.Generator) -> None:
    y, u, v = random_planes(rng, 9, 12)
    assert ops.yuv420_to_rgb(y, u, v, roi=(0, 0, 0, 0)).shape == (0, 0, 3)
    assert ops.yuv420_to_rgb(y, u, v, roi=(3, 4, 0, 5)).shape == (5, 0, 3)
    assert ops.yuv420_to_rgb(y, u, v, roi=(12, 9, 0, 0)).shape == (0, 0, 3)  # the far corner
    with pytest.raises(ValueError, match="roi"):
        ops.yuv420_to_rgb(y, u, v, roi=(13, 0, 0, 1))
    with pytest.raises(ValueError, match="negative"):
        ops.yuv420_to_rgb(y, u, v, roi=(0, 0, -1, 2))


def test_padded_and_read_only_planes_of_a_video_frame(rng: np.random.Generator) -> None:
    # av.VideoFrame planes have padded rows: read through strided views, like contiguous copies
    for h, w in [(50, 70), (31, 45)]:
        vf = av.VideoFrame(w, h, "yuv420p")
        assert vf.planes[0].line_size > w  # padded
        planes = yuv420_planes(vf)
        for p in planes:
            p[...] = rng.integers(0, 256, p.shape, dtype=np.uint8)
        copies = [np.ascontiguousarray(p) for p in planes]
        want = reference(*copies)
        assert_images_equal(ops.yuv420_to_rgb(*planes), want)
        assert_images_equal(ops.yuv420_to_rgb(*planes, roi=(3, 5, w - 8, h - 9)), want[5 : h - 4, 3 : w - 5])
        read_only = []
        for p in planes:
            r = p.view()
            r.flags.writeable = False
            read_only.append(r)
        assert_images_equal(ops.yuv420_to_rgb(*read_only), want)
        assert_images_equal(_core.yuv420_to_rgb_reference(*read_only), want)


def test_out_is_written_in_place(rng: np.random.Generator) -> None:
    y, u, v = random_planes(rng, 41, 57)
    full = reference(y, u, v)
    out = np.zeros((41, 57, 3), np.uint8)
    assert ops.yuv420_to_rgb(y, u, v, out) is out
    assert_images_equal(out, full)
    part = np.zeros((10, 21, 3), np.uint8)
    assert ops.yuv420_to_rgb(y, u, v, part, roi=(5, 7, 21, 10)) is part
    assert_images_equal(part, full[7:17, 5:26])


def test_neutral_chroma_gives_grey(rng: np.random.Generator) -> None:
    # U = V = 128: R = G = B = 255/219 (Y - 16), rounded; the ends of the range are black and white
    y = np.arange(256, dtype=np.uint8).reshape(16, 16)
    u = np.full((8, 8), 128, np.uint8)
    for matrix in MATRICES:
        rgb = ops.yuv420_to_rgb(y, u, u, matrix=matrix).astype(int)
        assert np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2])
        expected = np.clip(np.floor((np.arange(256) - 16) * 255 / 219 + 0.5), 0, 255)
        assert np.array_equal(rgb[..., 0].ravel(), expected)
        assert rgb[1, 0, 0] == 0 and rgb[14, 11, 0] == 255  # Y 16 -> 0, Y 235 -> 255


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
def test_round_trip_of_grey_images(astronaut: np.ndarray, matrix: str) -> None:
    # grey in, grey out: every 8-bit level (a ramp) comes back within one level (the luma
    # quantisation to 220 levels), a grey photograph too (measured: 13% and 14% of the values off by one)
    ramp = np.repeat(np.repeat(np.arange(256, dtype=np.uint8), 2)[None, :], 4, 0)
    grey_face = cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY)
    for grey in (ramp, grey_face):
        rgb = np.ascontiguousarray(np.repeat(grey[..., None], 3, 2))
        back = ops.yuv420_to_rgb(*ops.rgb_to_yuv420(rgb, matrix=matrix), matrix=matrix)
        d = np.abs(back.astype(int) - rgb)
        assert d.max() <= 1 and d.mean() < 0.15, (d.max(), d.mean())


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
def test_round_trip_of_a_real_image(astronaut: np.ndarray, matrix: str) -> None:
    # Colour that is constant over each 2x2 block survives the 4:2:0 subsampling: only the
    # rounding of Y, Cb, Cr remains (measured: max 2, mean 0.35). A natural image also loses its
    # chroma detail: small on average, large only at sharp colour edges (measured: mean 1.35,
    # median 1, 99th percentile 12, max 57 / 60).
    blocky = np.ascontiguousarray(astronaut[::2, ::2].repeat(2, 0).repeat(2, 1))
    back = ops.yuv420_to_rgb(*ops.rgb_to_yuv420(blocky, matrix=matrix), matrix=matrix)
    d = np.abs(back.astype(int) - blocky)
    assert d.max() <= 2 and d.mean() < 0.4, (d.max(), d.mean())
    back = ops.yuv420_to_rgb(*ops.rgb_to_yuv420(astronaut, matrix=matrix), matrix=matrix)
    d = np.abs(back.astype(int) - astronaut)
    assert d.mean() < 1.4 and np.median(d) <= 1 and np.percentile(d, 99) <= 12, (d.mean(), np.percentile(d, 99))


def test_close_to_opencv(astronaut: np.ndarray) -> None:
    # cv2.COLOR_YUV2RGB_I420: BT.601 limited range, chroma replicated too; only its fixed point
    # differs (measured on the planes of real images: at most one level, on 4 to 4.5% of the values)
    for img in (astronaut, np.ascontiguousarray(astronaut[:300, :214])):
        y, u, v = ops.rgb_to_yuv420(img)
        h, w = y.shape
        i420 = np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(h * 3 // 2, w)
        cv = cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420)
        d = np.abs(ops.yuv420_to_rgb(y, u, v).astype(int) - cv)
        assert d.max() <= 1 and np.mean(d > 0) < 0.05, (d.max(), np.mean(d > 0))


def test_bad_arguments() -> None:
    y = np.zeros((10, 12), np.uint8)
    u = np.zeros((5, 6), np.uint8)
    v = np.zeros((5, 6), np.uint8)
    with pytest.raises(TypeError, match="y must be a uint8"):
        ops.yuv420_to_rgb(y.astype(np.float32), u, v)
    with pytest.raises(TypeError, match="v must be a uint8"):
        ops.yuv420_to_rgb(y, u, v.astype(np.uint16))
    with pytest.raises(TypeError, match="u must be a numpy array"):
        ops.yuv420_to_rgb(y, [[0]], v)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="u plane must be 5x6"):
        ops.yuv420_to_rgb(y, np.zeros((5, 5), np.uint8), v)
    with pytest.raises(ValueError, match="v plane must be 5x6"):
        ops.yuv420_to_rgb(y, u, np.zeros((6, 6), np.uint8))
    with pytest.raises(ValueError, match="y must be a 2-D"):
        ops.yuv420_to_rgb(np.zeros((10, 12, 1), np.uint8), u, v)
    with pytest.raises(ValueError, match="u must have adjacent pixels"):
        ops.yuv420_to_rgb(y, np.zeros((5, 12), np.uint8)[:, ::2], v)
    with pytest.raises(ValueError, match="y plane is empty"):
        ops.yuv420_to_rgb(np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.uint8), np.zeros((0, 0), np.uint8))
    with pytest.raises(ValueError, match="roi"):
        ops.yuv420_to_rgb(y, u, v, roi=(8, 0, 5, 2))
    with pytest.raises(ValueError, match="roi"):
        ops.yuv420_to_rgb(y, u, v, roi=(-1, 0, 2, 2))
    with pytest.raises(TypeError, match="roi"):
        ops.yuv420_to_rgb(y, u, v, roi=(0, 0, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="matrix"):
        ops.yuv420_to_rgb(y, u, v, matrix="bt2020")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        ops.yuv420_to_rgb(y, u, v, device="tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out must be a \\(10, 12, 3\\)"):
        ops.yuv420_to_rgb(y, u, v, np.zeros((10, 12, 4), np.uint8))
    with pytest.raises(ValueError, match="out must be a \\(2, 3, 3\\)"):
        ops.yuv420_to_rgb(y, u, v, np.zeros((10, 12, 3), np.uint8), roi=(0, 0, 3, 2))
    with pytest.raises(TypeError, match="out must be a uint8"):
        ops.yuv420_to_rgb(y, u, v, np.zeros((10, 12, 3), np.float32))
    with pytest.raises(TypeError, match="out must be a numpy array"):
        ops.yuv420_to_rgb(y, u, v, [0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        ops.yuv420_to_rgb(y, u, v, np.zeros((10, 24, 3), np.uint8)[:, ::2])
    buf = np.zeros(500, np.uint8)  # y: 10 rows of 12 in a stride of 20; out from byte 130, inside y's span
    with pytest.raises(ValueError, match="share memory"):
        ops.yuv420_to_rgb(buf[:200].reshape(10, 20)[:, :12], u, v, buf[130:490].reshape(10, 12, 3))
    with pytest.raises(ValueError, match="writeable"):
        ro = np.zeros((10, 12, 3), np.uint8)
        ro.flags.writeable = False
        ops.yuv420_to_rgb(y, u, v, ro)
