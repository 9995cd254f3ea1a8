"""Faces and masks, by the audit's own detector's boxes: box overlap and tracks (:func:`link_tracks`),
the detail left in a face (:func:`detail_ratio`, :func:`looks_clear`), the outputs decoded side by
side (:func:`decode_together`), and which face is the subject in each audited frame
(:func:`subject_per_frame`, rules 1 - 3 of :mod:`mime_fast.audit`) and his identity reference
(:func:`reference_frames`)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..media import iter_display_frames, probe
from .protocol import LINK_DISTANCE, LINK_IOU

__all__ = ["decode_together", "detail_ratio", "iou", "link_tracks", "looks_clear", "luma", "reference_frames",
           "subject_per_frame"]


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of box ``a`` ``(4,)`` with boxes ``b`` ``(N, 4)`` (x0 y0 x1 y1)."""
    b = np.reshape(b, (-1, 4))
    w = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    h = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return inter / np.maximum(union, 1e-9)


def link_tracks(boxes: list[np.ndarray], min_iou: float = LINK_IOU) -> list[np.ndarray]:
    """Track ids per frame for per-frame boxes ``(N_i, 4)``: each box takes the id of the
    best-overlapping box of the previous frame (greedy by IoU, at least ``min_iou``, one box per id),
    else a new id."""
    ids: list[np.ndarray] = []
    nxt = 0
    for i, cur in enumerate(boxes):
        out = np.full(len(cur), -1, np.int64)
        if i and len(cur) and len(boxes[i - 1]):
            prev = boxes[i - 1]
            m = np.stack([iou(c, prev) for c in cur])
            while True:
                j, k = np.unravel_index(int(np.argmax(m)), m.shape)
                if m[j, k] < min_iou:
                    break
                out[j] = ids[i - 1][k]
                m[j, :], m[:, k] = -1, -1
        for j in np.nonzero(out < 0)[0]:
            out[j], nxt = nxt, nxt + 1
        ids.append(out)
    return ids


def _inner(box: np.ndarray, shape: tuple[int, ...]) -> tuple[slice, slice]:
    x0, y0, x1, y1 = (float(v) for v in box)
    dx, dy = 0.2 * (x1 - x0), 0.2 * (y1 - y0)
    H, W = shape[:2]
    ys = slice(max(0, int(round(y0 + dy))), min(H, int(round(y1 - dy))))
    xs = slice(max(0, int(round(x0 + dx))), min(W, int(round(x1 - dx))))
    return ys, xs


def _lap_var(gray: np.ndarray, box: np.ndarray) -> float:
    import cv2

    ys, xs = _inner(box, gray.shape)
    patch = gray[ys, xs]
    if patch.shape[0] < 3 or patch.shape[1] < 3:
        return float("nan")
    return float(cv2.Laplacian(patch, cv2.CV_32F).var())


def detail_ratio(clear_gray: np.ndarray, degraded_gray: np.ndarray, box: np.ndarray) -> float:
    """Variance of the Laplacian of ``degraded_gray`` over ``clear_gray``'s (float32 luma) in the inner
    box of ``box`` (shrunk by 20 % on each side); NaN for a box too small or without detail."""
    c = _lap_var(clear_gray, box)
    return _lap_var(degraded_gray, box) / c if c > 1e-6 else float("nan")


def looks_clear(clear_gray: np.ndarray, degraded_gray: np.ndarray, box: np.ndarray, kernel: int) -> bool:
    """Whether the degraded face in ``box`` is nearer (mean absolute luma difference over the inner
    box) to the clear face than to the clear face blurred as MIME prescribes for its subset
    (``cv2.GaussianBlur`` with ``kernel``): what tells a face left clear from one blurred when the
    clear face has little detail of its own (motion blur, a small face), where the detail ratio
    cannot."""
    import cv2

    ys, xs = _inner(box, clear_gray.shape)
    if ys.stop - ys.start < 3 or xs.stop - xs.start < 3:
        return False
    r = kernel // 2
    H, W = clear_gray.shape
    y0, x0 = max(0, ys.start - r), max(0, xs.start - r)
    region = clear_gray[y0:min(H, ys.stop + r), x0:min(W, xs.stop + r)]
    blurred = cv2.GaussianBlur(region, (kernel, kernel), 0)[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0]
    deg = degraded_gray[ys, xs]
    return float(np.abs(deg - clear_gray[ys, xs]).mean()) < float(np.abs(deg - blurred).mean())


def luma(rgb: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)


def decode_together(paths: list[Path]) -> Iterator[tuple[int, float, list[np.ndarray]]]:
    """Decode ``paths`` in lockstep: ``(index, time of the first path's frame in seconds, [rgb per
    path])``; raises ValueError when their frame counts differ."""
    its = [iter_display_frames(p, probe(p)) for p in paths]
    i = 0
    while True:
        got = [next(it, None) for it in its]
        if all(g is None for g in got):
            return
        if any(g is None for g in got):
            raise ValueError(f"frame counts differ: {', '.join(p.parent.name for p in paths)} end at different frames")
        yield i, float(got[0][1]), [g[2] for g in got]
        i += 1


def _follow(prev: np.ndarray, boxes: np.ndarray) -> int | None:
    """The face of ``boxes`` that continues ``prev`` in the next audited frame: the nearest centre
    within :data:`LINK_DISTANCE` box heights of ``prev``'s, of a height within a factor 1.5."""
    h = float(prev[3] - prev[1])
    hs = boxes[:, 3] - boxes[:, 1]
    d = np.hypot((boxes[:, 0] + boxes[:, 2] - prev[0] - prev[2]) / 2, (boxes[:, 1] + boxes[:, 3] - prev[1] - prev[3]) / 2)
    ok = (d <= LINK_DISTANCE * h) & (hs <= 1.5 * h) & (hs >= h / 1.5)
    return int(np.argmin(np.where(ok, d, np.inf))) if ok.any() else None


def subject_per_frame(boxes: list[np.ndarray], masked: list[np.ndarray]) -> list[int | None]:
    """The subject's face index per audited frame (module docstring, rules 1-3); ``masked``: per
    audited frame, which of its faces are masked (detail ratio under :data:`MASKED_DETAIL_RATIO`)."""
    n = len(boxes)
    subject: list[int | None] = [None] * n
    ratios_known = False
    for i, m in enumerate(masked):
        low = np.flatnonzero(m)
        if len(low):
            ratios_known = True
        if len(low) == 1:
            subject[i] = int(low[0])
    if not ratios_known:  # rule 3: never masked anywhere -> the largest face
        for i, b in enumerate(boxes):
            if len(b):
                subject[i] = int(np.argmax((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])))
        return subject
    for order in (range(1, n), range(n - 2, -1, -1)):  # rule 2: follow by overlap, both ways
        step = 1 if order.start < order.stop else -1
        for i in order:
            j = i - step
            if subject[i] is not None or subject[j] is None or not len(boxes[i]):
                continue
            subject[i] = _follow(boxes[j][subject[j]], boxes[i])
    return subject


def reference_frames(subject: list[int | None], masked: list[np.ndarray], tracks: list[np.ndarray]) -> list[int]:
    """The audited frames whose subject face is his identity reference (module docstring): rule 1
    found him there and nobody else is masked, and his face there lies on a track masked in at least
    half of its audited frames (a face beside his, masked where the detector missed him -- a mask
    reaching the other man's face in the greyscale hug -- is on a track clear elsewhere); all of the
    first kind where none is of the second."""
    first = [k for k, j in enumerate(subject) if j is not None and masked[k][j] and masked[k].sum() == 1]
    seen: dict[int, int] = {}
    hidden: dict[int, int] = {}
    for ids, m in zip(tracks, masked):
        for t, h in zip(ids, m):
            seen[int(t)] = seen.get(int(t), 0) + 1
            hidden[int(t)] = hidden.get(int(t), 0) + int(bool(h))
    kept = [k for k in first if 2 * hidden[int(tracks[k][subject[k]])] >= seen[int(tracks[k][subject[k]])]]
    return kept or first

