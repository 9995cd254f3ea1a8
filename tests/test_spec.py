"""mime_fast.spec: the subset table is complete and consistent, the old tables are views of it, and
the plan of a clip's build is what the pipeline writes (every subset combination against the rules
the pipeline had before the plan existed; a sample of them built, with audio or not, with a subject
or not, with landmarks given or the subject detected)."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest

from mime_fast.spec import (ALL_SUBSETS, BLUR_LEVEL, CLEAR_VERSION, CODES, ENCODED_SUBSETS, FACE_SUBSETS,
                            REMUXED_FROM, SUBSETS, Subset, SubsetSpec, encoded_bases, face_codes, parse_codes, plan,
                            remux_base, spec)

# The rules as the manifest documents them (manifest.py's column table) and as the pipeline applied
# them before the spec: literal, so that a change to the table shows here.
DOC_ORDER = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
DOC_REMUXED_FROM = {"FDAM": "FDM", "FSAM": "FSM", "AMM": "FM"}
DOC_BLUR_LEVEL = {"FM": "none", "VMM": "none", "AMM": "none", "FDM": "light", "FDAM": "light", "FSM": "heavy",
                  "FSAM": "heavy"}
DOC_CLEAR_VERSION = {"FDM": "FM", "FSM": "FM", "FDAM": "AMM", "FSAM": "AMM"}
DOC_FACE = ("FDM", "FSM")


# ------------------------------------------------------------------------------------- the table


def test_every_code_has_one_record_in_the_mime_order():
    assert tuple(SUBSETS) == tuple(Subset) == ALL_SUBSETS
    assert CODES == DOC_ORDER
    assert len({s.code for s in SUBSETS.values()}) == len(SUBSETS) == 7
    for code, s in SUBSETS.items():
        assert isinstance(s, SubsetSpec) and s.code is code
        assert spec(code.value) is s and spec(code) is s
        assert s.name and s.description
    with pytest.raises(ValueError):
        spec("XM")


def test_subset_is_its_code_string():
    assert Subset.FDAM == "FDAM" and str(Subset.FDAM) == "FDAM" and f"{Subset.FDAM}" == "FDAM"
    assert f"{Subset.FM:>4}" == "  FM"
    assert json.dumps({Subset.FM: Subset.AMM}) == '{"FM": "AMM"}'
    assert {"FM": 1}[Subset.FM] == 1 and {Subset.FM: 1}["FM"] == 1
    assert Subset("VMM") is Subset.VMM


def test_remux_bases_exist_and_carry_their_video():
    assert {c.value: b.value for c, b in REMUXED_FROM.items()} == DOC_REMUXED_FROM
    for code, s in SUBSETS.items():
        assert s.encoded == (s.remux_of is None)
        assert s.base == (s.remux_of or code)
        if s.remux_of is None:
            continue
        base = SUBSETS[s.remux_of]
        assert base.encoded, f"{code} is remuxed from {base.code}, itself a remux"
        assert (s.video, s.kernel, s.blur_level) == (base.video, base.kernel, base.blur_level)
        assert not s.has_audio and base.has_audio  # the remux drops the audio, and only that
    assert ENCODED_SUBSETS == tuple(c for c in ALL_SUBSETS if SUBSETS[c].encoded) == ("FM", "FDM", "FSM", "VMM")


def test_video_kernel_and_blur_level_agree():
    assert {c.value: level for c, level in BLUR_LEVEL.items()} == DOC_BLUR_LEVEL
    assert FACE_SUBSETS == DOC_FACE
    for code, s in SUBSETS.items():
        assert s.video in ("clear", "blur", "black")
        assert s.face == (s.video == "blur")
        assert (s.kernel is not None) == s.face
        assert s.blur_level == {None: "none", "fdm": "light", "fsm": "heavy"}[s.kernel]
        assert not s.needs_audio or (s.encoded and s.has_audio and code not in REMUXED_FROM.values())
    assert [c for c in ALL_SUBSETS if SUBSETS[c].needs_audio] == ["VMM"]


def test_clear_counterparts():
    assert {c.value: v.value for c, v in CLEAR_VERSION.items()} == DOC_CLEAR_VERSION
    for code, s in SUBSETS.items():
        clear = SUBSETS[s.clear]
        assert clear.video != "blur" and clear.clear == clear.code  # a clear version is its own
        if s.face:  # the same video unblurred, with the same audio (none for FDAM / FSAM)
            assert clear.video == "clear" and clear.has_audio == s.has_audio and clear.base == SUBSETS[s.base].clear
        else:
            assert s.clear == code


def test_old_tables_are_views_of_the_spec():
    from mime_fast import corpus, demo, manifest, preview, subsets
    from mime_fast.coe import outputs, prompts

    assert subsets.ALL_SUBSETS == corpus.ALL_SUBSETS == preview.SUBSETS == outputs.SUBSETS == DOC_ORDER
    assert subsets.REMUXED_FROM == DOC_REMUXED_FROM and subsets.FACE_SUBSETS == DOC_FACE
    assert manifest.BLUR_LEVEL == {**DOC_BLUR_LEVEL, "audio": "none"}
    assert manifest.CLEAR_VERSION == DOC_CLEAR_VERSION
    assert demo.PREVIEW_SUBSETS == ("FM", "FDM", "FSM", "VMM")
    assert prompts.SUBSET_NAMES == {c.value: s.name for c, s in SUBSETS.items()}
    assert prompts.SUBSET_NAMES["FSAM"] == "Face Structures & Audio Missing"
    for table in (subsets.REMUXED_FROM, manifest.BLUR_LEVEL, manifest.CLEAR_VERSION):  # plain strings, as before
        assert all(type(k) is str for k in table) and all(type(v) is str for v in table.values())


def test_queries():
    assert remux_base("AMM") == "FM" and remux_base("FSM") == "FSM"
    assert face_codes(["FM", "FSAM", "VMM", "FDM"]) == ["FSAM", "FDM"]
    assert encoded_bases(["AMM", "FSAM", "VMM"]) == ["FM", "FSM", "VMM"]
    assert parse_codes(None) == list(DOC_ORDER)
    assert parse_codes(["fsam", "FM", "FSAM"]) == ["FSAM", "FM"] and parse_codes("vmm") == ["VMM"]
    with pytest.raises(ValueError, match=r"unknown subset 'XM'; expected some of \('FM', 'FDM'"):
        parse_codes(["FM", "XM"])
    with pytest.raises(ValueError, match="no subsets requested"):
        parse_codes([])


# ----------------------------------------------------------------------------------- the plan

COMBOS = [list(c) for n in range(1, 8) for c in itertools.combinations(DOC_ORDER, n)]
NO_FACE = "no subject: test"


def _rules(codes, has_audio, detect, subject):
    """What the pipeline did before the plan: subsets._run as it was (its _bases, _plan_faces, the
    VMM check and the remux loop), on the literal tables."""
    codes = list(codes)
    skipped = []
    faces_asked = any(DOC_REMUXED_FROM.get(c, c) in DOC_FACE for c in codes)
    detect = detect and faces_asked

    def drop_faces():
        for c in [c for c in codes if DOC_REMUXED_FROM.get(c, c) in DOC_FACE]:
            skipped.append((c, NO_FACE))
            codes.remove(c)

    def bases():
        return [c for c in ("FM", "FDM", "FSM", "VMM")
                if c in codes or any(DOC_REMUXED_FROM.get(r) == c for r in codes)]

    if not detect and not subject:
        drop_faces()
    b = bases()
    if "VMM" in b and not has_audio:
        b.remove("VMM")
        skipped.append(("VMM", "no audio"))
    first = [c for c in b if not (detect and c in DOC_FACE)]
    face = []
    if detect:
        if not subject:
            drop_faces()
        face = [c for c in bases() if c in DOC_FACE]
    written = [c for c in codes if c not in dict(skipped)]
    remuxes = [(r, bb) for r, bb in DOC_REMUXED_FROM.items() if r in codes]
    encoded = sorted(set(first) | set(face), key=DOC_ORDER.index)
    scratch = [(bb, next(r for r, x in DOC_REMUXED_FROM.items() if x == bb and r in codes))
               for bb in encoded if bb not in codes]
    return dict(codes=written, skipped=skipped, first=first, face=face, remuxes=remuxes, scratch=scratch,
                detect=detect)


def _executed(codes, has_audio, detect, subject):
    """The plan as :func:`mime_fast.subsets._run` runs it (the face pass after the first)."""
    p = plan(codes, has_audio=has_audio, detect=detect, no_subject=None if subject or detect else NO_FACE)
    first = list(p.first_pass)
    if p.detect and not subject:
        p = p.without_subject(NO_FACE)
    return p, dict(codes=list(p.codes), skipped=list(p.skipped), first=first, face=list(p.face_pass),
                   remuxes=list(p.remuxes), scratch=list(p.scratch), detect=p.detect)


@pytest.mark.parametrize("detect", [False, True], ids=["landmarks", "detect"])
@pytest.mark.parametrize("subject", [True, False], ids=["subject", "no-subject"])
@pytest.mark.parametrize("has_audio", [True, False], ids=["audio", "silent"])
def test_plan_of_every_combination_follows_the_rules(has_audio, subject, detect):
    for codes in COMBOS:
        for order in (codes, codes[::-1]):
            p, got = _executed(order, has_audio, detect, subject)
            assert got == _rules(order, has_audio, detect, subject), order
            assert set(p.codes) | {c for c, _ in p.skipped} == set(order)
            assert all(type(c) is str for c in p.codes + p.encoded)
            for c in p.codes:  # audio: with the source's, on the subsets that keep it
                with_audio, reason = p.output_audio(c)
                assert with_audio == (has_audio and c not in DOC_REMUXED_FROM)
                assert reason == ("" if has_audio or c in DOC_REMUXED_FROM else "source has no audio")


def test_plan_holds_fms_video_copied_or_encoded():
    # FM's video, when the plan makes it (FM, or AMM's source): a stream copy written before the
    # passes when the rule allows it (on no pass), else encoded on the first pass with the reason
    for codes in COMBOS:
        for has_audio, detect in itertools.product((True, False), repeat=2):
            enc = plan(codes, has_audio=has_audio, detect=detect, fm_copy=(False, "why"))
            cp = plan(codes, has_audio=has_audio, detect=detect, fm_copy=(True, ""))
            if not {"FM", "AMM"} & set(codes):
                assert enc.fm_video is cp.fm_video is None and enc == plan(codes, has_audio=has_audio, detect=detect)
                assert cp.copied == () and cp.videos == cp.encoded
                continue
            assert (enc.fm_video, enc.fm_video_reason, enc.copied) == ("encode", "why", ())
            assert (cp.fm_video, cp.fm_video_reason, cp.copied) == ("copy", "", ("FM",))
            assert "FM" in enc.first_pass and "FM" not in cp.first_pass + cp.face_pass
            assert cp.first_pass == tuple(c for c in enc.first_pass if c != "FM")
            assert cp.videos == enc.encoded == enc.videos  # the same videos, one of them copied
            assert (cp.codes, cp.skipped, cp.remuxes, cp.scratch) == (enc.codes, enc.skipped, enc.remuxes, enc.scratch)
            refused = cp.copy_refused("the copy would not do")
            assert refused == enc.__class__(**{**enc.__dict__, "fm_video_reason": "the copy would not do"})
            assert refused.copy_refused("again") == refused  # only a copy is refused
            if detect and face_codes(codes):  # no subject: FM's video stays as planned
                assert cp.without_subject(NO_FACE).fm_video == "copy"


# ------------------------------------------------------------------ the plan against the pipeline

BUILT = [["FM"], ["FDM"], ["FSM"], ["VMM"], ["FDAM"], ["FSAM"], ["AMM"], ["FSAM", "VMM"], ["AMM", "FDM", "FDAM"],
         ["FSM", "FSAM", "AMM"], list(DOC_ORDER)]
TINY = dict(min_height=0, min_duration=0, threads=1, queue_size=0, fm_copy=False, fsm_kernel=55)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    from mime_fast.samples import make_clip

    d = tmp_path_factory.mktemp("spec_clips")
    kw = dict(duration=0.4, fps=25, size=(128, 96))
    return {"face": make_clip(d / "face.mp4", seed=1, **kw),
            "silent": make_clip(d / "silent.mp4", audio=False, seed=2, **kw),
            "noface": make_clip(d / "noface.mp4", face=False, seed=3, **kw)}


class _FakeDetection:
    """Stands in for :class:`mime_fast.subject.SubjectDetection`: the clip's own landmarks, found
    "by detection" (with a tracking report)."""

    landmarks = None
    device_frames = False  # host RGB frames, as a CPU stack reads them

    def __init__(self, info, **kw):
        self.fed = 0

    def feed(self, rgb):
        self.fed += 1

    def result(self):
        from mime_fast.landmarks import ArrayLandmarks

        arr = ArrayLandmarks(self.landmarks)
        present = any(arr.points(i) is not None for i in range(arr.num_frames))
        return SimpleNamespace(points=arr.points, num_frames=arr.num_frames,
                               stats=SimpleNamespace(status="ok" if present else "no subject"))


@pytest.mark.parametrize("kind,detect", [("face", False), ("silent", False), ("noface", False), ("face", True),
                                         ("noface", True)])
def test_pipeline_writes_the_plan(clips, kind, detect, tmp_path, monkeypatch):
    from mime_fast import subsets

    clip = clips[kind]
    passes = []
    loop = subsets._encode_loop

    def recording(src, info, provider, st, ops, writers, *a, **kw):
        passes.append(sorted(writers, key=DOC_ORDER.index))
        return loop(src, info, provider, st, ops, writers, *a, **kw)

    monkeypatch.setattr(subsets, "_encode_loop", recording)
    if detect:
        monkeypatch.setattr(_FakeDetection, "landmarks", clip.landmarks)
        monkeypatch.setattr(subsets, "SubjectDetection", _FakeDetection)
    has_audio, subject = kind != "silent", kind != "noface"
    reason = ("no subject: no face found in any frame" if detect else
              "no subject: the landmarks given have no face in any frame")
    for i, codes in enumerate(BUILT):
        passes.clear()
        out = tmp_path / str(i)
        res = subsets.build_subsets(clip.path, out, landmarks=None if detect else clip.landmarks, subsets=codes,
                                    **TINY)
        p = plan(codes, has_audio=has_audio, detect=detect, no_subject=None if subject or detect else reason)
        first = list(p.first_pass)
        if p.detect and not subject:
            p = p.without_subject(reason)
        written = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
        assert written == sorted([f"{c}/{clip.path.stem}.mp4" for c in p.codes]
                                 + ([f"audio/{clip.path.stem}.wav"] if has_audio else [])), codes
        assert list(res.outputs) == list(p.codes)
        assert [(c, s.reason) for c, s in res.status.items() if s.status == "skipped"] == list(p.skipped)
        assert list(res.status) == [c for c, _ in p.skipped] + list(p.codes)
        expected_passes = [first] + ([list(p.face_pass)] if p.face_pass else [])
        if not p.detect and not first:
            expected_passes = []  # nothing to encode, no detection: no decode pass
        assert passes == expected_passes, codes
        for c in p.codes:
            st = res.status[c]
            assert (st.has_audio, st.reason) == p.output_audio(c)
            assert st.kernel == {"fdm": 15, "fsm": 55, None: None}[spec(c).kernel]
