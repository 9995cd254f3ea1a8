"""Decoding with PyAV (FFmpeg), frames as displayed and in presentation order.

:func:`iter_display_frames` decodes the video stream once and yields RGB24 ``H x W x 3`` uint8
frames **as displayed**: the display matrix (FFmpeg ``AV_FRAME_DATA_DISPLAYMATRIX`` side data, what
phones write as "rotate") is applied (:func:`apply_display_transform`): rotations by multiples of
90 degrees and mirrorings (the eight EXIF orientations); other angles are snapped to the nearest
quarter turn (:func:`mime_fast.media.probe`).  The RGB conversion is
:func:`mime_fast.frames.frame_rgb`.  :func:`prefetch` runs a decode on a thread of its own, and
:class:`Behind` a consumer of the frames (the subject detection beside the FM/VMM encoders);
:class:`KeptFrames` keeps a decode pass's frames for the next pass, within a memory budget.
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

__all__ = ["Behind", "KeptFrames", "apply_display_transform", "decode_frames", "frame_bytes", "iter_display_frames",
           "prefetch"]


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


class Behind:
    """``fn(item)`` for each item :meth:`put` here, in the order put, on a thread of its own: the
    caller goes on (decodes and feeds its encoders) while ``fn`` catches up, at most ``maxsize``
    items behind (:meth:`put` waits beyond).  Whatever ``fn`` computes is what it would compute
    called in line: one thread calls it, in order.

    An exception of ``fn`` is raised by the next :meth:`put` or by :meth:`close` (nothing more is
    handed to ``fn`` after it); :meth:`close` waits until every item was handed to ``fn``;
    :meth:`abort` stops without handing over the rest (the clip failed), and waits for the item
    being handed over.  ``maxsize=0``: ``fn`` is called in line by :meth:`put` (no thread)."""

    _DONE = object()

    def __init__(self, fn, maxsize: int, name: str = "behind"):
        self._fn = fn
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if maxsize > 0:
            self._q: queue.Queue = queue.Queue(maxsize=maxsize)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is self._DONE or self._stop.is_set():
                return
            try:
                self._fn(item)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller
                self._error = exc
                self._stop.set()
                return

    def _raise(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def put(self, item) -> None:
        if self._thread is None:
            self._fn(item)
            return
        while True:
            if self._stop.is_set():  # fn failed (its error is set before the stop), or aborted
                self._raise()
                raise RuntimeError("put() after abort()")
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        """Wait until ``fn`` took every item put; raise what it raised."""
        if self._thread is not None and self._thread.is_alive():
            while self._thread.is_alive():
                try:
                    self._q.put(self._DONE, timeout=0.1)
                    break
                except queue.Full:
                    continue
            self._thread.join()
        self._raise()

    def abort(self) -> None:
        """Hand ``fn`` nothing more; wait for the item it has (exceptions dropped)."""
        if self._thread is None:
            return
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._q.get_nowait()
            with contextlib.suppress(queue.Full):
                self._q.put_nowait(self._DONE)
            self._thread.join(timeout=0.05)
        self._error = None


def frame_bytes(*parts) -> int:
    """Bytes held by the parts of a decoded source frame: numpy arrays, ``av.VideoFrame`` planes,
    device frames (their tensor, or ``width x height x 3/2`` for an NV12 frame without one) and
    what holds them (an :class:`~mime_fast.media.NvdecFrame`'s ``frame``, if any, and ``nv12``);
    ``None`` is 0."""
    n = 0
    for x in parts:
        if x is None:
            continue
        if isinstance(x, np.ndarray):
            n += x.nbytes
        elif isinstance(x, av.VideoFrame):
            n += sum(int(p.buffer_size) for p in x.planes)
        elif hasattr(x, "nv12") and hasattr(x, "frame"):  # NvdecFrame: the host copy and the device frame
            n += frame_bytes(x.frame, x.nv12)
        elif hasattr(x, "tensor"):  # Nv12Frame: the tensor that owns it, pitch padding included
            n += int(x.tensor.numel()) * int(x.tensor.element_size())
        else:
            n += int(x.width) * int(x.height) * 3 // 2
    return n


class KeptFrames:
    """The decoded source frames of one decode pass, kept for the next pass of the same clip so the
    source is decoded once, within ``budget`` bytes (host and device memory together).

    :meth:`add` takes each ``(source_index, time_seconds, rgb, decoded)`` as the pass gets it and
    keeps what a decode with ``rgb=False`` would yield (the RGB only for a frame without its
    decoded yuv420p frame, :func:`iter_display_frames` with ``keep_yuv``; of an NVDEC frame only its
    device frame, the host copy downloaded again when replayed:
    :meth:`mime_fast.media.NvdecFrame.without_host`).  Past the budget, or
    told up front by :meth:`expect` that the clip will not fit, it keeps nothing: the next pass
    decodes again (all or nothing, since a decode cannot start midway).  :meth:`replay` hands the
    frames back in order, letting go of each as it goes.  Decoding is deterministic, so the
    frames replayed are those a second decode would give, and the outputs are the same bytes."""

    def __init__(self, budget: int):
        self.budget = max(int(budget), 0)
        self.bytes = 0
        self._items: list | None = [] if self.budget > 0 else None

    @property
    def complete(self) -> bool:
        """Whether every frame the pass decoded is kept (:meth:`replay` can stand in for a decode)."""
        return self._items is not None

    def expect(self, nbytes: int) -> None:
        """The whole clip will take about ``nbytes``: beyond the budget, keep nothing."""
        if nbytes > self.budget:
            self.drop()

    def drop(self) -> None:
        """Keep nothing (more): the next pass decodes the source again."""
        self._items, self.bytes = None, 0

    def add(self, index: int, t, rgb, decoded) -> None:
        if self._items is None:
            return
        if hasattr(decoded, "without_host"):  # NVDEC's: the device frame alone, its host copy made again
            decoded, rgb = decoded.without_host(), None
        elif decoded is not None:
            rgb = None  # (the next pass converts only what it blurs)
        self.bytes += frame_bytes(rgb, decoded)
        if self.bytes > self.budget:
            self.drop()
        else:
            self._items.append((index, t, rgb, decoded))

    def replay(self):
        """The kept frames, in order, as :func:`iter_display_frames` with ``keep_yuv`` and
        ``rgb=False`` would yield them; each is let go of once handed over, and the store is empty
        afterwards."""
        if self._items is None:
            raise RuntimeError("the frames were not all kept: decode the source again")
        items, self._items, self.bytes = self._items, None, 0
        items.reverse()
        while items:
            index, t, rgb, decoded = items.pop()
            if hasattr(decoded, "with_host"):
                decoded = decoded.with_host()
            yield index, t, rgb, decoded
