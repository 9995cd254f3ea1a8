"""Encoding the outputs: :class:`Mp4Writer`, libx264 (yuv420p) into MP4 with an optional AAC track,
on a worker thread of its own; :class:`StillRun`, the packets of a picture shown unchanged from the
first frame on (a :class:`~mime_fast.frames.Still`), encoded once per process and configuration
and muxed as they are into every output that shows it.
"""

from __future__ import annotations

import contextlib
import io
import queue
import threading
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from ..frames import Still, even_crop, yuv420_frame
from .audio import AacTrack
from .errors import av_path
from .x264 import add_x264_stream

__all__ = ["Mp4Writer", "StillRun"]


class StillRun:
    """The libx264 packets of a run of one still picture (:class:`~mime_fast.frames.Still`) for one
    encoder configuration, kept per process and muxed as they are into every output of that
    configuration that shows it (:meth:`Mp4Writer.write_still`).

    With preset ``"ultrafast"`` (no lookahead, no B-frames) libx264 gives frame ``i`` the same
    packet whatever frames follow, so the first ``n`` packets of a longer run are exactly the
    encode of ``n`` frames of the picture: the files are the bytes a direct encode writes
    (``tests/test_media_encode.py`` compares them).  The run is encoded frame by frame as far as a
    clip asks, so the first clip of a configuration costs what encoding its frames costs and a
    later one only the frames beyond the longest before it (re-encoded from the start: the encoder
    is released when the writer closes, as its buffers are large, 30 MB at 720p).  The packets
    stay: about 24 bytes a frame of a flat picture (3 KB for the key frame every 250 frames), for
    the 8 runs used last.  Thread-safe (one lock for all); use :meth:`shared`.
    """

    _lock = threading.RLock()
    _instances: dict = {}  # (config, still) -> StillRun, most recently used last (at most 8)

    def __init__(self, config: tuple, still: Still):
        self.config = config  # (width, height, fps, crf, preset, threads, matrix, sar) of add_x264_stream
        self.still = still
        self._packets: list[tuple[bytes, int, int, int, bool]] = []
        self._enc = None  # [container, stream, frame, frames fed] while a writer extends the run

    @classmethod
    def reset(cls) -> None:
        """Forget every run."""
        with cls._lock:
            for inst in cls._instances.values():
                inst.release()
            cls._instances.clear()

    @classmethod
    def shared(cls, config: tuple, still: Still) -> "StillRun":
        """The process's instance for ``config`` and ``still``."""
        key = (config, still)
        with cls._lock:
            inst = cls._instances.pop(key, None) or cls(config, still)
            cls._instances[key] = inst
            while len(cls._instances) > 8:
                cls._instances.pop(next(iter(cls._instances))).release()
            return inst

    def packet(self, i: int) -> tuple[bytes, int, int, int, bool]:
        """``(data, pts, dts, duration, keyframe)`` of frame ``i`` (times in ``1/fps``), encoding
        the picture until libx264 has returned it."""
        with self._lock:
            while i >= len(self._packets):
                self._feed()
            return self._packets[i]

    def release(self) -> None:
        """Free the encoder (the packets stay)."""
        with self._lock:
            enc, self._enc = self._enc, None
            if enc is not None:
                with contextlib.suppress(Exception):
                    enc[0].close()

    def _feed(self) -> None:
        if self._enc is None:
            c = av.open(io.BytesIO(), "w", format="mp4")  # the container makes the SPS/PPS global
            self._enc = [c, add_x264_stream(c, *self.config), self.still.draw(*self.config[:2]), 0]
        c, vs, vf, fed = self._enc
        vf.pts, vf.time_base = fed, 1 / self.config[2]
        self._enc[3] = fed + 1
        for p in vs.encode(vf):
            if int(p.dts) < len(self._packets):  # re-encoding the start of the run
                continue
            if int(p.dts) != len(self._packets) or int(p.pts) != int(p.dts):
                raise RuntimeError(f"libx264 {self.config[4]!r} reorders frames: {self.still.name} packets "
                                   "cannot be reused")
            self._packets.append((bytes(p), int(p.pts), int(p.dts), int(p.duration or 0), bool(p.is_keyframe)))


class Mp4Writer:
    """libx264 (yuv420p) MP4 writer with an optional AAC track.

    With ``video_template`` (an input ``av.VideoStream``) nothing is encoded: the video stream takes
    that stream's codec parameters and gets already-encoded packets through :meth:`write_packet`
    (FM's stream copy, :func:`mime_fast.media.grid_packets`); timestamps, audio and container are as
    for an encode.

    ``width``/``height`` are the (even) encoded size.  Frames given to :meth:`write_rgb` may be one
    pixel larger (odd source): they are cropped with :func:`~mime_fast.frames.even_crop`.  Video pts are frame indices
    in a ``1/fps`` time base.  ``sar``: the frames' sample aspect ratio when the pixels are not
    square (written into the stream, :func:`~mime_fast.media.add_x264_stream`).  Audio is either int16 PCM ``(n, channels)`` at ``audio_rate``
    (:meth:`write_audio`, encoded here) or an :class:`AacTrack` (``audio_track``, muxed as it is
    along the video by :meth:`write_audio_until`).

    With ``queue_size > 0`` the RGB->YUV conversion, encoding and muxing run on a worker thread fed
    by a bounded queue of that many items (PyAV releases the GIL while encoding, so several writers
    encode in parallel); the caller must not modify arrays after handing them over.  Errors of the
    worker are re-raised by the next call.  ``queue_size=0`` encodes synchronously.
    """

    def __init__(self, path, width: int, height: int, *, fps=30, crf: int = 18, preset: str = "veryfast",
                 threads: int = 2, audio_rate: int | None = None, audio_channels: int = 1,
                 audio_track: AacTrack | None = None, queue_size: int = 0, matrix: str = "bt601",
                 video_template=None, sar: Fraction | None = None):
        self.path = Path(path)
        self.width, self.height = int(width), int(height)
        self.fps = Fraction(fps)
        self.c = av.open(av_path(self.path), "w", format="mp4")
        self._config = (self.width, self.height, self.fps, int(crf), str(preset), int(threads), matrix,
                        None if sar is None or sar == 1 else Fraction(sar))
        self._copy = video_template is not None
        try:
            if self._copy:
                self.vs = self.c.add_stream_from_template(video_template)
                self.vs.time_base = 1 / self.fps
            else:
                self.vs = add_x264_stream(self.c, *self._config)
            self.matrix = matrix
            self.audio = None
            self._track = None
            if audio_track is not None:
                self._track = audio_track.open()
                self.audio = self.c.add_stream_from_template(self._track[1])
                self._track_packets = self._track[0].demux(self._track[1])
                self._track_next = None
            elif audio_rate:
                layout = {1: "mono", 2: "stereo"}[audio_channels]
                self.audio = self.c.add_stream("aac", rate=int(audio_rate), layout=layout)
                self.audio_rate = int(audio_rate)
                self.audio_layout = layout
                self.audio_pts = 0
        except Exception:
            self.c.close()
            if self._track is not None:
                self._track[0].close()
            raise
        self.frames = 0
        self._runs: dict[Still, None] = {}  # write_still's runs: their shared encoders are released at the end
        self._stills: dict[Still, object] = {}  # write_still's pictures with a preset other than "ultrafast"
        self._closed = self._finishing = False
        self._error: BaseException | None = None
        self._q = None
        self._thread = None
        if queue_size > 0:
            self._q = queue.Queue(maxsize=int(queue_size))
            self._thread = threading.Thread(target=self._worker, name=f"mp4writer-{self.path.name}", daemon=True)
            self._thread.start()

    # -- worker -------------------------------------------------------------------------------
    def _worker(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._error is not None:
                continue  # drain after a failure so producers never block
            try:
                getattr(self, "_do_" + item[0])(*item[1:])
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = exc

    def _submit(self, *item):
        if self._error is not None:
            raise self._error
        if self._q is None:
            getattr(self, "_do_" + item[0])(*item[1:])
        else:
            self._q.put(item)

    def _mux(self, packets):
        for p in packets:
            self.c.mux(p)

    def _do_frame(self, vf, pts):
        vf.pts = pts
        # a decoded frame (FM's passthrough) carries the source's picture type, which libx264 would
        # obey (forced I/P/B): the encoder decides the frame types itself, as for every other output
        vf.pict_type = 0
        vf.time_base = self.vs.codec_context.time_base
        self._mux(self.vs.encode(vf))

    def _do_packet(self, data: bytes, pts: int, dts: int, duration: int, keyframe: bool):
        p = av.Packet(data)
        p.pts, p.dts, p.duration, p.is_keyframe = pts, dts, duration, keyframe
        p.time_base = 1 / self.fps
        p.stream = self.vs
        self.c.mux(p)

    def _do_still(self, still: Still, pts: int):
        self._do_packet(*StillRun.shared(self._config, still).packet(pts))

    def _do_rgb(self, rgb, pts):
        self._do_frame(yuv420_frame(rgb, matrix=self.matrix), pts)

    def _do_audio(self, a, pts):
        af = av.AudioFrame.from_ndarray(a, format="s16", layout=self.audio_layout)
        af.sample_rate = self.audio_rate
        af.pts = pts
        af.time_base = Fraction(1, self.audio_rate)
        self._mux(self.audio.encode(af))

    def _do_track(self, until):
        """Mux the track's packets that start before ``until`` seconds (all of them: ``None``)."""
        tb = self._track[1].time_base
        while True:
            p = self._track_next
            if p is None:
                p = next(self._track_packets, None)
                if p is None:
                    return
                if p.dts is None and p.size == 0:  # the demuxer's final empty packet
                    continue
            if until is not None and p.pts is not None and p.pts * tb >= until:
                self._track_next = p
                return
            self._track_next = None
            p.stream = self.audio
            self.c.mux(p)

    def _do_flush(self):
        if not self._copy:
            self._mux(self.vs.encode(None))
        if self._track is not None:
            self._do_track(None)
        elif self.audio is not None:
            self._mux(self.audio.encode(None))

    # -- public -------------------------------------------------------------------------------
    def write_frame(self, vf, pts: int) -> None:
        """Encode a ready ``av.VideoFrame`` (rgb24 or yuv420p) with the given pts (frame index).
        The frame object is reused by nobody else while queued (its pts is set by the encoder)."""
        self._submit("frame", vf, int(pts))
        self.frames += 1

    def write_still(self, pts: int, still: Still) -> None:
        """Frame ``pts`` (frame index; call with 0, 1, 2, ... in order) shows ``still``: with preset
        ``"ultrafast"`` the packet of its :class:`StillRun` for this writer's configuration is muxed
        as it is (the bytes its encoder would write), else the picture is encoded."""
        if self._config[4] != "ultrafast":
            vf = self._stills.get(still)
            if vf is None:  # one picture for every call (the encoder copies it)
                vf = self._stills[still] = still.draw(self.width, self.height)
            self.write_frame(vf, pts)
            return
        if pts != self.frames:
            raise ValueError(f"write_still: frame {pts} after {self.frames} frames (still runs start at 0, in order)")
        self._runs[still] = None
        self._submit("still", still, int(pts))
        self.frames += 1

    def write_packet(self, data: bytes, pts: int, dts: int, duration: int, keyframe: bool) -> None:
        """Mux one already-encoded video packet (times in ``1/fps``; a ``video_template`` writer)."""
        if not self._copy:
            raise ValueError("write_packet needs a writer made with video_template=")
        self._submit("packet", data, int(pts), int(dts), int(duration), bool(keyframe))
        self.frames += 1

    def write_rgb(self, rgb: np.ndarray, pts: int) -> None:
        rgb = even_crop(rgb)
        if not rgb.flags.c_contiguous:
            rgb = np.ascontiguousarray(rgb)
        self._submit("rgb", rgb, int(pts))
        self.frames += 1

    def write_audio_until(self, seconds) -> None:
        """Mux the :class:`AacTrack`'s packets that start before ``seconds`` (call it as the video
        advances, so audio and video interleave in the file; :meth:`close` muxes the rest)."""
        if self._track is not None:
            self._submit("track", Fraction(seconds))

    def write_audio(self, samples: np.ndarray) -> None:
        if self._track is not None:
            raise ValueError("this writer muxes an AacTrack: use write_audio_until")
        if self.audio is None or len(samples) == 0:
            return
        a = np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1)
        pts = self.audio_pts
        self.audio_pts += samples.shape[0]
        self._submit("audio", a, pts)

    def finish(self) -> None:
        """Start closing: the encoders flush on the worker thread while the caller goes on (a
        writer without one flushes now); :meth:`close` waits for it and finishes the file.  Writers
        finished together flush side by side: libx264's last frames are encoded with fewer threads
        busy than the rest, so one writer's tail overlaps another's, or the next pass's start."""
        if self._closed or self._finishing:
            return
        self._submit("flush")
        if self._thread is not None:
            self._q.put(None)
        self._finishing = True

    def close(self) -> None:
        """Flush the encoders, wait for the worker and finish the file (raises any worker error)."""
        if self._closed:
            return
        self.finish()
        if self._thread is not None:
            self._thread.join()
        self._closed = True
        self._close_sources()
        if self._error is not None:
            with contextlib.suppress(Exception):
                self.c.close()
            raise self._error
        self.c.close()

    def abort(self) -> None:
        """Stop without finishing the file (the caller deletes it)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._error = self._error or RuntimeError("aborted")
            self._q.put(None)
            self._thread.join()
        self._close_sources()
        with contextlib.suppress(Exception):
            self.c.close()

    def _close_sources(self) -> None:
        if self._track is not None:
            with contextlib.suppress(Exception):
                self._track[0].close()
        for still in self._runs:
            StillRun.shared(self._config, still).release()
