"""Encoding (:mod:`mime_fast.media.encode`): the MP4 writer and the shared packets of a still picture."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mime_fast import frames, media
from mime_fast.frames import BLACK

try:
    from video_fixtures import decode_video, psnr, sha256, textured_frames, write_rgb_clip
except ImportError:  # tests/ imported as a package
    from .video_fixtures import decode_video, psnr, sha256, textured_frames, write_rgb_clip


def test_mp4_writer_is_deterministic_and_30fps(tmp_path):
    fr = textured_frames()
    a = write_rgb_clip(tmp_path / "a.mp4", fr, audio_rate=16000)
    b = write_rgb_clip(tmp_path / "b.mp4", fr, audio_rate=16000)
    assert sha256(a) == sha256(b)
    dec, times, info = decode_video(a)
    assert info["average_rate"] == 30 and info["pix_fmt"] == "yuv420p" and info["codec"] == "h264"
    assert times == [Fraction(i, 30) for i in range(12)]
    assert min(psnr(x, y) for x, y in zip(dec, fr)) > 35
    assert info["audio"] == [("aac", 16000, "mono")]


def test_mp4_writer_crops_odd_sizes(tmp_path):
    fr = textured_frames(4, h=121, w=161)
    a = write_rgb_clip(tmp_path / "odd.mp4", fr)
    dec, _, info = decode_video(a)
    assert (info["width"], info["height"]) == (160, 120)
    assert psnr(dec[0], fr[0][:120, :160]) > 35


def test_black_frame_decodes_to_black(tmp_path):
    wr = media.Mp4Writer(tmp_path / "k.mp4", 64, 48)
    vf = frames.black_frame(64, 48)
    for i in range(3):
        wr.write_frame(vf, i)
    wr.close()
    dec, _, _ = decode_video(tmp_path / "k.mp4")
    assert len(dec) == 3 and max(int(d.max()) for d in dec) <= 2


def test_threaded_writer_matches_synchronous_and_reports_worker_errors(tmp_path):
    fr = textured_frames()
    a = write_rgb_clip(tmp_path / "sync.mp4", fr, audio_rate=16000)
    b = write_rgb_clip(tmp_path / "thr.mp4", fr, audio_rate=16000, queue_size=2)
    assert sha256(a) == sha256(b)
    wr = media.Mp4Writer(tmp_path / "bad.mp4", 160, 120, queue_size=2)
    wr.write_rgb(fr[0], 0)
    wr.write_rgb(np.zeros((120, 160), np.uint8), 1)  # not RGB: fails on the worker thread
    with pytest.raises(ValueError):  # PyAV's from_ndarray rejects the 2-D array, re-raised here
        for i in range(2, 50):
            wr.write_rgb(fr[0], i)
        wr.close()
    wr.abort()


@pytest.mark.parametrize("queue_size", [0, 2])
def test_writers_finished_together_write_the_files_closed_in_turn(tmp_path, queue_size):
    """finish() starts a writer's flush and returns; close() then waits for it: two writers
    finished together, one aborted after finishing, write what close() alone writes (the aborted
    one nothing the caller keeps; its thread is gone)."""
    import threading

    fr = textured_frames()
    ref = write_rgb_clip(tmp_path / "ref.mp4", fr, queue_size=queue_size)
    ws = [media.Mp4Writer(tmp_path / f"w{i}.mp4", 160, 120, queue_size=queue_size) for i in range(3)]
    for i, f in enumerate(fr):
        for w in ws:
            w.write_rgb(f, i)
    for w in ws:
        w.finish()
        w.finish()  # (again: nothing more)
    ws[2].abort()
    for w in ws[:2]:
        w.close()
        w.close()
    assert sha256(tmp_path / "w0.mp4") == sha256(tmp_path / "w1.mp4") == sha256(ref)
    assert not [t for t in threading.enumerate() if t.name.startswith("mp4writer-w")]


@pytest.mark.parametrize("queue_size", [0, 2])
def test_still_run_packets_are_the_bytes_of_a_direct_encode(tmp_path, queue_size):
    # VMM's black frames come from the StillRun of BLACK, encoded once per configuration and reused: every
    # length, shorter or longer than what was encoded before (longer: the run is re-encoded from
    # the start, as each writer releases the encoder when it closes), even over a key frame (every
    # 250), for several sizes in turn, gives the same file as a writer encoding black frames
    # itself, audio included, and decodes to black
    media.StillRun.reset()
    pcm = (np.sin(np.arange(48000) / 7) * 6000).astype(np.int16)[:, None]
    media.write_wav(tmp_path / "a.wav", pcm, 16000)
    track = media.AacTrack(tmp_path / "a.wav")
    runs = [(64, 48, 1), (64, 48, 70), (64, 48, 3), (32, 32, 20), (48, 32, 5), (64, 48, 251), (64, 48, 64)]
    for k, (w, h, n) in enumerate(runs):
        direct, cached = tmp_path / f"direct{k}.mp4", tmp_path / f"cached{k}.mp4"
        for path, black in ((direct, False), (cached, True)):
            wr = media.Mp4Writer(path, w, h, preset="ultrafast", audio_track=track, queue_size=queue_size)
            vf = frames.black_frame(w, h)
            for i in range(n):
                if black:
                    wr.write_still(i, BLACK)
                else:
                    wr.write_frame(vf, i)
                wr.write_audio_until(Fraction(i + 1, 30))
            wr.close()
        assert sha256(cached) == sha256(direct), (w, h, n)
    assert len(media.StillRun._instances) == 3
    assert all(b._enc is None for b in media.StillRun._instances.values())  # no encoder held after the writers
    assert len(media.StillRun.shared((64, 48, Fraction(30), 18, "ultrafast", 2, "bt601", None), BLACK)._packets) == 251
    dec, times, _ = decode_video(tmp_path / "cached5.mp4")
    assert len(dec) == 251 and times[-1] == Fraction(250, 30) and max(int(d.max()) for d in dec) <= 2
    # out of order is refused; another preset encodes black frames itself
    wr = media.Mp4Writer(tmp_path / "x.mp4", 64, 48, preset="ultrafast")
    with pytest.raises(ValueError, match="in order"):
        wr.write_still(1, BLACK)
    wr.abort()
    wr = media.Mp4Writer(tmp_path / "vf.mp4", 64, 48, preset="veryfast")
    for i in range(3):
        wr.write_still(i, BLACK)
    wr.close()
    dec, _, _ = decode_video(tmp_path / "vf.mp4")
    assert len(dec) == 3 and max(int(d.max()) for d in dec) <= 2
    media.StillRun.reset()
    assert media.StillRun._instances == {}
