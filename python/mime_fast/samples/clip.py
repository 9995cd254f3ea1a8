"""The synthetic clip with a real face (:func:`make_clip`; ground truth as :mod:`mime_fast.samples`
describes), the astronaut's face sprite, audio-only files, and ``python -m mime_fast.samples``."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..frames import yuv420_frame
from ..media import av_path, encode_into, writing, x264_options

__all__ = ["SampleClip", "make_clip", "make_audio_only", "face_sprite", "FACE_TONES_HZ", "main"]

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
              color: str | None = None, sar: Fraction | None = None) -> SampleClip:
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
    ``sar``: the stream's sample aspect ratio (non-square pixels, as on DVDs and anamorphic
    footage; the frames are drawn as for square pixels); default unset.
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
    with writing(path) as c:
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
        if sar is not None:
            vs.codec_context.sample_aspect_ratio = Fraction(sar)
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
            encode_into(c, vs, vf)
        encode_into(c, vs, None)
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
                encode_into(c, ast, af)
            encode_into(c, ast, None)
    times_arr = np.array([float(t + t_start) for t in times])
    npz = path.with_suffix(".npz")
    if save_npz:
        np.savez(npz, landmarks=lms, boxes=boxes, times=times_arr)
    return SampleClip(path=path, npz=npz, fps=fps, width=w, height=h, rotation=rotation % 360,
                      times=times_arr, boxes=boxes, landmarks=lms, has_audio=bool(audio),
                      audio_rate=audio_rate if audio else None,
                      audio_channels=audio_channels if audio else None)


def make_audio_only(path, *, duration: float = 1.0, rate: int = 44100) -> Path:
    """An audio-only file (AAC in MP4/M4A): a 440 Hz tone."""
    import av

    path = Path(path)
    with contextlib.closing(av.open(av_path(path), "w")) as c:
        ast = c.add_stream("aac", rate=rate, layout="mono")
        total = int(duration * rate)
        pcm = (0.25 * np.sin(2 * np.pi * 440 * np.arange(total) / rate) * 32767).astype(np.int16)
        af = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        af.sample_rate = rate
        af.pts = 0
        encode_into(c, ast, af)
        encode_into(c, ast, None)
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
