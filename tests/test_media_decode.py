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
