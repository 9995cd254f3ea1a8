"""The typed option groups (mime_fast.options): one definition of every setting, checked where a
run starts, and the `mime-fast build` flags generated from them."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import pickle
import re
from pathlib import Path

import pytest

import mime_fast
from mime_fast import cli, samples
from mime_fast.options import (DETECT_DEFAULTS, FIELDS, GROUPS, DetectOptions, EncodeOptions, MaskOptions,
                               OptionError, Settings, hold_frames)

#: A valid value other than the default for every option.
NON_DEFAULT = dict(fps=25, crf=20, preset="slow", threads=1, queue_size=0, keep_frames_mb=64, fm_copy=False,
                   audio_rate=22050, audio_channels=2, min_height=0, min_duration=0.25, min_frames=1,
                   fdm_kernel=9, fsm_kernel=35, feather_px=3.5, margin_px=2.0, hold_s=1.0, detect_size=None,
                   detect_every=1, hull_margin_frac=0.2, faces="all", schedule="mesh", undecided="leave", device="cuda",
                   nvdec=False, device_frames=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_help(capsys) -> str:
    with pytest.raises(SystemExit):
        cli.main(["build", "--help"])
    return capsys.readouterr().out


def flag_args(values: dict) -> list[str]:
    """Command-line flags setting ``values`` (options by keyword)."""
    by_name = {f.name: f for f in FIELDS}
    out = []
    for name, v in values.items():
        f = by_name[name]
        if isinstance(v, bool):
            out.append(("--" if v else "--no-") + f.flags[0][2:])
        else:
            out += [f.flags[0], f.none if v is None else str(v)]
    return out


def cli_settings(args: list[str]) -> Settings:
    ns = cli.parser().parse_args(["build", "in", "--out", "out", *args])
    return Settings(**cli.flags.options(ns))


# ------------------------------------------------------------------------------------ the groups


def test_flat_keywords_build_the_groups_and_read_through_them() -> None:
    s = Settings(crf=20, margin=2, faces="all", audio_rate=22050)
    assert s == Settings(encode=EncodeOptions(crf=20), mask=MaskOptions(margin_px=2), detect=DetectOptions(faces="all"),
                         audio=dataclasses.replace(Settings().audio, rate=22050))
    assert s.encode.crf == s.crf == 20 and s.mask.margin_px == s.margin_px == s.margin == 2
    assert s.detect.faces == s.faces == "all" and s.device == "cpu" and s.audio.rate == 22050
    assert set(s.flat()) == {f.name for f in FIELDS} and s.flat()["margin_px"] == 2
    assert Settings(**s.flat()) == s
    assert pickle.loads(pickle.dumps(s)) == s  # worker processes get it whole
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.encode.crf = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.encode = EncodeOptions()
    with pytest.raises(AttributeError):
        s.no_such_option  # noqa: B018


def test_output_settings_are_every_option_but_those_documented_not_to_change_the_bytes() -> None:
    # what the manifest records so that a rerun with other values is refused (corpus.resume)
    from mime_fast.options import BYTE_NEUTRAL

    assert BYTE_NEUTRAL == {"queue_size", "keep_frames_mb", "device", "nvdec", "device_frames"}
    for name in BYTE_NEUTRAL:  # each one's help says so, or its group's docstring does
        f = next(f for f in FIELDS if f.name == name)
        assert "do not depend on it" in f.help or "the same" in f.help or "same bytes" in GROUPS[f.group].__doc__
    s = Settings(crf=20, queue_size=0)
    assert list(s.output_settings()) == [f.name for f in FIELDS if f.name not in BYTE_NEUTRAL]
    assert s.output_settings()["crf"] == 20 and "queue_size" not in s.output_settings()


def test_groups_given_and_keywords_combine() -> None:
    base = Settings(encode=EncodeOptions(crf=20, threads=1))
    assert Settings(encode=base.encode, crf=22).encode == EncodeOptions(crf=22, threads=1)  # keywords win
    assert Settings.resolve(base) is base and Settings.resolve() == Settings()
    changed = Settings.resolve(base, preset="slow", margin=1)
    assert changed.encode == EncodeOptions(crf=20, threads=1, preset="slow") and changed.mask.margin_px == 1
    assert base.replace(mask=MaskOptions(fdm_kernel=9)).mask.fdm_kernel == 9
    with pytest.raises(TypeError, match="margin_px given twice"):
        Settings(margin=1, margin_px=2)
    with pytest.raises(TypeError, match="encode must be EncodeOptions"):
        Settings(encode=MaskOptions())
    assert Settings.resolve({"crf": 20}, margin=1) == Settings(crf=20, margin_px=1)
    with pytest.raises(TypeError, match="settings must be Settings or a mapping"):
        Settings.resolve(20)


def test_unknown_option_names_the_nearest() -> None:
    with pytest.raises(TypeError, match=r"unknown setting 'crff' \(did you mean 'crf'\?\)"):
        Settings(crff=18)
    with pytest.raises(TypeError, match=r"unknown setting 'fsm_kernal' \(did you mean 'fsm_kernel'\?\)"):
        Settings.from_kwargs(fsm_kernal=55)
    with pytest.raises(TypeError, match="unknown setting 'zzz'; known: fps, crf"):
        Settings(zzz=1)


@pytest.mark.parametrize(("kw", "message"), [
    (dict(margin=-2), "margin must be >= 0 pixels"),  # named as given
    (dict(margin_px=-2), "margin_px must be >= 0 pixels"),
    (dict(feather=-1), "feather must be >= 0 pixels"),
    (dict(audio_rate=0), "audio_rate must be a sample rate AAC takes (7350, 8000, "),
    (dict(audio_rate=15999), "audio_rate must be a sample rate AAC takes"),
    (dict(audio_channels=3), "audio_channels must be 1 or 2"),
    (dict(fdm_kernel=16), "fdm_kernel must be an odd integer from 1 to 255, got 16"),
    (dict(fdm_kernel=257), "fdm_kernel must be an odd integer from 1 to 255, got 257"),
    (dict(feather_px=float("inf")), "feather_px must be a finite number, got inf"),
    (dict(margin_px=float("nan")), "margin_px must be a finite number, got nan"),
    (dict(fsm_kernel=45), 'fsm_kernel must be 55, 35 or "auto"'),
    (dict(crf=52), "crf must be between 0 and 51"),
    (dict(preset="quick"), "preset must be one of"),
    (dict(min_frames=-1), "min_frames must be >= 0"),
    (dict(hold_s=-1), "hold_s must be >= 0 seconds"),
    (dict(detect_size=0), "detect_size must be a positive number of pixels"),
    (dict(detect_every=0), "detect_every must be >= 1"),
    (dict(hull_margin_frac=-0.1), "hull_margin_frac must be >= 0"),
    (dict(faces="everyone"), 'faces must be "subject" or "all"'),
    (dict(undecided="blur"), 'undecided must be "mask" or "leave"'),
    (dict(device="tpu"), 'device must be "cpu" or "cuda"'),
    (dict(nvdec="yes"), "nvdec must be True or False"),
])
def test_each_bad_value_is_one_message_naming_the_option(kw, message) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        Settings(**kw)


@pytest.mark.parametrize(("kw", "message"), [
    (dict(fps=29.97), "fps must be an integer, got 29.97"),  # never truncated to 29
    (dict(fdm_kernel=15.9), "fdm_kernel must be an integer, got 15.9"),
    (dict(fps="30"), "fps must be an integer, got '30'"),
    (dict(crf=True), "crf must be an integer, got True"),
    (dict(crf=None), "crf cannot be None"),
    (dict(min_frames=None), "min_frames cannot be None"),
    (dict(hold_s="0.5"), "hold_s must be a finite number, got '0.5'"),
    (dict(fm_copy=1), "fm_copy must be True or False, got 1"),
])
def test_a_value_of_another_type_is_refused_naming_the_option(kw, message) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        Settings(**kw)


def test_numbers_of_the_right_value_are_stored_as_the_options_type() -> None:
    import numpy as np

    s = Settings(fps=30.0, crf=np.int64(20), audio_channels=1.0, margin_px=np.float32(1.5), hold_s=1, feather_px=2)
    got = {k: s.flat()[k] for k in ("fps", "crf", "audio_channels", "margin_px", "hold_s", "feather_px")}
    assert got == {"fps": 30, "crf": 20, "audio_channels": 1, "margin_px": 1.5, "hold_s": 1.0, "feather_px": 2.0}
    assert [type(v) for v in got.values()] == [int, int, int, float, float, float]
    assert Settings(feather_px=None, detect_size=None).flat()["feather_px"] is None  # None where it means "auto"


def test_a_group_checks_itself() -> None:
    with pytest.raises(OptionError, match="margin_px must be >= 0"):
        MaskOptions(margin_px=-1)
    with pytest.raises(ValueError, match="rate must be"):
        GROUPS["audio"](rate=-5)


def test_detection_defaults_are_read_from_one_definition() -> None:
    """Every signature that has a detection default has DetectOptions's."""
    from mime_fast.subject import ALL_FACES_DETECT_SIZE, AllFaceTracker, SubjectTracker, track_clip
    from mime_fast.subject import SubjectDetection, detect_subject

    d = DETECT_DEFAULTS
    want = dict(hold_s=d.hold_s, detect_size=d.detect_size, detect_every=d.detect_every, margin=d.hull_margin_frac,
                faces=d.faces, undecided=d.undecided, hold_frames=hold_frames(d.hold_s, 30))
    for fn in (SubjectDetection.__init__, detect_subject, SubjectTracker.__init__, AllFaceTracker.__init__,
               track_clip):
        params = inspect.signature(fn).parameters
        got = {k: params[k].default for k in want if k in params}
        if fn is AllFaceTracker.__init__:  # every face is looked for at a size of its own
            assert got.pop("detect_size") == ALL_FACES_DETECT_SIZE
        assert got and got == {k: want[k] for k in got}, fn


# --------------------------------------------------------------------------------------- the CLI


def test_every_option_has_a_flag(capsys) -> None:
    text = build_help(capsys)
    for f in FIELDS:
        for flag in f.flags:
            assert re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", text), flag
            if isinstance(f.default, bool):
                assert "--no-" + flag[2:] in text


def test_help_states_the_dataclass_defaults(capsys) -> None:
    text = build_help(capsys)
    for f in FIELDS:
        start = re.search(rf"\n  {re.escape(f.flags[0])}[ ,]", text)
        assert start, f.flags[0]
        entry = " ".join(text[start.start():].split())
        shown = re.search(r"\(default: ([^)]*)\)", entry)[1]
        want = ("on" if f.default else "off") if isinstance(f.default, bool) else (
            f.none if f.default is None else str(f.default))
        assert shown == want, f.name


def test_cli_flags_round_trip_to_settings(monkeypatch) -> None:
    assert set(NON_DEFAULT) == {f.name for f in FIELDS}
    assert all(NON_DEFAULT[f.name] != f.default for f in FIELDS)
    assert cli_settings([]) == Settings()  # the flags' defaults are the fields'
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)  # device="cuda" checks for CUDA
    got = cli_settings(flag_args(NON_DEFAULT))
    assert got == Settings(**NON_DEFAULT)
    assert got.flat() == NON_DEFAULT
    assert cli_settings(["--margin", "2", "--feather", "auto", "--fsm-kernel", "AUTO", "--fm-copy"]) == Settings(
        margin_px=2.0)


def test_cli_names_the_flag_given(tmp_path: Path, capsys) -> None:
    clip = samples.make_clip(tmp_path / "in" / "a.mp4", duration=0.4, fps=25, size=(320, 240))
    out = tmp_path / "out"
    for flag in ("--margin", "--margin-px"):
        assert cli.main(["build", str(clip.path), "--out", str(out), flag, "-1"]) == 2
        assert f"{flag} must be >= 0 pixels" in capsys.readouterr().err
    assert cli.main(["build", str(clip.path), "--out", str(out), "--detect-size", "0"]) == 2
    assert "--detect-size must be a positive number of pixels" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------------------- the entry points


def test_run_corpus_rejects_an_unknown_option_before_any_clip(tmp_path: Path, monkeypatch) -> None:
    from mime_fast import corpus

    samples.make_clip(tmp_path / "in" / "a.mp4", duration=0.4, fps=25, size=(320, 240))
    calls = []
    monkeypatch.setattr(corpus.clip, "build_subsets", lambda *a, **k: calls.append(a))  # where it is used
    out = tmp_path / "out"
    with pytest.raises(TypeError, match=r"unknown setting 'crff' \(did you mean 'crf'\?\)"):
        corpus.run_corpus(corpus.discover(tmp_path / "in"), out, crff=18)
    with pytest.raises(ValueError, match="crf must be between 0 and 51"):
        corpus.run_corpus(corpus.discover(tmp_path / "in"), out, settings=Settings(min_height=0), crf=99)
    assert calls == [] and not out.exists()  # no clip ran, nothing written


def test_entry_points_take_settings_and_keywords_alike(tmp_path: Path) -> None:
    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.4, fps=25, size=(320, 240))
    st = Settings(min_height=0, min_duration=0, fm_copy=False, fsm_kernel=55)
    by_object = mime_fast.build_subsets(clip.path, tmp_path / "a", landmarks=clip.landmarks, subsets=["FM", "FSM"],
                                        settings=st, crf=20)
    assert by_object.settings == st.replace(crf=20)
    by_keywords = mime_fast.build_subsets(clip.path, tmp_path / "b", landmarks=clip.landmarks,
                                          subsets=["FM", "FSM"], min_height=0, min_duration=0, fm_copy=False,
                                          fsm_kernel=55, crf=20)
    for c in ("FM", "FSM"):
        assert sha256(by_object.outputs[c]) == sha256(by_keywords.outputs[c]), c
    one = mime_fast.degrade(clip.path, tmp_path / "fsm.mp4", "FSM", landmarks=clip.landmarks,
                            settings=st.replace(crf=20))
    assert sha256(one) == sha256(by_object.outputs["FSM"])
