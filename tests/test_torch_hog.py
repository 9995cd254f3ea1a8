"""OpenCV's HOG people detector on torch (:class:`mime_fast.detect.hog.TorchHogPersons`) against
OpenCV 4.x's ``cv2.HOGDescriptor`` -- live where cv2 has it, and against the stored cv2 results of
``tests/data/hog_golden.npz`` (written by ``bench/make_hog_golden.py`` with OpenCV 4.14) everywhere,
so the comparison also runs where OpenCV (5.x) has no HOG.

Every comparison runs on "cpu" and, where torch sees a GPU, on "cuda"; with
``MIME_FAST_REQUIRE_CUDA=1`` a missing GPU fails the cuda cases.  Without torch the module skips.

Measured on cpu (torch 2.13, OpenCV 4.14; frames: crowd_1080p 0/40/80/100, two_people_hug_1080p
0/20/40/60, scikit-image astronaut and rocket: 16 persons), against the thresholds set here:

==================================  ==============================  ===========================
quantity                            measured (cpu)                  threshold
==================================  ==============================  ===========================
pyramid levels vs INTER_LINEAR_EXACT  equal                         equal
gray vs cvtColor(RGB2GRAY)          equal                           equal
descriptor (64 x 128 windows)       <= 3e-7 (values up to 0.58)     <= 1e-5
detectMultiScale rects (same gray)  equal on 10 / 10 frames        same count, IoU >= 0.8
detectMultiScale weights            <= 6.5e-6                       <= 1e-3
detect() vs HogPersonDetector       same boxes (0 px), scores       same count, IoU >= 0.8,
(and vs the golden file)            <= 4.2e-6                       scores within 1e-3
==================================  ==============================  ===========================

Time per 1080p frame (640 px pyramid, 22 levels) on this loaded 2-core machine: cv2 82 ms, torch
CPU 331 ms with one torch thread (medians over the 10 frames).
==================================  ==============================  ===========================

No synthetic image of upright people is used (none ships with the test dependencies); the two
scikit-image photographs give one (false-positive) detection each, which exercises the same code.
"""

from __future__ import annotations

import os
import runpy
import zlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mime_fast.detect.hog import TorchHogPersons, pyramid_levels, resize_linear_exact, rgb_to_gray_u8  # noqa: E402

REQUIRE_CUDA = os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1"
ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "hog_golden.npz"
IOU_MIN, SCORE_TOL, WEIGHT_TOL, DESC_TOL = 0.8, 1e-3, 1e-3, 1e-5

try:
    import cv2

    HAS_CV2_HOG = hasattr(cv2, "HOGDescriptor")
except ImportError:  # pragma: no cover - cv2 is a core test dependency
    cv2 = None
    HAS_CV2_HOG = False
needs_cv2_hog = pytest.mark.skipif(not HAS_CV2_HOG, reason="this OpenCV has no HOGDescriptor (5.x): golden file only")

DEVICES = ["cpu"] + (["cuda"] if REQUIRE_CUDA or torch.cuda.is_available() else [])
_DETECTORS: dict = {}


@pytest.fixture(params=DEVICES)
def det(request) -> TorchHogPersons:
    device = request.param
    if device == "cuda" and not torch.cuda.is_available():
        msg = f"torch {torch.__version__} sees no CUDA device"
        if REQUIRE_CUDA:
            pytest.fail(f"CUDA required (MIME_FAST_REQUIRE_CUDA=1): {msg}")
        pytest.skip(msg)
    if device not in _DETECTORS:
        _DETECTORS[device] = TorchHogPersons(device=device)
    return _DETECTORS[device]


def _cv2_hog():
    h = cv2.HOGDescriptor()
    h.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    return h


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(len(a), len(b))`` IoU of x0 y0 x1 y1 boxes."""
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = lambda r: (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def _assert_same_boxes(boxes, scores, ref_boxes, ref_scores, what: str, tol: float = SCORE_TOL) -> None:
    """Same count; each reference box matched (greedy by IoU) to a distinct box with IoU >= 0.8 and
    a score within ``tol``."""
    boxes, ref_boxes = np.asarray(boxes, np.float64).reshape(-1, 4), np.asarray(ref_boxes, np.float64).reshape(-1, 4)
    assert len(boxes) == len(ref_boxes), f"{what}: {len(boxes)} boxes, OpenCV {len(ref_boxes)}\n{boxes}\n{ref_boxes}"
    if not len(boxes):
        return
    iou = _iou(ref_boxes, boxes)
    used: set = set()
    for i in np.argsort(-iou.max(1)):
        j = max((j for j in range(len(boxes)) if j not in used), key=lambda j: iou[i, j])
        used.add(j)
        assert iou[i, j] >= IOU_MIN, f"{what}: box {ref_boxes[i]} best match {boxes[j]} IoU {iou[i, j]:.3f}"
        assert abs(float(scores[j]) - float(ref_scores[i])) <= tol, f"{what}: score {scores[j]} vs {ref_scores[i]}"


def _rects_to_boxes(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, np.float64).reshape(-1, 4)
    return np.concatenate([r[:, :2], r[:, :2] + r[:, 2:]], 1)


# ---- pieces


def test_svm_file_is_opencvs_people_detector():
    from mime_fast.detect.hog import hog_people_svm

    w = hog_people_svm()
    assert w.shape == (3781,) and w.dtype == np.float32
    if HAS_CV2_HOG:
        np.testing.assert_array_equal(w, cv2.HOGDescriptor_getDefaultPeopleDetector().reshape(-1))


@needs_cv2_hog  # OpenCV 4.x is the reference
def test_pyramid_resize_is_bit_exact(det):
    rng = np.random.default_rng(5)
    for H, W in ((360, 640), (337, 600), (129, 65)):
        img = rng.integers(0, 256, (H, W), np.uint8)
        x = torch.from_numpy(img)[None].to(det.device, torch.int32)
        for _, w, h in pyramid_levels(W, H):
            ref = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)
            np.testing.assert_array_equal(resize_linear_exact(x, (h, w))[0].cpu().numpy(), ref)


@needs_cv2_hog
def test_resize_coefficients_kept_are_bounded(det, monkeypatch):
    """The axis coefficients are kept for the last COEFF_CACHE_SIZE resizes (a corpus's frames come
    in many sizes); dropped and made again, they give the same bits."""
    from mime_fast.detect import hog

    monkeypatch.setattr(hog, "COEFF_CACHE_SIZE", 4)
    monkeypatch.setattr(hog, "_COEFF_CACHE", {})
    img = np.random.default_rng(8).integers(0, 256, (150, 200), np.uint8)
    x = torch.from_numpy(img)[None].to(det.device, torch.int32)
    for _ in range(2):
        for w, h in ((190, 140), (180, 130), (170, 120), (160, 110), (190, 140)):
            ref = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)
            np.testing.assert_array_equal(resize_linear_exact(x, (h, w))[0].cpu().numpy(), ref)
            assert len(hog._COEFF_CACHE) <= 4
    assert (200, 190, x.device) in hog._COEFF_CACHE  # the last used are kept


@needs_cv2_hog  # OpenCV 4.x is the reference (5.x may round its colour conversions differently)
def test_gray_is_cvtcolor(det):
    rgb = np.random.default_rng(6).integers(0, 256, (90, 130, 3), np.uint8)
    g = rgb_to_gray_u8(torch.from_numpy(rgb).permute(2, 0, 1)[None].to(det.device))[0].cpu().numpy()
    np.testing.assert_array_equal(g, cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))


def test_pyramid_levels():
    lv = pyramid_levels(640, 360)
    assert lv[0] == (1.0, 640, 360) and all(h >= 128 and w >= 64 for _, w, h in lv)
    assert len(lv) == 22 and abs(lv[-1][0] - 1.05 ** 21) < 1e-9


@needs_cv2_hog
def test_descriptor_matches_cv2(det):
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, (6, 128, 64), np.uint8)
    smooth = cv2.GaussianBlur(rng.integers(0, 256, (128 * 6, 64), np.uint8), (0, 0), 3).reshape(6, 128, 64)
    flat = np.full((1, 128, 64), 77, np.uint8)  # zero gradients everywhere
    hog = cv2.HOGDescriptor()
    for wins in (noise, smooth, flat):
        d = det.descriptor(wins)
        ref = np.stack([hog.compute(w).reshape(-1) for w in wins])
        assert d.shape == ref.shape == (len(wins), 3780)
        assert np.abs(d - ref).max() <= DESC_TOL, np.abs(d - ref).max()
    assert det.descriptor(noise[0]).shape == (3780,)


# ---- detections


@pytest.fixture(scope="module")
def golden() -> dict:
    z = np.load(GOLDEN)
    return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def golden_frames(request) -> list:
    """``(source, frame)`` in the golden file's order (decoded by bench/make_hog_golden.py's code)
    from ``$MIME_FAST_MEDIA_DIR`` (as tests/test_torch_models.py) or ``shared_media``."""
    d = os.environ.get("MIME_FAST_MEDIA_DIR")
    media = Path(d) if d and (Path(d) / "crowd_1080p.mp4").is_file() else request.getfixturevalue("shared_media")
    mod = runpy.run_path(str(ROOT / "bench" / "make_hog_golden.py"))
    return mod["golden_frames"](media)


def _split(golden: dict, key: str, count: str) -> list:
    ends = np.cumsum(golden[count])
    return np.split(golden[key], ends[:-1])


def test_golden_file_is_small_and_consistent(golden):
    assert GOLDEN.stat().st_size < 200_000
    assert len(golden["sources"]) == len(golden["n"]) == len(golden["crc"]) == 10
    assert golden["n"].sum() == len(golden["boxes"]) == 16 and str(golden["opencv"]).startswith("4.")


_DETECTIONS: dict = {}


def _detections(det, golden_frames) -> list:
    """``det.detect`` of every golden frame, once per device (the CPU pyramid takes a while)."""
    key = str(det.device)
    if key not in _DETECTIONS:
        _DETECTIONS[key] = [det.detect(f) for _, f in golden_frames]
    return _DETECTIONS[key]


#: frames with detections for the costlier checks (raw rects, batch)
SUBSET = (2, 4, 8)


@pytest.mark.slow
def test_detect_matches_golden(det, golden, golden_frames):
    """TorchHogPersons.detect against OpenCV 4.14's HogPersonDetector results stored in the golden file."""
    boxes, scores = _split(golden, "boxes", "n"), _split(golden, "scores", "n")
    crc_notes = []
    for k, ((src, frame), p) in enumerate(zip(golden_frames, _detections(det, golden_frames))):
        assert src == golden["sources"][k]
        if zlib.crc32(frame.tobytes()) != int(golden["crc"][k]):
            crc_notes.append(src)
        _assert_same_boxes(p.boxes, p.scores, boxes[k], scores[k],
                           f"{src} [{det.device}]" + (f" (decoded frames differ from the golden's: {crc_notes})"
                                                      if crc_notes else ""))


@pytest.mark.slow
def test_detect_gray_matches_golden_rects(det, golden, golden_frames):
    """The raw detectMultiScale output (640 px gray) against the stored cv2 rects and weights."""
    from mime_fast.detect.interface import _downscale

    if cv2 is None:
        pytest.skip("the CPU downscale needs OpenCV")
    rects, weights = _split(golden, "rects", "n_raw"), _split(golden, "weights", "n_raw")
    for k in SUBSET:
        src, frame = golden_frames[k]
        small, _ = _downscale(frame, 640)
        # (the gray as OpenCV 4.x makes it, whatever OpenCV is installed: test_gray_is_cvtcolor)
        gray = rgb_to_gray_u8(torch.from_numpy(np.ascontiguousarray(small)).permute(2, 0, 1)[None])[0].numpy()
        (r, w), = det.detect_gray(gray)
        _assert_same_boxes(_rects_to_boxes(r), w, _rects_to_boxes(rects[k]), weights[k], f"{src} [{det.device}]",
                           tol=WEIGHT_TOL)


@pytest.mark.slow
@needs_cv2_hog
def test_detect_matches_cv2_live(det, golden_frames):
    """Against cv2 itself (HogPersonDetector with OpenCV 4.x), on the golden frames and a batch."""
    from mime_fast.detect.models import HogPersonDetector

    cpu = HogPersonDetector()
    assert cpu.backend == "opencv"
    dets = _detections(det, golden_frames)
    for (src, frame), p in zip(golden_frames, dets):
        ref = cpu.detect(frame)
        _assert_same_boxes(p.boxes, p.scores, ref.boxes, ref.scores, f"{src} [{det.device}]")
    # batched (frames of one size share the pyramid) == one by one
    batch = det.detect_batch([golden_frames[k][1] for k in SUBSET])
    for k, pb in zip(SUBSET, batch):
        np.testing.assert_allclose(pb.boxes, dets[k].boxes, atol=1e-3)
        np.testing.assert_allclose(pb.scores, dets[k].scores, atol=1e-5)


def test_detect_batch_tensor_and_empty(det):
    x = torch.zeros(2, 200, 150, 3, dtype=torch.uint8)  # flat frames: no gradients, no people
    out = det.detect_batch(x.to(det.device))
    assert len(out) == 2 and all(len(p) == 0 and p.boxes.shape == (0, 4) for p in out)


def test_hog_person_detector_falls_back_to_torch(monkeypatch):
    """Where cv2 has no HOGDescriptor (OpenCV 5), HogPersonDetector runs the torch port on the CPU."""
    import sys
    import types

    from mime_fast.detect.models import HogPersonDetector

    fake = types.SimpleNamespace(__version__="5.0.0")
    monkeypatch.setitem(sys.modules, "cv2", fake)
    d = HogPersonDetector()
    assert d.backend == "torch" and isinstance(d._torch, TorchHogPersons) and d._torch.device.type == "cpu"
    p = d.detect(np.zeros((150, 100, 3), np.uint8))  # fits max_size: no cv2 call
    assert len(p) == 0


def test_load_torch_stack_uses_torch_hog(monkeypatch):
    from mime_fast.detect import torch_models as tm

    for name in ("TorchRetinaFace", "TorchFaceMesh", "TorchSFace"):
        monkeypatch.setattr(tm, name, lambda device="cpu", graphs=None: object())
    st = tm.load_torch_stack("cpu")
    assert isinstance(st.persons, TorchHogPersons) and st.persons.device.type == "cpu"
