"""Duplicates within and across corpora: a perceptual video hash (:func:`video_hash`) and the clips
that share one (:func:`duplicate_groups`).

The hash of a clip is the DCT hash (pHash) of each of its sampled frames (the same relative times
in every clip) after its black bars are cropped: a frame's content, shrunk to 32 x 32 grey, its
8 x 8 lowest DCT frequencies but the mean, each bit whether a coefficient is above their median.
Re-encoding, another size or CRF and letterboxing (bars found on the frames over time: rows and
columns that stay black) leave it nearly unchanged.  Two clips are copies when their durations
agree (within :data:`DURATION_TOLERANCE` s or :data:`DURATION_SHARE` of the longer) and the mean
Hamming distance of their frames' hashes is at most :data:`THRESHOLD` of the bits, over at least
half of the frames, frames with no picture (a flat frame: a fade to black) left out.  Only the
pairs that share a 16-bit band of one of their frames' hashes at the same frame are compared
(:func:`_candidates`: copies always do), so a corpus of 80,000 clips takes seconds.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BITS", "THRESHOLD", "content_box", "duplicate_groups", "frame_hashes", "video_hash_distance"]

BITS = 63  #: bits of a frame's hash (8 x 8 DCT coefficients but the mean)
THRESHOLD = 0.15  #: the share of the bits two copies' frames may differ by, on average
DURATION_TOLERANCE = 0.3
DURATION_SHARE = 0.05
BLACK = 24  #: a bar's pixels stay at or below this (0..255) in every frame
FLAT = 3.0  #: a frame whose content's standard deviation is below this has no picture
BUCKET_CAP = 64  #: a band value shared by more clips than this is too common to point at copies

_POP = np.array([(i).bit_count() for i in range(256)], np.uint8)


def content_box(frames: np.ndarray) -> tuple[int, int, int, int]:
    """``(y0, y1, x0, x1)``: the picture of ``frames`` (``K x H x W`` grey) without its black bars."""
    brightest = frames.max(axis=0)
    rows = np.flatnonzero(brightest.max(axis=1) > BLACK)
    cols = np.flatnonzero(brightest.max(axis=0) > BLACK)
    h, w = brightest.shape
    if rows.size == 0 or cols.size == 0:
        return 0, h, 0, w
    y0, y1, x0, x1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if (y1 - y0) < h / 4 or (x1 - x0) < w / 4:  # a dark clip, not bars
        return 0, h, 0, w
    # a bar is at least 2 % of its side: a thin dark border of the picture itself stays
    if y0 < 0.02 * h and h - y1 < 0.02 * h:
        y0, y1 = 0, h
    if x0 < 0.02 * w and w - x1 < 0.02 * w:
        x0, x1 = 0, w
    return y0, y1, x0, x1


def frame_hashes(frames: np.ndarray) -> tuple[bytes, list[bool]]:
    """The hash of each of ``frames`` (8 bytes each, concatenated) and which frames are flat."""
    import cv2  # the curate extra

    y0, y1, x0, x1 = content_box(frames)
    out, flat = bytearray(), []
    for f in frames:
        small = cv2.resize(f[y0:y1, x0:x1], (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
        flat.append(bool(small.std() < FLAT))
        coeff = cv2.dct(small)[:8, :8].ravel()[1:]
        bits = np.append(coeff > np.median(coeff), False)
        out += np.packbits(bits).tobytes()
    return bytes(out), flat


def video_hash_distance(a: bytes, flat_a: list[bool], b: bytes, flat_b: list[bool]) -> float | None:
    """The mean share of differing bits of two clips' frames (``None``: too few frames with a picture)."""
    ha, hb = np.frombuffer(a, np.uint8).reshape(-1, 8), np.frombuffer(b, np.uint8).reshape(-1, 8)
    if ha.shape != hb.shape:
        return None
    valid = ~(np.asarray(flat_a) | np.asarray(flat_b))
    if valid.sum() * 2 < len(valid):
        return None
    ham = _POP[ha ^ hb].sum(axis=1)
    return float(ham[valid].mean() / BITS)


def _candidates(hashes: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``, of clips that share one of their frames' 16-bit bands at the
    same frame: two copies whose frame differs by 3 bits or fewer share one of its 4 bands, and
    copies share such a band in some of their 12 frames.  Bands shared by more than
    :data:`BUCKET_CAP` clips (a black frame's, a common pattern) say nothing and are skipped."""
    n, k = hashes.shape[:2]
    bands = hashes.reshape(n, k, 4, 2).astype(np.int64)
    values = (bands[..., 0] << 8) | bands[..., 1]  # (n, k, 4)
    keys = ((np.arange(k)[None, :, None] * 4 + np.arange(4)[None, None, :]) << 16) | values
    owner = np.broadcast_to(np.arange(n)[:, None, None], keys.shape)
    usable = np.broadcast_to(~flat[:, :, None], keys.shape)
    keys, owner = keys[usable], owner[usable]
    order = np.lexsort((owner, keys))
    keys, owner = keys[order], owner[order]
    bucket = np.cumsum(np.r_[True, keys[1:] != keys[:-1]])  # the bucket of each key, 1..
    sizes = np.bincount(bucket)
    keep = sizes[bucket] <= BUCKET_CAP
    bucket, owner = bucket[keep], owner[keep]
    codes = []
    for d in range(1, int(sizes[bucket].max(initial=1))):  # every pair within a bucket: d apart
        same = bucket[:-d] == bucket[d:]
        i, j = owner[:-d][same], owner[d:][same]
        codes.append(np.minimum(i, j) * n + np.maximum(i, j))
    codes = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
    pairs = np.stack([codes // n, codes % n], axis=1)
    return pairs[pairs[:, 0] != pairs[:, 1]]


def duplicate_groups(items: list[tuple[str, float, bytes, list[bool]]]) -> list[list[str]]:
    """The groups of copies among ``items`` (key, duration in s, hash, flat frames), each group's
    keys in the order of ``items``; groups in the order of their first key."""
    if not items:
        return []
    k = len(items[0][3])
    usable = [len(it[3]) == k and len(it[2]) == 8 * k for it in items]
    hashes = np.stack([np.frombuffer(it[2], np.uint8).reshape(k, 8) if ok else np.zeros((k, 8), np.uint8)
                       for it, ok in zip(items, usable)])
    flat = np.array([list(it[3]) if ok else [True] * k for it, ok in zip(items, usable)], bool)
    durations = np.array([float(it[1]) for it in items])
    pairs = _candidates(hashes, flat)
    if len(pairs):
        a, b = pairs[:, 0], pairs[:, 1]
        longer = np.maximum(durations[a], durations[b])
        near = np.abs(durations[a] - durations[b]) <= np.maximum(DURATION_TOLERANCE, DURATION_SHARE * longer)
        a, b = a[near], b[near]
        valid = ~(flat[a] | flat[b])  # (P, K)
        ham = _POP[hashes[a] ^ hashes[b]].sum(axis=2)
        n = valid.sum(axis=1)
        dist = (ham * valid).sum(axis=1) / np.maximum(n, 1) / BITS
        close = (n * 2 >= k) & (n > 0) & (dist <= THRESHOLD)
        pairs = np.stack([a[close], b[close]], axis=1)
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in pairs.tolist():
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[str]] = {}
    for i in range(len(items)):
        groups.setdefault(find(i), []).append(items[i][0])
    return [g for g in groups.values() if len(g) > 1]
