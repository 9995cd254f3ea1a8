"""Static overlays (watermarks, logos, burnt-in text): found from the frames sampled across a clip
(:func:`measure`), judged severe or not (:func:`judge`).

The detector is Dekel et al.'s (CVPR 2017) observation applied over time: the median of the
gradients of many pictures under one overlay keeps the overlay's edges and loses the pictures'.
Here the pictures are the clip's frames, so what persists is the overlay *and* whatever does not
move (a static camera's background).  An overlay pixel must therefore also lie where the picture
changes: a pixel is an overlay edge when

- its median gradient (the median of each Sobel component over the frames) is strong
  (:data:`EDGE`), and the edge is there, pointing the same way, in nearly every frame
  (:data:`PERSIST` of them): an edge of the scene that a passer-by hides now and then is not;
- the picture changes around it: at least :data:`AROUND` of the pixels within :data:`RING` of it
  deviate from their median over the frames by :data:`CHANGE` in most frames (the median
  deviation: a static camera's background does not change, nor does a pixel a passer-by crosses).

The edges are closed into blobs (text into lines, a logo into one) and each blob measured:
``area`` (its box, a share of the picture), ``opacity`` (how much of the picture under it the
overlay hides, 0..1, below) and
``position`` (``corner`` when its box lies within the outer :data:`CORNER` of both sides, else
``edge`` or ``centre``).  Severe (:func:`judge`): semi-transparent blobs (an opacity from
:data:`SEVERE_OPACITY` up to :data:`OPAQUE`) covering together at least :data:`SEVERE_AREA` of the
picture outside the corners, or one blob over :data:`LARGE_AREA` that is semi-transparent, or opaque
and not in the centre.  Smaller ones (a corner logo) are reported, not excluded.

What a static camera shows is not a watermark: its background does not change, so no edge of it
counts (the change asked for is the pixel's median deviation over the frames: a passer-by changes
a pixel in a few frames only).  A person who stands still while others move around him does look
like an opaque shape with change around it: an opaque blob in the centre of the picture is
reported, never severe (opaque overlays sit at the edges and corners: channel logos, banners).

Opacity: under an overlay of opacity a over a changing picture, the pixel inside an edge follows
the one outside it as ``(1 - a) y + c`` over time; the slope, measured :data:`STEP` pixels to either
side of every edge pixel where the picture changes (:func:`_opacity`), gives a.  On generated text
over a moving picture, opacities 0.25, 0.4 and 0.6 measure about 0.38, 0.47 and 0.61; over a static
camera's scene (the real crowd clip) the estimate runs high, 0.3 and 0.5 measuring up to 0.87 and
0.90, while the standing man of the real hug clip measures 0.96: :data:`OPAQUE` lies between.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHANGE", "CORNER", "EDGE", "LARGE_AREA", "PERSIST", "REPORT_AREA", "SEVERE_AREA", "SEVERE_OPACITY",
           "describe", "judge", "measure", "reportable"]

EDGE = 48.0  #: median gradient magnitude (Sobel 3x3 on 0..255) of an overlay edge
PERSIST = 0.85  #: share of the frames in which the edge is there, pointing the same way
CHANGE = 4.0  #: a pixel's median deviation from its median over the frames (0..255) where the picture changes
STEP = 2.0  #: pixels to either side of an edge where its opacity is measured
RING = 5  #: pixels around an edge where the change is looked for (an opaque logo's edge: just outside it)
AROUND = 0.3  #: the share of the pixels around an edge where the picture changes
CORNER = 0.3  #: a corner: the outer 30 % of the width and of the height
SEVERE_AREA = 0.03  #: the overlay's share of the picture, outside the corners, that is severe
SEVERE_OPACITY = 0.2  #: an overlay hiding less of the picture than this is faint, not severe
OPAQUE = 0.92  #: an overlay hiding more is opaque: severe at the edges of the picture only
LARGE_AREA = 0.10  #: an overlay this large is severe wherever it is
REPORT_AREA = 0.001  #: smaller blobs are noise, not reported
MIN_EDGES = 12  #: edge pixels (at the analysis size) a blob needs


def _sobel(frames: np.ndarray):
    import cv2  # the curate extra

    gx = np.stack([cv2.Sobel(f, cv2.CV_32F, 1, 0, ksize=3) for f in frames])
    gy = np.stack([cv2.Sobel(f, cv2.CV_32F, 0, 1, ksize=3) for f in frames])
    return gx, gy


def measure(frames: np.ndarray) -> list[dict]:
    """The static overlays of ``frames`` (``K x H x W`` uint8, grey, K >= 3): one dict per blob,
    ``area``, ``opacity``, ``position`` and ``box`` (x0, y0, x1, y1 as shares of the width and height),
    largest first."""
    import cv2

    k, h, w = frames.shape
    if k < 3:
        return []
    f = frames.astype(np.float32)
    gx, gy = _sobel(f)
    mx, my = np.median(gx, axis=0), np.median(gy, axis=0)
    strength = np.hypot(mx, my)
    # the edge in each frame, along the median's direction
    ux, uy = mx / np.maximum(strength, 1e-6), my / np.maximum(strength, 1e-6)
    along = gx * ux + gy * uy
    persist = (along > EDGE / 2).mean(axis=0)
    # the picture changes where most frames differ from the pixel's median (a passer-by changes a
    # pixel of a static camera's scene in a few frames only: its median deviation stays 0)
    changing = (np.median(np.abs(f - np.median(f, axis=0)), axis=0) >= CHANGE).astype(np.float32)
    around = cv2.blur(changing, (2 * RING + 1, 2 * RING + 1), borderType=cv2.BORDER_REFLECT)
    edges = (strength >= EDGE) & (persist >= PERSIST) & (around >= AROUND)
    edges[:1, :] = edges[-1:, :] = False
    edges[:, :1] = edges[:, -1:] = False
    if int(edges.sum()) < MIN_EDGES:
        return []
    moments = _covariances(f, edges, ux, uy)
    size = max(3, round(min(h, w) / 24))
    closed = cv2.morphologyEx(edges.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((size, size), np.uint8))
    closed = cv2.dilate(closed, np.ones((3, 3), np.uint8))
    n, lab, stats, _ = cv2.connectedComponentsWithStats(closed, connectivity=8)
    blobs = []
    for i in range(1, n):
        x, y, bw, bh, _ = (int(v) for v in stats[i])
        inside = (lab == i) & edges
        if int(inside.sum()) < MIN_EDGES:
            continue
        area = bw * bh / float(w * h)
        if area < REPORT_AREA:
            continue
        box = (x / w, y / h, (x + bw) / w, (y + bh) / h)
        opacity = _opacity(moments, inside)
        blobs.append({"area": round(area, 4), "opacity": round(min(1.0, max(0.0, opacity)), 2),
                      "position": _position(box), "box": [round(v, 3) for v in box]})
    blobs.sort(key=lambda b: (-b["area"], b["box"]))
    return blobs


def _covariances(f: np.ndarray, edges: np.ndarray, ux: np.ndarray, uy: np.ndarray) -> np.ndarray:
    """At each edge pixel, over time, the covariance of the pixels :data:`STEP` to either side of
    the edge and the variance of each: ``(3, H, W)``, zero off the edges (see :func:`_opacity`)."""
    h, w = f.shape[1:]
    ys, xs = np.nonzero(edges)
    dy, dx = uy[ys, xs] * STEP, ux[ys, xs] * STEP
    a = f[:, np.clip(np.rint(ys + dy), 0, h - 1).astype(int), np.clip(np.rint(xs + dx), 0, w - 1).astype(int)]
    b = f[:, np.clip(np.rint(ys - dy), 0, h - 1).astype(int), np.clip(np.rint(xs - dx), 0, w - 1).astype(int)]
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    out = np.zeros((3, h, w), np.float64)
    out[0][ys, xs], out[1][ys, xs], out[2][ys, xs] = (a * b).mean(axis=0), (a * a).mean(axis=0), (b * b).mean(axis=0)
    return out


def _opacity(moments: np.ndarray, inside: np.ndarray) -> float:
    """How much of the picture an overlay hides (0..1), from the covariances at its edge pixels
    ``inside`` (:func:`_covariances`).  Across an edge of an overlay of opacity a, the pixel under
    it ``x`` follows the one beside it ``y`` over time as ``x = (1 - a) y + c``: the slope of ``x``
    on ``y`` is ``1 - a`` (0 for an opaque logo, which does not change), the slope the other way
    round ``1 / (1 - a)``; which side is the overlay is not known, so the smaller is taken.  The
    median over the edge pixels where the picture changes (a standard deviation of :data:`CHANGE`
    on one side at least): where a static scene lies behind the overlay, neither side tells."""
    cov, va, vb = (m[inside] for m in moments)
    slope = np.minimum(cov / np.maximum(vb, 1e-3), cov / np.maximum(va, 1e-3))
    told = np.maximum(va, vb) >= CHANGE * CHANGE
    opacity = 1.0 - slope[told] if told.any() else 1.0 - slope
    return float(np.clip(np.median(opacity), 0.0, 1.0))


def _position(box: tuple[float, float, float, float]) -> str:
    x0, y0, x1, y1 = box
    left, right = x1 <= CORNER, x0 >= 1 - CORNER
    top, bottom = y1 <= CORNER, y0 >= 1 - CORNER
    if (left or right) and (top or bottom):
        return "corner"
    if left or right or top or bottom:
        return "edge"
    return "centre"


def _translucent(b: dict) -> bool:
    return SEVERE_OPACITY <= b["opacity"] < OPAQUE


def judge(blobs: list[dict]) -> str | None:
    """Why the overlays ``blobs`` (:func:`measure`) are severe, or ``None``."""
    outside = [b for b in blobs if b["position"] != "corner" and _translucent(b)]
    area = sum(b["area"] for b in outside)
    if area >= SEVERE_AREA:
        return (f"severe watermark: a static semi-transparent overlay over {area:.1%} of the picture outside the "
                f"corners (opacity {max(b['opacity'] for b in outside):.2f}; severe from {SEVERE_AREA:.0%})")
    large = [b for b in blobs if b["area"] >= LARGE_AREA and (_translucent(b) or
                                                              (b["opacity"] >= OPAQUE and b["position"] != "centre"))]
    if large:
        return (f"severe watermark: a static overlay over {large[0]['area']:.1%} of the picture "
                f"({large[0]['position']}, opacity {large[0]['opacity']:.2f}; severe from {LARGE_AREA:.0%})")
    return None


def reportable(blobs: list[dict]) -> list[dict]:
    """The blobs worth reporting: not faint (an opacity of at least :data:`SEVERE_OPACITY`)."""
    return [b for b in blobs if b["opacity"] >= SEVERE_OPACITY]


def describe(blobs: list[dict]) -> str:
    """The overlays in a few words for the report (``""`` for none)."""
    return "; ".join(f"{b['position']} {b['area']:.1%} opacity {b['opacity']:.2f}" for b in blobs)
