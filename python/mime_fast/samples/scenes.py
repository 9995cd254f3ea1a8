"""Tracking scenes (:func:`make_scene_clip`): the astronaut and a second real person crossing, or
the astronaut walking behind an opaque panel, with per-frame ground truth."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..media import encode_into, writing, x264_options
from .clip import _FACE_ELLIPSE, _background_texture, face_sprite

__all__ = ["SceneClip", "make_scene_clip"]


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

    with writing(path) as c:
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
            encode_into(c, vs, vf)
        encode_into(c, vs, None)
    return SceneClip(path, fps, w - w % 2, h - h % 2, boxes, lms, oboxes, covered[:, :h - h % 2, :w - w % 2], visible)
