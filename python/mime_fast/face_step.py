"""The face step of one decoded frame: the frames of the face-blurred subsets (FDM, FSM).

The layer between the mask providers (:mod:`mime_fast.landmarks`) and the pipeline
(:mod:`mime_fast.subsets`): given one source frame and the subject's points (or, with
``faces="all"``, every face's hull), :func:`face_frames` / :func:`face_frames_union` return one
yuv420p frame per face subset, each blurred inside the mask with its kernel.  One step, three ways
to the same samples: the fused operator on the decoded planes (:func:`mime_fast.ops.blur_hull_yuv420`,
or :func:`mime_fast.ops.blur_hull_nv12` on NVDEC's frame in device memory), or the mask's region
blurred in RGB (:func:`blur_region`, :func:`blur_masked`) and patched into the frame
(:func:`mime_fast.frames.patched_frame`).  The operators arrive as the ``ops`` argument
(:mod:`mime_fast.ops`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frames import copy_frame, frame_rgb, patched_frame, yuv420_planes
from .options import Settings

__all__ = ["Blurred", "blur_masked", "blur_region", "face_frames", "face_frames_union", "union_mask"]


@dataclass
class Blurred:
    """The blur levels of one frame, over the region the blur reads: ``levels[i]`` is the RGB
    region at ``origin`` (even ``(x0, y0)``) blurred with kernel ``kernels[i]`` inside ``mask``
    (region-sized); ``roi`` is the mask's box in region coordinates."""

    levels: list
    origin: tuple[int, int]
    roi: tuple[int, int, int, int]
    mask: np.ndarray


def blur_region(ops, rgb, decoded, shape, pts, kernels: list[int], st: Settings, matrix: str) -> Blurred | None:
    """One mask, one fused blur call over the mask's box grown by the largest kernel's radius (the
    only pixels the blur reads), so RGB is needed only there: sliced from ``rgb`` or converted from
    the ``decoded`` frame's planes (:func:`mime_fast.frames.frame_rgb`).  Inside the box the levels
    equal the blur of the whole frame (the region holds every neighbour the kernels read, and its
    edges are the frame's wherever it is clipped).  ``None``: no face, nothing to blur."""
    if pts is None or not kernels:
        return None
    mask, bbox = ops.hull_mask(pts, shape, feather=st.mask.feather_px, margin=st.mask.margin_px,
                               device=st.compute.device)
    return blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels, st)


def union_mask(ops, shape, hulls: list, st: Settings) -> tuple[np.ndarray | None, tuple[int, int, int, int]]:
    """The union of the feathered masks of ``hulls`` (each :func:`mime_fast.ops.hull_mask` with the
    settings' feather and margin): per pixel the largest of them, and the box of its non-zero
    pixels (``(None, (0, 0, 0, 0))`` when no hull reaches into the frame)."""
    union, box = None, None
    for pts in hulls:
        m, (x, y, w, h) = ops.hull_mask(pts, shape, feather=st.mask.feather_px, margin=st.mask.margin_px,
                                        device=st.compute.device)
        if w == 0 or h == 0:
            continue
        if union is None:
            union, box = m, [x, y, x + w, y + h]
            continue
        np.maximum(union[y:y + h, x:x + w], m[y:y + h, x:x + w], out=union[y:y + h, x:x + w])
        box = [min(box[0], x), min(box[1], y), max(box[2], x + w), max(box[3], y + h)]
    if union is None:
        return None, (0, 0, 0, 0)
    return union, (box[0], box[1], box[2] - box[0], box[3] - box[1])


def blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels: list[int], st: Settings) -> Blurred | None:
    """:func:`blur_region` for a frame-sized ``mask`` whose non-zero pixels lie in ``bbox``."""
    H, W = shape
    if bbox[2] == 0 or bbox[3] == 0:
        return None
    x, y, w, h = (int(v) for v in bbox)
    uniq = sorted(set(kernels))
    r = max(uniq) // 2 + 1  # + 1: the 2x2 blocks covering the box lie inside the region
    x0, y0 = max(0, x - r) // 2 * 2, max(0, y - r) // 2 * 2
    x1, y1 = min(W, x + w + r), min(H, y + h + r)
    x1, y1 = min(W, x1 + x1 % 2), min(H, y1 + y1 % 2)
    if rgb is not None:
        src = np.ascontiguousarray(rgb[y0:y1, x0:x1])
    else:
        src = frame_rgb(decoded, (x0, y0, x1 - x0, y1 - y0), device=st.compute.device)
    m = np.ascontiguousarray(mask[y0:y1, x0:x1])
    roi = (x - x0, y - y0, w, h)
    outs = ops.blur_in_mask(src, m, uniq, bbox=roi, device=st.compute.device)
    by_k = dict(zip(uniq, outs))
    return Blurred([by_k[k] for k in kernels], (x0, y0), roi, m)


def face_frames(ops, rgb, decoded, base, shape, pts, kernels: list[int], codes: list[str], st: Settings,
                 matrix: str, nv12=None) -> dict:
    """The frames of the face subsets ``codes`` (blurred with ``kernels``) for one source frame:
    copies of ``base`` (its yuv420p frame), blurred inside the subject's mask (``pts``; ``None``:
    no subject in this frame, the copies are the output).  With the ``decoded`` planes the fused
    step (:func:`mime_fast.ops.blur_hull_yuv420`) writes the masked samples into the copies,
    reading the frame on the device where NVDEC left it when ``nv12`` is given
    (:func:`mime_fast.ops.blur_hull_nv12`); otherwise (a rotated or converted source) the region
    is blurred in RGB (:func:`blur_region`) and patched in (:func:`mime_fast.frames.patched_frame`):
    the same samples every way."""
    if pts is None or not codes:
        return {c: copy_frame(base) for c in codes}
    if decoded is None:
        blurred = blur_region(ops, rgb, decoded, shape, pts, kernels, st, matrix)
        return {c: copy_frame(base) if blurred is None else patched_frame(
            base, blurred.levels[i], blurred.origin, blurred.roi, blurred.mask, matrix=matrix)
            for i, c in enumerate(codes)}
    frames = {c: copy_frame(base) for c in codes}
    first = {}  # one output per distinct kernel; a code that repeats a kernel copies it
    for c, k in zip(codes, kernels):
        first.setdefault(k, c)
    outs = [yuv420_planes(frames[c]) for c in first.values()]
    if nv12 is not None:
        ops.blur_hull_nv12(nv12, pts, outs, list(first), feather=st.mask.feather_px, margin=st.mask.margin_px,
                           matrix=matrix)
    else:
        ops.blur_hull_yuv420(yuv420_planes(decoded), pts, outs, list(first), feather=st.mask.feather_px,
                             margin=st.mask.margin_px, matrix=matrix, device=st.compute.device)
    for c, k in zip(codes, kernels):
        if first[k] != c:
            for dst, src in zip(yuv420_planes(frames[c]), yuv420_planes(frames[first[k]])):
                np.copyto(dst, src)
    return frames


def face_frames_union(ops, rgb, decoded, base, shape, hulls: list, kernels: list[int], codes: list[str],
                       st: Settings, matrix: str) -> dict:
    """:func:`face_frames` for several faces (``faces="all"``): copies of ``base`` blurred inside the
    union of the hulls' masks (:func:`union_mask`), made with the operators the single-hull path
    is checked against: the union's box grown by the blur's reach blurred in RGB
    (:func:`mime_fast.ops.blur_in_mask`, the ``decoded`` frame's RGB converted only there) and
    converted back where the union mask is non-zero (:func:`mime_fast.frames.patched_frame`).  With
    one hull, the same samples as :func:`face_frames`."""
    if not hulls or not codes:
        return {c: copy_frame(base) for c in codes}
    mask, bbox = union_mask(ops, shape, hulls, st)
    blurred = None if mask is None else blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels, st)
    return {c: copy_frame(base) if blurred is None else patched_frame(
        base, blurred.levels[i], blurred.origin, blurred.roi, blurred.mask, matrix=matrix)
        for i, c in enumerate(codes)}
