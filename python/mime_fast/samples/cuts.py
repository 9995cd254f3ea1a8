"""Cut sequences (:func:`make_cut_sequence`): shots of other clips cut or dissolved into one clip
with known shot boundaries; the pieces they are made of, for sequences assembled in memory
(``bench/bench_cuts.py``, ``tests/test_shot_boundaries.py``): frames letterboxed
(:func:`read_frames`), closer framings (:func:`closeup`), dark grades (:func:`darken`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..media import av_path, encode_into, writing, x264_options

__all__ = ["GRADES", "CutSequence", "closeup", "content_box", "darken", "make_cut_sequence", "read_frames"]


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


#: Dark grades of footage (:func:`darken`): gamma, contrast (a gain), saturation (towards the
#: luma), sensor noise sigma (0..255).  ``stage``: a lit stage, a dark film grade; ``night``: a night
#: scene (a small picture's luma deviates by 3 - 8 of 255).
GRADES: dict[str, tuple[float, float, float, float] | None] = {
    "bright": None, "stage": (2.2, 0.40, 0.6, 1.5), "night": (3.0, 0.25, 0.3, 2.5)}


def read_frames(src, first: int = 0, count: int | None = None,
                size: tuple[int, int] = (1280, 720)) -> list[np.ndarray]:
    """``count`` frames (all: ``None``) of ``src`` from ``first`` (RGB, displayed orientation),
    letterboxed into ``size`` (the picture scaled to fit, centred on black); fewer when the clip
    ends."""
    import av
    import cv2

    w, h = size
    out = []
    with av.open(av_path(Path(src))) as c:
        for i, f in enumerate(c.decode(c.streams.video[0])):
            if i < first:
                continue
            if count is not None and len(out) >= count:
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


def darken(img: np.ndarray, grade, rng: np.random.Generator | None = None) -> np.ndarray:
    """``img`` (RGB) graded dark (``grade``: a name of :data:`GRADES` or ``(gamma, contrast,
    saturation, noise)``; ``None``: as it is): gamma, contrast (a gain), saturation towards its
    luma, sensor noise drawn from ``rng`` (needed when the grade has noise)."""
    if isinstance(grade, str):
        grade = GRADES[grade]
    if grade is None:
        return img
    gamma, contrast, sat, noise = grade
    x = (img.astype(np.float32) / 255.0) ** gamma * (contrast * 255.0)
    y = (x @ np.float32([0.299, 0.587, 0.114]))[..., None]
    x = y + np.float32(sat) * (x - y)
    if noise:
        x += rng.normal(0.0, noise, x.shape).astype(np.float32)
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def content_box(img: np.ndarray) -> tuple[int, int, int, int]:
    """The picture inside a letterbox (rows and columns with a value over 16): ``y0, y1, x0, x1``."""
    rows, cols = np.flatnonzero(img.max(axis=(1, 2)) > 16), np.flatnonzero(img.max(axis=(0, 2)) > 16)
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def closeup(img: np.ndarray, view: int, box: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """A closer framing of ``img``: half the picture's width and height (``box``, the picture inside
    the letterbox; by default :func:`content_box`) around one of four points (``view`` 0 - 3: upper
    left, upper right, lower left, lower right quarter's centre, a little lower), scaled up to fit
    the frame, centred on black."""
    import cv2

    y0, y1, x0, x1 = content_box(img) if box is None else box
    h, w = y1 - y0, x1 - x0
    ch, cw = h // 2, w // 2
    cy = min(max(y0 + [h // 4, h // 4, h // 2, h // 2][view] - ch // 2 + h // 8, y0), y1 - ch)
    cx = min(max(x0 + [w // 4, w * 3 // 4, w // 4, w * 3 // 4][view] - cw // 2, x0), x1 - cw)
    H, W = img.shape[:2]
    s = min(W / cw, H / ch)
    pic = cv2.resize(img[cy:cy + ch, cx:cx + cw], (round(cw * s), round(ch * s)), interpolation=cv2.INTER_LINEAR)
    out = np.zeros_like(img)
    oy, ox = (H - pic.shape[0]) // 2, (W - pic.shape[1]) // 2
    out[oy:oy + pic.shape[0], ox:ox + pic.shape[1]] = pic
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
        pics = read_frames(src, first, count, size)
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
    with writing(path) as c:
        vs = c.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.codec_context.time_base = 1 / fps
        vs.codec_context.thread_count = 1
        vs.options = x264_options(crf, "ultrafast")
        for i, fr in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(fr, format="rgb24").reformat(format="yuv420p")
            vf.pts = i
            encode_into(c, vs, vf)
        encode_into(c, vs, None)
    return CutSequence(path, (w, h), fps, starts, sources, firsts, dissolves, len(frames))
