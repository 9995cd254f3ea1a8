"""Outputs made without encoding and atomic outputs (:mod:`mime_fast.media.outputs`)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mime_fast import media

try:
    from video_fixtures import decode_video, textured_frames, video_packets, write_rgb_clip
except ImportError:  # tests/ imported as a package
    from .video_fixtures import decode_video, textured_frames, video_packets, write_rgb_clip


def test_remux_copies_video_packets_byte_identical_and_drops_audio(tmp_path):
    a = write_rgb_clip(tmp_path / "a.mp4", textured_frames(), audio_rate=16000)
    b = tmp_path / "b.mp4"
    n = media.remux_video(a, b)
    assert n == 12
    assert video_packets(a) == video_packets(b)
    _, times, info = decode_video(b)
    assert info["audio"] == [] and info["n_streams"] == 1
    assert times == [Fraction(i, 30) for i in range(12)]


def test_atomic_outputs_remove_temporaries_on_error(tmp_path):
    final = tmp_path / "x" / "clip.mp4"
    with pytest.raises(RuntimeError):
        with media.atomic_outputs() as outs:
            t = outs.temp_for(final)
            assert t.parent == final.parent and t.name.startswith(".clip.tmp-") and t.suffix == ".mp4"
            t.write_bytes(b"partial")
            raise RuntimeError("boom")
    assert list((tmp_path / "x").iterdir()) == []
    with media.atomic_outputs() as outs:
        outs.temp_for(final).write_bytes(b"done")
    assert final.read_bytes() == b"done" and list((tmp_path / "x").iterdir()) == [final]


def test_check_writable_names_the_folder_and_leaves_no_probe(tmp_path, monkeypatch) -> None:
    import errno
    import os

    media.check_writable(tmp_path, ("c1.mp4",))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as err:  # a name too long once its temporary's name is added
        media.check_writable(tmp_path, ("x" * 250 + ".mp4",))
    assert err.value.errno == errno.ENAMETOOLONG

    def full(fd: int) -> None:  # a full disk shows when the written byte is synced
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as err:
        media.check_writable(tmp_path)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path)
    assert list(tmp_path.iterdir()) == []
