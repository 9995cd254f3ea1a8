"""The audio of the outputs.

* :func:`extract_audio_wav` decodes the first audio stream, resamples it with
  ``av.AudioResampler`` to 16-bit PCM at ``rate`` Hz / ``channels`` channels, aligns it to the first
  video frame (leading silence is inserted when audio starts late, leading samples are dropped when
  it starts early) and pads / trims it to exactly the output video duration, writing a WAV file.
* :class:`AacTrack` encodes such a WAV to AAC once, for every output that carries it
  (:class:`mime_fast.media.Mp4Writer` ``audio_track=``).
* :func:`write_wav`, :func:`read_wav` and :class:`WavReader` read and write 16-bit PCM WAV files.
"""

from __future__ import annotations

import contextlib
import io
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from .errors import ClipError, ffmpeg_detail, interrupted, open_input
from .mux import encode_into
from .source import SourceInfo

__all__ = ["AacTrack", "WavReader", "extract_audio_wav", "read_wav", "write_wav"]


def write_wav(path, samples: np.ndarray, rate: int) -> None:
    """Write int16 samples (``(n,)`` mono or ``(n, channels)``) as a PCM WAV file."""
    s = np.asarray(samples, dtype=np.int16)
    if s.ndim == 1:
        s = s[:, None]
    with open(path, "wb") as f, wave.open(f, "wb") as w:  # (opened first: a failed open leaves no Wave_write)
        w.setnchannels(s.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(rate))
        w.writeframes(np.ascontiguousarray(s).tobytes())


def read_wav(path) -> tuple[np.ndarray, int]:
    """Read a 16-bit PCM WAV: ``(samples (n, channels) int16, rate)``."""
    with wave.open(str(path), "rb") as w:
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        data = np.frombuffer(w.readframes(n), dtype="<i2").reshape(-1, ch)
    return data, rate


def extract_audio_wav(path, info: SourceInfo, wav_path, *, n_samples: int, rate: int = 16000,
                      channels: int = 1) -> int:
    """Decode + resample the first audio stream to ``wav_path`` (16-bit PCM), streaming.

    The result starts at the first video frame and has exactly ``n_samples`` samples per channel
    (silence-padded or trimmed).  Returns the number of samples that came from the source (the rest is
    padding).
    """
    path = Path(path)
    layout = {1: "mono", 2: "stereo"}.get(channels)
    if layout is None:
        raise ValueError(f"audio_channels must be 1 or 2, got {channels}")
    resampler = av.AudioResampler(format="s16", layout=layout, rate=rate)
    written = 0
    from_source = 0
    skip = 0
    started = False

    # the file opened first: where it cannot be created, wave.open(name) would leave a half-made
    # Wave_write whose __del__ prints a second traceback
    with open(wav_path, "wb") as f, wave.open(f, "wb") as w, contextlib.closing(open_input(path)) as c:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)

        def emit(arr: np.ndarray, real: bool):
            nonlocal written, from_source
            room = n_samples - written
            if room <= 0:
                return
            arr = arr[:room]
            w.writeframes(np.ascontiguousarray(arr).tobytes())
            written += len(arr)
            if real:
                from_source += len(arr)

        def consume(rframes):
            nonlocal skip
            for rf in rframes:
                a = rf.to_ndarray()  # packed s16: (1, n * channels)
                a = a.reshape(-1, channels)
                if skip:
                    d = min(skip, len(a))
                    a = a[d:]
                    skip -= d
                if len(a):
                    emit(a, True)

        ast = c.streams.audio[0]
        atb = ast.time_base
        try:
            for frame in c.decode(ast):
                if not started:
                    started = True
                    if frame.pts is not None and atb is not None:
                        offset = (Fraction(frame.pts) * atb - info.start) * rate
                        off = int(round(offset))
                        if off > 0:
                            emit(np.zeros((off, channels), np.int16), False)
                        elif off < 0:
                            skip = -off
                frame.pts = None  # let the resampler count samples; we align by the first frame only
                consume(resampler.resample(frame))
                if written >= n_samples:
                    break
            else:
                consume(resampler.resample(None))
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, "corrupt audio stream: decoding fails", ffmpeg_detail(exc)) from exc
        if written < n_samples:
            emit(np.zeros((n_samples - written, channels), np.int16), False)
    return from_source


class WavReader:
    """Sequential reader of a 16-bit WAV: ``read_until(n)`` returns the samples up to index ``n``."""

    def __init__(self, path):
        self._w = wave.open(str(path), "rb")
        self.channels = self._w.getnchannels()
        self.rate = self._w.getframerate()
        self.total = self._w.getnframes()
        self.pos = 0

    def read_until(self, n: int) -> np.ndarray:
        n = min(n, self.total)
        if n <= self.pos:
            return np.zeros((0, self.channels), np.int16)
        data = np.frombuffer(self._w.readframes(n - self.pos), dtype="<i2").reshape(-1, self.channels)
        self.pos += len(data)
        return data

    def close(self):
        self._w.close()


class AacTrack:
    """The AAC encoding of a 16-bit WAV, made once and muxed as it is into every output that
    carries that audio (:class:`mime_fast.media.Mp4Writer` ``audio_track=``): the encoder is
    deterministic, so each output gets the packets it would have encoded itself, for a quarter of
    the work when four outputs share the track.  Held in memory (about 20 KB per 10 s of 16 kHz
    mono)."""

    def __init__(self, wav_path):
        with contextlib.closing(wave.open(str(wav_path), "rb")) as w:
            channels, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
            pcm = np.frombuffer(w.readframes(n), dtype="<i2").reshape(1, -1)
        self.rate, self.channels, self.samples = rate, channels, n
        layout = {1: "mono", 2: "stereo"}[channels]
        buf = io.BytesIO()
        with contextlib.closing(av.open(buf, "w", format="mp4")) as c:
            st = c.add_stream("aac", rate=rate, layout=layout)
            if n:
                af = av.AudioFrame.from_ndarray(pcm, format="s16", layout=layout)
                af.sample_rate, af.pts, af.time_base = rate, 0, Fraction(1, rate)
                encode_into(c, st, af)
            encode_into(c, st, None)
        self.data = buf.getvalue()

    def open(self):
        """``(container, stream)``: a new reader of the encoded track."""
        c = av.open(io.BytesIO(self.data), "r")
        return c, c.streams.audio[0]
