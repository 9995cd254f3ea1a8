"""``degradation.png``: accuracy per subset with its 95% interval, and the degradation steps drawn
between the bars (red where Holm's p < 0.05, grey otherwise), drawn with numpy and written by
the preview's PNG writer (no plotting library needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..preview import draw_text, write_png

__all__ = ["BAR", "degradation_png", "plot"]

BAR = (70, 130, 180)
_BACK, _AXIS, _WHISKER = (24, 24, 24), (150, 150, 150), (235, 235, 235)
_SIGNIFICANT, _NOT = (220, 60, 60), (110, 110, 110)
_TOP, _BOTTOM, _STEP_X, _WIDTH = 40, 310, 96, 44  # accuracy 1 at _TOP, 0 at _BOTTOM


def _y(accuracy: float) -> int:
    return round(_BOTTOM - accuracy * (_BOTTOM - _TOP))


def _line(img: np.ndarray, a: tuple[int, int], b: tuple[int, int], color: tuple[int, int, int]) -> None:
    n = max(abs(b[0] - a[0]), abs(b[1] - a[1]), 1) + 1
    xs, ys = np.linspace(a[0], b[0], n).round().astype(int), np.linspace(a[1], b[1], n).round().astype(int)
    img[ys, xs] = color
    img[np.clip(ys + 1, 0, img.shape[0] - 1), xs] = color


def plot(m: dict[str, Any]) -> np.ndarray:
    """The picture (RGB uint8) of a ``recognize`` run's metrics ``m``."""
    codes = [c for c, s in m["subsets"].items() if s["accuracy"] is not None]
    img = np.zeros((_BOTTOM + 40, 40 + _STEP_X * max(1, len(codes)), 3), np.uint8)
    img[:] = _BACK
    x_of = {c: 40 + _STEP_X * i + _STEP_X // 2 for i, c in enumerate(codes)}
    for level in (0.0, 0.5, 1.0):
        img[_y(level), 30:] = _AXIS
        draw_text(img, f"{level:.1f}", 2, _y(level) - 7, scale=1, color=_AXIS)
    for c in codes:
        s, x = m["subsets"][c], x_of[c]
        img[_y(s["accuracy"]):_BOTTOM, x - _WIDTH // 2:x + _WIDTH // 2] = BAR
        if s["ci95"]:
            lo, hi = _y(s["ci95"][0]), _y(s["ci95"][1])
            img[hi:lo + 1, x - 1:x + 1] = _WHISKER
            img[hi, x - 8:x + 8] = img[lo, x - 8:x + 8] = _WHISKER
        above = _y(s["ci95"][1] if s["ci95"] else s["accuracy"])  # the label above the interval
        draw_text(img, f"{s['accuracy']:.2f}", x - 23, max(2, above - 20), color=_WHISKER)
        draw_text(img, c, x - 6 * len(c), _BOTTOM + 12)
    for k, st in enumerate(m["steps"]):
        if st["from"] in x_of and st["to"] in x_of and st["delta"] is not None:
            color = _SIGNIFICANT if st["p_holm"] is not None and st["p_holm"] < 0.05 else _NOT
            a = (x_of[st["from"]] + 6, _y(m["subsets"][st["from"]]["accuracy"]) - 2 - 3 * k)
            b = (x_of[st["to"]] - 6, _y(m["subsets"][st["to"]]["accuracy"]) - 2 - 3 * k)
            _line(img, (a[0], max(0, a[1])), (b[0], max(0, b[1])), color)
    return img


def degradation_png(m: dict[str, Any], path: Path) -> None:
    """Write :func:`plot` of ``m`` to ``path`` (atomically)."""
    write_png(Path(path), plot(m))
