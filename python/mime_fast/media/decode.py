"""Decoding with PyAV (FFmpeg), frames as displayed and in presentation order.

:func:`iter_display_frames` decodes the video stream once and yields RGB24 ``H x W x 3`` uint8
frames **as displayed**: the display matrix (FFmpeg ``AV_FRAME_DATA_DISPLAYMATRIX`` side data, what
phones write as "rotate") is applied (:func:`apply_display_transform`): rotations by multiples of
90 degrees and mirrorings (the eight EXIF orientations); other angles are snapped to the nearest
quarter turn (:func:`mime_fast.media.probe`).  The RGB conversion is
:func:`mime_fast.frames.frame_rgb`.  :func:`prefetch` runs a decode on a thread of its own.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from ..frames import frame_matrix, frame_rgb, native_yuv
from .errors import ClipError, ffmpeg_detail, interrupted, open_input
from .source import SourceInfo, probe

__all__ = ["apply_display_transform", "decode_frames", "iter_display_frames", "prefetch"]


def apply_display_transform(img: np.ndarray, t: tuple[int, int, int, int]) -> np.ndarray:
    """Map a decoded frame to its displayed orientation: ``out[y', x'] = img[y, x]`` with
    ``x' = a x + c y``, ``y' = b x + d y`` (up to a translation).  Returns a view."""
    a, b, c, d = t
    if b == 0 and c == 0:
        out = img
        if a < 0:
            out = out[:, ::-1]
        if d < 0:
            out = out[::-1]
        return out
    out = img.swapaxes(0, 1)  # out[x, y] = img[y, x]: y' = x, x' = y
    if b < 0:
        out = out[::-1]
    if c < 0:
        out = out[:, ::-1]
    return out


def _frame_time(frame, tb, fallback: Fraction) -> Fraction:
    if frame.pts is not None:
        return Fraction(frame.pts) * (frame.time_base or tb)
    return fallback


def iter_display_frames(path, info: SourceInfo, *, rgb: bool = True, keep_yuv: bool = False) -> Iterator[tuple]:
    """Decode the video once; yield ``(source_index, time_seconds, rgb)`` in presentation order
    (``(source_index, time_seconds, rgb, frame)`` with ``keep_yuv``: ``frame`` is the decoded
    yuv420p ``av.VideoFrame`` when ``info.yuv_passthrough`` and the frame still qualifies, else
    ``None``).

    ``rgb`` is H x W x 3 uint8, C-contiguous, rotated to the display orientation
    (:func:`frame_rgb`).  With ``rgb=False`` and ``keep_yuv``, frames that come with their decoded
    ``frame`` are not converted (``rgb`` is ``None``): a caller that needs RGB only in places
    converts just those (:func:`frame_rgb` with a ``roi``).  Raises :class:`ClipError` when decoding
    fails or yields fewer frames than the container holds.
    """
    path = Path(path)
    transform = tuple(info.display_transform)
    identity = transform == (1, 0, 0, 1)
    step = Fraction(1, 30) if not info.average_rate else 1 / Fraction(info.average_rate).limit_denominator(100000)
    n = 0
    last_t = info.start - step
    with contextlib.closing(open_input(path)) as c:
        vs = c.streams[info.stream_index]
        vs.thread_type = "AUTO"
        tb = vs.time_base or Fraction(1, 90000)
        try:
            for frame in c.decode(vs):
                t = _frame_time(frame, tb, last_t + step)
                last_t = t
                same = keep_yuv and (info.yuv_passthrough and native_yuv(frame) and frame_matrix(frame) == info.matrix
                                     and (frame.width, frame.height) == (info.coded_width, info.coded_height))
                img = None
                if rgb or not same:
                    img = frame_rgb(frame)
                    if not identity:
                        img = np.ascontiguousarray(apply_display_transform(img, transform))
                if keep_yuv:
                    yield n, t, img, (frame if same else None)
                else:
                    yield n, t, img
                n += 1
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, f"corrupt video stream: decoding fails after {n} frames", ffmpeg_detail(exc)) from exc
    if n < info.video_frames:
        raise ClipError(path, f"decoded only {n} of {info.video_frames} video frames (truncated or corrupt)")


def decode_frames(path, indices) -> list[np.ndarray]:
    """The RGB frames (display orientation, :func:`iter_display_frames`) at the source frame
    ``indices`` of the clip at ``path``, in increasing index order, decoding no further than the
    last one (reference frames for tests and golden files).  Raises :class:`ClipError` when the clip
    has fewer frames."""
    path = Path(path)
    wanted, out = set(int(i) for i in indices), []
    if not wanted:
        return out
    for i, _, rgb in iter_display_frames(path, probe(path)):
        if i in wanted:
            out.append(np.ascontiguousarray(rgb))
        if i >= max(wanted):
            break
    if len(out) != len(wanted):
        raise ClipError(path, f"has {len(out)} of the {len(wanted)} frames asked for")
    return out


def prefetch(iterable, maxsize: int = 4):
    """Run ``iterable`` on a worker thread, handing its items over through a bounded queue.

    Exceptions of the producer are re-raised in the consumer; closing the returned generator early
    stops the producer.  ``maxsize=0`` returns a plain iterator (no thread).
    """
    if maxsize <= 0:
        yield from iterable
        return
    q: queue.Queue = queue.Queue(maxsize=maxsize)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("done", done))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            q.put(("error", exc))
        finally:
            close = getattr(iterable, "close", None)
            if close is not None and stop.is_set():
                with contextlib.suppress(Exception):
                    close()

    t = threading.Thread(target=run, name="prefetch", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        while t.is_alive():
            with contextlib.suppress(queue.Empty):
                q.get(timeout=0.05)
        t.join()
