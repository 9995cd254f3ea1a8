"""The synthetic clips (:mod:`mime_fast.samples`): ground truth and command line."""

from __future__ import annotations

import numpy as np

from mime_fast import media, samples

try:
    from video_fixtures import psnr, source_display_frames
except ImportError:  # tests/ imported as a package
    from .video_fixtures import psnr, source_display_frames


def test_sample_ground_truth_matches_the_face_in_the_frames(tmp_path):
    clip = samples.make_clip(tmp_path / "g.mp4", duration=0.4, fps=25, size=(640, 480), audio=False)
    assert clip.landmarks.shape == (10, 106, 2) and clip.boxes.shape == (10, 4)
    z = np.load(clip.npz)
    assert np.array_equal(z["landmarks"], clip.landmarks)
    assert not np.allclose(clip.boxes[0], clip.boxes[-1])  # the face moves
    _, _, frames = source_display_frames(clip.path)
    sprite, alpha, pts = samples.face_sprite(0.3 * 480 / (2 * 58.0))
    for i in (0, 9):
        x, y = np.round(clip.landmarks[i].min(0) - pts.min(0)).astype(int)  # sprite top-left
        h, w = sprite.shape[:2]
        inner = alpha > 0.99
        got = frames[i][y:y + h, x:x + w][inner]
        assert psnr(got, sprite[inner]) > 30


def test_samples_cli_writes_clip_and_ground_truth(tmp_path):
    out = tmp_path / "cli.mp4"
    assert samples.main([str(out), "--duration", "0.2", "--fps", "30000/1001", "--size", "160x120", "--no-audio"]) == 0
    info = media.probe(out)
    assert (info.width, info.height, info.video_frames, info.has_audio) == (160, 120, 6, False)
    assert np.load(out.with_suffix(".npz"))["landmarks"].shape == (6, 106, 2)
