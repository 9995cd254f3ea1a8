"""The decision over the whole clip (mime_fast.subject.decision): each face track the forward pass
left undecided, decided his, another's or still undecided, rule by rule, on records made by hand
(the real-footage checks are in tests/test_shots.py and bench/privacy_variants.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mime_fast.subject.decision import (
    COHORT_MIN, DIM_CONTRAST, MIN_CONTRAST, SubjectObservation, decide_tracks
)
from mime_fast.subject.face_tracks import TrackRecord

DIM = 16
MIN_COS, STRONG_COS = 0.38, 0.55  # SFace's


def _unit(v) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


def _reading(ref: np.ndarray, cos: float, k: int) -> np.ndarray:
    """A unit vector reading ``cos`` against ``ref`` (``k`` picks the direction of the rest)."""
    o = np.zeros(DIM, np.float32)
    o[(k % (DIM - 2)) + 1] = 1.0
    o = o - float(o @ ref) * ref
    return _unit(cos * ref + np.sqrt(1 - cos * cos) * o / np.linalg.norm(o))


HIM = _unit(np.eye(DIM)[0])
VIEWS = (HIM[None], np.array([40.0]))


def _track(ident: int, frames, box=(100, 100, 160, 160), cos=None, shot: int = 0, contrast: float = 40.0,
           k: int = 0) -> TrackRecord:
    """A face track seen at ``frames`` at ``box``; ``cos``: its embeddings read this against him
    (one per value; ``None``: never embedded)."""
    rec = TrackRecord(ident, shot, list(frames), [np.array(box, np.float64) for _ in frames])
    for j, c in enumerate([] if cos is None else np.atleast_1d(cos)):
        rec.embeddings.append((frames[0], 60.0, _reading(HIM, float(c), k + j), contrast))
    return rec


def _him(frames, ident=None, sure=True, how="near", box=(600, 100, 660, 160)) -> dict:
    return {f: SubjectObservation(ident, sure, how, np.array(box, np.float64)) for f in frames}


def _decide(records, undecided=None, his=None, views=VIEWS, returning=None, weak_shots=(), ends=None):
    records = {r.ident: r for r in records}
    undecided = undecided if undecided is not None else {i: list(r.frames) for i, r in records.items()}
    return decide_tracks(records, undecided, his or {}, views, min_cos=MIN_COS, strong_cos=STRONG_COS,
                         shot_ends=ends or {0: 1000}, returning=returning or {}, weak_shots=set(weak_shots))


def _cohort(n: int, start: int = 100) -> list[TrackRecord]:
    """``n`` other people of the clip, each reading low as him, in frames nobody else is in."""
    return [_track(start + j, [500 + j], cos=0.1, k=3 + j) for j in range(n)]


def test_his_own_track_stays_masked():
    d = _decide([_track(1, [10, 11, 12], cos=0.0)], his=_him([20, 21], ident=1))
    assert d[1].decision == "subject" and d[1].rule == "his own track"


@pytest.mark.parametrize("sure", [True, False])
def test_a_track_beside_him_found_for_sure_is_another(sure):
    """Two faces of one frame are two people -- where he was found for sure there only."""
    d = _decide([_track(1, [10, 11, 12], cos=None)], his=_him([12], ident=7, sure=sure))
    if sure:
        assert (d[1].decision, d[1].rule, d[1].at) == ("other", "beside him", 12)
    else:  # (continuity, a return, a weak match: he may be this face)
        assert d[1].decision == "undecided" and d[1].rule == "too small to tell"


def test_beside_him_but_reading_as_him_stays_undecided():
    """A face track is boxes linked by overlap: one that reads as him and was seen beside him may
    have passed from his face to the face beside it."""
    d = _decide([_track(1, [10, 11, 12], cos=0.48)], his=_him([12], ident=7))
    assert (d[1].decision, d[1].rule) == ("undecided", "beside him, reads as him")


def test_identity_him_and_the_faces_beside_it():
    him = _track(1, [10, 11, 12], box=(100, 100, 160, 160), cos=[0.6, 0.7])
    small = _track(2, [12, 13], box=(400, 100, 460, 160), cos=None)
    weak = _track(3, [11], box=(700, 100, 760, 160), cos=0.45, k=5)
    d = _decide([him, small, weak])
    assert (d[1].decision, d[1].rule) == ("subject", "identity: him")
    # a face too small to read stands beside a track that is his
    assert (d[2].decision, d[2].rule, d[2].at) == ("other", "beside him", 12)
    # one that reads weakly as him itself stays undecided (either may be the other's face)
    assert (d[3].decision, d[3].rule) == ("undecided", "identity unsure")


def test_two_tracks_of_one_frame_both_reading_as_him_stay_undecided():
    a = _track(1, [10, 11], cos=0.7)
    b = _track(2, [11, 12], box=(400, 100, 460, 160), cos=0.7, k=4)
    d = _decide([a, b])
    assert {d[1].rule, d[2].rule} == {"two read as him"} and d[1].decision == d[2].decision == "undecided"


def test_identity_another_below_the_weak_threshold():
    d = _decide([_track(1, [10, 11], cos=[0.2, 0.3])])
    assert (d[1].decision, d[1].rule) == ("other", "identity: another")
    assert d[1].evidence.cos == pytest.approx(0.25, abs=1e-4) and d[1].evidence.best == pytest.approx(0.3, abs=1e-4)


@pytest.mark.parametrize("cohort", [COHORT_MIN, COHORT_MIN - 1])
def test_a_face_reading_alike_against_everybody_is_another_with_a_cohort(cohort):
    """0.42 is above the weak threshold: it clears the track only as a score no better than its
    scores against the clip's other people (who read about as alike)."""
    rec = _track(1, [10], cos=0.42)
    # the cohort's people read about 0.4 against this face: build them from its own embedding
    e = rec.embeddings[0][2]
    others = []
    for j in range(cohort):
        o = _track(100 + j, [500 + j], cos=None)
        o.embeddings.append((500 + j, 60.0, _reading(e, 0.40 + 0.02 * j, 7 + j), 40.0))
        others.append(o)
    d = _decide([rec, *others], undecided={1: [10]})
    if cohort >= COHORT_MIN:
        assert (d[1].decision, d[1].rule) == ("other", "identity: another") and d[1].evidence.z < 1.5
    else:
        assert (d[1].decision, d[1].rule) == ("undecided", "identity unsure") and d[1].evidence.z is None


def test_a_face_reading_as_him_above_the_cohort_stays_undecided():
    rec = _track(1, [10], cos=0.45)
    d = _decide([rec, *_cohort(5)], undecided={1: [10]})
    assert (d[1].decision, d[1].rule) == ("undecided", "identity unsure") and d[1].evidence.z > 1.5


def test_his_place_in_his_shot_keeps_a_face_that_reads_low():
    """He was found at (600..660) until frame 9 and lost; a face there at frame 12 reading 0.1 may
    be him, turned away; a face across the frame reading 0.1 is another's."""
    there = _track(1, [12, 13], box=(610, 105, 670, 165), cos=0.1)
    away = _track(2, [12, 13], box=(100, 100, 160, 160), cos=0.1, k=4)
    d = _decide([there, away], his=_him(range(0, 10), ident=9, sure=False))
    assert (d[1].decision, d[1].rule, d[1].at) == ("undecided", "his place", 12)
    assert (d[2].decision, d[2].rule) == ("other", "identity: another")


@pytest.mark.parametrize("him", ["there", "both sides", "one side", "too far apart", "this track", "reads unsure",
                                 "dark"])
def test_his_place_beside_him_masked_on_his_own_face(him):
    """A face at his place that reads as another person is cleared when he is masked on a face
    of his own in each frame it was undecided: taken for him there, or on both sides near enough
    for his mask to be interpolated across (2 x hold); otherwise it could be him, lost."""
    hold = 3
    frames = {"there": [11, 12, 13], "both sides": [9, 14], "one side": [8, 9, 10],
              "too far apart": [6, 16], "this track": [11, 12, 13], "reads unsure": [11, 12, 13],
              "dark": [11, 12, 13]}[him]
    ident = 1 if him == "this track" else 9
    there = _track(1, [11, 12, 13], box=(610, 105, 670, 165), cos=0.45 if him == "reads unsure" else 0.1,
                   contrast=MIN_CONTRAST - 1 if him == "dark" else 40.0)
    records = {1: there}
    d = decide_tracks(records, {1: [11, 12, 13]}, _him(frames, ident=ident, sure=False), VIEWS, min_cos=MIN_COS,
                      strong_cos=STRONG_COS, shot_ends={0: 1000}, returning={}, weak_shots=set(), hold=hold)[1]
    if him in ("there", "both sides"):
        assert (d.decision, d.rule, d.at) == ("other", "his place, he is masked beside it", 11)
        if him == "there":  # the same with his own track masked there, undecided
            records[7] = _track(7, [11, 12, 13], box=(500, 105, 560, 165))
            dd = decide_tracks(records, {1: [11, 12, 13], 7: [11, 12, 13]}, _him([5, 6], ident=7, sure=False), VIEWS,
                               min_cos=MIN_COS, strong_cos=STRONG_COS, shot_ends={0: 1000}, returning={},
                               weak_shots=set(), hold=hold)
            assert dd[7].rule == "his own track" and dd[1].rule == "his place, he is masked beside it"
    elif him == "this track":
        assert (d.decision, d.rule) == ("subject", "his own track")
    else:
        assert (d.decision, d.rule) == ("undecided", "his place")


def test_his_place_is_his_shot_only():
    """Where he stood in another shot says nothing: a face there in a shot of its own is decided
    by identity."""
    there = _track(1, [52, 53], box=(610, 105, 670, 165), cos=0.1, shot=50)
    d = _decide([there], his=_him(range(0, 10), ident=9), ends={0: 50, 50: 1000})
    assert d[1].decision == "other"


def test_a_return_puts_him_where_he_stood():
    there = _track(1, [52, 53], box=(610, 105, 670, 165), cos=0.1, shot=50)
    d = _decide([there], his=_him(range(0, 10), ident=9), ends={0: 50, 50: 1000},
                returning={50: np.array([600, 100, 660, 160], np.float64)})
    assert (d[1].decision, d[1].rule) == ("undecided", "his place")


def test_a_shot_taken_weakly_clears_nobody_by_identity():
    d = _decide([_track(1, [52], cos=0.1, shot=50)], ends={0: 50, 50: 1000}, weak_shots=[50])
    assert (d[1].decision, d[1].rule) == ("undecided", "a shot taken weakly")


@pytest.mark.parametrize("dark", ["track", "views", "dim track, dark views"])
def test_too_dark_to_tell(dark):
    """A dark face reads alike against everybody: a low score clears nothing -- a face under
    DIM_CONTRAST, or a dim face against views of him that are all dark."""
    rec = _track(1, [10], cos=0.1, contrast={"track": DIM_CONTRAST - 1, "views": 40.0}.get(dark, MIN_CONTRAST - 1))
    views = (HIM[None], np.array([40.0 if dark == "track" else MIN_CONTRAST - 1]))
    d = _decide([rec], views=views)
    assert (d[1].decision, d[1].rule) == ("undecided", "too dark to tell")


@pytest.mark.parametrize("contrast", [DIM_CONTRAST, MIN_CONTRAST - 1])
def test_a_dim_face_against_his_lit_views(contrast):
    """A dim face (DIM_CONTRAST up to MIN_CONTRAST) reads against his lit views (rule 7b): under
    min_cos it is another's (on the real clips his own dim faces read 0.57 - 0.82 against them, the
    strangers' 0.33 at most), above it, it stays masked; no cohort clears it (the middle of the two
    thresholds is where his darkest faces read)."""
    recs = [_track(1, [10], cos=0.2, contrast=contrast), _track(2, [20], cos=0.42, contrast=contrast, k=1),
            _track(3, [30], cos=0.45, contrast=contrast, k=2), *_cohort(COHORT_MIN + 2)]
    d = _decide(recs)
    assert (d[1].decision, d[1].rule) == ("other", "identity: another, dim")
    assert d[1].evidence.cos == pytest.approx(0.2, abs=1e-5) and d[1].evidence.z is None
    assert (d[2].decision, d[2].rule) == (d[3].decision, d[3].rule) == ("undecided", "too dark to tell")


def test_a_dim_face_in_a_shot_taken_weakly_stays_masked():
    d = _decide([_track(1, [10], cos=0.1, contrast=DIM_CONTRAST + 1)], weak_shots=[0])
    assert (d[1].decision, d[1].rule) == ("undecided", "too dark to tell")


def test_a_dark_face_reading_strongly_as_him_is_his():
    d = _decide([_track(1, [10], cos=0.7, contrast=5.0)])
    assert (d[1].decision, d[1].rule) == ("subject", "identity: him")


def test_too_small_and_no_views():
    d = _decide([_track(1, [10], cos=None), _track(2, [20], cos=0.1)], views=None)
    assert d[1].rule == "too small to tell" and d[2].rule == "no views of him"
    assert d[1].decision == d[2].decision == "undecided"


def test_the_decision_records_its_evidence():
    d = _decide([_track(1, [10, 14], cos=0.2)])[1].as_dict()
    assert d["track"] == 1 and d["frames"] == [10, 14] and d["decision"] == "other"
    assert set(d) == {"track", "shot", "frames", "decision", "rule", "at", "cos", "best", "z", "cohort", "views",
                      "embeddings"}


# ------------------------------------------------------------------ real footage


def _720p(path, first: int, count: int) -> list[np.ndarray]:
    """``count`` frames of a real clip from ``first``, at 1280 x 720 (a narrower picture centred)."""
    import av
    import cv2

    out = []
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(c.streams.video[0])):
            if i < first:
                continue
            if len(out) == count:
                break
            img = f.to_ndarray(format="rgb24")
            w = round(img.shape[1] * 720 / img.shape[0])
            img = cv2.resize(img, (w, 720), interpolation=cv2.INTER_AREA if w < 1280 else cv2.INTER_CUBIC)
            if w < 1280:
                img = cv2.copyMakeBorder(img, 0, 0, (1280 - w) // 2, 1280 - w - (1280 - w) // 2, cv2.BORDER_CONSTANT)
            out.append(img[:, (w - 1280) // 2:(w - 1280) // 2 + 1280] if w > 1280 else img)
    return out


def _darken(img: np.ndarray) -> np.ndarray:
    """A night / stage grade (as bench/edited_variants.py's): contrast 35 %, gamma 2.5, half
    desaturated, seeded sensor noise."""
    x = (img.astype(np.float32) / 255.0) ** 2.5 * 0.35 + 0.02
    x = 0.5 * x + 0.5 * x.mean(axis=2, keepdims=True)
    rng = np.random.default_rng(int(img[::97, ::89].sum()) % (2**32))
    return np.clip(x * 255.0 + rng.normal(0, 2.0, img.shape), 0, 255).astype(np.uint8)


#: his shots (the hug's subject) alternating with shots of other real people: (clip, first, count)
MIX = [("hug", 0, 20), ("crowd", 0, 22), ("hug", 20, 20), ("arm", 30, 22), ("hug", 40, 16)]
SOURCES = {"hug": "two_people_hug_1080p.mp4", "crowd": "crowd_1080p.mp4", "arm": "arm_wrestling_340x256.mp4"}


@pytest.fixture(scope="module")
def mix(shared_media, hog_stack, tmp_path_factory):
    """The cut sequence MIX at 720p, bright and darkened, as clips, with per frame the shot it is
    in and his face box (the hug clip tracked alone, at 720p: ground truth for his face; the man on
    the right, selected with HOG's bodies: ``hog_stack``)."""
    from mime_fast.subject import detect_subject
    from video_fixtures import write_rgb_clip

    tmp = tmp_path_factory.mktemp("mix")
    hug = _720p(shared_media / SOURCES["hug"], 0, 72)
    truth = detect_subject(write_rgb_clip(tmp / "hug.mp4", hug, fps=25), stack=hog_stack)
    frames, shot, his = [], [], []
    for k, (name, first, count) in enumerate(MIX):
        part = hug[first:first + count] if name == "hug" else _720p(shared_media / SOURCES[name], first, count)
        frames += part
        shot += [k] * count
        his += [truth.tracks[first + j].box if name == "hug" else None for j in range(count)]
    bright = write_rgb_clip(tmp / "mix.mp4", frames, fps=30)
    dark = write_rgb_clip(tmp / "mix_dark.mp4", [_darken(f) for f in frames], fps=30)
    return {"bright": bright, "dark": dark, "shot": shot, "his": his, "tmp": tmp}


def _faces_masked(fm, fdm, faces) -> list[bool]:
    """Per face box of ``faces``, whether FDM's frame shows its centre blurred: nearer a Gaussian
    blur (k = 15, FDM's) of FM's than FM's own (x264's coding noise moves a clear face a little,
    the blur a lot, dark or bright)."""
    import cv2

    out = []
    blur = cv2.GaussianBlur(fm, (15, 15), 0)
    for b in faces.boxes:
        x0, y0, x1, y1 = (int(v) for v in b)
        w, h = x1 - x0, y1 - y0
        sl = np.s_[max(0, y0 + h // 5):y1 - h // 5, max(0, x0 + w // 5):x1 - w // 5]
        d = fdm[sl].astype(np.int16)
        out.append(float(np.abs(d - blur[sl]).mean()) < float(np.abs(d - fm[sl]).mean()))
    return out


def _his(box, faces) -> np.ndarray:
    """Which faces of ``faces`` are his face at ``box`` (IoU >= 0.2 or the centre inside)."""
    from mime_fast.subject.geometry import _iou

    if box is None or not len(faces):
        return np.zeros(len(faces), bool)
    b = np.asarray(box, np.float64)
    c = (faces.boxes[:, :2] + faces.boxes[:, 2:]) / 2
    inside = (c[:, 0] >= b[0]) & (c[:, 0] <= b[2]) & (c[:, 1] >= b[1]) & (c[:, 1] <= b[3])
    return (_iou(faces.boxes, b)[:, 0] >= 0.2) | inside


@pytest.mark.slow
@pytest.mark.parametrize("grade", ["bright", "dark"])
def test_real_cut_sequence_blurs_him_and_nobody_else(mix, hog_stack, grade):
    """His shots (the hug) alternate with shots of other real people (the crowd, the arm
    wrestlers), cut hard, bright and graded to a night level.  CenterFace (not the engine's
    detector) finds the faces of FM: his is blurred in FDM in every frame it finds it; in the other
    people's shots, after their 2nd frame, no face changes beyond coding noise -- but, in the
    dark, the faces too dark to read an identity from (a dark face reads alike against everybody:
    they stay masked, and the decision says so, track by track).  The dark sequence cuts where the bright
    one does."""
    from mime_fast import build_subsets
    from mime_fast.detect import CenterFaceDetector
    from video_fixtures import rgb_frames

    from mime_fast.subject import detect_subject

    res = build_subsets(mix[grade], mix["tmp"] / grade, subsets=["FM", "FDM"], min_height=0, min_duration=0,
                        fm_copy=False, landmarks=detect_subject(mix[grade], stack=hog_stack))
    tr = res.tracking
    starts = [0] + [i for i in range(1, len(mix["shot"])) if mix["shot"][i] != mix["shot"][i - 1]]
    assert [n for n, _ in tr.shot_frames] == [b - a for a, b in zip(starts, starts[1:] + [len(mix["shot"])])], tr
    fm, fdm = rgb_frames(res.outputs["FM"]), rgb_frames(res.outputs["FDM"])
    assert len(fm) == len(fdm) == len(mix["shot"])  # (30 fps in and out: an output frame is a source frame)
    det = CenterFaceDetector()
    seen, other_faces = 0, []
    for i, (a, b) in enumerate(zip(fm, fdm)):
        k = mix["shot"][i]
        faces = det.detect(a)
        mine = _his(mix["his"][i], faces)
        blurred = _faces_masked(a, b, faces)
        for j in np.flatnonzero(mine):
            seen += 1
            assert blurred[j], (i, faces.boxes[j])  # his face
        if MIX[k][0] != "hug" and i - starts[k] >= 2:
            other_faces += [(i, j) for j, m in enumerate(blurred) if not mine[j] and m] + [None] * int((~mine).sum())
    assert seen >= 40, seen  # CenterFace saw his face in most of his 56 frames
    # the other people's faces: clear (but for x264's coding noise), or, in the dark, masked where undecided
    masked = [f for f in other_faces if f is not None]
    undecided = [t for t in tr.tracks if MIX[mix["shot"][t["frames"][0]]][0] != "hug" and t["decision"] != "other"]
    assert len(other_faces) >= 100, len(other_faces)
    assert all(t["rule"] in ("too dark to tell", "too small to tell") for t in undecided), undecided
    if grade == "bright":  # (a dark face of the arm wrestlers' background stays masked: CenterFace does not see it)
        assert not masked and len(undecided) <= 1, (masked, undecided)
    # (pass 1 could not tell: every run of the detector in the crowd's shot after its 2nd frame --
    # searched for, every detect_every = 3 frames --; the decision cleared them.  The dark arm
    # wrestlers are found in a few frames only, and his own last shot, where the tracker once left
    # both men undecided, is resolved in pass 1 since revision 11: not counted)
    crowd = [i for i in range(len(fm)) if MIX[mix["shot"][i]][0] == "crowd" and i - starts[mix["shot"][i]] >= 2]
    assert tr.undecided_pass1 >= len(crowd) // 3 and len(crowd) == 20, (tr.undecided_pass1, len(crowd))


@pytest.mark.slow
def test_real_wide_shot_then_a_strangers_close_up_then_his(shared_media, stack, tmp_path):
    """He is selected small in a wide shot (the hug at 720p, his face ~45 px), a close-up of a
    stranger of the crowd (others behind him) follows, then a close-up of him: the stranger's
    close-up is not masked after its 2nd frame (he reads as another person against the subject's
    views), and he is masked in his close-up."""
    import cv2

    from mime_fast.landmarks import faces_list
    from mime_fast.subject import detect_subject
    from video_fixtures import write_rgb_clip

    hug = _720p(shared_media / SOURCES["hug"], 0, 72)
    crowd = _720p(shared_media / SOURCES["crowd"], 30, 26)
    stranger = [cv2.resize(f[267:507, 220:647], (1280, 720), interpolation=cv2.INTER_CUBIC) for f in crowd]
    close = [cv2.resize(f[80:320, 453:880], (1280, 720), interpolation=cv2.INTER_CUBIC) for f in hug[30:72]]
    clip = write_rgb_clip(tmp_path / "wide_close.mp4", hug[:30] + stranger + close, fps=25)
    prov = detect_subject(clip, stack=stack)
    assert [n for n, _ in prov.stats.shot_frames] == [30, 26, 42], prov.stats.shot_frames
    assert all(not faces_list(prov, i) for i in range(32, 56)), [len(faces_list(prov, i)) for i in range(30, 56)]
    assert all(faces_list(prov, i) for i in range(56, 98))  # his close-up: masked (he is found in it)
    assert prov.stats.undecided_pass1 > prov.stats.undecided


@pytest.mark.slow
def test_real_subject_after_a_corrupt_stretch_is_masked(shared_media, stack, monkeypatch):
    """The real 340 x 256 arm-wrestling clip: the subject (the wrestler in the white cap and
    glasses) is masked through his first shot; after the corrupt stretch near its end (about 60
    source frames of smeared macroblocks, no face found) a cut brings him back in profile at the
    left edge of the picture (face box about x 4 - 52, y 35 - 101, source frames 272 - 279).  His
    face there is masked, the other wrestler's is not: he is searched for, and his first read (0.33
    against SFace's weak threshold, 0.38: a 42 px profile) is unsure, so his track is read again
    (SEARCH_READS) and re-acquired by a strong read 6 frames later.  With one read per track (the
    rule removed) he was decided another's and left clear for the clip's last 8 frames (the audit's
    identity rule flagged them)."""
    import cv2

    import mime_fast.subject.face_tracks as face_tracks
    from mime_fast.landmarks import faces_list
    from mime_fast.subject import detect_subject

    def masked_at(prov, i: int, point) -> bool:
        for p in faces_list(prov, i):
            p = np.asarray(p, np.float32)
            p = p[np.isfinite(p).all(axis=1)]
            if len(p) >= 3 and cv2.pointPolygonTest(cv2.convexHull(p), point, False) >= 0:
                return True
        return False

    clip = shared_media / "arm_wrestling_340x256.mp4"
    prov = detect_subject(clip, stack=stack)
    assert all(masked_at(prov, i, (35.0, 40.0)) for i in (150, 200, 203)), "his first shot"
    assert all(masked_at(prov, i, (27.0, 68.0)) for i in range(272, 280)), [masked_at(prov, i, (27.0, 68.0)) for i in range(272, 280)]
    assert not any(masked_at(prov, i, (300.0, 60.0)) for i in range(272, 280))  # the other wrestler's face
    monkeypatch.setattr(face_tracks, "SEARCH_READS", 1)
    once = detect_subject(clip, stack=stack)
    assert not any(masked_at(once, i, (27.0, 68.0)) for i in range(274, 280))
