"""ops.rgb_to_yuv420: BT.601 limited-range RGB -> YUV 4:2:0 in fixed point, checked against an
independent numpy transcription of the formulas, the CUDA kernel's per-block code (run on the
CPU), swscale (FFmpeg's converter) and the encoder path of the pipeline."""

from __future__ import annotations

import av
import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import _core, ops
from mime_fast.frames import copy_frame, patched_frame, yuv420_frame, yuv420_planes


MATRICES = {  # Q16 coefficients: Y (R, G, B), Cb (R, G, B), Cr (R, G, B)
    "bt601": ((16829, 33039, 6416), (-9714, -19070, 28784), (28784, -24103, -4681)),
    "bt709": ((11966, 40254, 4064), (-6596, -22188, 28784), (28784, -26145, -2639)),
}


def reference(rgb: np.ndarray, matrix: str = "bt601") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documented formulas, in int64 numpy: luma per pixel, chroma over each 2x2 block with the
    last row / column repeated at odd edges."""
    (yr, yg, yb), (ur, ug, ub), (vr, vg, vb) = MATRICES[matrix]
    h, w = rgb.shape[:2]
    c = rgb[..., :3].astype(np.int64)
    r, g, b = c[..., 0], c[..., 1], c[..., 2]
    y = (yr * r + yg * g + yb * b + (16 << 16) + (1 << 15)) >> 16
    pad = np.pad(c, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    s = pad.reshape(pad.shape[0] // 2, 2, pad.shape[1] // 2, 2, 3).sum(axis=(1, 3))
    r4, g4, b4 = s[..., 0], s[..., 1], s[..., 2]
    u = (ur * r4 + ug * g4 + ub * b4 + (128 << 18) + (1 << 17)) >> 18
    v = (vr * r4 + vg * g4 + vb * b4 + (128 << 18) + (1 << 17)) >> 18
    return tuple(a.astype(np.uint8) for a in (y, u, v))  # type: ignore[return-value]


def assert_planes(got, expected) -> None:
    for g, e in zip(got, expected):
        assert_images_equal(g, e)


SIZES = [(1, 1), (1, 7), (6, 1), (2, 2), (3, 5), (17, 33), (240, 320), (241, 319)]


@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_equals_the_formulas_and_the_cuda_body(rng: np.random.Generator, size, matrix) -> None:
    rgb = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
    got = ops.rgb_to_yuv420(rgb, matrix=matrix)
    half = ((size[0] + 1) // 2, (size[1] + 1) // 2)
    assert [p.shape for p in got] == [size, half, half]
    assert_planes(got, reference(rgb, matrix))
    ref = [np.zeros_like(p) for p in got]
    _core.rgb_to_yuv420_reference(rgb, *ref, matrix=matrix)
    assert_planes(got, ref)


def test_matrices_sum_to_the_limited_range() -> None:
    for (y, u, v) in MATRICES.values():
        assert sum(u) == sum(v) == 0  # grey -> Cb = Cr = 128
        assert (sum(y) * 255 + (1 << 15)) >> 16 == 219  # white -> Y = 235


def test_rgbx_ignores_the_fourth_channel(rng: np.random.Generator) -> None:
    rgbx = rng.integers(0, 256, (45, 61, 4), dtype=np.uint8)
    assert_planes(ops.rgb_to_yuv420(rgbx), reference(np.ascontiguousarray(rgbx[..., :3])))


def test_extremes_and_grey() -> None:
    # every 8-bit grey maps to Cb = Cr = 128 exactly (the chroma rows sum to zero); black and
    # white to the ends of the limited range; the primaries to BT.601's values
    grey = np.repeat(np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], 2, 0), 6, 1).repeat(3, 2)
    y, u, v = ops.rgb_to_yuv420(np.ascontiguousarray(grey))
    assert np.all(u == 128) and np.all(v == 128)
    assert y[0, 0] == 16 and y[-1, 0] == 235 and np.all(np.diff(y[::2, 0].astype(int)) >= 0)
    prim = np.zeros((2, 6, 3), np.uint8)
    prim[:, 0:2, 0] = 255
    prim[:, 2:4, 1] = 255
    prim[:, 4:6, 2] = 255
    y, u, v = ops.rgb_to_yuv420(prim)
    assert y[0].tolist() == [81, 81, 145, 145, 41, 41]  # 16 + 219 * (0.299, 0.587, 0.114), rounded
    assert u[0].tolist() == [90, 54, 240] and v[0].tolist() == [240, 34, 110]


@pytest.mark.parametrize("matrix,colorspace", [("bt601", "ITU601"), ("bt709", "ITU709")])
def test_close_to_swscale(astronaut: np.ndarray, matrix: str, colorspace: str) -> None:
    # FFmpeg's converter (what PyAV uses) agrees within one level on luma; chroma differs only by
    # its filter (swscale's chroma siting and vertical filter), a few levels on a natural image
    y, u, v = ops.rgb_to_yuv420(astronaut, matrix=matrix)
    sw = av.VideoFrame.from_ndarray(astronaut, format="rgb24").reformat(format="yuv420p", dst_colorspace=colorspace)
    ys, us, vs = (p.copy() for p in yuv420_planes(sw))
    assert np.abs(y.astype(int) - ys).max() <= 1
    for a, b in ((u, us), (v, vs)):
        d = np.abs(a.astype(int) - b)
        assert np.median(d) <= 1 and np.percentile(d, 99) <= 6


def test_region_writes_only_its_blocks(rng: np.random.Generator) -> None:
    rgb = rng.integers(0, 256, (73, 91, 3), dtype=np.uint8)
    full = ops.rgb_to_yuv420(rgb)
    for roi in [(0, 0, 1, 1), (5, 8, 20, 11), (30, 31, 61, 42), (90, 72, 1, 1), (0, 0, 91, 73)]:
        planes = [np.full(p.shape, 3, np.uint8) for p in full]
        ops.rgb_to_yuv420(rgb, planes, roi=roi)
        x, y, w, h = roi
        cx0, cy0, cx1, cy1 = x // 2, y // 2, (x + w + 1) // 2, (y + h + 1) // 2  # covering blocks
        for i, (got, want) in enumerate(zip(planes, full)):
            f = 1 if i else 2  # luma: two rows / columns per block
            inside = np.zeros(want.shape, bool)
            inside[cy0 * f : cy1 * f, cx0 * f : cx1 * f] = True
            assert np.array_equal(got[inside], want[inside]), (roi, i)
            assert np.all(got[~inside] == 3), (roi, i)
        ref = [np.full(p.shape, 3, np.uint8) for p in full]
        _core.rgb_to_yuv420_reference(rgb, *ref, roi=roi)
        assert_planes(planes, ref)


@pytest.mark.parametrize("size", [(73, 91), (64, 80)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_mask_selects_what_is_written(rng: np.random.Generator, size) -> None:
    # luma where the mask is non-zero, chroma where any pixel of the block is; the rest keeps the
    # planes' values; odd sizes take the partial blocks at the edges
    h, w = size
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    mask = np.where(rng.random((h, w)) < 0.3, rng.integers(1, 256, (h, w)), 0).astype(np.uint8)
    mask[:10] = 0  # whole blocks unselected
    full = reference(rgb)
    ch, cw = full[1].shape
    sel = mask != 0
    pad = np.pad(sel, ((0, h % 2), (0, w % 2)))
    block_any = pad.reshape(ch, 2, cw, 2).any(axis=(1, 3))
    for roi in [None, (5, 8, 40, 31), (0, 0, w, h), (w - 3, h - 5, 3, 5)]:
        planes = [np.full(p.shape, 7, np.uint8) for p in full]
        ops.rgb_to_yuv420(rgb, planes, roi=roi, mask=mask)
        x, y, rw, rh = roi or (0, 0, w, h)
        cx0, cy0, cx1, cy1 = x // 2, y // 2, (x + rw + 1) // 2, (y + rh + 1) // 2
        in_y = np.zeros((h, w), bool)
        in_y[2 * cy0 : 2 * cy1, 2 * cx0 : 2 * cx1] = True
        in_c = np.zeros((ch, cw), bool)
        in_c[cy0:cy1, cx0:cx1] = True
        want_y = np.where(in_y & sel, full[0], 7)
        assert_images_equal(planes[0], want_y.astype(np.uint8))
        for got, want in zip(planes[1:], full[1:]):
            assert_images_equal(got, np.where(in_c & block_any, want, 7).astype(np.uint8))
        ref = [np.full(p.shape, 7, np.uint8) for p in full]
        _core.rgb_to_yuv420_reference(rgb, *ref, roi=roi, mask=mask)
        assert_planes(planes, ref)
    # an all-zero mask writes nothing, a full one everything
    planes = [np.full(p.shape, 7, np.uint8) for p in full]
    ops.rgb_to_yuv420(rgb, planes, mask=np.zeros((h, w), np.uint8))
    assert all(np.all(p == 7) for p in planes)
    ops.rgb_to_yuv420(rgb, planes, mask=np.full((h, w), 255, np.uint8))
    assert_planes(planes, full)


def test_padded_planes_of_a_video_frame(rng: np.random.Generator) -> None:
    # av.VideoFrame planes have padded rows: written through strided views
    rgb = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    vf = av.VideoFrame(70, 50, "yuv420p")
    assert vf.planes[0].line_size > 70  # padded
    ops.rgb_to_yuv420(rgb, yuv420_planes(vf))
    assert_planes(yuv420_planes(vf), reference(rgb))


@pytest.mark.parametrize("shift", [(0, 0), (300, 295)], ids=["inside", "past-the-odd-edge"])
def test_patched_frame_converts_only_what_the_mask_touches(astronaut: np.ndarray, astronaut_face_points, shift) -> None:
    # the pipeline's shortcut: copy the source's planes and convert, from the blurred region alone,
    # only the pixels the mask touches (luma) and the blocks with any such pixel (chroma)
    src = np.ascontiguousarray(astronaut[:511, :509])  # odd: cropped to 510 x 508 for the encoder
    pts = astronaut_face_points + np.array(shift, np.float64)
    mask, (x, y, w, h) = ops.hull_mask(pts, src.shape[:2])
    base = yuv420_frame(src)
    base_planes = [p.copy() for p in yuv420_planes(base)]
    r = 28
    x0, y0 = max(0, x - r) // 2 * 2, max(0, y - r) // 2 * 2
    x1, y1 = min(509, x + w + r), min(511, y + h + r)
    if shift != (0, 0):
        assert (x1, y1) == (509, 511)  # the region reaches the odd edges the encoder drops
    touched = mask[:510, :508] > 0
    touched4 = touched.reshape(255, 2, 254, 2).any(axis=(1, 3))
    for k in (15, 55):
        level = ops.blur_in_mask(src, mask, k, bbox=(x, y, w, h))[0]  # the whole frame's blur
        region = np.ascontiguousarray(level[y0:y1, x0:x1])
        patched = patched_frame(base, region, (x0, y0), (x - x0, y - y0, w, h),
                                      np.ascontiguousarray(mask[y0:y1, x0:x1]))
        assert patched is not base and (patched.width, patched.height) == (508, 510)
        conv = reference(level[:510, :508])
        want = (np.where(touched, conv[0], base_planes[0]), np.where(touched4, conv[1], base_planes[1]),
                np.where(touched4, conv[2], base_planes[2]))
        assert_planes(yuv420_planes(patched), want)
        assert_planes(yuv420_planes(base), base_planes)  # the base is left as it was
    copy = copy_frame(base)
    assert copy is not base
    assert_planes(yuv420_planes(copy), base_planes)
    with pytest.raises(ValueError, match="even"):
        patched_frame(base, region, (x0 + 1, y0), (0, 0, 2, 2), np.ascontiguousarray(mask[y0:y1, x0:x1]))


def test_bad_arguments() -> None:
    rgb = np.zeros((10, 12, 3), np.uint8)
    y, u, v = ops.rgb_to_yuv420(rgb)
    with pytest.raises(TypeError, match="uint8"):
        ops.rgb_to_yuv420(rgb.astype(np.float32))
    with pytest.raises(ValueError, match="RGB"):
        ops.rgb_to_yuv420(np.zeros((10, 12), np.uint8))
    with pytest.raises(ValueError, match="3 \\(RGB\\) or 4"):
        ops.rgb_to_yuv420(np.zeros((10, 12, 2), np.uint8))
    with pytest.raises(ValueError, match="u plane must be 5x6"):
        ops.rgb_to_yuv420(rgb, (y, np.zeros((5, 5), np.uint8), v))
    with pytest.raises(ValueError, match="roi"):
        ops.rgb_to_yuv420(rgb, (y, u, v), roi=(8, 0, 5, 2))
    with pytest.raises(ValueError, match="matrix"):
        ops.rgb_to_yuv420(rgb, matrix="bt2020")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out="):
        ops.rgb_to_yuv420(rgb, roi=(0, 0, 2, 2))
    with pytest.raises(ValueError, match="share memory"):
        ops.rgb_to_yuv420(rgb, (rgb.reshape(-1)[:120].reshape(10, 12), u, v))
    with pytest.raises(ValueError, match="mask must be 10x12"):
        ops.rgb_to_yuv420(rgb, (y, u, v), mask=np.zeros((10, 11), np.uint8))
    with pytest.raises(TypeError, match="mask must be a uint8"):
        ops.rgb_to_yuv420(rgb, (y, u, v), mask=np.zeros((10, 12), np.float32))
    with pytest.raises(ValueError, match="mask needs out="):
        ops.rgb_to_yuv420(rgb, mask=np.zeros((10, 12), np.uint8))
    with pytest.raises(ValueError, match="writeable"):
        y.flags.writeable = False
        ops.rgb_to_yuv420(rgb, (y, u, v))
