"""OpenCV's HOG people detector on PyTorch: :class:`TorchHogPersons`.

The same detector as :class:`~mime_fast.detect.models.HogPersonDetector` (OpenCV 4.x
``cv2.HOGDescriptor`` with the default people SVM, ``detectMultiScale(gray, hitThreshold=0,
winStride=(8, 8), padding=(8, 8), scale=1.05)``), written from OpenCV 4.x's algorithm in torch
ops so that it runs on any torch device and where OpenCV has no ``HOGDescriptor`` (OpenCV 5).

The steps follow ``modules/objdetect/src/hog.cpp`` (OpenCV 4.x):

* Pyramid: level ``i`` has scale ``1.05**i`` (repeated multiplication in double), size
  ``round(W / scale) x round(H / scale)``; levels stop before the first one smaller than the
  64 x 128 window (at most 64).  Each level is resized from the input with ``INTER_LINEAR_EXACT``
  (what ``detectMultiScale`` uses unless OpenCV is built with the approximate algorithm hint),
  emulated bit for bit (:func:`resize_linear_exact`: 8-bit fixed-point coefficients rounded from
  double, horizontal then vertical pass, ``(v + 2**15) >> 16``).
* Gradients on the image padded by ``padding`` (8 px, BORDER_REFLECT_101), of ``sqrt(intensity)``
  (gamma correction), central differences ``[-1, 0, 1]``; magnitude and orientation as
  ``cartToPolar`` computes them (OpenCV's polynomial ``atan``, reproduced), 9 unsigned bins over
  180 degrees with linear interpolation between the two nearest bin centres.
* Blocks of 16 x 16 px on an 8 px grid, 2 x 2 cells of 8 px: every pixel votes into the cells
  around it with bilinear weights (cells outside the block dropped) times the Gaussian block
  weight ``exp(-((i - 8)**2 + (j - 8)**2) / (2 sigma**2))``, ``sigma = 4`` (as OpenCV builds its
  table, float32).  Implemented as one strided convolution of the 9 orientation planes.
* L2-Hys: ``v / (|v| + 3.6)`` (OpenCV's ``0.1 * 36`` epsilon), clipped at 0.2, ``/ (|v| + 1e-3)``.
* Linear SVM (OpenCV's default people detector, 3780 weights + bias, stored in
  ``data/hog_people_svm.npy``; OpenCV, Apache-2.0) over the 7 x 15 blocks of each 64 x 128 window
  at an 8 px stride: a second convolution.  Windows scoring ``>= hit_threshold`` are hits at
  ``(8 wx - 8, 8 wy - 8)`` of the level, rectangles ``round(x * scale), round(y * scale),
  round(64 * scale), round(128 * scale)`` in the input.
* Grouping as ``HOGDescriptor::groupRectangles(rects, weights, 2, 0.2)``: ``partition`` by
  OpenCV's ``SimilarRects`` (``eps`` of the mean of the smaller sides), clusters of more than 2
  rectangles averaged (``sum * (1 / n)``, rounded half to even), weight the cluster maximum,
  clusters inside a larger, better-supported one dropped; then ``clipObjects`` to the image.

Deviations from OpenCV (float32 throughout, sums in another order): the descriptor agrees to about
1e-6, window scores to about 1e-5; a window whose score lies within that of ``hit_threshold`` can
be a hit on one side only, which can move a group's average box by a pixel or (rarely) a
borderline group's support across the threshold.  tests/test_torch_hog.py holds the measured
agreement.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
import torch
import torch.nn.functional as F

from .interface import Persons
from .torch_ops import _as_frames, _device, _size_batches

__all__ = ["TorchHogPersons", "group_rectangles", "hog_people_svm", "resize_linear_exact"]

WIN_W, WIN_H, BLOCK, CELL, STRIDE, NBINS = 64, 128, 16, 8, 8, 9
BLOCKS_X, BLOCKS_Y = (WIN_W - BLOCK) // STRIDE + 1, (WIN_H - BLOCK) // STRIDE + 1  # 7, 15
BLOCK_HIST = NBINS * (BLOCK // CELL) ** 2  # 36
DESCRIPTOR_SIZE = BLOCK_HIST * BLOCKS_X * BLOCKS_Y  # 3780


def hog_people_svm() -> np.ndarray:
    """OpenCV's default people detector (``cv2.HOGDescriptor_getDefaultPeopleDetector()``, OpenCV
    4.x, Apache-2.0): 3780 float32 weights in OpenCV's descriptor order, then the bias."""
    with resources.files("mime_fast.detect").joinpath("data/hog_people_svm.npy").open("rb") as f:
        w = np.load(f)
    assert w.shape == (DESCRIPTOR_SIZE + 1,) and w.dtype == np.float32, (w.shape, w.dtype)
    return w


# --------------------------------------------------------------------------------------------------
# Pieces


def _linear_exact_coeffs(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per output sample of ``cv::resize(INTER_LINEAR_EXACT)`` on 8-bit data: the two source
    indices and their 8-bit fixed-point weights (summing to 256).  Source position
    ``(d + 0.5) * (1 / (dst / src)) - 0.5`` in double; weight ``round(frac * 256)``; positions left
    of 0 take sample 0, from ``src - 1`` on the last sample."""
    scale = 1.0 / (dst / src)
    d = np.arange(dst, dtype=np.float64)
    f = scale * (d + 0.5) - 0.5
    i = np.floor(f).astype(np.int64)
    c1 = np.rint((f - i) * 256.0).astype(np.int64)  # softdouble -> ufixedpoint16, nearest (even)
    i0, i1, w0, w1 = i.copy(), i + 1, 256 - c1, c1
    left = (i < 0) | (src <= 1)
    right = ~left & (i >= src - 1)
    i0[left], i1[left], w0[left], w1[left] = 0, 0, 256, 0
    i0[right], i1[right], w0[right], w1[right] = src - 1, src - 1, 256, 0
    return i0, i1, w0, w1


#: The interpolation coefficients of the axis resizes made, by (length, new length, device); the
#: oldest dropped beyond :data:`COEFF_CACHE_SIZE` (a corpus's clips come in many frame sizes, and
#: each clip's pyramid adds a few dozen axis lengths).
_COEFF_CACHE: dict = {}
COEFF_CACHE_SIZE = 256


def resize_linear_exact(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``cv2.resize(x, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)`` of 8-bit images ``x``
    ``(N, H, W)`` (int32 values 0..255 on any device), bit for bit; returns int32 ``(N, h, w)``."""
    h, w = size
    H, W = x.shape[1:]
    if (H, W) == (h, w):
        return x
    out = []
    for axis_len, new_len in ((W, w), (H, h)):
        key = (axis_len, new_len, x.device)
        coeffs = _COEFF_CACHE.pop(key, None)  # (re-inserted: the dict's order is that of last use)
        if coeffs is None:
            coeffs = tuple(torch.from_numpy(a).to(x.device, torch.int64 if k < 2 else torch.int32)
                           for k, a in enumerate(_linear_exact_coeffs(axis_len, new_len)))
            while len(_COEFF_CACHE) >= COEFF_CACHE_SIZE:
                del _COEFF_CACHE[next(iter(_COEFF_CACHE))]
        _COEFF_CACHE[key] = coeffs
        out.append(coeffs)
    (xi0, xi1, xw0, xw1), (yi0, yi1, yw0, yw1) = out
    t = x[:, :, xi0] * xw0 + x[:, :, xi1] * xw1  # (N, H, w): 8 fractional bits
    v = t[:, yi0, :] * yw0[:, None] + t[:, yi1, :] * yw1[:, None]  # 16 fractional bits
    return (v + (1 << 15)) >> 16


def rgb_to_gray_u8(x: torch.Tensor) -> torch.Tensor:
    """``cv2.cvtColor(RGB2GRAY)`` on 8-bit data (OpenCV 4.x's 15-bit fixed point): ``x``
    ``(N, 3, H, W)`` integer-valued (any dtype); returns int32 ``(N, H, W)``:
    ``(9798 R + 19235 G + 3735 B + 2**14) >> 15``."""
    x = x.to(torch.int32)
    return (x[:, 0] * 9798 + x[:, 1] * 19235 + x[:, 2] * 3735 + (1 << 14)) >> 15


# OpenCV's atan polynomial (degrees), core/src/mathfuncs_core.simd.hpp
_P1, _P3, _P5, _P7 = (np.float32(c * (180 / math.pi)) for c in
                      (0.9997878412794807, -0.3258083974640975, 0.1555786518463281, -0.04432655554792128))


def _cart_to_polar(dx: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cv::cartToPolar(dx, dy, mag, angle, false)`` in float32: magnitude, angle in [0, 2 pi)."""
    mag = torch.sqrt(dx * dx + dy * dy)
    ax, ay = dx.abs(), dy.abs()
    c = torch.minimum(ax, ay) / (torch.maximum(ax, ay) + float(np.float32(np.finfo(np.float64).eps)))
    c2 = c * c
    a = (((c2 * float(_P7) + float(_P5)) * c2 + float(_P3)) * c2 + float(_P1)) * c
    # the selections as exact blends (x * 1 + y * 0 == x): torch.where is slow on the CPU
    a = _select(ax < ay, 90.0 - a, a)
    a = _select(dx < 0, 180.0 - a, a)
    a = _select(dy < 0, 360.0 - a, a)
    return mag, a * float(np.float32(math.pi / 180))


def _select(cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.where(cond, a, b)`` for finite float tensors, bit for bit (a blend with 0 / 1)."""
    m = cond.to(a.dtype)
    return a * m + b * (1.0 - m)


def _block_kernels() -> np.ndarray:
    """``(4, 16, 16)`` float32 per-pixel weights of a block's four cells (cell order x-major, as in
    OpenCV's descriptor: (0,0), (0,1), (1,0), (1,1) for (cell x, cell y)): the Gaussian block
    weight times the bilinear cell weight, as OpenCV's ``HOGCache`` tables compute them."""
    f32 = np.float32
    sigma = f32((BLOCK + BLOCK) / 8.0)
    scale = f32(1.0) / (sigma * sigma * f32(2))
    d = (np.arange(BLOCK, dtype=f32) - f32(BLOCK * 0.5)) ** 2
    gauss = np.exp(-(d[:, None] + d[None, :]) * scale).astype(f32)  # (i = y, j = x)
    pos = (np.arange(BLOCK, dtype=f32) + f32(0.5)) / f32(CELL) - f32(0.5)
    ncell = BLOCK // CELL
    w1d = np.stack([np.maximum(f32(0), f32(1) - np.abs(pos - f32(c))) for c in range(ncell)]).astype(f32)  # (cell, px)
    out = np.empty((ncell * ncell, BLOCK, BLOCK), f32)
    for cx in range(ncell):
        for cy in range(ncell):
            out[cx * ncell + cy] = gauss * (w1d[cy][:, None] * w1d[cx][None, :]).astype(f32)
    return out


def group_rectangles(rects: np.ndarray, weights: np.ndarray, group_threshold: int = 2,
                     eps: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """``cv::HOGDescriptor::groupRectangles``: ``rects`` ``(n, 4)`` int ``x, y, w, h``, ``weights``
    ``(n,)``; returns the grouped rectangles (int64) and each group's maximum weight (float64)."""
    rects = np.asarray(rects, np.int64).reshape(-1, 4)
    weights = np.asarray(weights, np.float64).reshape(-1)
    n = len(rects)
    if group_threshold <= 0 or n == 0:
        return rects, weights
    x, y, w, h = rects.T
    delta = eps * (np.minimum(w[:, None], w[None, :]) + np.minimum(h[:, None], h[None, :])) * 0.5
    sim = ((np.abs(x[:, None] - x[None, :]) <= delta) & (np.abs(y[:, None] - y[None, :]) <= delta)
           & (np.abs((x + w)[:, None] - (x + w)[None, :]) <= delta)
           & (np.abs((y + h)[:, None] - (y + h)[None, :]) <= delta))
    parent = np.arange(n)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(sim, 1))):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots = np.array([find(i) for i in range(n)])
    _, labels = np.unique(roots, return_inverse=True)
    k = labels.max() + 1
    sums = np.zeros((k, 4), np.float64)
    np.add.at(sums, labels, rects.astype(np.float64))
    count = np.bincount(labels, minlength=k)
    wmax = np.full(k, -np.inf)
    np.maximum.at(wmax, labels, weights)
    avg = np.rint(sums * (1.0 / count)[:, None]).astype(np.int64)  # Rect_<double> -> Rect: cvRound
    out_r, out_w = [], []
    for i in range(k):
        n1 = count[i]
        if n1 <= group_threshold:
            continue
        r1 = avg[i]
        inside = False
        for j in range(k):
            n2 = count[j]
            if j == i or n2 <= group_threshold:
                continue
            r2 = avg[j]
            dx, dy = int(np.rint(r2[2] * eps)), int(np.rint(r2[3] * eps))
            if (r1[0] >= r2[0] - dx and r1[1] >= r2[1] - dy and r1[0] + r1[2] <= r2[0] + r2[2] + dx
                    and r1[1] + r1[3] <= r2[1] + r2[3] + dy and (n2 > max(3, n1) or n1 < 3)):
                inside = True
                break
        if not inside:
            out_r.append(r1)
            out_w.append(wmax[i])
    return np.asarray(out_r, np.int64).reshape(-1, 4), np.asarray(out_w, np.float64)


def _clip_rects(rects: np.ndarray, weights: np.ndarray, W: int, H: int) -> tuple[np.ndarray, np.ndarray]:
    """``cv::clipObjects``: intersect with the image, drop empty rectangles."""
    x0, y0 = np.maximum(rects[:, 0], 0), np.maximum(rects[:, 1], 0)
    x1, y1 = np.minimum(rects[:, 0] + rects[:, 2], W), np.minimum(rects[:, 1] + rects[:, 3], H)
    keep = (x1 > x0) & (y1 > y0)
    return np.stack([x0, y0, x1 - x0, y1 - y0], 1)[keep], weights[keep]


def pyramid_levels(W: int, H: int, scale0: float = 1.05, nlevels: int = 64) -> list[tuple[float, int, int]]:
    """``detectMultiScale``'s levels: ``(scale, w, h)`` for scales ``scale0**i`` while the level
    still holds the window."""
    out, scale = [], 1.0
    for _ in range(nlevels):
        w, h = int(round_half_even(W / scale)), int(round_half_even(H / scale))
        if w < WIN_W or h < WIN_H or scale0 <= 1:
            break
        out.append((scale, w, h))
        scale *= scale0
    return out or [(1.0, W, H)]


def round_half_even(v: float) -> float:
    return float(np.rint(v))


# --------------------------------------------------------------------------------------------------
# The detector


class TorchHogPersons:
    """:class:`~mime_fast.detect.models.HogPersonDetector` on torch ``device`` (see the module
    docstring for the algorithm): ``detect(frame) -> Persons`` for an RGB frame, ``detect_batch``
    for a list of frames or a uint8 ``(N, H, W, 3)`` tensor (frames of one size share every
    pyramid level's work), ``detect_gray`` for ``detectMultiScale``'s own output and
    ``descriptor`` for ``HOGDescriptor.compute`` of a 64 x 128 window.

    The frame is first shrunk so its longer side is at most ``max_size`` (area averaging, as the CPU
    class; :func:`~mime_fast.detect.torch_ops.area_downscale`), then converted to gray
    (``RGB2GRAY``'s fixed point); boxes come back in frame pixels, scores ``1 - exp(-weight)``."""

    def __init__(self, *, device="cpu", max_size: int | None = 640, hit_threshold: float = 0.0,
                 scale: float = 1.05, padding: int = 8, group_threshold: int = 2, eps: float = 0.2):
        self.device = _device(device)
        self.max_size, self.hit_threshold, self.scale = max_size, float(hit_threshold), float(scale)
        self.padding = -(-max(int(padding), 0) // STRIDE) * STRIDE  # alignSize to the 8 px cache stride
        self.group_threshold, self.eps = int(group_threshold), float(eps)
        svm = hog_people_svm()
        self.rho = float(svm[DESCRIPTOR_SIZE])
        # OpenCV's order: block (bx, by) x-major, then cell (cx, cy) x-major, then bin -> conv weight
        w = svm[:DESCRIPTOR_SIZE].reshape(BLOCKS_X, BLOCKS_Y, BLOCK_HIST).transpose(2, 1, 0)  # (36, by, bx)
        self._svm = torch.from_numpy(np.ascontiguousarray(w)[None]).to(self.device)
        self._kern = torch.from_numpy(_block_kernels()[:, None]).to(self.device)  # (4, 1, 16, 16)
        self._area: dict = {}

    # ---- HOG features

    def _blocks(self, gray: torch.Tensor, pad: int) -> torch.Tensor:
        """Normalised block histograms ``(N, 36, nby, nbx)`` of int32 gray images ``(N, h, w)``
        padded by ``pad`` (reflect-101) for the gradients; block ``(by, bx)`` covers padded pixels
        ``8 by .. 8 by + 15``, ``8 bx .. 8 bx + 15``."""
        N, h, w = gray.shape
        img = torch.sqrt(gray.to(torch.float32))[:, None]  # gamma: sqrt (IEEE, = OpenCV's table)
        img = F.pad(img, (pad + 1,) * 4, mode="reflect")[:, 0]
        dx = img[:, 1:-1, 2:] - img[:, 1:-1, :-2]
        dy = img[:, 2:, 1:-1] - img[:, :-2, 1:-1]
        mag, ang = _cart_to_polar(dx, dy)
        ang = ang * float(np.float32(NBINS / math.pi)) - 0.5
        hidx = torch.floor(ang)
        frac = ang - hidx
        h0 = (hidx.long() + NBINS) % NBINS  # hidx in [-1, 17]
        h1 = (h0 + 1) % NBINS
        Hp, Wp = mag.shape[1:]
        planes = torch.zeros(N, NBINS, Hp, Wp, dtype=torch.float32, device=gray.device)
        planes.scatter_add_(1, h0[:, None], (mag * (1.0 - frac))[:, None])
        planes.scatter_add_(1, h1[:, None], (mag * frac)[:, None])
        hist = F.conv2d(planes.reshape(N * NBINS, 1, Hp, Wp), self._kern, stride=STRIDE)  # (N*9, 4, nby, nbx)
        nby, nbx = hist.shape[2:]
        hist = hist.reshape(N, NBINS, 4, nby, nbx).transpose(1, 2).reshape(N, BLOCK_HIST, nby, nbx)
        # L2-Hys, OpenCV's epsilons
        hist = hist / (torch.sqrt((hist * hist).sum(1, keepdim=True)) + BLOCK_HIST * 0.1)
        hist = torch.clamp(hist, max=0.2)
        return hist / (torch.sqrt((hist * hist).sum(1, keepdim=True)) + 1e-3)

    @torch.inference_mode()
    def descriptor(self, window) -> np.ndarray:
        """``cv2.HOGDescriptor().compute(window)`` of 8-bit gray 64 x 128 windows: ``window``
        ``(128, 64)`` or ``(N, 128, 64)`` uint8; returns ``(3780,)`` / ``(N, 3780)`` float32."""
        a = np.asarray(window)
        single = a.ndim == 2
        g = torch.from_numpy(np.ascontiguousarray(a.reshape(-1, WIN_H, WIN_W))).to(self.device, torch.int32)
        b = self._blocks(g, 0)  # (N, 36, 15, 7)
        d = b.permute(0, 3, 2, 1).reshape(len(g), DESCRIPTOR_SIZE).cpu().numpy()
        return d[0] if single else d

    def _scores(self, gray: torch.Tensor) -> torch.Tensor:
        """SVM scores of every window position ``(N, nwy, nwx)`` (float32) of int32 gray ``(N, h, w)``;
        window ``(wy, wx)`` has its top-left corner at ``(8 wx - pad, 8 wy - pad)``."""
        b = self._blocks(gray, self.padding)
        return F.conv2d(b, self._svm)[:, 0] + self.rho

    # ---- detection

    @torch.inference_mode()
    def detect_gray(self, gray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``detectMultiScale(gray, hit_threshold, (8, 8), (padding, padding), scale)`` (grouped and
        clipped) of 8-bit gray images, a ``(H, W)`` / ``(N, H, W)`` array or tensor of one size:
        per image ``(rects (M, 4) int64 x y w h, weights (M,) float64)``."""
        g = torch.as_tensor(gray).to(self.device)
        if g.dim() == 2:
            g = g[None]
        g = g.to(torch.int32)
        N, H, W = g.shape
        flat, info = [], []
        for scale, w, h in pyramid_levels(W, H, self.scale):
            s = self._scores(resize_linear_exact(g, (h, w)))
            info.append((scale, s.shape[1], s.shape[2]))
            flat.append(s.reshape(N, -1))
        allscores = torch.cat(flat, 1).double().cpu().numpy()  # one transfer
        out = []
        for n in range(N):
            rects, weights, off = [], [], 0
            for scale, ny, nx in info:
                s = allscores[n, off:off + ny * nx].reshape(ny, nx)
                off += ny * nx
                wy, wx = np.nonzero(s >= self.hit_threshold)
                if len(wy):
                    x = np.rint((wx * STRIDE - self.padding) * scale)
                    y = np.rint((wy * STRIDE - self.padding) * scale)
                    ww, hh = np.rint(WIN_W * scale), np.rint(WIN_H * scale)
                    rects.append(np.stack([x, y, np.full_like(x, ww), np.full_like(x, hh)], 1))
                    weights.append(s[wy, wx])
            r = np.concatenate(rects).astype(np.int64) if rects else np.zeros((0, 4), np.int64)
            wt = np.concatenate(weights) if weights else np.zeros(0)
            r, wt = group_rectangles(r, wt, self.group_threshold, self.eps)
            out.append(_clip_rects(r, wt, W, H))
        return out

    def detect(self, frame: np.ndarray) -> Persons:
        return self.detect_batch([frame])[0]

    @torch.inference_mode()
    def detect_batch(self, frames) -> list[Persons]:
        """Persons of a list of RGB uint8 frames or a uint8 ``(N, H, W, 3)`` tensor; frames of one
        size go through the pyramid together."""
        frames = _as_frames(frames, self.device)
        out: list = [None] * len(frames)
        for H, W, idx, x, s in _size_batches(frames, self.device, self.max_size, self._area):
            for i, (rects, weights) in zip(idx, self.detect_gray(rgb_to_gray_u8(x))):
                rects = rects.astype(np.float32)
                boxes = np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]], 1) / s
                boxes[:, 0::2] = boxes[:, 0::2].clip(0, W)
                boxes[:, 1::2] = boxes[:, 1::2].clip(0, H)
                order = np.argsort(-weights, kind="stable")
                wt = weights[order].astype(np.float32)
                out[i] = Persons(boxes[order], 1.0 - np.exp(-np.maximum(wt, 0)))
        return out
