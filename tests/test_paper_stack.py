"""The paper stack (mime_fast.detect.paper) on generated ONNX models with the real models' signatures
(tests/onnx_fakes.py): geometry against analytically known results, and equality with insightface's
own SCRFD / Landmark / ArcFaceONNX classes run on the same model files and images."""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
import warnings

import numpy as np
import pytest

from conftest import import_for_models, models_unavailable  # noqa: E402

cv2 = import_for_models("cv2", module_level=True)
import_for_models("onnx", module_level=True)
import_for_models("onnxruntime", module_level=True)

import onnx_fakes as fakes  # noqa: E402

from mime_fast.detect import stacks as mf_stacks  # noqa: E402
from mime_fast.cli import main  # noqa: E402
from mime_fast.detect import (
    ARCFACE_DST, ArcFaceEmbedder, FaceDetector, FaceEmbedder, Faces, HogPersonDetector, Landmark106,
    LandmarkModel, ModelNotAvailable, PersonDetector, ScrfdDetector, YoloV8PersonDetector, arcface_transform,
    find_paper_models, landmark106_quality, load_paper_stack, load_stack, nms, stack_choice
)
from mime_fast.subject import track_clip
from mime_fast.detect import stacks  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Folder with the four fakes under the real names, plus variants."""
    d = fakes.write_paper_models(tmp_path_factory.mktemp("paper_models"))
    fakes.scrfd(d / "variants_scrfd_batched.onnx", batched=True)
    fakes.scrfd(d / "variants_scrfd_nokps.onnx", kps=False)
    fakes.landmark106(d / "variants_lmk_normalised.onnx", normalised_input=True)
    fakes.arcface(d / "variants_arcface_selfnorm.onnx", self_normalising=True)
    fakes.arcface(d / "variants_arcface_128.onnx", dim=128)
    fakes.yolov8(d / "variants_yolo_nc1.onnx", nc=1)
    return d


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No model variables, and a HOME without ~/.insightface."""
    for var in ("MIME_FAST_MODELS", "MIME_FAST_YOLO", "MIME_FAST_STACK"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def insightface_class(module: str, name: str):
    """insightface 2.1's class (installed --no-deps; model_zoo needs onnx, skimage, cv2, requests)."""
    return getattr(import_for_models(f"insightface.model_zoo.{module}"), name)


def ours_and_theirs(ours_cls, module: str, name: str, model_path):
    """Our model class and insightface's on the same ONNX file, after checking that they read the
    same input normalisation from it."""
    theirs = insightface_class(module, name)(str(model_path))
    ours = ours_cls(model_path)
    assert (ours.input_mean, ours.input_std) == (theirs.input_mean, theirs.input_std)
    return ours, theirs


class InsightFace(dict):
    """insightface's Face: a dict with attribute access."""

    __getattr__ = dict.__getitem__


# --------------------------------------------------------------------------------------------------
# SCRFD


def scrfd_scale(h: int, w: int, size: int = 640) -> float:
    """insightface's det_scale for a square det_size."""
    if h / w > 1:
        return size / h
    return int(size * h / w) / h


def face_square(frame: np.ndarray, det_centre, side_det: float, det_scale: float, value: int = 255):
    """Draw the square that the fake SCRFD sees as a face of side ``side_det`` centred on
    ``det_centre`` (letterbox pixels); returns the expected frame box (the anchor's window)."""
    cx, cy = det_centre
    box = np.array([cx - side_det / 2, cy - side_det / 2, cx + side_det / 2, cy + side_det / 2]) / det_scale
    x0, y0, x1, y1 = np.round(box).astype(int)
    frame[y0:y1, x0:x1] = value
    return box


@pytest.mark.parametrize("hw", [(720, 1280), (601, 457), (555, 999)])
def test_scrfd_finds_the_square_where_it_is(models, hw):
    """Letterboxed frames (wide, tall, odd sizes): one face per square, box and keypoints in frame
    pixels as the fake predicts them (the anchor's window, keypoints at KPS_UNIT of it)."""
    h, w = hw
    s = scrfd_scale(h, w)
    frame = np.zeros((h, w, 3), np.uint8)
    small = face_square(frame, (160, 200), 64, s)  # stride 8: side 64 on an anchor (multiples of 8)
    big = face_square(frame, (368, 224), 128, s)  # stride 16: side 128 on a multiple of 16
    det = ScrfdDetector(models / "det_10g.onnx")
    faces = det.detect(frame)
    assert len(faces) == 2, faces.boxes
    assert np.all(np.diff(faces.scores) <= 0) and np.all(faces.scores > 0.99)
    got = sorted(range(2), key=lambda i: faces.boxes[i, 0])
    for i, want in zip(got, (small, big)):
        np.testing.assert_allclose(faces.boxes[i], want, atol=1e-3)
        side = want[2] - want[0]
        np.testing.assert_allclose(faces.keypoints[i], want[:2] + fakes.KPS_UNIT * side, atol=1e-3)


def test_scrfd_empty_frame_has_no_face(models):
    det = ScrfdDetector(models / "det_10g.onnx")
    for frame in (np.zeros((480, 640, 3), np.uint8), np.full((300, 700, 3), 90, np.uint8)):
        faces = det.detect(frame)
        assert len(faces) == 0 and faces.keypoints.shape == (0, 5, 2)


def test_scrfd_score_threshold_and_nms(models):
    frame = np.zeros((640, 640, 3), np.uint8)
    face_square(frame, (320, 320), 64, 1.0, value=200)  # dim: score sigmoid(20 * 200/255 - 15)
    want = 1 / (1 + math.exp(-(20 * 200 / 255 - 15)))
    faces = ScrfdDetector(models / "det_10g.onnx").detect(frame)
    assert len(faces) == 1 and faces.scores[0] == pytest.approx(want, abs=1e-4)
    assert len(ScrfdDetector(models / "det_10g.onnx", score_threshold=want + 0.01).detect(frame)) == 0
    # without NMS the duplicates are there: both anchors of the cell (the second 0.9 x the box) and
    # the neighbouring cells; NMS 0.4 merges them into the best one
    bright = np.zeros((640, 640, 3), np.uint8)
    face_square(bright, (320, 320), 64, 1.0)
    raw = ScrfdDetector(models / "det_10g.onnx", nms_threshold=1.0).detect(bright)
    assert len(raw) >= 4
    sides = raw.boxes[:, 2] - raw.boxes[:, 0]
    assert np.any(np.isclose(sides, 64)) and np.any(np.isclose(sides, 0.9 * 64))
    merged = ScrfdDetector(models / "det_10g.onnx").detect(bright)
    assert len(merged) == 1
    np.testing.assert_allclose(merged.boxes[0], [288, 288, 352, 352], atol=1e-3)


def test_scrfd_output_variants(models):
    """Batched 3-D outputs give the same faces; a model without keypoint outputs gets the ArcFace
    template stretched over each box."""
    frame = np.zeros((720, 1280, 3), np.uint8)
    face_square(frame, (320, 160), 64, 0.5)
    ref = ScrfdDetector(models / "det_10g.onnx").detect(frame)
    batched = ScrfdDetector(models / "variants_scrfd_batched.onnx").detect(frame)
    np.testing.assert_array_equal(batched.boxes, ref.boxes)
    np.testing.assert_array_equal(batched.keypoints, ref.keypoints)
    nokps = ScrfdDetector(models / "variants_scrfd_nokps.onnx")
    assert not nokps.use_kps
    f = nokps.detect(frame)
    np.testing.assert_array_equal(f.boxes, ref.boxes)
    b = f.boxes[0]
    np.testing.assert_allclose(f.keypoints[0], b[:2] + ARCFACE_DST / 112 * (b[2:] - b[:2]), atol=1e-4)


@pytest.mark.parametrize("name", ["det_10g.onnx", "variants_scrfd_batched.onnx", "variants_scrfd_nokps.onnx"])
def test_scrfd_matches_insightface(models, name):
    SCRFD = insightface_class("scrfd", "SCRFD")
    rng = np.random.default_rng(7)
    for h, w in ((720, 1280), (555, 999)):
        frame = (rng.random((h, w, 3)) * 40).astype(np.uint8)
        s = scrfd_scale(h, w)
        face_square(frame, (160, 200), 64, s)
        face_square(frame, (368, 224), 128, s, value=215)
        face_square(frame, (500, 100), 64 + 5, s, value=230)  # off-size: lower score, off-grid box
        theirs = SCRFD(str(models / name))
        theirs.prepare(-1, input_size=(640, 640), det_thresh=0.3)  # the dim squares score 0.4 - 0.5
        det, kpss = theirs.detect(np.ascontiguousarray(frame[:, :, ::-1]))
        ours = ScrfdDetector(models / name, score_threshold=0.3).detect(frame)
        assert len(det) == len(ours) >= 3
        np.testing.assert_allclose(ours.boxes, det[:, :4], rtol=1e-6, atol=1e-4)
        np.testing.assert_allclose(ours.scores, det[:, 4], rtol=1e-6, atol=1e-6)
        if kpss is not None:
            np.testing.assert_allclose(ours.keypoints, kpss, rtol=1e-6, atol=1e-4)


def test_nms_helper():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.95, 0.5, 0.9])
    np.testing.assert_array_equal(nms(boxes, scores, 0.5), [1, 2])
    np.testing.assert_array_equal(nms(boxes, scores, 0.7), [1, 0, 2])  # IoU 81/119 = 0.68 < 0.7
    # pixel-inclusive areas (insightface): IoU 100/142 = 0.70 -> suppressed at 0.69
    np.testing.assert_array_equal(nms(boxes, scores, 0.69, plus_one=True), [1, 2])
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.5).shape == (0,)


# --------------------------------------------------------------------------------------------------
# 106-point landmarks


def crop_matrix(box) -> np.ndarray:
    """insightface's crop of 2d106det written out: scale 192 / (1.5 max(w, h)) about the box centre."""
    x0, y0, x1, y1 = box
    s = 192 / (1.5 * max(x1 - x0, y1 - y0))
    return np.array([[s, 0, 96 - s * (x0 + x1) / 2], [0, s, 96 - s * (y0 + y1) / 2]])


def draw_dots(shape, points, sigma: float) -> np.ndarray:
    """uint8 RGB frame with a Gaussian dot (peak 250) at each point."""
    h, w = shape
    img = np.zeros((h, w), np.float64)
    r = int(math.ceil(4 * sigma))
    for x, y in points:
        xi, yi = int(round(x)), int(round(y))
        ys, xs = np.mgrid[max(0, yi - r):min(h, yi + r + 1), max(0, xi - r):min(w, xi + r + 1)]
        img[ys, xs] += 250 * np.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * sigma**2))
    g = np.clip(np.round(img), 0, 255).astype(np.uint8)
    return np.repeat(g[:, :, None], 3, axis=2)


@pytest.mark.parametrize("box", [(250, 180, 350, 300), (-30, -20, 90, 110), (560, 380, 660, 500), (100, 50, 400, 250)],
                         ids=["centre", "top-left edge", "bottom-right edge", "wide and large"])
def test_landmarks_come_back_at_the_dots(models, box):
    """Dots drawn at known frame positions (one inside each of the fake's 106 regions, off-centre) come
    back at those positions: the crop transform and its inverse, for boxes anywhere (dots that would
    fall outside the frame are not drawn; those points are not checked)."""
    rects, centres = fakes.landmark_regions()
    rng = np.random.default_rng(1)
    crop_pts = centres + rng.uniform(-1.0, 1.0, centres.shape)
    M = crop_matrix(box)
    Minv = cv2.invertAffineTransform(M)
    frame_pts = crop_pts @ Minv[:, :2].T + Minv[:, 2]
    h, w = 480, 640
    sigma = 0.7 / M[0, 0]
    inside = np.all((frame_pts >= 4 * sigma) & (frame_pts <= [w - 1 - 4 * sigma, h - 1 - 4 * sigma]), axis=1)
    assert inside.sum() >= 40
    frame = draw_dots((h, w), frame_pts[inside], sigma)
    faces = Faces(np.array([box], np.float32), [0.9], np.zeros((1, 5, 2)))
    lmk = Landmark106(models / "2d106det.onnx").landmarks(frame, faces)
    assert lmk.points.shape == (1, 106, 2)
    err = np.linalg.norm(lmk.points[0][inside] - frame_pts[inside], axis=1)
    assert err.max() < 0.25 / min(1.0, M[0, 0]), err.max()


def test_landmark_input_normalisation_follows_the_graph(models):
    """insightface's rule: a graph starting with Sub and Mul nodes gets raw pixels (mean 0, std 1), one
    without gets (x - 127.5) / 128; both fakes compute the same function of the picture.  The node
    names come from our protobuf reader, checked against onnx."""
    import onnx

    from mime_fast.detect.paper import _first_node_names

    for f in ("2d106det.onnx", "variants_lmk_normalised.onnx", "w600k_r50.onnx", "variants_arcface_selfnorm.onnx"):
        assert _first_node_names(models / f) == [n.name for n in onnx.load(str(models / f)).graph.node[:8]]
    raw = Landmark106(models / "2d106det.onnx")
    scaled = Landmark106(models / "variants_lmk_normalised.onnx")
    assert (raw.input_mean, raw.input_std) == (0.0, 1.0)
    assert (scaled.input_mean, scaled.input_std) == (127.5, 128.0)
    frame = np.zeros((400, 400, 3), np.uint8)
    frame[150:250, 140:260] = (255, 200, 120)
    faces = Faces([[140, 150, 260, 250]], [0.9], np.zeros((1, 5, 2)))
    np.testing.assert_allclose(scaled.landmarks(frame, faces).points, raw.landmarks(frame, faces).points, atol=1e-3)


@pytest.mark.parametrize("name", ["2d106det.onnx", "variants_lmk_normalised.onnx"])
def test_landmarks_match_insightface(models, name):
    ours, theirs = ours_and_theirs(Landmark106, "landmark", "Landmark", models / name)
    rng = np.random.default_rng(3)
    frame = (rng.random((480, 640, 3)) * 255).astype(np.uint8)
    boxes = np.array([[250.3, 180.7, 351.1, 297.9], [-30, -20, 90, 110], [500.5, 300.25, 700, 520]], np.float32)
    faces = Faces(boxes, np.ones(3), np.zeros((3, 5, 2)))
    got = ours.landmarks(frame, faces).points
    bgr = np.ascontiguousarray(frame[:, :, ::-1])
    for i, b in enumerate(boxes):
        want = theirs.get(bgr, InsightFace(bbox=b))
        np.testing.assert_allclose(got[i], want, atol=1e-3)


def synthetic_106(kps: np.ndarray, size: float, rng) -> np.ndarray:
    """106 points whose eye groups are rings centred on the eye keypoints, nose tip and mouth corners
    on theirs, the rest anywhere in the face."""
    pts = rng.uniform(kps.min(0) - size / 4, kps.max(0) + size / 4, (106, 2))
    t = np.linspace(0, 2 * np.pi, 10, endpoint=False)
    ring = np.stack([np.cos(t), np.sin(t)], 1) * size * 0.06
    pts[33:43] = kps[0] + ring
    pts[87:97] = kps[1] + ring
    pts[86], pts[52], pts[61] = kps[2], kps[3], kps[4]
    return pts


def test_landmark106_quality():
    """Quality = 1 - mean distance (fraction of the face size) between the 106-point eye centres,
    nose tip, mouth corners and the detector's 5 keypoints, / 0.2; image-left/right is taken from the
    eye axis, so swapped groups agree too."""
    rng = np.random.default_rng(5)
    box = np.array([100, 100, 200, 220], np.float32)
    kps = np.array([[130, 140], [170, 140], [150, 165], [135, 190], [165, 190]], np.float32)
    faces = Faces(box[None], [0.9], kps[None])
    pts = synthetic_106(kps, 120, rng)
    assert landmark106_quality(pts[None], faces)[0] == pytest.approx(1.0, abs=1e-5)
    swapped = pts.copy()
    swapped[33:43], swapped[87:97] = pts[87:97], pts[33:43]
    swapped[[52, 61]] = pts[[61, 52]]
    assert landmark106_quality(swapped[None], faces)[0] == pytest.approx(1.0, abs=1e-5)
    shifted = pts + [0.1 * 120, 0]  # every point 10 % of the face size off: half the tolerance
    assert landmark106_quality(shifted[None], faces)[0] == pytest.approx(0.5, abs=1e-4)
    assert landmark106_quality((pts + [0, 0.3 * 120])[None], faces)[0] == 0.0
    two = Faces(np.stack([box, box]), [0.9, 0.8], np.stack([kps, kps]))
    np.testing.assert_allclose(landmark106_quality(np.stack([pts, shifted]), two), [1.0, 0.5], atol=1e-4)


def test_landmark_model_reports_the_quality(models):
    """Landmark106's quality is landmark106_quality of its points: high where the fake's 106 points
    agree with the keypoints (the detector's on a bright face square), low for wrong keypoints."""
    frame = np.zeros((480, 640, 3), np.uint8)
    face_square(frame, (320, 240), 128, 1.0)
    faces = ScrfdDetector(models / "det_10g.onnx").detect(frame)
    model = Landmark106(models / "2d106det.onnx")
    assert isinstance(model, LandmarkModel) and model.num_points == 106
    lmk = model.landmarks(frame, faces)
    assert lmk.quality[0] > 0.8
    np.testing.assert_allclose(lmk.quality, landmark106_quality(lmk.points, faces))
    wrong = Faces(faces.boxes, faces.scores, faces.keypoints + [0, 40])
    assert model.landmarks(frame, wrong).quality[0] < 0.5
    empty = model.landmarks(frame, faces[[]])
    assert empty.points.shape == (0, 106, 2) and empty.quality.shape == (0,)


# --------------------------------------------------------------------------------------------------
# ArcFace


def similar_template(scale: float, angle_deg: float, t) -> np.ndarray:
    a = math.radians(angle_deg)
    R = scale * np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return (ARCFACE_DST.astype(np.float64) @ R.T + t).astype(np.float32)


def test_arcface_transform_matches_insightface_estimate_norm():
    estimate_norm = import_for_models("insightface.utils.face_align").estimate_norm
    rng = np.random.default_rng(11)
    for size in (112, 224, 128):
        kps = similar_template(1.7, 18, [300, 120]) + rng.normal(0, 2.5, (5, 2)).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-image's estimate() deprecation
            want = estimate_norm(kps, size)
        np.testing.assert_allclose(arcface_transform(kps, size), want, rtol=1e-6, atol=1e-6)
    # an exact similarity of the template maps onto it exactly
    kps = similar_template(0.8, -25, [40, 60])
    M = arcface_transform(kps)
    np.testing.assert_allclose(kps @ M[:, :2].T + M[:, 2], ARCFACE_DST, atol=1e-4)


def test_arcface_chip_puts_the_keypoints_on_the_template(models):
    kps = similar_template(1.9, 15, [250, 90])
    frame = draw_dots((480, 640), kps, 1.5)
    emb = ArcFaceEmbedder(models / "w600k_r50.onnx")
    chip = emb.chip(frame, kps)[:, :, 0].astype(np.float64)
    assert chip.shape == (112, 112)
    for want in ARCFACE_DST:
        x0, y0 = np.floor(want - 5).astype(int)
        win = chip[y0:y0 + 11, x0:x0 + 11]
        ys, xs = np.mgrid[y0:y0 + 11, x0:x0 + 11]
        got = np.array([(win * xs).sum(), (win * ys).sum()]) / win.sum()
        np.testing.assert_allclose(got, want, atol=0.3)


def textured_face(frame: np.ndarray, kps: np.ndarray, texture: np.ndarray) -> None:
    """Paste a 112 x 112 texture so that its template points land on ``kps`` (in place)."""
    M = cv2.invertAffineTransform(arcface_transform(kps))
    warped = cv2.warpAffine(texture, M, frame.shape[1::-1], flags=cv2.INTER_LINEAR)
    mask = cv2.warpAffine(np.full((112, 112), 255, np.uint8), M, frame.shape[1::-1]) > 0
    frame[mask] = warped[mask]


def test_arcface_embeddings(models):
    """Unit rows; the same face twice (translated: identical chip) has cosine 1; rescaled and
    rotated still ~1; another face clearly less; dim from the model."""
    rng = np.random.default_rng(2)
    tex_a = cv2.GaussianBlur((rng.random((112, 112, 3)) * 255).astype(np.uint8), (0, 0), 4)
    tex_a = cv2.normalize(tex_a, None, 0, 255, cv2.NORM_MINMAX)
    tex_b = np.ascontiguousarray(np.rot90(tex_a))
    frame = np.zeros((480, 960, 3), np.uint8)
    kps = [similar_template(1.5, 0, [20, 20]), similar_template(1.5, 0, [220, 20]),
           similar_template(2.1, 20, [500, 40]), similar_template(1.5, 0, [20, 250])]
    for k, tex in zip(kps, (tex_a, tex_a, tex_a, tex_b)):
        textured_face(frame, k, tex)
    faces = Faces(np.zeros((4, 4)), np.ones(4), np.stack(kps))
    emb = ArcFaceEmbedder(models / "w600k_r50.onnx")
    assert isinstance(emb, FaceEmbedder) and emb.dim == 512
    e = emb.embed(frame, faces)
    assert e.shape == (4, 512) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert e[0] @ e[1] == pytest.approx(1.0, abs=1e-6)
    assert e[0] @ e[2] > 0.99
    assert e[0] @ e[3] < 0.95
    assert emb.embed(frame, faces[[]]).shape == (0, 512)
    assert ArcFaceEmbedder(models / "variants_arcface_128.onnx").dim == 128


@pytest.mark.parametrize("name", ["w600k_r50.onnx", "variants_arcface_selfnorm.onnx"])
def test_arcface_matches_insightface(models, name):
    ours, theirs = ours_and_theirs(ArcFaceEmbedder, "arcface_onnx", "ArcFaceONNX", models / name)
    rng = np.random.default_rng(4)
    frame = (rng.random((360, 480, 3)) * 255).astype(np.uint8)
    kps = np.stack([similar_template(1.3, 10, [100, 60]) + rng.normal(0, 2, (5, 2)),
                    similar_template(2.0, -30, [250, 150]) + rng.normal(0, 2, (5, 2))]).astype(np.float32)
    got = ours.embed(frame, Faces(np.zeros((2, 4)), np.ones(2), kps))
    bgr = np.ascontiguousarray(frame[:, :, ::-1])
    for i in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = theirs.get(bgr, InsightFace(kps=kps[i]))
        np.testing.assert_allclose(got[i], want / np.linalg.norm(want), atol=2e-5)


# --------------------------------------------------------------------------------------------------
# YOLOv8


def yolo_letterbox(h: int, w: int, size: int = 640):
    """ultralytics' letterbox: scale and the (left, top) padding."""
    r = min(size / h, size / w)
    dw, dh = (size - round(w * r)) / 2, (size - round(h * r)) / 2
    return r, int(round(dw - 0.1)), int(round(dh - 0.1))


def person_rect(frame, centre_cells, stride: int, hw, value=(255, 255, 255)) -> np.ndarray:
    """Draw the rectangle the fake sees as a person at anchor ``centre_cells`` of ``stride``; return
    the expected frame box."""
    r, left, top = yolo_letterbox(*hw)
    kw, kh = fakes.PERSON_CELLS
    cx, cy = (np.asarray(centre_cells) + 0.5) * stride
    lb = np.array([cx - kw * stride / 2, cy - kh * stride / 2, cx + kw * stride / 2, cy + kh * stride / 2])
    box = (lb - [left, top, left, top]) / r
    x0, y0, x1, y1 = np.maximum(np.round(box).astype(int), 0)
    frame[y0:y1, x0:x1] = value
    return box


@pytest.mark.parametrize("hw", [(720, 1280), (555, 999), (640, 480)])
def test_yolo_finds_the_person_rectangle(models, hw):
    frame = np.zeros((*hw, 3), np.uint8)
    want = [person_rect(frame, (12, 20), 16, hw), person_rect(frame, (50, 30), 8, hw)]
    det = YoloV8PersonDetector(models / "yolov8n.onnx")
    assert isinstance(det, PersonDetector)
    persons = det.detect(frame)
    assert len(persons) == 2, persons.boxes
    assert np.all(np.diff(persons.scores) <= 0) and np.all(persons.scores > 0.9)
    got = persons.boxes[np.argsort(persons.boxes[:, 0])]
    np.testing.assert_allclose(got, sorted(want, key=lambda b: b[0]), atol=1e-3)
    assert len(det.detect(np.zeros((*hw, 3), np.uint8))) == 0


def test_yolo_keeps_only_the_person_class(models):
    hw = (720, 1280)
    frame = np.zeros((*hw, 3), np.uint8)
    person = person_rect(frame, (10, 20), 16, hw)
    car = person_rect(frame, (28, 20), 16, hw, value=(255, 0, 0))  # class 2 scores high here
    persons = YoloV8PersonDetector(models / "yolov8n.onnx").detect(frame)
    assert len(persons) == 1
    np.testing.assert_allclose(persons.boxes[0], person, atol=1e-3)
    cars = YoloV8PersonDetector(models / "yolov8n.onnx", person_class=2).detect(frame)
    assert len(cars) == 1
    np.testing.assert_allclose(cars.boxes[0], car, atol=1e-3)
    one = YoloV8PersonDetector(models / "variants_yolo_nc1.onnx").detect(frame)  # nc = 1: (1, 5, 8400)
    assert len(one) == 1
    np.testing.assert_allclose(one.boxes[0], person, atol=1e-3)


def test_yolo_person_must_be_the_best_class(tmp_path):
    """ultralytics' rule: a box counts for its best class only, so a person score above the threshold
    does not make a person when another class scores higher."""
    table = np.zeros((84, 8400), np.float32)
    table[:4, 0] = [100, 100, 40, 80]  # cx, cy, w, h (letterbox pixels)
    table[:4, 1] = [400, 300, 60, 120]
    table[4, 0], table[4 + 2, 0] = 0.6, 0.9  # person 0.6 but car 0.9: a car
    table[4, 1], table[4 + 2, 1] = 0.5, 0.1  # a person
    det = YoloV8PersonDetector(fakes.yolov8_constant(tmp_path / "const.onnx", table))
    persons = det.detect(np.zeros((640, 640, 3), np.uint8))
    assert len(persons) == 1 and persons.scores[0] == pytest.approx(0.5)
    np.testing.assert_allclose(persons.boxes[0], [370, 240, 430, 360])


def test_yolo_threshold_nms_and_clipping(models):
    hw = (640, 640)
    frame = np.zeros((*hw, 3), np.uint8)
    person_rect(frame, (20, 20), 16, hw)
    raw = YoloV8PersonDetector(models / "yolov8n.onnx", iou_threshold=1.0).detect(frame)
    assert len(raw) >= 3  # the neighbouring anchors score above 0.25 too
    assert len(YoloV8PersonDetector(models / "yolov8n.onnx").detect(frame)) == 1
    dim = np.zeros((*hw, 3), np.uint8)
    person_rect(dim, (20, 20), 16, hw, value=(200, 200, 200))  # score sigmoid(20 * 200/255 - 16) = 0.42
    found = YoloV8PersonDetector(models / "yolov8n.onnx").detect(dim)
    assert len(found) == 1 and found.scores[0] == pytest.approx(1 / (1 + math.exp(16 - 20 * 200 / 255)), abs=1e-4)
    assert len(YoloV8PersonDetector(models / "yolov8n.onnx", score_threshold=0.45).detect(dim)) == 0
    hw = (720, 1280)  # letterboxed: 140 px of padding above and below
    edge = np.zeros((*hw, 3), np.uint8)
    want = person_rect(edge, (20, 12), 16, hw)  # the window reaches 12 px into the padding above
    assert want[1] == pytest.approx(-24)
    b = YoloV8PersonDetector(models / "yolov8n.onnx").detect(edge).boxes
    assert len(b) == 1
    np.testing.assert_allclose(b[0], [want[0], 0, want[2], want[3]], atol=1e-3)  # clipped to the frame


# --------------------------------------------------------------------------------------------------
# Discovery, loading, stack choice


def test_discovery_from_env_and_auto_choice(models, clean_env, monkeypatch):
    monkeypatch.setenv("MIME_FAST_MODELS", str(models))
    found = find_paper_models()
    assert found == {"detector": models / "det_10g.onnx", "landmarks": models / "2d106det.onnx",
                     "embedder": models / "w600k_r50.onnx", "persons": models / "yolov8n.onnx"}
    st = load_paper_stack()
    assert st.name == "paper"
    assert isinstance(st.detector, ScrfdDetector) and isinstance(st.detector, FaceDetector)
    assert isinstance(st.landmarks, Landmark106) and isinstance(st.embedder, ArcFaceEmbedder)
    assert isinstance(st.persons, YoloV8PersonDetector)
    assert stack_choice() == "paper"
    auto = load_stack("auto")
    assert auto.name == "paper" and isinstance(auto.detector, ScrfdDetector)
    lite = load_paper_stack(embedder=False, persons=False)
    assert lite.embedder is None and lite.persons is None


def test_discovery_order_and_places(models, clean_env, monkeypatch, tmp_path):
    import shutil

    # ~/.insightface/models/buffalo_l (HOME is a temporary folder)
    home_models = clean_env / ".insightface" / "models" / "buffalo_l"
    home_models.mkdir(parents=True)
    for f in ("det_10g.onnx", "2d106det.onnx", "w600k_r50.onnx"):
        shutil.copy(models / f, home_models / f)
    found = find_paper_models()
    assert found["detector"] == home_models / "det_10g.onnx" and found["persons"] is None
    # $MIME_FAST_MODELS/buffalo_l beats home; the root argument beats both
    env_dir = tmp_path / "env" / "buffalo_l"
    env_dir.mkdir(parents=True)
    shutil.copy(models / "2d106det.onnx", env_dir / "2d106det.onnx")
    monkeypatch.setenv("MIME_FAST_MODELS", str(env_dir.parent))
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(models / "det_10g.onnx", root / "det_10g.onnx")
    shutil.copy(models / "yolov8n.onnx", root / "yolov8s.onnx")
    found = find_paper_models(root)
    assert found["detector"] == root / "det_10g.onnx"
    assert found["landmarks"] == env_dir / "2d106det.onnx"
    assert found["embedder"] == home_models / "w600k_r50.onnx"
    assert found["persons"] == root / "yolov8s.onnx"
    # $MIME_FAST_YOLO names the person detector
    monkeypatch.setenv("MIME_FAST_YOLO", str(models / "variants_yolo_nc1.onnx"))
    assert find_paper_models(root)["persons"] == models / "variants_yolo_nc1.onnx"
    monkeypatch.setenv("MIME_FAST_YOLO", str(tmp_path / "nope.onnx"))
    assert find_paper_models(root)["persons"] is None


def test_missing_files_are_named(models, clean_env, monkeypatch, tmp_path):
    import shutil

    shutil.copy(models / "det_10g.onnx", tmp_path / "det_10g.onnx")
    monkeypatch.setenv("MIME_FAST_MODELS", str(tmp_path))
    with pytest.raises(ModelNotAvailable) as exc:
        load_paper_stack()
    msg = str(exc.value)
    assert "2d106det.onnx" in msg and "w600k_r50.onnx" in msg and "det_10g.onnx" not in msg.split("not found")[0]
    assert str(tmp_path) in msg and str(clean_env / ".insightface" / "models" / "buffalo_l") in msg
    assert stack_choice() == "offline"  # auto falls back when the face models are incomplete
    with pytest.raises(ModelNotAvailable, match="2d106det.onnx"):
        load_stack("paper")


def test_no_yolo_falls_back_to_the_offline_person_detectors(models, clean_env, monkeypatch, tmp_path):
    import shutil

    from mime_fast.detect.pose import BlazePoseDetector, PersonDetectors

    for f in ("det_10g.onnx", "2d106det.onnx", "w600k_r50.onnx"):
        shutil.copy(models / f, tmp_path / f)
    with pytest.warns(UserWarning, match="BlazePose, HOG"):
        st = load_paper_stack(tmp_path)
    assert isinstance(st.persons, PersonDetectors) and any("BlazePose, HOG" in n for n in st.notes)
    assert [type(d) for d in st.persons.detectors] == [BlazePoseDetector, HogPersonDetector]
    assert "persons" not in st.files


def test_stack_env_override(models, clean_env, monkeypatch):
    monkeypatch.setenv("MIME_FAST_MODELS", str(models))
    monkeypatch.setenv("MIME_FAST_STACK", "offline")
    assert stack_choice() == "offline" and stack_choice("auto") == "offline"
    assert stack_choice("paper") == "paper"  # an explicit name wins
    monkeypatch.setenv("MIME_FAST_STACK", "paper")
    assert load_stack().name == "paper"
    monkeypatch.setenv("MIME_FAST_STACK", "bogus")
    with pytest.raises(ValueError, match="bogus"):
        stack_choice()


def test_offline_stack_is_named(clean_env, monkeypatch):
    monkeypatch.setenv("MIME_FAST_STACK", "offline")
    try:
        st = load_stack(embedder=False, persons=False)
    except ModelNotAvailable as e:
        models_unavailable(e)
    assert st.name == "offline" and type(st).__name__ == "OfflineStack"


def test_default_stack_uses_load_stack_per_thread(models, clean_env, monkeypatch):
    monkeypatch.setenv("MIME_FAST_MODELS", str(models))
    monkeypatch.setattr(mf_stacks, "_STACKS", None)
    st = mf_stacks.default_stack()
    assert st.name == "paper" and mf_stacks.default_stack() is st
    other = []
    t = threading.Thread(target=lambda: other.append(mf_stacks.default_stack()))
    t.start()
    t.join()
    assert other[0].name == "paper" and other[0] is not st


# --------------------------------------------------------------------------------------------------
# End to end: tracking with the paper stack


def test_track_clip_with_the_paper_stack(models, clean_env):
    """A bright face square moving over 12 frames: the subject is selected, detected in every frame,
    masked by the 106-point hull (quality high, no box-ellipse fallback), and the hull covers the
    square without spreading far beyond it."""
    stack = load_paper_stack(models)
    frames, squares = [], []
    for i in range(12):
        f = np.zeros((480, 640, 3), np.uint8)
        cx, cy = 200 + 8 * i, 240
        f[cy - 32:cy + 32, cx - 32:cx + 32] = 255
        f[300:420, 500:560] = 90  # a grey block: not a face
        frames.append(f)
        squares.append((cx - 32, cy - 32, cx + 32, cy + 32))
    tracks, stats = track_clip(frames, stack, hold_frames=3)
    assert stats.status == "ok" and stats.selected_frame == 0
    assert stats.detected == 12 and stats.mesh_fallbacks == 0
    for t, (x0, y0, x1, y1) in zip(tracks, squares):
        assert t.kind == "detected"
        hull = t.hull()
        for corner in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)):
            assert cv2.pointPolygonTest(hull.reshape(-1, 1, 2), corner, False) >= 0
        assert hull[:, 0].min() >= x0 - 20 and hull[:, 0].max() <= x1 + 20
        assert hull[:, 1].min() >= y0 - 20 and hull[:, 1].max() <= y1 + 20


# --------------------------------------------------------------------------------------------------
# mime-fast models


def test_models_command_reports_the_paper_stack(models, clean_env, monkeypatch, capsys):
    monkeypatch.setenv("MIME_FAST_MODELS", str(models))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stack: paper")
    for f in ("det_10g.onnx", "2d106det.onnx", "w600k_r50.onnx", "yolov8n.onnx"):
        assert str(models / f) in out
    assert "offline stack (not in use): " in out  # both stacks are listed, the other one in a line
    assert out.index("yolov8n.onnx") < out.index("offline stack")  # the stack in use first


def test_models_command_says_where_it_looked(clean_env, capsys):
    main(["models"])
    out = capsys.readouterr().out
    assert out.startswith("stack: offline")
    assert "not found" in out and str(clean_env / ".insightface" / "models" / "buffalo_l") in out


def test_models_fetch_fails_clearly(clean_env, monkeypatch, capsys):
    # without internet (checked with a short timeout; faked here so nothing touches the network)
    monkeypatch.setattr(stacks, "_have_internet", lambda **kw: False)
    # (exit status 1: the environment stops the command, not its usage)
    if importlib.util.find_spec("insightface") and importlib.util.find_spec("onnx"):
        assert main(["models", "--fetch"]) == 1
        assert "no internet" in capsys.readouterr().err
    # without insightface
    monkeypatch.setitem(sys.modules, "insightface", None)
    assert main(["models", "--fetch"]) == 1
    err = capsys.readouterr().err
    assert "insightface" in err and "pip install" in err
    assert not (clean_env / ".insightface").exists()  # nothing was downloaded or created
