"""Synthetic test clips with a real face and known ground truth.

No real-face 720p video ships in any package, so clips are composed: the face of
``skimage.data.astronaut()`` (a real photograph, 512 x 512, shipped in scikit-image) is cut out with a
soft elliptical alpha and composited over a moving, procedurally generated background, moving along a
known Lissajous path.  For every frame the generator knows

* ``boxes[i]``: the face box ``(x, y, w, h)`` (float) in displayed-frame pixels,
* ``landmarks[i]``: 106 ``(x, y)`` points: 33 on the face ellipse contour + 73 interior points on
  concentric ellipses (a stand-in for a dense 106-point landmark set),
* ``times[i]``: the presentation time in seconds (the first frame's is ``start``, 0 by default).

An optional generated audio track (440 Hz on the left channel, 1000 Hz on the right, 0.25 full scale
each, AAC, default 48 kHz stereo) exercises resampling.  Rotation metadata (display matrix) can be
written: the frames are stored rotated so that a player honouring the metadata shows the upright scene.

Usage::

    from mime_fast.samples import make_clip
    clip = make_clip(tmp_path / "a.mp4", duration=1.0, fps=25, size=(1280, 720))
    clip.landmarks  # (frames, 106, 2) float32, displayed-frame coordinates

``make_clip`` also writes ``<stem>.npz`` beside the clip (keys ``landmarks``, ``boxes``, ``times``).
Needs scikit-image (test dependency) and PyAV.

One kind of clip per module: :mod:`~mime_fast.samples.clip` (the moving face above, audio-only
files, the command line), :mod:`~mime_fast.samples.scenes` (tracking scenes: two people crossing,
an occluding panel), :mod:`~mime_fast.samples.cuts` (shots of other clips cut or dissolved together).
"""

from __future__ import annotations

from .clip import FACE_TONES_HZ, SampleClip, face_sprite, main, make_audio_only, make_clip
from .scenes import SceneClip, make_scene_clip
from .cuts import CutSequence, make_cut_sequence

__all__ = ["SampleClip", "SceneClip", "CutSequence", "make_clip", "make_scene_clip", "make_cut_sequence",
           "make_audio_only", "face_sprite", "FACE_TONES_HZ", "main"]
