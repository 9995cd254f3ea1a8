"""The constant-frame-rate grid of the outputs.

:class:`FrameStandardiser` maps decoded source frames onto it by timestamp: output frame ``i`` shows
the latest source frame whose presentation time is ``<= t0 + i/fps`` (``t0`` = presentation time of
the first video frame), with a 1 ms tolerance for container timestamp rounding
(:data:`PTS_TOLERANCE`).  Frames are duplicated or dropped as needed.  The number of output frames
is ``round(video_duration * fps)`` (at least 1, :func:`output_frame_count`), where the video
duration is ``max(pts + duration) - min(pts)`` over the video packets
(:func:`mime_fast.media.probe`).  All arithmetic uses exact fractions, so there is no drift on long
clips.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["PTS_TOLERANCE", "FrameStandardiser", "output_frame_count"]

#: Timestamp tolerance of the standardiser (container timestamps are often rounded to 1 ms).
PTS_TOLERANCE = Fraction(1, 1000)


def output_frame_count(duration: Fraction, fps: int | Fraction) -> int:
    """``round(duration * fps)`` (half up), at least 1."""
    n = Fraction(duration) * Fraction(fps)
    return max(1, int(n + Fraction(1, 2)))


class FrameStandardiser:
    """Constant-frame-rate resampling by timestamps, streaming.

    ``push(time, item)`` with source frames in presentation order yields ``(out_index, item)`` for every
    output frame that is now decided; ``finish()`` yields the remaining ones up to ``n_out``.  Output
    frame ``i`` at ``t_i = t0 + i / fps`` gets the latest pushed item with ``time <= t_i + tolerance``.
    Only the current item is held, so memory is constant.
    """

    def __init__(self, t0: Fraction, fps, n_out: int, tolerance: Fraction = PTS_TOLERANCE):
        self.t0 = Fraction(t0)
        self.fps = Fraction(fps)
        self.n_out = int(n_out)
        self.tol = Fraction(tolerance)
        self.next_out = 0
        self.current = None
        self._have = False

    def _t(self, i: int) -> Fraction:
        return self.t0 + Fraction(i) / self.fps

    def push(self, time: Fraction, item):
        time = Fraction(time)
        # every output slot strictly before this frame's time is decided by the current item
        while self._have and self.next_out < self.n_out and self._t(self.next_out) + self.tol < time:
            yield self.next_out, self.current
            self.next_out += 1
        self.current = item
        self._have = True

    def finish(self):
        while self._have and self.next_out < self.n_out:
            yield self.next_out, self.current
            self.next_out += 1

