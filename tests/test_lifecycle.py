"""The subject's lifecycle (mime_fast.subject.lifecycle): each phase entered and left by its event,
decided in one place (phase_of), and what the tracker does in each; the subject package's modules
import one way."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mime_fast.detect.interface import Faces, Landmarks
from mime_fast.subject import Phase, SubjectTracker
from mime_fast.subject.lifecycle import phase_of, recent
from mime_fast.subject.state import Follow

BOX = np.array([600.0, 300, 680, 400])  # his face in a 720 x 1280 frame


def _follow(last_seen=None, present_at=-(10**9), box=BOX) -> Follow:
    f = Follow()
    f.box, f.last_seen, f.present_at = (None if box is None else box.copy()), last_seen, present_at
    return f


@pytest.mark.parametrize("follow, index, start, phase", [
    (_follow(box=None), 5, 0, Phase.UNSELECTED),
    (_follow(last_seen=9), 10, 0, Phase.FOLLOWED),             # matched whole on the frame before
    (_follow(last_seen=7), 10, 0, Phase.MISSED),               # 2 frames missed, within the hold of 3
    (_follow(last_seen=7), 11, 0, Phase.SEARCHING),            # 3 frames missed: the hold ran out
    (_follow(last_seen=7, present_at=9), 11, 0, Phase.GLIMPSED),  # ... but part of him was seen
    (_follow(last_seen=7, present_at=7), 11, 0, Phase.SEARCHING),
    (_follow(last_seen=9), 10, 10, Phase.SEARCHING),           # a new shot starts at this frame
    (_follow(last_seen=9, present_at=9), 10, 10, Phase.SEARCHING),
])
def test_phase_of_each_phase(follow, index, start, phase):
    assert phase_of(follow, index, start, 3) is phase
    assert phase.lost == (phase in (Phase.GLIMPSED, Phase.SEARCHING))


def test_recent_is_in_the_shot_and_within_the_hold():
    assert recent(7, 10, 0, 3) and not recent(6, 10, 0, 3) and not recent(7, 10, 8, 3) and not recent(None, 10, 0, 3)


def test_forget_motion_is_the_one_reset():
    f = _follow(last_seen=9)
    f.vel, f.vel_known, f.anchor, f.last_points, f.partial_run = np.ones(2), True, (1, 2, 3), np.ones((3, 2)), 2
    f.head, f.seed = object(), (1, None, None)
    f.forget_motion()
    assert not f.vel.any() and not f.vel_known and f.anchor is None and f.last_points is None
    assert f.partial_run == 0 and f.head is None and f.seed is None
    assert f.last_seen == 9 and f.box is not None  # where he was is kept: the phase follows the clocks


class _Script:
    """A stack whose detector finds, at its n-th call, the boxes ``script(n)`` (frame pixels of a
    720 x 1280 frame) and records the size of each frame it is given; one person (every face
    embeds alike: identity strong); the mesh an ellipse in the box."""

    def __init__(self, script):
        self.script, self.calls, self.inputs = script, -1, []
        self.detector = SimpleNamespace(detect=self._detect)
        self.landmarks = SimpleNamespace(landmarks=self._landmarks)
        self.embedder = SimpleNamespace(embed=lambda frame, faces: np.tile(np.eye(1, 128, dtype=np.float32), (len(faces), 1)))
        self.persons = None
        self.crop_detection = False

    def _detect(self, img):
        self.calls += 1
        self.inputs.append(max(img.shape[:2]))
        s = max(img.shape[:2]) / 1280
        boxes = np.asarray(self.script(self.calls), np.float64).reshape(-1, 4) * s
        c = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2], 1)
        return Faces(boxes, np.full(len(boxes), 0.99), np.repeat(c[:, None], 5, axis=1))

    def _landmarks(self, frame, faces):
        t = np.linspace(0, 2 * np.pi, 36, endpoint=False)
        pts = [np.stack([(b[0] + b[2]) / 2 + (b[2] - b[0]) / 2 * np.cos(t), (b[1] + b[3]) / 2 + (b[3] - b[1]) / 2 * np.sin(t)], 1)
               for b in faces.boxes]
        return Landmarks(np.array(pts, np.float32).reshape(-1, 36, 2), np.ones(len(pts)))


def _run(script, frames: int, cuts=(), **kw):
    stack = _Script(script)
    tr = SubjectTracker(stack, detect_every=1, hold_frames=3, **kw)
    frame = np.zeros((720, 1280, 3), np.uint8)
    phases, kinds = [], []
    for i in range(frames):
        if i in cuts:
            tr.new_shot()
        kinds.append(tr.update(frame).kind)
        phases.append(tr.phase)
    return tr, stack, phases, kinds


def test_the_phases_entered_and_left_by_their_events():
    """Selected on his first frame; followed; missed when the detector loses him; searched for once
    the hold runs out; followed again once identity finds him; searched for after a cut."""
    present = set(range(0, 5)) | set(range(11, 14)) | set(range(14, 18))
    tr, stack, phases, kinds = _run(lambda n: [BOX] if n in present else [], 18, cuts=(14,), detect_size=None)
    F, M, S = Phase.FOLLOWED, Phase.MISSED, Phase.SEARCHING
    assert phases == [Phase.UNSELECTED, F, F, F, F,  # selected on frame 0, then matched frame after frame
                      F, M, M,  # lost by the detector at 5: followed there (matched on 4), missed from 6
                      S, S, S,  # hold (3) ran out: searched for
                      S, F, F,  # found again at 11 by identity (re-acquired), followed from 12
                      S, F, F, F]  # a cut at 14: searched for, found at once
    assert kinds[:5] == ["detected"] * 5 and kinds[11:] == ["detected"] * 7
    assert tr.stats.reacquired == 2 and tr.stats.selected_frame == 0


def test_glimpsed_while_only_part_of_him_is_found():
    """His face found only in part (smaller than PARTIAL of his size) moves his ``present_at`` clock
    alone: once the hold runs out he is glimpsed, looked for by identity among every face, and a
    whole match makes him followed again."""
    small = BOX + np.array([10.0, 12, -10, -12])  # 0.75 of his size, same centre
    tr, _, phases, kinds = _run(lambda n: [BOX] if n < 5 else [small], 10, detect_size=None)
    assert kinds[5:9] == ["partial"] * 3 + ["detected"]  # (after the hold of partial frames: his new size)
    assert phases[5:10] == [Phase.FOLLOWED, Phase.MISSED, Phase.MISSED, Phase.GLIMPSED, Phase.FOLLOWED], phases


def test_searched_for_on_the_whole_frame_at_the_search_size():
    """While he is searched for, the detector sees the whole frame at SEARCH_DETECT_SIZE (640); else
    at ``detect_size``."""
    from mime_fast.subject.tracking import SEARCH_DETECT_SIZE

    tr, stack, phases, _ = _run(lambda n: [BOX] if n < 3 or n >= 8 else [], 10, detect_size=384)
    searched = [i for i, p in enumerate(phases) if p is Phase.SEARCHING]
    assert searched == [6, 7, 8]
    assert [stack.inputs[i] for i in range(10)] == [SEARCH_DETECT_SIZE if i in searched else 384 for i in range(10)]


def test_a_followed_subject_is_detected_around_him_only_when_followed():
    """The detector looks only around him (the observation's ``roi``) where he was followed on the
    frame before; missed or searched for, it sees the whole frame."""
    def bright(img):  # the face is the one bright square of the picture, wherever it is cut from
        ys, xs = np.nonzero(img[..., 0] > 128)
        if not len(xs):
            return Faces(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))
        box = np.array([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], np.float64)
        return Faces(box, np.ones(1), np.repeat(((box[:, :2] + box[:, 2:]) / 2)[:, None], 5, axis=1))

    stack = _Script(lambda n: [])
    stack.detector, stack.crop_detection = SimpleNamespace(detect=bright), True
    tr = SubjectTracker(stack, detect_every=1, hold_frames=3, detect_size=1280)
    face, empty = np.zeros((720, 1280, 3), np.uint8), np.zeros((720, 1280, 3), np.uint8)
    face[330:370, 620:660] = 255  # a 40 px face: the square around him is a fraction of the frame
    seen = []
    for i in range(8):
        tr.update(empty if i in (4, 5) else face)
        seen.append((tr.phase, tr.observation.roi is not None))
    assert seen == [(Phase.UNSELECTED, False), (Phase.FOLLOWED, True), (Phase.FOLLOWED, True),
                    (Phase.FOLLOWED, True), (Phase.FOLLOWED, True), (Phase.MISSED, False),
                    (Phase.MISSED, False), (Phase.FOLLOWED, True)]


def test_a_view_of_him_is_kept_once_per_hold_while_he_is_followed():
    """While he is followed, a view of his face is kept on a full detection at most once per
    ``hold_frames`` (about twice a second): one steady face, the detector on every frame, a hold
    of 5 frames: views on frames 0, 5, ..., 35 and none between, so that the views a search reads
    (GALLERY_SIZE) and those of the whole clip (CLIP_VIEWS) are spread over his moments."""
    stack = _Script(lambda n: [BOX])
    tr = SubjectTracker(stack, detect_every=1, hold_frames=5, detect_size=None)
    frame = np.zeros((720, 1280, 3), np.uint8)
    kept, kinds = [], []
    for i in range(40):
        before = tr.identity.gallery_at
        kinds.append(tr.update(frame).kind)
        if tr.identity.gallery_at != before:
            kept.append(tr.identity.gallery_at)
    assert kinds == ["detected"] * 40 and stack.calls == 39 and tr.phase is Phase.FOLLOWED
    assert kept == [0, 5, 10, 15, 20, 25, 30, 35]
    assert len(tr.identity.clip_views) == 8


def test_a_hold_under_one_frame_is_refused():
    with pytest.raises(ValueError, match="hold_frames"):
        SubjectTracker(_Script(lambda n: []), hold_frames=0)


# ------------------------------------------------------------------ the package's imports


SUBJECT = Path(__file__).resolve().parents[1] / "python" / "mime_fast" / "subject"


def _imports(path: Path) -> set[str]:
    """The sibling modules ``path`` imports (``from .x import ...``), TYPE_CHECKING imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_the_subject_package_imports_one_way():
    """No circle among the subject package's modules (the package's ``__init__`` aside), and none
    past 400 lines but the tracker's pipeline (issue 50: tracking.py is still being cut)."""
    graph = {p.stem: _imports(p) & {q.stem for q in SUBJECT.glob("*.py")} for p in SUBJECT.glob("*.py")
             if p.stem != "__init__"}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            assert state.get(n) != 1, "import circle: " + " -> ".join([*path, m, n])
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert {"lifecycle", "matching", "mesh_follow", "appearance", "record"} <= set(graph)
    assert "tracking" not in set().union(*(graph[m] for m in graph if m not in ("detection",)))
    long = {p.name for p in SUBJECT.glob("*.py") if len(p.read_text().splitlines()) > 400}
    assert long <= {"tracking.py", "shots.py"}, long


# ------------------------------------------------------------------ the detection schedule


def _textured(seed: int = 0) -> np.ndarray:
    """A 720 x 1280 picture with corners everywhere (optical flow holds on it)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, 8, axis=0), 8, axis=1)


def _scheduled(script, frames, *, quality: float = 0.0, detect_every: int = 3, cuts=(), swap=(), schedule="period"):
    """Run the tracker over ``frames`` textured frames (``swap``: frames whose picture is flat
    grey, where his head's motion cannot hold), the mesh's confidence ``quality`` (0: never
    followed by it); returns the tracker and, per frame, (phase, whether the detector ran)."""
    stack = _Script(script)
    lmk = stack.landmarks.landmarks
    stack.landmarks = SimpleNamespace(landmarks=lambda f, faces: Landmarks(lmk(f, faces).points, np.full(len(faces), quality)))
    tr = SubjectTracker(stack, detect_every=detect_every, hold_frames=10, detect_size=None, schedule=schedule)
    a, b = _textured(0), np.full((720, 1280, 3), 128, np.uint8)
    seen = []
    for i in range(frames):
        if i in cuts:
            tr.new_shot()
        tr.update(b if i in swap else a)
        seen.append((tr.phase, tr.observation is not None))
    return tr, seen


def test_the_detector_runs_at_its_period_while_he_is_followed_by_his_head():
    """An unsure mesh no longer forces a detection: between the detector's runs (every
    ``detect_every`` frames) a followed face is followed by its head's motion."""
    tr, seen = _scheduled(lambda n: [BOX], 12)
    assert [ran for _, ran in seen] == [True, False, False] * 4
    assert tr.stats.detector_runs == 4 and tr.stats.waited == 8 and tr.stats.head == 0  # (before finish)
    tr1, seen1 = _scheduled(lambda n: [BOX], 12, detect_every=1)
    assert all(ran for _, ran in seen1) and tr1.stats.waited == 0


def test_the_detector_runs_at_once_where_his_head_is_lost_or_a_shot_starts():
    """Events: where his head's motion does not hold (the picture changed) the detector runs on
    that frame, and on a new shot's first frame."""
    _, seen = _scheduled(lambda n: [BOX], 9, swap={4})
    # (4: the picture went flat; 5: a head seeded on the flat frame has nothing to follow)
    assert [ran for _, ran in seen] == [True, False, False, True, True, True, False, False, True]
    _, seen = _scheduled(lambda n: [BOX], 9, cuts={5})
    assert [ran for _, ran in seen] == [True, False, False, True, False, True, False, False, True]
    assert seen[5][0] is Phase.SEARCHING


def test_searched_for_at_the_period_missed_every_frame():
    """Searched for, the detector runs at its period (a face found then is held back over the
    frames between); after a run that did not find him while he is missed, every frame."""
    _, seen = _scheduled(lambda n: [BOX] if n < 4 else [], 30)  # found by the detector's first 4 runs
    phases, ran = [p for p, _ in seen], [r for _, r in seen]
    # runs 0, 3, 6, 9 find him; 12 does not; then every frame while he is missed (hold 10: up to
    # frame 19), then, searched for, nothing of him seen for longer than the hold, every
    # SEARCH_SLOWDOWN x 3 = 6th frame from the last run
    assert [i for i, r in enumerate(ran) if r] == [0, 3, 6, 9, 12, *range(13, 20), 25]
    assert phases[12:20] == [Phase.MISSED] * 8 and set(phases[20:]) == {Phase.SEARCHING}


def test_a_shot_without_him_is_searched_at_a_lower_rate():
    """After a cut to a shot without him: searched for every 3rd frame through the hold (10 frames:
    he may be found there, and a face found then is held back to the shot's start), then every
    SEARCH_SLOWDOWN x 3 = 6th frame; a face found later is held back over those frames too."""
    from mime_fast.subject.tracking import SEARCH_SLOWDOWN

    assert SEARCH_SLOWDOWN == 2
    _, seen = _scheduled(lambda n: [BOX] if n < 2 else [], 40, cuts={6})
    ran = [i for i, (_, r) in enumerate(seen) if r]
    assert ran == [0, 3, 6, 9, 12, 15, 21, 27, 33, 39], ran


def test_the_mesh_schedule_detects_every_frame_the_mesh_does_not_follow():
    """The "mesh" schedule: where his mesh is unsure the detector runs every frame, as before
    issue 50; "period" is the default; an unknown schedule is refused."""
    from mime_fast.options import DETECT_DEFAULTS
    assert DETECT_DEFAULTS.schedule == "period" and SubjectTracker(_Script(lambda n: [])).schedule == "period"
    tr, seen = _scheduled(lambda n: [BOX], 9, schedule="mesh")
    assert all(ran for _, ran in seen) and tr.stats.waited == 0
    with pytest.raises(ValueError, match="schedule"):
        SubjectTracker(_Script(lambda n: []), schedule="sometimes")


# ------------------------------------------------------------------ runs frames apart: the latest evidence of him

FAR = np.array([100.0, 100, 180, 200])  # another face, far from him (no event: nobody near him)


def test_no_jump_where_his_mesh_still_holds_him():
    """Runs three frames apart: at the run of frame 6 the detector misses him while the other faces
    moved on (none continues a face track of the last run), which reads as a jump -- but his mesh,
    followed on frame 5, still holds him on frame 6: he stays followed, by it
    (``TrackingStats.jumps_held``).  Without the check he would be searched for from frame 6."""
    def script(n):  # the detector's n-th run: frames 0, 3, 6, 9
        if n < 2:
            return [BOX, FAR]
        return [FAR + [900, 0, 900, 0], FAR + [700, 350, 700, 350]]

    tr, seen = _scheduled(script, 9, quality=1.0)
    assert [ran for _, ran in seen][:7] == [True, False, False, True, False, False, True]
    assert tr.stats.jumps == 0 and tr.stats.jumps_held == 1, tr.stats
    assert seen[7][0] is Phase.FOLLOWED and tr.his[6].how == "tracked"

    import mime_fast.subject.tracking as tracking  # the check removed: a jump, he is searched for
    orig = tracking.SubjectTracker._mesh_holds
    tracking.SubjectTracker._mesh_holds = lambda self, frame: None
    try:
        tr, seen = _scheduled(script, 9, quality=1.0)
    finally:
        tracking.SubjectTracker._mesh_holds = orig
    assert tr.stats.jumps == 1 and seen[6][0] is Phase.SEARCHING


def test_his_track_continues_from_where_his_mesh_last_put_him():
    """The rule of his own face track (matching.continued_track) reads where he just was: his last
    detection, or, followed by his mesh since (runs frames apart), the mesh's box -- a face of his
    track that moved on from the detection three frames before continues it."""
    from mime_fast.subject.matching import Candidates, Context, continued_track
    from mime_fast.subject.state import ShotState

    moved = BOX + [40, 0, 40, 0]  # IoU 0.33 with BOX (his last detection, frame 6), 0.78 with the mesh's
    f = _follow(last_seen=8, present_at=6, box=BOX + [30, 0, 30, 0])
    f.present_box, f.subject_track, f.frame_ids = BOX.copy(), 7, [7, 9]
    # (the other face beside it, so that it is not alone there either)
    faces = Faces(np.array([moved, moved + [100, 0, 100, 0]]), np.full(2, 0.99), np.zeros((2, 5, 2)))
    cand = np.arange(2)
    c = Candidates(faces, cand, faces, np.zeros((2, 4)), np.array([0.2, 0.1]), np.zeros(2), np.zeros(2), False)
    ctx = Context(9, 10, f, ShotState(), 0.55, list)
    pick = continued_track(ctx, c)
    assert pick is not None and pick.j == 0 and pick.how == "continued"
    f.last_seen = 6  # not followed since the detection: the detection's box, which it does not overlap
    assert continued_track(Context(9, 10, f, ShotState(), 0.55, list), c) is None


def test_between_two_partial_matches_his_mask_holds():
    """A frame left without a mask between two of his matches of which one is partial (his face
    half hidden; between the schedule's runs his head's motion lost) gets the hull of both; not
    across more than twice the hold."""
    from mime_fast.subject import fill_gaps
    from mime_fast.subject.geometry import FrameTrack, _box_ellipse

    def part(box):
        return FrameTrack(_box_ellipse(box), box.astype(np.float32), "partial", None, 5.0)

    absent = FrameTrack()
    tracks = [part(BOX), absent, absent, part(BOX + 20)]
    fill_gaps(tracks, hold_frames=2)
    assert [t.kind for t in tracks] == ["partial", "interpolated", "interpolated", "partial"]
    assert tracks[1].points.shape[0] == 2 * tracks[0].points.shape[0]  # the hull of both
    far = [part(BOX)] + [FrameTrack()] * 5 + [part(BOX)]
    fill_gaps(far, hold_frames=2)
    assert [t.kind for t in far[1:-1]] == ["absent"] * 5


def test_an_undecided_mask_reaches_to_where_the_next_run_would_have_been():
    """Under the period schedule a face undecided at the clip's last detector run stays masked up to
    where the next run would have been (the frames after it were not looked at); with every frame
    detected, one frame on each side as before."""
    from mime_fast.subject.record import undecided_hulls
    from mime_fast.subject.state import PassRecord

    hull = np.array([[0, 0], [10, 0], [10, 10]], np.float32)
    rec = PassRecord(run_every=3, detector_frames=[0, 3, 6])
    rec.undecided, rec.undecided_ids = {6: [hull]}, {6: [None]}
    out = undecided_hulls(rec, 10, None, 0.1)
    assert [i for i, h in enumerate(out) if h] == [4, 5, 6, 7, 8]  # (from the run before on)
    rec.run_every, rec.detector_frames = 1, []
    assert [i for i, h in enumerate(undecided_hulls(rec, 10, None, 0.1)) if h] == [5, 6, 7]


def test_the_gates_are_centred_on_a_part_of_his_face_found_since_his_whole_match():
    """He moved right fast, then stopped: the detector found only part of his face on frame 4 (where
    he stopped) and, on frame 5, his face (weakly: score 0.6) where the part was and a stranger
    (confident) where his last whole match moved by its motion would put him.  The gates are
    centred on the part found since his whole match: his face is taken, not the stranger's (which
    the geometric match would otherwise take, alone and confident near the prediction)."""
    step = np.array([40.0, 0, 40, 0])
    part = BOX + 3 * step + [10, 12, -10, -12]  # 0.75 of his size, where he stopped

    def script(n):
        if n < 4:
            return [BOX + n * step], [0.99]
        if n == 4:
            return [part], [0.99]
        return [BOX + 3 * step, BOX + 5 * step + [20, 0, 20, 0]], [0.6, 0.99]

    class Stack(_Script):
        def _detect(self, img):
            boxes, scores = script(self.calls + 1)
            self.script = lambda n: boxes
            faces = super()._detect(img)
            return Faces(faces.boxes, np.asarray(scores, np.float64), faces.keypoints)

    stack = Stack(script)
    first = [True]

    def embed(frame, faces):  # identity cannot decide after the selection: every later face reads 0
        out = np.zeros((len(faces), 128), np.float32)
        out[:, 0 if first[0] else 1] = 1
        first[0] = False
        return out

    stack.embedder = SimpleNamespace(embed=embed)
    tr = SubjectTracker(stack, detect_every=1, hold_frames=10, detect_size=None)
    frame = np.zeros((720, 1280, 3), np.uint8)
    kinds = [tr.update(frame).kind for _ in range(6)]
    assert kinds[4] == "partial"
    taken = tr.his.get(5)
    assert taken is not None and abs(taken.box[0] - (BOX[0] + 3 * step[0])) < 1, (kinds, taken)
