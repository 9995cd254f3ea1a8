"""Decoding (:mod:`mime_fast.media.decode`): display orientation, frame times, prefetch."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mime_fast import media, samples
from mime_fast.media import ClipError

try:
    from video_fixtures import psnr, source_display_frames
except ImportError:  # tests/ imported as a package
    from .video_fixtures import psnr, source_display_frames


def test_display_transform_matches_quarter_turns():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    # FFmpeg av_display_rotation_set(m, theta): a = cos, b = -sin, c = sin, d = cos (counter-clockwise)
    for k, t in ((1, (0, -1, 1, 0)), (2, (-1, 0, 0, -1)), (3, (0, 1, -1, 0))):
        assert np.array_equal(media.apply_display_transform(img, t), np.rot90(img, k)), k
    assert np.array_equal(media.apply_display_transform(img, (-1, 0, 0, 1)), img[:, ::-1])


@pytest.mark.parametrize("rotation,hflip", [(90, False), (270, False), (180, False), (0, True), (90, True)])
def test_rotation_metadata_is_applied(tmp_path, rotation, hflip):
    up = samples.make_clip(tmp_path / "up.mp4", duration=0.2, fps=25, size=(320, 240), audio=False, seed=3)
    rot = samples.make_clip(tmp_path / "rot.mp4", duration=0.2, fps=25, size=(320, 240), audio=False, seed=3,
                            rotation=rotation, hflip=hflip)
    info = media.probe(rot.path)
    assert info.rotation == rotation and info.mirrored == hflip
    assert (info.width, info.height) == (320, 240)
    if rotation % 180:
        assert (info.coded_width, info.coded_height) == (240, 320)
    _, _, a = source_display_frames(up.path)
    _, _, b = source_display_frames(rot.path)
    assert len(a) == len(b) == 5
    for fa, fb in zip(a, b):
        assert fb.shape == (240, 320, 3)
        assert psnr(fa, fb) > 30  # same picture up to chroma siting of the rotated storage
    # and a wrong orientation would not match
    assert psnr(a[0], np.ascontiguousarray(np.rot90(np.rot90(b[0])))) < 20


def test_decode_yields_all_frames_with_times(tmp_path):
    clip = samples.make_clip(tmp_path / "d.mp4", duration=0.5, fps=Fraction(30000, 1001), size=(160, 120),
                             audio=False)
    info, times, frames = source_display_frames(clip.path)
    assert len(frames) == clip.frames == 15
    assert times == [Fraction(1001 * j, 30000) for j in range(15)]
    assert all(f.flags.c_contiguous and f.dtype == np.uint8 for f in frames)


@pytest.mark.parametrize("rotation", [90, 270])
def test_rotation_agrees_with_opencv_autorotation(tmp_path, rotation):
    """Independent reference: OpenCV's FFmpeg backend rotates frames by the display matrix too."""
    cv2 = pytest.importorskip("cv2")
    clip = samples.make_clip(tmp_path / "r.mp4", duration=0.2, fps=25, size=(320, 240), audio=False,
                             rotation=rotation)
    cap = cv2.VideoCapture(str(clip.path))
    if cap.get(cv2.CAP_PROP_ORIENTATION_AUTO) != 1:
        pytest.skip("this OpenCV build does not auto-rotate")
    ok, ref = cap.read()
    cap.release()
    assert ok
    _, _, ours = source_display_frames(clip.path)
    assert ours[0].shape == ref.shape == (240, 320, 3)
    assert psnr(ours[0], cv2.cvtColor(ref, cv2.COLOR_BGR2RGB)) > 45


def test_prefetch_propagates_errors_and_stops_early():
    def gen(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ClipError("x.mp4", "boom")
            yield i

    assert list(media.prefetch(gen(50), 3)) == list(range(50))
    assert list(media.prefetch(gen(5), 0)) == list(range(5))
    with pytest.raises(ClipError, match="boom"):
        list(media.prefetch(gen(50, fail_at=20), 3))
    produced = []

    def tracked():
        for i in range(10_000):
            produced.append(i)
            yield i

    it = media.prefetch(tracked(), 2)
    assert next(it) == 0
    it.close()  # consumer stops: the producer thread must stop too, bounded by the queue
    assert len(produced) <= 5


def test_behind_hands_every_item_over_in_order_on_its_own_thread():
    """:class:`media.Behind` calls ``fn`` on each item in the order put, on one thread of its own
    (``maxsize=0``: in line, on the caller's), and :meth:`close` returns once every item was taken."""
    import threading

    for maxsize, inline in ((3, False), (0, True)):
        seen: list[tuple[int, bool]] = []
        b = media.Behind(lambda i: seen.append((i, threading.current_thread() is threading.main_thread())), maxsize)
        for i in range(200):
            b.put(i)
        b.close()
        assert [i for i, _ in seen] == list(range(200))
        assert {on_main for _, on_main in seen} == {inline}
    assert not [t for t in threading.enumerate() if t.name == "behind"]


def test_behind_raises_what_fn_raised_and_takes_nothing_after_it():
    """An exception of ``fn`` comes out of a later :meth:`put` (or of :meth:`close`), and no item
    after the one that failed reaches ``fn``."""
    seen: list[int] = []

    def fn(i):
        if i == 5:
            raise ClipError("x.mp4", "boom")
        seen.append(i)

    b = media.Behind(fn, 2)
    with pytest.raises(ClipError, match="boom"):
        for i in range(1000):
            b.put(i)
        b.close()
    assert seen == [0, 1, 2, 3, 4]
    b.abort()  # (what a failed pass does next: nothing left to stop)
    b = media.Behind(fn, 2)
    for i in range(6):
        b.put(i)
    with pytest.raises(ClipError, match="boom"):
        b.close()


def test_behind_abort_drops_the_items_not_taken_yet():
    """:meth:`abort` (the clip failed) waits for the item ``fn`` is working on and hands over
    none of those queued behind it; the thread is gone after it."""
    import threading

    started, release, seen = threading.Event(), threading.Event(), []

    def fn(i):
        seen.append(i)
        if i == 0:
            started.set()
            assert release.wait(60)

    b = media.Behind(fn, 4)
    for i in range(4):
        b.put(i)
    assert started.wait(60)
    threading.Timer(0.2, release.set).start()
    b.abort()
    assert seen == [0]
    assert not [t for t in threading.enumerate() if t.name == "behind"]


# ------------------------------------------------------------------ frames kept from one pass for the next


def _decoded(path, rgb=True):
    info = media.probe(path)
    return info, list(media.iter_display_frames(path, info, rgb=rgb, keep_yuv=True))


@pytest.mark.parametrize("rotation", [0, 90], ids=["yuv420p", "rotated"])
def test_kept_frames_replay_what_a_second_decode_yields(tmp_path, rotation):
    """A pass that decodes with RGB (for the models) keeps each frame as a decode without RGB would
    give it: the decoded yuv420p frame alone when it passes through, the RGB alone when it must be
    converted (rotated); the replay hands them back in order, equal to a second decode, and holds
    none of them afterwards."""
    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.4, fps=25, size=(320, 240), audio=False, seed=2,
                             rotation=rotation)
    info, first = _decoded(clip.path)
    kept = media.KeptFrames(64 << 20)
    for item in first:
        kept.add(*item)
    assert kept.complete
    assert kept.bytes == sum(media.frame_bytes(rgb if frame is None else frame) for _, _, rgb, frame in first)
    _, second = _decoded(clip.path, rgb=False)
    replayed = list(kept.replay())
    assert len(replayed) == len(second) == 10
    for (i, t, rgb, frame), (j, u, rgb2, frame2) in zip(replayed, second):
        assert (i, t) == (j, u)
        assert (rgb is None) == (rgb2 is None) and (frame is None) == (frame2 is None)
        if rotation:
            assert frame is None and np.array_equal(rgb, rgb2)
        else:
            assert rgb is None
            for p, q in zip(frame.planes, frame2.planes):
                assert bytes(p) == bytes(q)
    assert not kept.complete and kept.bytes == 0
    with pytest.raises(RuntimeError, match="decode the source again"):
        next(kept.replay())


def test_kept_frames_keep_nothing_past_the_budget(tmp_path):
    clip = samples.make_clip(tmp_path / "c.mp4", duration=0.4, fps=25, size=(320, 240), audio=False)
    _, first = _decoded(clip.path)
    one = media.frame_bytes(first[0][3])
    assert one >= 320 * 240 * 3 // 2
    kept = media.KeptFrames(4 * one)  # room for 4 of the 10 frames: all or nothing
    for k, item in enumerate(first):
        kept.add(*item)
        assert kept.complete == (k < 4) and kept.bytes == (k + 1) * one * (k < 4)
    expected = media.KeptFrames(100 * one)
    expected.expect(101 * one)  # told up front the clip will not fit
    expected.add(*first[0])
    assert not expected.complete and expected.bytes == 0
    assert not media.KeptFrames(0).complete  # 0: keep nothing


def test_frame_bytes_counts_host_and_device_parts():
    class Nv12:  # a device frame without a tensor: its NV12 size
        width, height = 64, 48

    class Tensor:
        def numel(self):
            return 1000

        def element_size(self):
            return 1

    class Owned(Nv12):
        tensor = Tensor()

    class Nvdec:
        def __init__(self, nv12):
            self.frame, self.nv12 = np.zeros((48, 64), np.uint8), nv12

    assert media.frame_bytes(None, np.zeros((2, 3), np.int32)) == 24
    assert media.frame_bytes(Nv12()) == 64 * 48 * 3 // 2
    assert media.frame_bytes(Nvdec(Owned())) == 64 * 48 + 1000


def test_nvdec_frames_are_kept_on_the_device_alone(monkeypatch):
    """An NVDEC frame is kept without its host copy (half the memory); the replay downloads it again
    from the device frame, with the colour tags it was decoded with."""
    import av

    from mime_fast.media import nvdec

    class Dev:
        width, height = 64, 48

    host = av.VideoFrame(64, 48, "yuv420p")
    host.colorspace, host.color_range = 1, 1
    tags = (host.colorspace, host.color_range, host.color_primaries, host.color_trc)
    made = []
    monkeypatch.setattr(nvdec, "nv12_host_frame", lambda dev, color: made.append((dev, color)) or host)
    dev = Dev()
    kept = media.KeptFrames(1 << 20)
    kept.add(0, Fraction(0), np.zeros((48, 64, 3), np.uint8), nvdec.NvdecFrame(host, dev))
    assert kept.bytes == 64 * 48 * 3 // 2  # the device frame alone: no host copy, no RGB
    ((i, t, rgb, frame),) = list(kept.replay())
    assert (i, t, rgb) == (0, 0, None) and frame.nv12 is dev and frame.frame is host and made == [(dev, tags)]
