"""`mime-fast preview`: the contact sheet shows every subset, the blurred region and audio presence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mime_fast import build_subsets, samples
from mime_fast.cli import main
from video_fixtures import junk_bytes
from mime_fast.manifest import read_rows
from mime_fast.preview import SUBSETS, contact_sheet

YELLOW = np.array([255, 220, 0], np.uint8)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("preview")
    clip = samples.make_clip(d / "src" / "p1.mp4", duration=1.0, fps=25, size=(320, 240), seed=4)
    build_subsets(clip.path, d / "out", landmarks=clip.landmarks, min_height=0, min_duration=0)
    return d / "out", clip


def tile(sheet: np.ndarray, row: int, col: int, h: int = 240, w: int = 320) -> np.ndarray:
    y, x = 24 + row * (h + 4), 90 + col * (w + 4)
    return sheet[y : y + h, x : x + w]


def test_sheet_layout_outline_and_audio_bars(built) -> None:
    out, clip = built
    sheet = contact_sheet(out, "p1", times=3)
    assert sheet.shape == (24 + 7 * 244, 90 + 3 * 324, 3)
    for row, code in enumerate(SUBSETS):
        bar = sheet[24 + row * 244 + 120 + 8, 10]
        assert tuple(bar) == ((60, 200, 80) if code in ("FM", "FDM", "FSM", "VMM") else (90, 90, 90)), code
        for col in range(3):
            t = tile(sheet, row, col)
            yellow = np.all(t == YELLOW, axis=2)
            if code == "VMM":
                assert t.max() <= 8 and not yellow.any()
                continue
            # The outline surrounds the true face box (a few stray pixels from coding noise may
            # appear elsewhere: the bulk of the outline is checked).
            i = (int(np.linspace(0, 29, 3).round()[col]) * 25) // 30
            x, y, w, h = clip.boxes[i]
            ys, xs = np.nonzero(yellow)
            assert len(xs) > 50, (code, col)
            x5, x95 = np.percentile(xs, [5, 95])
            y5, y95 = np.percentile(ys, [5, 95])
            assert x - 0.3 * w <= x5 < x + 0.3 * w and x + 0.7 * w < x95 <= x + 1.3 * w, (code, col)
            assert y - 0.3 * h <= y5 < y + 0.4 * h and y + 0.6 * h < y95 <= y + 1.3 * h, (code, col)


def test_cli_preview_from_output_path_and_errors(built, tmp_path: Path, capsys) -> None:
    out, _ = built
    png = tmp_path / "sheet.png"
    assert main(["preview", str(out / "FSM" / "p1.mp4"), "--out", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG") and str(png) in capsys.readouterr().out
    assert main(["preview", "p1", "--dir", str(out)]) == 0
    assert (out / "previews" / "p1.png").is_file()
    assert main(["preview", "nope", "--dir", str(out)]) == 2
    assert "no subset of clip 'nope'" in capsys.readouterr().err


def test_cli_preview_of_a_failed_clip_says_that_it_failed_and_why(tmp_path: Path, capsys) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "broken.mp4").write_bytes(junk_bytes(4096))
    out = tmp_path / "out"
    assert main(["build", str(root), "--out", str(out)]) == 1
    capsys.readouterr()
    reason = read_rows(out)[0]["reason"]
    assert reason
    assert main(["preview", "broken", "--dir", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"mime-fast preview: error: clip 'broken' failed, so it has no outputs: {reason}"


def test_preview_out_naming_a_folder_is_a_usage_error_and_leaves_no_temp(built, tmp_path: Path, capsys) -> None:
    out, _ = built
    folder = tmp_path / "sheet.png"
    folder.mkdir()
    assert main(["preview", "p1", "--dir", str(out), "--out", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mime-fast preview: error: --out") and str(folder) in err and "\n" not in err
    assert list(tmp_path.iterdir()) == [folder] and not list(folder.iterdir())


def test_write_png_removes_its_temp_when_the_rename_fails(tmp_path: Path) -> None:
    from mime_fast.preview import write_png

    (tmp_path / "x.png").mkdir()
    with pytest.raises(OSError):
        write_png(tmp_path / "x.png", np.zeros((4, 4, 3), np.uint8))
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]


def test_only_the_frames_shown_are_converted_to_rgb(built, monkeypatch) -> None:
    """The sheet converts (and keeps) only the frames it shows: 3 per subset decoded, not all 30 of
    each (memory that grew with the clip's length); FDAM, FSAM and AMM carry FDM's, FSM's and FM's
    video packets and are not decoded again."""
    import av

    out, _ = built
    converted = []

    class Frame:
        def __init__(self, frame):
            self._frame = frame

        def __getattr__(self, name):
            return getattr(self._frame, name)

        def to_ndarray(self, *args, **kwargs):
            converted.append(kwargs.get("format"))
            return self._frame.to_ndarray(*args, **kwargs)

    class Container:
        def __init__(self, c):
            self._c = c

        def __getattr__(self, name):
            return getattr(self._c, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._c.close()

        def decode(self, *args, **kwargs):
            return (Frame(f) for f in self._c.decode(*args, **kwargs))

    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: Container(real_open(*a, **k)))
    assert contact_sheet(out, "p1", times=3).shape == (24 + 7 * 244, 90 + 3 * 324, 3)
    assert converted.count("rgb24") == 3 * 4  # FM, FDM, FSM, VMM


def test_a_remux_whose_packets_are_not_its_bases_is_shown_as_it_is(built, tmp_path: Path) -> None:
    """A remux is shown with its base's frames only when its video packets are the base's: an FDAM
    that carries other video (here FSAM's, FSM's heavier blur) is decoded and shown as itself."""
    import shutil

    out, _ = built
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    rows = {code: i for i, code in enumerate(SUBSETS)}
    sheet = contact_sheet(copy, "p1", times=3)
    for remux, base in (("FDAM", "FDM"), ("FSAM", "FSM"), ("AMM", "FM")):
        assert np.array_equal(tile(sheet, rows[remux], 1), tile(sheet, rows[base], 1)), remux
    assert not np.array_equal(tile(sheet, rows["FDM"], 1), tile(sheet, rows["FSM"], 1))
    shutil.copyfile(copy / "FSAM" / "p1.mp4", copy / "FDAM" / "p1.mp4")
    sheet = contact_sheet(copy, "p1", times=3)
    for col in range(3):
        assert np.array_equal(tile(sheet, rows["FDAM"], col), tile(sheet, rows["FSM"], col)), col
        assert not np.array_equal(tile(sheet, rows["FDAM"], col), tile(sheet, rows["FDM"], col)), col


def test_cli_preview_of_an_output_that_cannot_be_read_is_a_runtime_error(built, tmp_path: Path, capsys) -> None:
    import shutil

    out, _ = built
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    fsm = copy / "FSM" / "p1.mp4"
    fsm.write_bytes(fsm.read_bytes()[:2000])
    assert main(["preview", "p1", "--dir", str(copy), "--out", str(tmp_path / "s.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"mime-fast preview: error: {fsm}: truncated") and err.count("\n") == 1, err
    assert not (tmp_path / "s.png").exists()


def test_cli_preview_refuses_a_clip_id_that_is_a_path(built, tmp_path: Path, capsys) -> None:
    """'../FM/p1' would read OUT/FM/../FM/p1.mp4 and write OUT/previews/../FM/p1.png."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(built[0], out)
    before = sorted(p for p in out.rglob("*"))
    for clip in ("../FM/p1", "..", "a\\b"):
        assert main(["preview", clip, "--dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"clip id {clip!r} cannot name a file" in err and err.count("\n") == 1, err
    assert sorted(p for p in out.rglob("*")) == before
    with pytest.raises(ValueError, match="cannot name a file"):
        contact_sheet(out, "../FM/p1")


def test_time_labels_follow_the_output_frame_rate(tmp_path: Path) -> None:
    """At 25 fps the last of 25 frames is at 0.96 s (labelled 1.0s), not 24 / 30 = 0.8 s."""
    from mime_fast.preview import draw_text

    clip = samples.make_clip(tmp_path / "src" / "q.mp4", duration=1.0, fps=25, size=(160, 120), seed=4)
    build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, min_height=0, min_duration=0, fps=25,
                  subsets=["FM"])
    sheet = contact_sheet(tmp_path / "out", "q", times=4)
    header = np.full((24, sheet.shape[1], 3), 24, np.uint8)
    for j, label in enumerate(("0.0s", "0.3s", "0.6s", "1.0s")):  # frames 0, 8, 16, 24
        draw_text(header, label, 90 + j * (160 + 4) + 4, 5)
    assert np.array_equal(sheet[:24], header)


def test_a_clip_without_audio_keeps_a_vmm_row_that_says_so(tmp_path: Path, capsys) -> None:
    clip = samples.make_clip(tmp_path / "src" / "quiet.mp4", duration=0.6, fps=25, size=(320, 240), seed=5,
                             audio=False)
    build_subsets(clip.path, tmp_path / "out", landmarks=clip.landmarks, min_height=0, min_duration=0)
    assert not (tmp_path / "out" / "VMM" / "quiet.mp4").exists()
    sheet = contact_sheet(tmp_path / "out", "quiet", times=2)
    assert sheet.shape == (24 + 7 * 244, 90 + 2 * 324, 3)  # every subset's row, VMM's too
    vmm = SUBSETS.index("VMM")
    for col in range(2):
        t = tile(sheet, vmm, col)
        assert (t == 48).all(axis=2).mean() > 0.9 and (t == 255).all(axis=2).any()  # grey, with its text
    assert tuple(sheet[24 + vmm * 244 + 120 + 8, 10]) == (90, 90, 90)  # no audio
    assert main(["preview", "quiet", "--dir", str(tmp_path / "out"), "--times", "2"]) == 0
    assert "quiet: no VMM, the source has no audio" in capsys.readouterr().out
