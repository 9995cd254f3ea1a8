"""Shared helpers for the video pipeline tests (imported explicitly, not a conftest)."""

from __future__ import annotations

import hashlib
import random
from fractions import Fraction
from pathlib import Path

import numpy as np

import av
from mime_fast import frames, media, ops


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree_files(root) -> list[Path]:
    """Every file under ``root`` (hidden ones included)."""
    root = Path(root)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def decode_video(path, limit: int | None = None):
    """``(frames list of RGB arrays, times list of Fractions, stream info dict)`` of the first video
    stream, rotation *not* applied."""
    frames, times = [], []
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        info = {
            "average_rate": vs.average_rate,
            "width": vs.codec_context.width,
            "height": vs.codec_context.height,
            "pix_fmt": vs.codec_context.pix_fmt,
            "codec": vs.codec_context.name,
            "audio": [(a.codec_context.name, a.codec_context.sample_rate, a.codec_context.layout.name)
                      for a in c.streams.audio],
            "n_streams": len(c.streams),
        }
        for f in c.decode(vs):
            frames.append(f.to_ndarray(format="rgb24"))
            times.append(Fraction(f.pts) * f.time_base)
            if limit is not None and len(frames) >= limit:
                break
    return frames, times, info


def decode_audio(path) -> tuple[np.ndarray, int, int]:
    """All samples of the first audio stream as float32 ``(channels, n)``, rate, channels."""
    chunks = []
    with av.open(str(path)) as c:
        a = c.streams.audio[0]
        rate, ch = a.codec_context.sample_rate, a.codec_context.layout.nb_channels
        for f in c.decode(a):
            x = f.to_ndarray()
            if x.dtype != np.float32:
                x = x.astype(np.float32) / 32768.0
            if not f.format.is_planar:
                x = x.reshape(-1, ch).T
            chunks.append(x)
    return np.concatenate(chunks, axis=1), rate, ch


def video_packets(path) -> list[bytes]:
    """Bytes of every video packet, in file order."""
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        return [bytes(p) for p in c.demux(vs) if p.size]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    d = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if d == 0 else float(10 * np.log10(255.0 ** 2 / d))


def dominant_freqs(x: np.ndarray, rate: int, n: int = 2) -> list[float]:
    """The ``n`` strongest frequencies (Hz) of a mono signal, at least 50 Hz apart."""
    x = x - x.mean()
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    freqs = np.fft.rfftfreq(len(x), 1 / rate)
    out = []
    for i in np.argsort(spec)[::-1]:
        f = float(freqs[i])
        if all(abs(f - g) > 50 for g in out):
            out.append(f)
        if len(out) == n:
            break
    return sorted(out)


def expected_source_index(times: list[Fraction], i: int, fps: int = 30, tol=Fraction(1, 1000)) -> int:
    """Reference standardisation: latest source frame with time <= t0 + i/fps (+1 ms)."""
    t = times[0] + Fraction(i, fps) + tol
    best = 0
    for j, s in enumerate(times):
        if s <= t:
            best = j
    return best


def source_display_frames(path):
    """Decoded source frames as displayed (rotation applied) with their times, via mime_fast.media."""
    info = media.probe(path)
    out = [(t, rgb) for _, t, rgb in media.iter_display_frames(path, info)]
    return info, [t for t, _ in out], [f for _, f in out]


def gradient_energy(img: np.ndarray) -> float:
    g = img.astype(np.float64).mean(axis=2)
    return float(np.mean(np.abs(np.diff(g, axis=0))) + np.mean(np.abs(np.diff(g, axis=1))))


def capture_encoder_frames(monkeypatch) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Record a copy of the (y, u, v) planes of every frame handed to an encoder during the test,
    by subset folder name and pts: ``captured[code][pts]``."""
    captured: dict[str, dict[int, tuple]] = {}
    original = media.Mp4Writer.write_frame

    def capture(self, vf, pts):
        captured.setdefault(self.path.parent.name, {})[int(pts)] = tuple(p.copy() for p in frames.yuv420_planes(vf))
        return original(self, vf, pts)

    monkeypatch.setattr(media.Mp4Writer, "write_frame", capture)
    return captured


def assert_planes_equal(got, expected, where="") -> None:
    for name, g, e in zip("yuv", got, expected):
        assert g.shape == e.shape and np.array_equal(g, e), (where, name, int(np.abs(g.astype(int) - e).max()))


def expected_encoder_planes(info, decoded_planes, rgb: np.ndarray, mask=None):
    """The planes the pipeline must hand an encoder for the RGB frame ``rgb`` (the source's frame,
    or a blur level of it made with ``mask``): with yuv passthrough, the decoded planes where the
    mask is 0 (luma per pixel, chroma per 2x2 block) and the conversion of ``rgb`` elsewhere;
    otherwise the whole-frame conversion of ``rgb`` (even-cropped) with the source's matrix."""
    h, w = rgb.shape[:2]
    conv = ops.rgb_to_yuv420(np.ascontiguousarray(rgb[: h - h % 2, : w - w % 2]), matrix=info.matrix)
    if not info.yuv_passthrough:
        return conv
    if mask is None:
        return tuple(p.copy() for p in decoded_planes)
    touched = mask[: h - h % 2, : w - w % 2] > 0
    touched4 = touched.reshape(touched.shape[0] // 2, 2, touched.shape[1] // 2, 2).any(axis=(1, 3))
    return (np.where(touched, conv[0], decoded_planes[0]), np.where(touched4, conv[1], decoded_planes[1]),
            np.where(touched4, conv[2], decoded_planes[2]))


def source_yuv_planes(path) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The decoded yuv420p planes of every source frame (copies)."""
    with av.open(str(path)) as c:
        return [tuple(p.copy() for p in frames.yuv420_planes(f)) for f in c.decode(video=0)]


def textured_frames(n=12, h=120, w=160, seed=0) -> list[np.ndarray]:
    """``n`` RGB frames of a texture moving 3 px a frame to the right, for encoder tests."""
    import cv2

    rng = np.random.default_rng(seed)
    # luminance texture with a smooth colour tint (yuv420p keeps luma detail, halves chroma)
    lum = cv2.resize(rng.integers(0, 255, (h // 8, w // 8), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
    tint = cv2.resize(rng.integers(-40, 40, (3, 4, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)
    base = np.clip(lum[..., None].astype(np.float32) * 0.7 + 40 + tint, 0, 255).astype(np.uint8)
    return [np.ascontiguousarray(np.roll(base, 3 * i, axis=1)) for i in range(n)]


def write_rgb_clip(path, rgb: list[np.ndarray], **kw):
    """Encode the RGB frames ``rgb`` with :class:`mime_fast.media.Mp4Writer` (``kw``; with
    ``audio_rate``, a tone of 8000 samples too) at ``path``; returns ``path``."""
    h, w = rgb[0].shape[:2]
    wr = media.Mp4Writer(path, w - w % 2, h - h % 2, **kw)
    for i, f in enumerate(rgb):
        wr.write_rgb(f, i)
    if kw.get("audio_rate"):
        wr.write_audio((np.sin(np.arange(8000) / 5) * 8000).astype(np.int16)[:, None])
    wr.close()
    return path


def write_avi(path, rgb: list[np.ndarray], drop=(), trailing_drops: int = 0, rate: int = 25):
    """An MPEG-4 Part 2 AVI (as XviD captures are) of the RGB frames ``rgb`` at ``rate`` fps, frame
    ``i`` at time ``i / rate``, with the frames at the indices ``drop`` left out: FFmpeg's AVI muxer
    stores each timestamp gap as a 0-byte chunk, a "drop frame" that the header's frame count
    includes.  ``trailing_drops`` more 0-byte chunks follow the last frame (empty packets muxed
    after it).  Returns ``path``."""
    h, w = rgb[0].shape[:2]
    with av.open(str(path), "w") as c:
        vs = c.add_stream("mpeg4", rate=rate)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.codec_context.bit_rate = 4_000_000
        for i, img in enumerate(rgb):
            if i in drop:
                continue
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts = i
            for pkt in vs.encode(f):
                c.mux(pkt)
        for pkt in vs.encode(None):
            c.mux(pkt)
        for k in range(trailing_drops):
            pkt = av.Packet(b"")
            pkt.pts = pkt.dts = len(rgb) + k
            pkt.time_base, pkt.stream = Fraction(1, rate), vs
            c.mux(pkt)
    return Path(path)


def rgb_frames(path) -> list[np.ndarray]:
    """Every frame of an output file as RGB (PyAV's conversion), e.g. to compare FM with FDM."""
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]


def haar_faces(gray: np.ndarray, min_size: int = 60) -> list[tuple[int, int, int, int]]:
    """``(x, y, w, h)`` of the faces OpenCV's Haar cascades find in a gray frame, frontal and profile
    (both directions): an independent detector for privacy checks on real footage."""
    import cv2

    frontal, profile = (cv2.CascadeClassifier(cv2.data.haarcascades + n) for n in
                        ("haarcascade_frontalface_default.xml", "haarcascade_profileface.xml"))
    ms = (min_size, min_size)
    hits = [tuple(h) for c in (frontal, profile) for h in c.detectMultiScale(gray, 1.1, 5, minSize=ms)]
    width = gray.shape[1]
    hits += [(width - x - w, y, w, h) for x, y, w, h in profile.detectMultiScale(cv2.flip(gray, 1), 1.1, 5, minSize=ms)]
    return hits


def junk_bytes(n: int) -> bytes:
    """``n`` bytes that FFmpeg recognises as no container ("not a media file"), the same every run:
    ``os.urandom``'s bytes sometimes probe as a container without streams (2 of 300 draws of 4 KiB),
    which made the tests that expect "not a media file" fail now and then."""
    return random.Random(0).randbytes(n)
