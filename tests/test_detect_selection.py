"""Primary-subject selection (mime_fast.subject.selection): each of the four terms, and the winner on
real photographs (insightface's t1.jpg, six people) and on composites of the real astronaut face at
controlled positions and scales, run through the offline models.

Model-dependent tests skip without the ``detect`` packages (see test_detect_models.py) unless
``MIME_FAST_REQUIRE_MODELS=1``; the pure term tests always run.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import import_for_models  # noqa: E402

cv2 = import_for_models("cv2", module_level=True)

from mime_fast.detect import Faces, HogPersonDetector, Landmarks, Persons
from mime_fast.subject import WEIGHTS, assign_bodies, detect_candidates, select_primary_subject


@pytest.fixture(scope="module")
def head(astronaut_module) -> np.ndarray:
    """The astronaut's head and shoulders (a real face, ~95 px wide), 200 x 170."""
    return np.ascontiguousarray(astronaut_module[10:210, 140:310])


@pytest.fixture(scope="module")
def astronaut_module() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


def canvas(*placements, size=(720, 1280)) -> np.ndarray:
    """Grey frame with the given ``(image, (cx, cy), scale)`` pastes centred at (cx, cy)."""
    out = np.full((*size, 3), 118, np.uint8)
    for img, (cx, cy), scale in placements:
        im = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
        h, w = im.shape[:2]
        x0, y0 = int(round(cx - w / 2)), int(round(cy - h / 2))
        out[y0:y0 + h, x0:x0 + w] = im
    return out


def centre_x(faces: Faces, i: int) -> float:
    return float(faces.boxes[i, 0] + faces.boxes[i, 2]) / 2


def run(stack, frame, persons="detect"):
    faces, lmk, det_persons = detect_candidates(stack, frame)
    sel = select_primary_subject(frame, faces, lmk, det_persons if persons == "detect" else persons)
    return faces, lmk, sel


# ---------------------------------------------------------------------------------------------------
# Terms on hand-made candidates (no models)


def _faces(boxes, kps=None):
    boxes = np.asarray(boxes, np.float32)
    if kps is None:  # frontal keypoints in the box
        unit = np.array([[0.3, 0.45], [0.7, 0.45], [0.5, 0.62], [0.35, 0.8], [0.65, 0.8]], np.float32)
        wh = boxes[:, 2:] - boxes[:, :2]
        kps = unit[None] * wh[:, None] + boxes[:, None, :2]
    return Faces(boxes, np.ones(len(boxes)), kps)


def _oval(faces: Faces, n=64) -> Landmarks:
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    b = faces.boxes
    c, r = (b[:, :2] + b[:, 2:]) / 2, (b[:, 2:] - b[:, :2]) / 2
    pts = c[:, None] + r[:, None] * np.stack([np.cos(t), np.sin(t)], 1)[None]
    return Landmarks(pts.astype(np.float32), np.ones(len(b), np.float32))


def test_terms_are_in_unit_range_and_weighted():
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)
    rng = np.random.default_rng(4)
    xy = rng.uniform(-50, 600, (7, 2))
    faces = _faces(np.c_[xy, xy + rng.uniform(20, 150, (7, 1))])
    sel = select_primary_subject((480, 640), faces, _oval(faces), Persons(rng.uniform(0, 640, (3, 4))))
    total = np.zeros(7)
    for k, v in sel.terms.items():
        assert v.shape == (7,) and np.all((v >= 0) & (v <= 1)), (k, v)
        total += WEIGHTS[k] * v
    np.testing.assert_allclose(sel.scores, total)
    assert sel.index == int(np.argmax(sel.scores))
    assert sel.breakdown()["score"] == pytest.approx(sel.scores.max())
    ranked = np.sort(sel.scores)[::-1]
    assert sel.breakdown()["margin"] == pytest.approx(ranked[0] - ranked[1] if len(ranked) > 1 else 1.0)


def test_no_face_selects_nothing():
    sel = select_primary_subject((480, 640), _faces(np.zeros((0, 4))))
    assert sel.index is None and sel.scores.shape == (0,)


def test_single_candidate_has_full_relative_terms():
    faces = _faces([[300, 200, 340, 250]])
    sel = select_primary_subject((480, 640), faces, _oval(faces))
    assert sel.index == 0
    assert sel.terms["body"][0] == 1.0 and sel.terms["scale"][0] == 1.0
    assert sel.terms["centrality"][0] > 0.95


def test_centrality_is_one_at_centre_and_zero_at_corner():
    faces = _faces([[310, 230, 330, 250], [-10, -10, 10, 10], [630, 230, 650, 250]])
    c = select_primary_subject((480, 640), faces).terms["centrality"]
    np.testing.assert_allclose(c, [1.0, 0.0, 1 - 1 / np.sqrt(2)], atol=1e-6)


def test_structure_term_components():
    faces = _faces([[100, 100, 200, 220], [400, 100, 500, 220]])
    lmk = _oval(faces)
    q = select_primary_subject((480, 640), faces, lmk).terms["structure"]
    np.testing.assert_allclose(q, [1.0, 1.0], atol=1e-6)
    # p: the landmark model's confidence scales Q
    q = select_primary_subject((480, 640), faces, Landmarks(lmk.points, np.array([0.5, 1.0]))).terms["structure"]
    np.testing.assert_allclose(q, [0.5, 1.0], atol=1e-6)
    # v: points outside the frame
    pts = lmk.points.copy()
    pts[1, :16, 0] = -5.0
    q = select_primary_subject((480, 640), faces, Landmarks(pts, lmk.quality)).terms["structure"]
    np.testing.assert_allclose(q, [1.0, 0.75], atol=1e-6)
    # s: nose moving towards one eye (head turning away) lowers Q monotonically
    prev = 1.0
    for shift in (5, 10, 15, 18):
        k = faces.keypoints.copy()
        k[1, 2, 0] += shift
        q = select_primary_subject((480, 640), Faces(faces.boxes, faces.scores, k), lmk).terms["structure"]
        assert q[0] == pytest.approx(1.0) and q[1] < prev
        prev = q[1]
    assert prev < 0.7  # nose 2 px from one eye (x), 20 px below: s = 1 - 22.5 / 63.5


def test_bodies_are_assigned_one_to_one():
    faces = _faces([[100, 100, 140, 150], [300, 100, 340, 150], [150, 100, 190, 150]])
    persons = Persons([[60, 80, 220, 470], [280, 90, 360, 300], [500, 0, 600, 400]])
    bodies, detected = assign_bodies(faces, persons, (480, 640))
    # face 0 is closest to the first box's centre, face 2 lies in it too but gets the prior
    assert detected.tolist() == [True, True, False]
    np.testing.assert_allclose(bodies[0], [60, 80, 220, 470])
    np.testing.assert_allclose(bodies[1], [280, 90, 360, 300])
    np.testing.assert_allclose(bodies[2], [110, 100, 230, 350])  # cx +- 1.5 w, y0 .. y0 + 5 h
    # a box whose top is far below the face is not that face's body
    _, detected = assign_bodies(faces[:1], Persons([[60, 300, 220, 470]]), (480, 640))
    assert not detected[0]


def test_ties_go_to_the_higher_detector_score():
    faces = _faces([[100, 215, 150, 265], [490, 215, 540, 265]])  # mirror images about the centre
    faces = Faces(faces.boxes, [0.8, 0.9], faces.keypoints)
    assert select_primary_subject((480, 640), faces).index == 1


# ---------------------------------------------------------------------------------------------------
# Scenes where the weights decide: two candidates, each ahead on one term, equal on the others.
# The documented score is 0.40 C + 0.30 Q + 0.20 B + 0.10 F.  Each scene pits two terms whose
# weights are neighbours in that order against each other, with the lead on the lighter term a
# little larger than the lead on the heavier one, so the heavier term's weight must win -- and any
# exchange of two weights reverses at least one of the three pairs (C, Q), (Q, B), (B, F), hence
# changes at least one pick.  Frames are 1000 x 1000; faces are squares with frontal keypoints
# (s = 1) and an oval of landmarks inside the frame (v = 1), so Q is the landmark confidence p;
# without a person box the body is the prior (cx +- 1.5 w, y0 .. y0 + 5 h).


def _scene(cands):
    """``cands``: ``(cx, cy, side, p, person_box or None)`` per face."""
    boxes = [[cx - a / 2, cy - a / 2, cx + a / 2, cy + a / 2] for cx, cy, a, _, _ in cands]
    faces = _faces(boxes)
    lmk = _oval(faces)
    lmk = Landmarks(lmk.points, np.array([p for *_, p, _ in cands], np.float32))
    persons = [b for *_, b in cands if b is not None]
    return faces, lmk, (Persons(np.array(persons, np.float32)) if persons else None)


SCENES = {
    # Centrality vs quality.  A: 40 px face at the centre, C = 1, p = 0.4.  B: the same face
    # 250 sqrt(2) = 353.6 px right of the centre: |d| = 353.6 / 500 = 0.7071, C = 1 - 0.7071 /
    # 1.4142 = 0.5; p = 1.  Same size, bodies (prior, 120 x 200, inside the frame) equal: B = F = 1.
    #   A = 0.40 * 1   + 0.30 * 0.4 + 0.30 = 0.82
    #   B = 0.40 * 0.5 + 0.30 * 1   + 0.30 = 0.80   -> A.
    # With C and Q's weights exchanged: A = 0.30 + 0.16 + 0.30 = 0.76 < B = 0.15 + 0.40 + 0.30 = 0.85.
    "centrality_over_quality": ([(500.0, 500.0, 40.0, 0.4, None),
                                 (500.0 + 250.0 * np.sqrt(2.0), 500.0, 40.0, 1.0, None)], 0),
    # Quality vs body.  Faces of 40 px mirrored about the centre (x = 300, 700): equal C; F = 1 both.
    # A: p = 0.5, person box 200 x 500 (area 100000): B = 1.  B: p = 1, person box 100 x 400 (area
    # 40000): B = 0.4.
    #   A = 0.30 * 0.5 + 0.20 * 1   = 0.35 (+ the equal terms)
    #   B = 0.30 * 1   + 0.20 * 0.4 = 0.38          -> B.
    # With Q and B's weights exchanged: A = 0.10 + 0.30 = 0.40 > B = 0.20 + 0.12 = 0.32.
    "quality_over_body": ([(300.0, 500.0, 40.0, 0.5, [200, 470, 400, 970]),
                           (700.0, 500.0, 40.0, 1.0, [650, 470, 750, 870])], 1),
    # Body vs scale.  Mirrored about the centre: equal C; p = 1 both: Q = 1.  A: 80 px face, person
    # box 200 x 300 (60000): F = 1, B = 0.6.  B: 40 px face, person box 200 x 500 (100000):
    # F = 40 / 80 = 0.5, B = 1.
    #   A = 0.20 * 0.6 + 0.10 * 1   = 0.22 (+ the equal terms)
    #   B = 0.20 * 1   + 0.10 * 0.5 = 0.25          -> B.
    # With B and F's weights exchanged: A = 0.06 + 0.20 = 0.26 > B = 0.10 + 0.10 = 0.20.
    "body_over_scale": ([(300.0, 500.0, 80.0, 1.0, [200, 440, 400, 740]),
                         (700.0, 500.0, 40.0, 1.0, [600, 460, 800, 960])], 1),
}


@pytest.mark.parametrize("name", list(SCENES))
@pytest.mark.parametrize("reverse", [False, True])
def test_the_weights_decide_between_candidates_each_ahead_on_one_term(name, reverse):
    cands, winner = SCENES[name]
    order = [1, 0] if reverse else [0, 1]  # the pick must not depend on the candidates' order
    faces, lmk, persons = _scene([cands[i] for i in order])
    sel = select_primary_subject((1000, 1000), faces, lmk, persons)
    assert persons is None or sel.body_detected.all()
    assert order[sel.index] == winner, (name, sel.scores, {k: v.tolist() for k, v in sel.terms.items()})


# ---------------------------------------------------------------------------------------------------
# Real faces through the offline models


def test_centred_face_beats_equal_off_centre_face(stack, head):
    frame = canvas((head, (940, 360), 1.0), (head, (560, 400), 1.0))
    faces, _, sel = run(stack, frame)
    assert len(faces) == 2
    assert abs(centre_x(faces, sel.index) - 560) < 40
    c = sel.terms["centrality"]
    assert c[sel.index] > c[1 - sel.index] + 0.2
    for k in ("structure", "scale"):  # same face, same size: the other terms agree
        assert abs(sel.terms[k][0] - sel.terms[k][1]) < 0.05, (k, sel.terms[k])


def test_larger_face_and_body_beat_smaller_at_equal_centrality(stack, head):
    # two positions mirrored about the frame centre (640, 360): equal centrality
    frame = canvas((head, (400, 360), 0.6), (head, (880, 360), 1.3))
    faces, _, sel = run(stack, frame, persons=None)
    assert len(faces) == 2
    assert centre_x(faces, sel.index) > 640
    other = 1 - sel.index
    assert sel.terms["scale"][sel.index] == 1.0 and sel.terms["scale"][other] < 0.6
    assert sel.terms["body"][sel.index] == 1.0 and sel.terms["body"][other] < 0.4
    assert abs(sel.terms["centrality"][0] - sel.terms["centrality"][1]) < 0.03


def test_larger_detected_body_wins_between_equal_faces(stack, head):
    frame = canvas((head, (400, 300), 1.0), (head, (880, 300), 1.0))
    faces, lmk, _ = run(stack, frame)
    left = int(np.argmin([centre_x(faces, i) for i in range(len(faces))]))
    fb = faces.boxes
    persons = []
    for i in range(2):  # body boxes under each face: the right person's is twice as tall
        cx, w, h = centre_x(faces, i), fb[i, 2] - fb[i, 0], fb[i, 3] - fb[i, 1]
        tall = 3.2 if i != left else 1.6  # (both inside the frame)
        persons.append([cx - 1.5 * w, fb[i, 1], cx + 1.5 * w, fb[i, 1] + tall * h])
    sel = select_primary_subject(frame, faces, lmk, Persons(persons))
    assert sel.body_detected.all()
    assert sel.index != left
    assert sel.terms["body"][left] == pytest.approx(0.5, abs=0.05)
    # swap: the taller body moves to the left face, and so does the choice
    persons[0][3], persons[1][3] = persons[1][3], persons[0][3]
    assert select_primary_subject(frame, faces, lmk, Persons(persons)).index == left


def test_clear_face_beats_structurally_blurred_face(stack, head):
    """Structure term on real pixels: an equal face at an equal distance from the centre, but heavily
    blurred (k = 35, the MIME 'face structures missing' level), has no usable landmarks."""
    blurred = cv2.GaussianBlur(head, (35, 35), 0)
    for clear_at, blur_at in (((400, 360), (880, 360)), ((880, 360), (400, 360))):
        frame = canvas((head, clear_at, 1.0), (blurred, blur_at, 1.0))
        faces, _, sel = run(stack, frame)
        if len(faces) == 1:  # the detector may miss the blob entirely: then the clear face wins anyway
            assert abs(centre_x(faces, 0) - clear_at[0]) < 40
            continue
        assert abs(centre_x(faces, sel.index) - clear_at[0]) < 40
        q = sel.terms["structure"]
        assert q[sel.index] > 0.8 and q[1 - sel.index] < 0.2


def test_t1_primary_subject_is_a_central_man(stack, t1):
    faces, lmk, sel = run(stack, t1)
    assert len(faces) == 6
    centres = (faces.boxes[:, 0] + faces.boxes[:, 2]) / 2
    grey, red = int(np.argmin(np.abs(centres - 520))), int(np.argmin(np.abs(centres - 792)))
    # hand-checked: the two men at the centre of the table rank first, the four outer people below
    order = np.argsort(-sel.scores)
    assert set(order[:2].tolist()) == {grey, red}, centres[order]
    # BlazePose finds both men's bodies (their noses in their face boxes): the man in red, right of
    # centre, leaning over the table with his arm out, shows the larger body, and wins narrowly
    assert sel.body_detected[grey] and sel.body_detected[red]
    assert sel.terms["body"][red] > sel.terms["body"][grey] and sel.index == red
    assert 0 < sel.breakdown()["margin"] < 0.05  # a near tie, and the breakdown says so
    # with HOG alone neither body is found (seated, cut by the table): both get the body guessed
    # from the face, and the man in the grey shirt, left of centre, wins by his face's structure
    hog = select_primary_subject(t1, faces, lmk, HogPersonDetector().detect(t1))
    assert not hog.body_detected[grey] and not hog.body_detected[red] and hog.index == grey


def test_t1_each_face_wins_when_centred(stack, t1):
    """A 640 x 640 window centred on each of t1's faces (black padding at the borders): the selection
    follows the framing."""
    faces = stack.detector.detect(t1)
    pad = cv2.copyMakeBorder(t1, 320, 320, 320, 320, cv2.BORDER_CONSTANT, value=(0, 0, 0))
    for b in faces.boxes:
        cx, cy = int(round((b[0] + b[2]) / 2)) + 320, int(round((b[1] + b[3]) / 2)) + 320
        win = np.ascontiguousarray(pad[cy - 320:cy + 320, cx - 320:cx + 320])
        f, _, sel = run(stack, win)
        w = f.boxes[sel.index]
        assert np.hypot((w[0] + w[2]) / 2 - 320, (w[1] + w[3]) / 2 - 320) < 20, (b, f.boxes, sel.scores)
