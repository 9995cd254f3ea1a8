"""The fused per-frame step of the face subsets (hull mask, masked multi-level blur, back to
4:2:0 on the decoded planes): sample for sample what the separate operators give on the whole
frame, on the CPU and (``cuda`` marker) on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import ops


def _frame(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Limited-range 4:2:0 planes with texture at every scale (noise over gradients)."""
    ch, cw = (h + 1) // 2, (w + 1) // 2
    yy, xx = np.mgrid[0:h, 0:w]
    y = np.clip(16 + (xx * 3 + yy * 2) % 219 + rng.integers(-20, 21, (h, w)), 16, 235).astype(np.uint8)
    u = rng.integers(16, 241, (ch, cw), dtype=np.uint8)
    v = np.clip(128 + rng.integers(-60, 61, (ch, cw)), 16, 240).astype(np.uint8)
    return y, u, v


def _composed(planes, pts, ks, feather, margin, matrix):
    """The definition: the whole frame to RGB, the mask, the levels, each back to 4:2:0 inside the
    mask on a copy of the planes."""
    h, w = planes[0].shape
    rgb = ops.yuv420_to_rgb(*planes, matrix=matrix)
    mask, bbox = ops.hull_mask(pts, (h, w), feather=feather, margin=margin)
    outs = [tuple(p.copy() for p in planes) for _ in ks]
    if bbox[2] == 0:
        return outs, bbox
    levels = ops.blur_in_mask(rgb, mask, ks, bbox=bbox)
    for lv, o in zip(levels, outs):
        ops.rgb_to_yuv420(lv, o, matrix=matrix, mask=mask)
    return outs, bbox


def _fused(planes, pts, ks, feather, margin, matrix, device="cpu"):
    outs = [tuple(p.copy() for p in planes) for _ in ks]
    bbox = ops.blur_hull_yuv420(planes, pts, outs, ks, feather=feather, margin=margin, matrix=matrix, device=device)
    return outs, bbox


def _cases(rng: np.random.Generator, n: int):
    for trial in range(n):
        h, w = [(120, 160), (121, 163), (240, 320), (64, 64)][trial % 4]
        centre = rng.uniform([-30, -30], [w + 30, h + 30])
        pts = centre + rng.normal(size=(int(rng.integers(3, 60)), 2)) * rng.uniform(2, 50)
        ks = [[15], [15, 55], [35, 15], [15, 35, 55]][trial % 4]
        feather = None if trial % 3 else float(rng.uniform(0, 12))
        margin = float(rng.choice([0.0, 1.5, 4.0]))
        matrix = "bt709" if trial % 5 == 0 else "bt601"
        yield _frame(rng, h, w), pts, ks, feather, margin, matrix


def _assert_same(a, b, device="cpu"):
    for pa, pb in zip(a, b):
        for x, y in zip(pa, pb):
            assert_images_equal(x, y, device)


def test_fused_equals_the_operators_one_after_the_other(rng: np.random.Generator) -> None:
    changed = 0
    for planes, pts, ks, feather, margin, matrix in _cases(rng, 60):
        ref, rb = _composed(planes, pts, ks, feather, margin, matrix)
        got, gb = _fused(planes, pts, ks, feather, margin, matrix)
        _assert_same(got, ref)
        assert gb == rb
        changed += rb[2] > 0
    assert changed > 30  # most hulls reach into the frame


def test_fused_equals_the_pipelines_region_path(rng: np.random.Generator) -> None:
    """The path build_subsets took before the fused step (mask box grown by the blur radius,
    region converted and patched): the same samples."""
    import av

    from mime_fast.face_step import blur_region
    from mime_fast.options import Settings
    from mime_fast.frames import COLORSPACE, patched_frame, yuv420_planes

    for planes, pts, ks, feather, margin, matrix in _cases(rng, 24):
        h, w = planes[0].shape
        if h % 2 or w % 2:
            continue  # decoded yuv420p frames that pass through are even-sized
        st = Settings(feather=feather, margin=margin)
        vf = av.VideoFrame(w, h, "yuv420p")
        vf.colorspace = COLORSPACE[matrix]  # as decoded frames that pass through are tagged
        for dst, src in zip(yuv420_planes(vf), planes):
            np.copyto(dst, src)
        blurred = blur_region(ops, None, vf, (h, w), pts, ks, st, matrix)
        got, _ = _fused(planes, pts, ks, feather, margin, matrix)
        for i in range(len(ks)):
            ref = vf if blurred is None else patched_frame(vf, blurred.levels[i], blurred.origin, blurred.roi,
                                                           blurred.mask, matrix=matrix)
            for x, y in zip(got[i], yuv420_planes(ref)):
                assert_images_equal(x, y)


def test_padded_read_only_input_and_untouched_outside(rng: np.random.Generator) -> None:
    y, u, v = _frame(rng, 240, 320)
    big = [np.zeros((p.shape[0], p.shape[1] + 48), np.uint8) for p in (y, u, v)]
    for b, p in zip(big, (y, u, v)):
        b[:, : p.shape[1]] = p
    views = tuple(b[:, : p.shape[1]] for b, p in zip(big, (y, u, v)))
    for p in views:
        p.flags.writeable = False
    pts = np.array([[100, 60], [220, 70], [200, 190], [120, 180]], float)
    ref, rb = _composed((y, u, v), pts, [15, 55], None, 0.0, "bt601")
    got, gb = _fused(views, pts, [15, 55], None, 0.0, "bt601")
    _assert_same(got, ref)
    mask, _ = ops.hull_mask(pts, (240, 320))
    assert gb == rb
    # outside the mask (and its chroma blocks) every sample is the input's
    assert np.array_equal(got[1][0][mask == 0], y[mask == 0])
    assert not np.array_equal(got[1][0], y)


def test_hull_outside_the_frame_changes_nothing(rng: np.random.Generator) -> None:
    planes = _frame(rng, 120, 160)
    got, bbox = _fused(planes, np.array([[500.0, 500], [600, 520], [560, 640]]), [15], None, 0.0, "bt601")
    assert bbox == (0, 0, 0, 0)
    _assert_same(got, [planes])


def test_arguments_are_checked(rng: np.random.Generator) -> None:
    planes = _frame(rng, 120, 160)
    pts = np.array([[10.0, 10], [80, 12], [40, 90]])
    outs = [tuple(p.copy() for p in planes)]
    with pytest.raises(ValueError, match="distinct"):
        ops.blur_hull_yuv420(planes, pts, outs * 2, [15, 15])
    with pytest.raises(ValueError, match="one output"):
        ops.blur_hull_yuv420(planes, pts, outs, [15, 35])
    with pytest.raises(ValueError, match="share memory"):
        ops.blur_hull_yuv420(planes, pts, [planes], [15])
    with pytest.raises(ValueError, match="odd|kernel|ksize"):
        ops.blur_hull_yuv420(planes, pts, outs, [14])
    with pytest.raises(ValueError, match="plane"):
        ops.blur_hull_yuv420(planes, pts, [(planes[0].copy(), planes[1][:10].copy(), planes[2].copy())], [15])
    with pytest.raises(ValueError, match="collinear"):
        ops.blur_hull_yuv420(planes, np.array([[0.0, 0], [1, 1], [2, 2]]), outs, [15])
    with pytest.raises(ValueError, match="matrix"):
        ops.blur_hull_yuv420(planes, pts, outs, [15], matrix="bt2020")


@pytest.mark.cuda
def test_cuda_fused_equals_cpu(rng: np.random.Generator) -> None:
    for planes, pts, ks, feather, margin, matrix in _cases(rng, 80):
        cpu, cb = _fused(planes, pts, ks, feather, margin, matrix)
        gpu, gb = _fused(planes, pts, ks, feather, margin, matrix, device="cuda")
        _assert_same(gpu, cpu, "cuda")
        assert gb == cb


@pytest.mark.cuda
def test_cuda_fused_reuses_its_buffers(rng: np.random.Generator) -> None:
    """Frames of growing and shrinking size through one thread's workspace: same results, and the
    device memory in use does not grow once the largest frame has been seen."""
    import mime_fast._core as core

    sizes = [(720, 1280), (240, 320), (1080, 1920), (121, 163), (1080, 1920)]
    pts0 = np.array([[0.3, 0.25], [0.7, 0.3], [0.65, 0.8], [0.35, 0.75]])
    free = []
    for rep in range(3):
        for h, w in sizes:
            planes = _frame(rng, h, w)
            pts = pts0 * [w, h]
            cpu, _ = _fused(planes, pts, [15, 55], None, 0.0, "bt601")
            gpu, _ = _fused(planes, pts, [15, 55], None, 0.0, "bt601", device="cuda")
            _assert_same(gpu, cpu, "cuda")
        free.append(core.cuda_memory()[0])
    assert free[2] >= free[1] - (1 << 20), f"device memory in use grew: free {free}"
