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
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from .frames import yuv420_frame
from .media import x264_options

__all__ = ["SampleClip", "SceneClip", "CutSequence", "make_clip", "make_scene_clip", "make_cut_sequence",
           "make_audio_only", "face_sprite", "FACE_TONES_HZ"]

#: Frequencies of the generated audio track (left, right channel).
FACE_TONES_HZ = (440.0, 1000.0)

# Astronaut photograph geometry (pixels of skimage.data.astronaut()).
_HEAD_CROP = (10, 190, 140, 310)  # y0, y1, x0, x1: head with hair
_HEAD_ELLIPSE = (225.0, 95.0, 78.0, 88.0)  # cx, cy, ax, ay: alpha of the cut-out
# The face (landmarks, ground-truth box): the ellipse inscribed in the hand-checked face box
# (178, 58)-(273, 178), hairline to chin and cheek to cheek (tests/test_detect_models.py::ASTRONAUT_FACE).
_FACE_ELLIPSE = (225.5, 118.0, 47.5, 60.0)  # cx, cy, ax, ay


@dataclass
class SampleClip:
    path: Path
    npz: Path
    fps: Fraction
    width: int  # displayed size
    height: int
    rotation: int
    times: np.ndarray  # (frames,) seconds
    boxes: np.ndarray  # (frames, 4) x, y, w, h float32
    landmarks: np.ndarray  # (frames, 106, 2) float32
    has_audio: bool
    audio_rate: int | None
    audio_channels: int | None

    @property
    def frames(self) -> int:
        return len(self.times)


@contextlib.contextmanager
def _writing(path: Path):
    """An output container for ``path``; on any error it is closed and the partial file removed."""
    import av

    c = av.open(str(path), "w")
    try:
        yield c
    except BaseException:
        c.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise
    c.close()


def face_sprite(scale: float = 1.0):
    """``(rgb, alpha, landmarks)`` of the astronaut's head scaled by ``scale``.

    ``rgb`` h x w x 3 uint8, ``alpha`` h x w float32 in [0, 1], ``landmarks`` 106 x 2 float32 in sprite
    coordinates.
    """
    import cv2
    from skimage import data

    img = data.astronaut()
    y0, y1, x0, x1 = _HEAD_CROP
    crop = img[y0:y1, x0:x1]
    hcx, hcy, hax, hay = _HEAD_ELLIPSE
    yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32) + 0.5
    r = np.sqrt(((xx - hcx) / hax) ** 2 + ((yy - hcy) / hay) ** 2)
    alpha = np.clip((1.0 - r) / 0.12, 0.0, 1.0).astype(np.float32)
    pts = _face_points() - np.array([x0, y0], np.float32)
    if scale != 1.0:
        h, w = crop.shape[:2]
        nw, nh = max(2, int(round(w * scale))), max(2, int(round(h * scale)))
        crop = cv2.resize(crop, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
        alpha = cv2.resize(alpha, (nw, nh), interpolation=cv2.INTER_LINEAR)
        pts = pts * np.array([nw / w, nh / h], np.float32)
    return np.ascontiguousarray(crop), alpha, pts.astype(np.float32)


def _face_points() -> np.ndarray:
    """106 points in astronaut-image coordinates: 33 contour + 73 interior (rings of 24, 24, 16, 8, +1)."""
    cx, cy, ax, ay = _FACE_ELLIPSE
    pts = []
    for n, s in ((33, 1.0), (24, 0.78), (24, 0.56), (16, 0.36), (8, 0.18)):
        th = np.linspace(0, 2 * np.pi, n, endpoint=False) + (0.1 if s < 1 else 0.0)
        pts.append(np.stack([cx + s * ax * np.cos(th), cy + s * ay * np.sin(th)], 1))
    pts.append(np.array([[cx, cy]]))
    out = np.concatenate(pts).astype(np.float32)
    assert out.shape == (106, 2)
    return out


def _background_texture(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Smooth coloured noise (value noise + gradients), uint8 h x w x 3."""
    import cv2

    small = rng.integers(30, 226, size=(max(2, h // 48), max(2, w // 48), 3), dtype=np.uint8)
    tex = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float32)
    # fine detail in luminance only (yuv420p halves chroma resolution)
    fine = cv2.resize(rng.integers(0, 256, size=(max(2, h // 8), max(2, w // 8)), dtype=np.uint8), (w, h),
                      interpolation=cv2.INTER_LINEAR).astype(np.float32)[..., None]
    gy = np.linspace(0, 60, h, dtype=np.float32)[:, None, None]
    gx = np.linspace(0, 40, w, dtype=np.float32)[None, :, None]
    out = 0.6 * tex + 0.25 * fine + gy + gx
    return np.clip(out, 0, 255).astype(np.uint8)


def _path(t: float, w: int, h: int, sw: int, sh: int, duration: float):
    """Top-left of the sprite at time t: a Lissajous path inside the frame."""
    mx, my = max(0.0, (w - sw) / 2 - 4), max(0.0, (h - sh) / 2 - 4)
    ax, ay = 0.6 * mx, 0.5 * my
    px = (w - sw) / 2 + ax * np.sin(2 * np.pi * t / max(duration, 1e-6))
    py = (h - sh) / 2 + ay * np.sin(4 * np.pi * t / max(duration, 1e-6) + 0.5)
    return int(round(px)), int(round(py))


def _frame_times(n: int, fps: Fraction, vfr: bool) -> list[Fraction]:
    if not vfr:
        return [Fraction(i) / fps for i in range(n)]
    # variable frame rate: intervals cycle through 0.6, 1.4, 1.0 times the nominal interval (ms grid)
    pattern = (Fraction(3, 5), Fraction(7, 5), Fraction(1))
    t, out = Fraction(0), []
    for i in range(n):
        out.append(Fraction(round(t * 1000), 1000))
        t += pattern[i % 3] / fps
    return out


def make_clip(path, *, duration: float = 1.0, fps=25, size=(1280, 720), audio: bool = True,
              audio_rate: int = 48000, audio_channels: int = 2, rotation: int = 0, vfr: bool = False,
              face_scale: float | None = None, face: bool = True, seed: int = 0, crf: int = 16,
              codec: str = "libx264", save_npz: bool = True, audio_delay: float = 0.0,
              hflip: bool = False, start: float = 0.0, audio_marks=None, bframes: int | None = None,
              color: str | None = None) -> SampleClip:
    """Write a synthetic clip to ``path`` (container from the suffix: .mp4, .mkv, .mov) and its
    ground truth to ``<stem>.npz``.

    ``size`` = displayed (width, height); any size (odd allowed).  ``fps``: frame rate (25, 29.97 =
    ``Fraction(30000, 1001)``, ...); with ``vfr=True`` the frame intervals vary (0.6/1.4/1.0 x nominal,
    1 ms time base).  ``rotation``: display rotation in degrees counter-clockwise (0/90/180/270);
    frames are stored rotated by ``-rotation`` so they display upright.  ``hflip=True`` adds a
    horizontal mirror to the display matrix (applied after the rotation, as PyAV's
    ``set_display_rotation`` defines it); the stored frames are mirrored accordingly.  ``face_scale``: sprite scale
    (default: face height ~ 0.3 x frame height).  ``face=False`` gives a clip without a face
    (landmarks all NaN).  ``start``: presentation time (s) of the first video frame (the video
    timestamps are shifted; ``times`` includes it; the picture content is the same as with
    ``start=0``).  ``audio_delay``: the audio track starts this many seconds after the first
    video frame (its timestamps are shifted; negative: before it), to exercise audio/video
    alignment.  ``audio_marks``: times (s, from the start of the audio track) where a 50 ms burst of
    the tones plays over silence, instead of the continuous tones (``audio_delay`` + a mark is where
    the burst belongs relative to the first video frame).  ``bframes``: libx264's B-frame count
    (default: the preset's, none), so packets come out of presentation order.  ``color``:
    ``"bt709"`` or ``"bt601"``: frames converted with that matrix (:func:`mime_fast.frames.yuv420_frame`)
    and the stream tagged with it (``bt709`` / ``smpte170m``, limited range); default untagged.
    """
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = int(size[0]), int(size[1])
    fps = Fraction(fps).limit_denominator(1001) if not isinstance(fps, Fraction) else fps
    rng = np.random.default_rng(seed)
    n = max(1, int(round(duration * fps)))
    times = _frame_times(n, fps, vfr)  # from the first frame; the timestamps add ``start``
    t_start = Fraction(start).limit_denominator(1000)
    if t_start < 0:
        raise ValueError("start must be >= 0")
    if audio and t_start + Fraction(audio_delay).limit_denominator(audio_rate) < 0:
        raise ValueError("the audio would start before time 0 (start + audio_delay < 0)")
    if face_scale is None:
        face_scale = 0.3 * h / (2 * 58.0)  # the sprite's scale: 0.3 h over the head size of 116 px
    sprite, alpha, sprite_pts = face_sprite(face_scale)
    sh, sw = sprite.shape[:2]
    if sh > h or sw > w:
        raise ValueError(f"face sprite {sw}x{sh} larger than the frame {w}x{h}; lower face_scale")
    pad = 64
    tex = _background_texture(h + 2 * pad, w + 2 * pad, rng)
    k = (rotation // 90) % 4
    if rotation % 90:
        raise ValueError("rotation must be a multiple of 90")
    cw, ch = (h, w) if k % 2 else (w, h)  # stored size

    boxes = np.full((n, 4), np.nan, np.float32)
    lms = np.full((n, 106, 2), np.nan, np.float32)
    a3 = alpha[..., None]
    with _writing(path) as c:
        vs = c.add_stream(codec, rate=fps if not vfr else None)
        vs.width, vs.height = cw - cw % 2, ch - ch % 2  # encoder needs even; odd handled below
        odd = (cw % 2) or (ch % 2)
        if odd:
            # keep the odd size: yuv444p allows odd dimensions with libx264
            vs.width, vs.height = cw, ch
            vs.pix_fmt = "yuv444p"
        else:
            vs.pix_fmt = "yuv420p"
        tb = Fraction(1, 1000) if vfr else 1 / fps
        if (t_start / tb).denominator != 1:  # a time base that holds the start and every frame time
            tb = Fraction(math.gcd(tb.numerator * t_start.denominator, t_start.numerator * tb.denominator),
                          tb.denominator * t_start.denominator)
        vs.codec_context.time_base = tb
        vs.codec_context.thread_count = 1
        vs.options = x264_options(crf, "ultrafast") if codec == "libx264" else {"crf": str(crf), "preset": "ultrafast"}
        if bframes is not None:
            vs.codec_context.max_b_frames = int(bframes)
        if color is not None:
            vs.codec_context.colorspace, vs.codec_context.color_range = {"bt709": 1, "bt601": 6}[color], 1
        if k or hflip:
            if not hasattr(vs, "set_display_rotation"):
                raise RuntimeError("writing rotation metadata needs PyAV >= 18.1 (Stream.set_display_rotation)")
            vs.set_display_rotation(rotation, hflip=hflip)
        ast = None
        if audio:
            layout = {1: "mono", 2: "stereo"}[audio_channels]
            ast = c.add_stream("aac", rate=audio_rate, layout=layout)
        for i, t in enumerate(times):
            tf = float(t)
            ox = int(round(pad + 20 * np.sin(2 * np.pi * tf * 0.7)))
            oy = int(round(pad + 15 * np.cos(2 * np.pi * tf * 0.5)))
            frame = tex[oy:oy + h, ox:ox + w].copy()
            # a moving bar for temporal structure
            bx = int((tf * 200) % max(1, w))
            frame[:, bx:bx + 12] = (255, 255, 255)
            if face:
                px, py = _path(tf, w, h, sw, sh, duration)
                roi = frame[py:py + sh, px:px + sw].astype(np.float32)
                frame[py:py + sh, px:px + sw] = (roi * (1 - a3) + sprite * a3 + 0.5).astype(np.uint8)
                p = sprite_pts + np.array([px, py], np.float32)
                lms[i] = p
                x0, y0 = p.min(0)
                x1, y1 = p.max(0)
                boxes[i] = (x0, y0, x1 - x0, y1 - y0)
            # display = mirror(rotate_ccw(stored)) => stored = rotate_ccw^-1(mirror(display))
            disp = frame[:, ::-1] if hflip else frame
            stored = np.ascontiguousarray(np.rot90(disp, -k)) if (k or hflip) else frame
            if color is not None and vs.pix_fmt == "yuv420p":
                vf = yuv420_frame(stored, matrix=color)
                vf.colorspace, vf.color_range = vs.codec_context.colorspace, 1
            else:
                vf = av.VideoFrame.from_ndarray(stored, format="rgb24")
            vf.pts = int((t + t_start) / tb)
            vf.time_base = tb
            for pkt in vs.encode(vf):
                c.mux(pkt)
        for pkt in vs.encode(None):
            c.mux(pkt)
        if ast is not None:
            total = int(round(float(duration) * audio_rate))
            tt = np.arange(total) / audio_rate
            left = 0.25 * np.sin(2 * np.pi * FACE_TONES_HZ[0] * tt)
            right = 0.25 * np.sin(2 * np.pi * FACE_TONES_HZ[1] * tt)
            if audio_marks is not None:
                gate = np.zeros(total)
                for m in audio_marks:
                    gate[(tt >= m) & (tt < m + 0.05)] = 1.0
                left, right = left * gate, right * gate
            chans = [left, right] if audio_channels == 2 else [(left + right) / 2]
            pcm = (np.stack(chans, 1) * 32767).astype(np.int16)
            step = 1024
            for s0 in range(0, total, step):
                blk = np.ascontiguousarray(pcm[s0:s0 + step]).reshape(1, -1)
                af = av.AudioFrame.from_ndarray(blk, format="s16", layout=ast.codec_context.layout.name)
                af.sample_rate = audio_rate
                af.pts = s0 + int(round((float(t_start) + audio_delay) * audio_rate))
                af.time_base = Fraction(1, audio_rate)
                for pkt in ast.encode(af):
                    c.mux(pkt)
            for pkt in ast.encode(None):
                c.mux(pkt)
    times_arr = np.array([float(t + t_start) for t in times])
    npz = path.with_suffix(".npz")
    if save_npz:
        np.savez(npz, landmarks=lms, boxes=boxes, times=times_arr)
    return SampleClip(path=path, npz=npz, fps=fps, width=w, height=h, rotation=rotation % 360,
                      times=times_arr, boxes=boxes, landmarks=lms, has_audio=bool(audio),
                      audio_rate=audio_rate if audio else None,
                      audio_channels=audio_channels if audio else None)


@dataclass
class SceneClip:
    """A tracking scene (:func:`make_scene_clip`); arrays per frame, displayed-frame pixels.

    ``boxes`` / ``landmarks``: the subject's face box ``(x, y, w, h)`` and 106 face points (NaN
    where the subject is out of the frame); ``other_boxes``: the second person's face box (NaN when
    there is none); ``covered``: ``(frames, H, W)`` bool, pixels drawn *over* the subject (the other
    person passing in front, the occluding panel); ``visible``: fraction of the subject's face box
    not covered."""

    path: Path
    fps: Fraction
    width: int
    height: int
    boxes: np.ndarray
    landmarks: np.ndarray
    other_boxes: np.ndarray
    covered: np.ndarray
    visible: np.ndarray

    @property
    def frames(self) -> int:
        return len(self.boxes)


def _ellipse_alpha(h: int, w: int, cx: float, cy: float, ax: float, ay: float) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) + 0.5
    r = np.sqrt(((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2)
    return np.clip((1.0 - r) / 0.12, 0.0, 1.0).astype(np.float32)


def make_scene_clip(path, *, other=None, mode: str = "crossing", size=(640, 360), fps=25, duration: float = 2.0,
                    subject_in_front: bool = True, seed: int = 0, crf: int = 18) -> SceneClip:
    """A clip for tracking tests: the astronaut (the subject, real face) with a blue torso, and

    * ``mode="crossing"``: a second real person (``other = (rgb, (x0, y0, x1, y1))``: a photograph
      and the face box in it; a head-and-shoulders sprite is cut around the face) with a red torso
      walks the other way; the faces cross at the frame centre at half time, the subject in front
      (``subject_in_front=True``) or behind;
    * ``mode="occlusion"``: the subject walks behind an opaque striped panel at the frame centre
      (fully hidden for about 0.2 s at the defaults), ``other`` ignored.

    The subject's face is about 0.33 x the frame height.  No audio.  Ground truth in the returned
    :class:`SceneClip` (nothing written beside the clip).
    """
    import av
    import cv2

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = int(size[0]), int(size[1])
    fps = Fraction(fps).limit_denominator(1001) if not isinstance(fps, Fraction) else fps
    n = max(2, int(round(duration * fps)))
    rng = np.random.default_rng(seed)
    pad = 64
    tex = _background_texture(h + 2 * pad, w + 2 * pad, rng)
    scale = 0.33 * h / (2 * _FACE_ELLIPSE[3])
    spr, alpha, spts = face_sprite(scale)
    sh, sw = spr.shape[:2]
    fx0, fy0 = spts.min(0)
    fx1, fy1 = spts.max(0)
    fw = fx1 - fx0
    osp = None
    if mode == "crossing":
        if other is None:
            raise ValueError('mode="crossing" needs other=(rgb, face_box)')
        img, (bx0, by0, bx1, by1) = other
        ofs = (fy1 - fy0) / (by1 - by0)  # same face height as the subject
        bw, bh = bx1 - bx0, by1 - by0
        cx0, cy0 = int(max(0, bx0 - 0.4 * bw)), int(max(0, by0 - 0.35 * bh))
        cx1, cy1 = int(min(img.shape[1], bx1 + 0.4 * bw)), int(min(img.shape[0], by1 + 0.25 * bh))
        crop = np.ascontiguousarray(img[cy0:cy1, cx0:cx1])
        ow, oh = max(2, round(crop.shape[1] * ofs)), max(2, round(crop.shape[0] * ofs))
        ocrop = cv2.resize(crop, (ow, oh), interpolation=cv2.INTER_AREA if ofs < 1 else cv2.INTER_CUBIC)
        ofb = (np.array([bx0, by0, bx1, by1], np.float32) - [cx0, cy0, cx0, cy0]) * ofs
        oal = _ellipse_alpha(oh, ow, (ofb[0] + ofb[2]) / 2, (ofb[1] + ofb[3]) / 2 - 0.05 * (ofb[3] - ofb[1]),
                             0.62 * (ofb[2] - ofb[0]), 0.62 * (ofb[3] - ofb[1]))
        osp = (ocrop, oal, ofb)
    elif mode != "occlusion":
        raise ValueError(f"unknown mode {mode!r}")

    boxes = np.full((n, 4), np.nan, np.float32)
    lms = np.full((n, 106, 2), np.nan, np.float32)
    oboxes = np.full((n, 4), np.nan, np.float32)
    covered = np.zeros((n, h, w), bool)
    visible = np.zeros(n, np.float32)

    def paste(frame, sprite, a, x, y, cover=None):
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(w, x + sprite.shape[1]), min(h, y + sprite.shape[0])
        if x1 <= x0 or y1 <= y0:
            return
        sub = sprite[y0 - y:y1 - y, x0 - x:x1 - x].astype(np.float32)
        aa = a[y0 - y:y1 - y, x0 - x:x1 - x, None]
        roi = frame[y0:y1, x0:x1].astype(np.float32)
        frame[y0:y1, x0:x1] = (roi * (1 - aa) + sub * aa + 0.5).astype(np.uint8)
        if cover is not None:
            cover[y0:y1, x0:x1] |= aa[..., 0] > 0.5

    def torso(frame, cx, top, width, colour, cover=None):
        x0, x1 = int(round(cx - width / 2)), int(round(cx + width / 2))
        y0 = int(round(top))
        frame[max(0, y0):h, max(0, x0):max(0, min(w, x1))] = colour
        if cover is not None:
            cover[max(0, y0):h, max(0, x0):max(0, min(w, x1))] = True

    with _writing(path) as c:
        vs = c.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = w - w % 2, h - h % 2, "yuv420p"
        vs.codec_context.thread_count = 1
        vs.options = x264_options(crf, "ultrafast")
        for i in range(n):
            t = i / (n - 1)
            ox = int(round(pad + 20 * np.sin(2 * np.pi * i / float(fps) * 0.7)))
            frame = tex[pad:pad + h, ox:ox + w].copy()
            # subject path: left -> right; face centre y at 0.4 h
            scx = (0.2 + 0.6 * t) * w
            sx = int(round(scx - (fx0 + fx1) / 2))
            sy = int(round(0.4 * h - (fy0 + fy1) / 2))
            cover = np.zeros((h, w), bool)

            def draw_subject():
                torso(frame, scx, sy + fy1 + 0.05 * (fy1 - fy0), 1.7 * fw, (40, 70, 200), cover)
                cover[:] = False  # everything drawn so far is behind the subject
                paste(frame, spr, alpha, sx, sy)

            def draw_other():
                ocr, oal, ofb = osp
                ocx = (0.8 - 0.6 * t) * w
                ox0 = int(round(ocx - (ofb[0] + ofb[2]) / 2))
                oy0 = int(round(0.42 * h - (ofb[1] + ofb[3]) / 2))
                torso(frame, ocx, oy0 + ofb[3] + 0.05 * (ofb[3] - ofb[1]), 1.7 * (ofb[2] - ofb[0]), (200, 40, 40), cover)
                paste(frame, ocr, oal, ox0, oy0, cover)
                oboxes[i] = (ox0 + ofb[0], oy0 + ofb[1], ofb[2] - ofb[0], ofb[3] - ofb[1])

            if osp is not None and not subject_in_front:
                draw_subject()
                draw_other()
            else:
                if osp is not None:
                    draw_other()
                draw_subject()
            if mode == "occlusion":
                pw = int(round(1.5 * fw))
                px0 = w // 2 - pw // 2
                stripes = ((np.arange(h)[:, None] // 12) % 2 * 90 + 60).astype(np.uint8)
                frame[:, px0:px0 + pw] = np.repeat(stripes, pw, 1)[..., None] * np.array([1, 1, 0.8])
                cover[:, px0:px0 + pw] = True
            p = spts + np.array([sx, sy], np.float32)
            lms[i] = p
            bx0, by0 = p.min(0)
            bx1, by1 = p.max(0)
            boxes[i] = (bx0, by0, bx1 - bx0, by1 - by0)
            covered[i] = cover
            ib = cover[max(0, int(by0)):int(np.ceil(by1)), max(0, int(bx0)):int(np.ceil(bx1))]
            visible[i] = 1.0 - ib.mean() if ib.size else 0.0
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame[:vs.height, :vs.width]), format="rgb24")
            vf.pts = i
            for pkt in vs.encode(vf):
                c.mux(pkt)
        for pkt in vs.encode(None):
            c.mux(pkt)
    return SceneClip(path, fps, w - w % 2, h - h % 2, boxes, lms, oboxes, covered[:, :h - h % 2, :w - w % 2], visible)


@dataclass
class CutSequence:
    """A clip made of shots of other clips (:func:`make_cut_sequence`): ``starts[i]`` is the first
    frame of shot ``i`` (``starts[0] == 0``), ``sources[i]`` the clip it shows and ``first[i]`` the
    source frame it begins with; ``dissolves[i]``: frames of cross-fade into shot ``i`` (0: a hard
    cut)."""

    path: Path
    size: tuple[int, int]
    fps: Fraction
    starts: list[int]
    sources: list[Path]
    first: list[int]
    dissolves: list[int]
    frames: int

    def shot_of(self, i: int) -> int:
        """Index of the shot frame ``i`` belongs to (a dissolve belongs to the shot it leads into)."""
        return max(k for k, s in enumerate(self.starts) if s <= i)


def _read_frames(src: Path, first: int, count: int, size: tuple[int, int]) -> list[np.ndarray]:
    """``count`` frames of ``src`` from ``first`` (RGB, displayed orientation), letterboxed into
    ``size`` (the picture scaled to fit, centred on black); fewer when the clip ends."""
    import av
    import cv2

    w, h = size
    out = []
    with av.open(str(src)) as c:
        for i, f in enumerate(c.decode(c.streams.video[0])):
            if i < first:
                continue
            if len(out) >= count:
                break
            img = f.to_ndarray(format="rgb24")
            s = min(w / img.shape[1], h / img.shape[0])
            sw, sh = max(2, round(img.shape[1] * s)), max(2, round(img.shape[0] * s))
            interp = cv2.INTER_AREA if s < 1 else cv2.INTER_CUBIC
            pic = cv2.resize(img, (sw, sh), interpolation=interp)
            frame = np.zeros((h, w, 3), np.uint8)
            y0, x0 = (h - sh) // 2, (w - sw) // 2
            frame[y0:y0 + sh, x0:x0 + sw] = pic
            out.append(frame)
    return out


def make_cut_sequence(path, shots, *, size=(1280, 720), fps=25, crf: int = 16) -> CutSequence:
    """Concatenate shots of (real) clips into one clip with known boundaries: ``shots`` is a list of
    ``(source path, first source frame, frames)`` or ``(source, first, frames, dissolve)`` where
    ``dissolve`` frames of the previous shot's end cross-fade into this one (0: a hard cut).  Each
    source frame is letterboxed into ``size``; written with libx264 at ``fps``, no audio."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fps = Fraction(fps)
    frames: list[np.ndarray] = []
    starts, sources, firsts, dissolves = [], [], [], []
    for spec in shots:
        src, first, count = Path(spec[0]), int(spec[1]), int(spec[2])
        dis = int(spec[3]) if len(spec) > 3 else 0
        pics = _read_frames(src, first, count, size)
        if len(pics) < count:
            raise ValueError(f"{src} has fewer than {first + count} frames")
        if dis and frames:
            if dis > len(pics) or dis > len(frames):
                raise ValueError("a dissolve longer than a shot")
            start = len(frames) - dis
            for j in range(dis):  # the old shot's last frames fade into the new shot's first ones
                a = (j + 1) / (dis + 1)
                frames[start + j] = np.uint8(np.clip((1 - a) * frames[start + j] + a * pics[j] + 0.5, 0, 255))
            frames.extend(pics[dis:])
        else:
            start = len(frames)
            frames.extend(pics)
        starts.append(start)
        sources.append(src)
        firsts.append(first)
        dissolves.append(dis if start else 0)
    w, h = int(size[0]), int(size[1])
    with _writing(path) as c:
        vs = c.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.codec_context.time_base = 1 / fps
        vs.codec_context.thread_count = 1
        vs.options = x264_options(crf, "ultrafast")
        for i, fr in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(fr, format="rgb24").reformat(format="yuv420p")
            vf.pts = i
            for pkt in vs.encode(vf):
                c.mux(pkt)
        for pkt in vs.encode(None):
            c.mux(pkt)
    return CutSequence(path, (w, h), fps, starts, sources, firsts, dissolves, len(frames))


def make_audio_only(path, *, duration: float = 1.0, rate: int = 44100) -> Path:
    """An audio-only file (AAC in MP4/M4A): a 440 Hz tone."""
    import av

    path = Path(path)
    with contextlib.closing(av.open(str(path), "w")) as c:
        ast = c.add_stream("aac", rate=rate, layout="mono")
        total = int(duration * rate)
        pcm = (0.25 * np.sin(2 * np.pi * 440 * np.arange(total) / rate) * 32767).astype(np.int16)
        af = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        af.sample_rate = rate
        af.pts = 0
        for pkt in ast.encode(af):
            c.mux(pkt)
        for pkt in ast.encode(None):
            c.mux(pkt)
    return path


def main(argv=None) -> int:
    """``python -m mime_fast.samples OUT.mp4 [--duration S] [--fps F] [--size WxH] ...``"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m mime_fast.samples", description=make_clip.__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output clip (.mp4, .mkv, .mov); ground truth goes to <stem>.npz")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--fps", default="25", help="frame rate, e.g. 25, 30, 30000/1001")
    ap.add_argument("--size", default="1280x720", help="displayed WxH")
    ap.add_argument("--no-audio", action="store_true")
    ap.add_argument("--audio-rate", type=int, default=48000)
    ap.add_argument("--rotation", type=int, default=0, choices=(0, 90, 180, 270))
    ap.add_argument("--hflip", action="store_true")
    ap.add_argument("--vfr", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.lower().split("x"))
    clip = make_clip(a.out, duration=a.duration, fps=Fraction(a.fps), size=(w, h), audio=not a.no_audio,
                     audio_rate=a.audio_rate, rotation=a.rotation, hflip=a.hflip, vfr=a.vfr, seed=a.seed)
    print(f"{clip.path}: {clip.frames} frames {clip.width}x{clip.height} @ {float(clip.fps):.3f} fps"
          f"{' + audio' if clip.has_audio else ''}; ground truth {clip.npz}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
