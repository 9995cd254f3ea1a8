"""Small generated corpus releases for the curate tests (imported explicitly, not a conftest): each
layout's folders, lists and spreadsheets, with clips a few frames long and under 100 px tall."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


def _cv2():
    import cv2 as mod

    return mod


def background(seed: int, n: int = 14, h: int = 72, w: int = 96) -> list[np.ndarray]:
    """A textured picture panning across ``n`` frames (every seed its own picture)."""
    cv = _cv2()
    rng = np.random.default_rng(seed)
    big = rng.integers(0, 255, (h // 4 + n + 2, w // 4 + n + 2, 3), dtype=np.uint8)
    big = cv.GaussianBlur(cv.resize(big, None, fx=4, fy=4, interpolation=cv.INTER_CUBIC), (0, 0), 2)
    return [np.ascontiguousarray(big[3 * i:3 * i + h, 2 * i:2 * i + w]) for i in range(n)]


def write_clip(path: Path, frames: list[np.ndarray], *, crf: int = 20, fps: int = 25) -> Path:
    """``frames`` (RGB) as H.264 in an mp4 (mpeg4 in an .avi)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames[0].shape[:2]
    avi = path.suffix.lower() == ".avi"
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4" if avi else "libx264", rate=fps)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        if avi:
            s.bit_rate = 2_000_000
        else:
            s.options = {"crf": str(crf), "preset": "ultrafast"}
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def resized(frames, w: int, h: int):
    cv = _cv2()
    return [cv.resize(f, (w, h), interpolation=cv.INTER_AREA) for f in frames]


def letterboxed(frames, w: int, h: int):
    """Each frame scaled to width ``w`` and centred between black bars, ``h`` tall."""
    cv = _cv2()
    out = []
    for f in frames:
        fh = round(f.shape[0] * w / f.shape[1] / 2) * 2
        canvas = np.zeros((h, w, 3), np.uint8)
        y = (h - fh) // 2
        canvas[y:y + fh] = cv.resize(f, (w, fh), interpolation=cv.INTER_AREA)
        out.append(canvas)
    return out


def with_text(frames, text: str = "SAMPLE WATERMARK", alpha: float = 0.45):
    """A large semi-transparent white text across the middle of every frame."""
    cv = _cv2()
    h, w = frames[0].shape[:2]
    layer = np.zeros((h, w), np.uint8)
    scale = w / 260
    cv.putText(layer, text, (int(w * 0.04), int(h * 0.58)), cv.FONT_HERSHEY_SIMPLEX, scale, 255,
               max(2, int(scale * 2.5)), cv.LINE_AA)
    a = (layer.astype(np.float32) / 255 * alpha)[..., None]
    return [np.clip(f * (1 - a) + 255 * a, 0, 255).astype(np.uint8) for f in frames]


def with_corner_logo(frames):
    """A small opaque logo in the top right corner of every frame."""
    cv = _cv2()
    h, w = frames[0].shape[:2]
    s = max(8, int(h * 0.12))
    x0, y0 = int(w * 0.84), int(h * 0.05)
    out = []
    for f in frames:
        g = f.copy()
        cv.rectangle(g, (x0, y0), (x0 + s, y0 + s), (255, 255, 255), -1)
        cv.rectangle(g, (x0 + s // 4, y0 + s // 4), (x0 + 3 * s // 4, y0 + 3 * s // 4), (200, 0, 0), -1)
        out.append(g)
    return out


def static_scene(seed: int, n: int = 14, h: int = 72, w: int = 96):
    """A static camera: a still textured room with edges, and a dark figure walking across it."""
    cv = _cv2()
    rng = np.random.default_rng(seed)
    room = cv.GaussianBlur(rng.integers(40, 220, (h, w, 3), dtype=np.uint8), (0, 0), 1.5)
    cv.rectangle(room, (10, 8), (40, 60), (250, 250, 250), 2)  # a door frame
    cv.line(room, (0, 50), (w, 50), (20, 20, 20), 2)  # the floor's edge
    out = []
    for i in range(n):
        f = room.copy()
        x = 5 + i * (w - 20) // n
        cv.rectangle(f, (x, 20), (x + 14, 70), (30, 30, 60), -1)
        out.append(f)
    return out


def write_xlsx(path: Path, rows: list[list]) -> Path:
    import openpyxl

    path.parent.mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    for r in rows:
        sheet.append(r)
    book.save(path)
    return path


def dfew_votes_row(number: int, votes: list[int], label: int) -> list:
    return [number, *votes, label]


DFEW_VOTE_HEADER = ["order", "1happy", "2sad", "3neutral", "4angry", "5surprise", "6disgust", "7fear", "label"]
