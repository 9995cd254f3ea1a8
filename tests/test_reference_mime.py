"""bench/reference_mime.py, the straightforward MIME pipeline bench_vs_reference.py measures the
engine against, computes what the engine computes: on a short clip, with the same landmarks and
kernels, its masks match the engine's and its blurred regions agree within encoding noise."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import mime_fast
from mime_fast.landmarks import as_provider
from mime_fast.samples import make_clip
from mime_fast.media import probe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from reference_mime import blurred_region_psnr, reference_mask, reference_subsets  # noqa: E402


def test_reference_mask_covers_the_hull_like_the_engine(astronaut_face_points) -> None:
    shape = (512, 512)
    ref = reference_mask(astronaut_face_points, shape)
    hull, _ = mime_fast.ops.hull_mask(astronaut_face_points, shape, feather=0.0)
    eng, _ = mime_fast.ops.hull_mask(astronaut_face_points, shape)
    assert ref[hull == 255].min() >= 245  # (nearly) fully blurred inside the hull, as the engine
    iou = ((ref > 127) & (eng > 127)).sum() / ((ref > 127) | (eng > 127)).sum()
    assert iou > 0.95


def test_reference_outputs_agree_with_the_engine(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "c.mp4", duration=0.6, fps=25, size=(640, 480), seed=7)
    prov = as_provider(clip.npz)
    eng = mime_fast.build_subsets(clip.path, tmp_path / "eng", landmarks=prov, fsm_kernel=35).outputs
    ref = reference_subsets(clip.path, tmp_path / "ref", prov, fsm_kernel=35)
    assert set(ref) == set(eng) == set(mime_fast.subsets.ALL_SUBSETS)
    for c in ref:  # same frames, duration and audio presence
        a, b = probe(ref[c]), probe(eng[c])
        assert (a.video_frames, a.duration, a.has_audio, a.width, a.height) == \
            (b.video_frames, b.duration, b.has_audio, b.width, b.height), c
    floor = blurred_region_psnr(ref["FM"], eng["FM"], clip.path, prov)
    for c in ("FDM", "FSM"):
        got = blurred_region_psnr(ref[c], eng[c], clip.path, prov)
        assert got["mask_iou"] > 0.95
        assert got["psnr_db"] > 35.0, (c, got, floor)
    # a kernel mismatch would show: the reference's light blur against the engine's heavy one
    assert blurred_region_psnr(ref["FDM"], eng["FSM"], clip.path, prov)["psnr_db"] < 33.0
    assert np.isfinite(floor["psnr_db"])
