"""Box and hull geometry shared by the trackers (:mod:`mime_fast.subject.tracking`,
:mod:`mime_fast.subject.all_faces`) and the gap filling (:mod:`mime_fast.subject.gaps`):
:class:`FrameTrack` (one frame's mask: hull points, box, kind, margin), :func:`grow_hull` (the
mask polygon: the convex hull grown by a margin), the ellipse of a face box (a face without a
confident mesh), box centre, size and IoU, and the least-squares similarity between two landmark
sets (how the subject tracker moves and checks a tracked face).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["FrameTrack", "grow_hull"]


@dataclass
class FrameTrack:
    """Subject in one frame: ``points (P, 2)`` of the hull (``None`` where not detected), ``box``."""

    points: np.ndarray | None = None
    box: np.ndarray | None = None
    kind: str = "absent"  # detected | partial | head | interpolated | held | absent
    height: float | None = None  # height of the landmarks before any margin (detected frames)
    margin: float = 0.0  # px to grow the hull of ``points`` by (:meth:`hull`)

    def hull(self) -> np.ndarray | None:
        """The mask polygon: convex hull of ``points`` grown by ``margin`` (``None`` if absent)."""
        return None if self.points is None else grow_hull(self.points, self.margin)


def grow_hull(points: np.ndarray, margin: float, n_dir: int = 16) -> np.ndarray:
    """Convex hull vertices of ``points`` grown by ``margin`` px (Minkowski sum with a 16-gon
    circumscribing the disc of radius ``margin``); the hull itself when ``margin <= 0``."""
    import cv2

    hull = cv2.convexHull(np.asarray(points, np.float32).reshape(-1, 1, 2)).reshape(-1, 2)
    if margin <= 0:
        return hull.astype(np.float32)
    th = np.arange(n_dir) * (2 * np.pi / n_dir)
    r = margin / math.cos(math.pi / n_dir)  # polygon circumscribes the disc
    ring = np.stack([np.cos(th), np.sin(th)], 1) * r
    pts = (hull[:, None, :] + ring[None]).reshape(-1, 2).astype(np.float32)
    return cv2.convexHull(pts.reshape(-1, 1, 2)).reshape(-1, 2).astype(np.float32)


def _box_ellipse(box, grow: float = 0.2, n: int = 48) -> np.ndarray:
    x0, y0, x1, y1 = (float(v) for v in box)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    ax, ay = (x1 - x0) * (0.5 + grow), (y1 - y0) * (0.5 + grow)
    th = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([cx + ax * np.cos(th), cy + ay * np.sin(th)], 1).astype(np.float32)


def _centre(box) -> np.ndarray:
    b = np.asarray(box, np.float64)
    return np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2])


def _size(box) -> float:
    b = np.asarray(box, np.float64)
    return float(max(b[2] - b[0], b[3] - b[1], 1.0))


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of each box of ``a (N, 4)`` with each of ``b (M, 4)``: ``(N, M)``."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def _similarity(src: np.ndarray, dst: np.ndarray) -> tuple[complex, np.ndarray, np.ndarray]:
    """Least-squares similarity ``p -> k (p - m0) + m1`` (``k`` complex: scale and rotation) taking
    the points ``src`` onto ``dst`` (same count and order)."""
    m0, m1 = src.mean(0), dst.mean(0)
    a = (src[:, 0] - m0[0]) + 1j * (src[:, 1] - m0[1])
    b = (dst[:, 0] - m1[0]) + 1j * (dst[:, 1] - m1[1])
    den = float(np.real(np.vdot(a, a)))
    k = complex(np.vdot(a, b) / den) if den > 0 else 1.0 + 0j
    return k, m0, m1


def _shape_change(ref: np.ndarray, pts: np.ndarray) -> float:
    """RMS distance between ``pts`` and the best similarity transform of ``ref`` onto them, over the
    height of ``pts`` (0: the same shape moved, turned or scaled)."""
    ref = np.asarray(ref, np.float64)
    pts = np.asarray(pts, np.float64)
    k, m0, m1 = _similarity(ref, pts)
    z = k * ((ref[:, 0] - m0[0]) + 1j * (ref[:, 1] - m0[1]))
    d2 = (z.real + m1[0] - pts[:, 0]) ** 2 + (z.imag + m1[1] - pts[:, 1]) ** 2
    return float(np.sqrt(d2.mean()) / max(float(np.ptp(pts[:, 1])), 1.0))
