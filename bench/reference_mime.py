"""The straightforward MIME implementation: what the paper implies, written plainly with OpenCV and
PyAV, as the baseline ``bench_vs_reference.py`` measures ``mime_fast.build_subsets`` against.

One pass per subset, each decoding the source and encoding its own output:

* every frame decoded by PyAV and converted to RGB by swscale (with the source's colour matrix);
* FDM / FSM (and FDAM / FSAM): the whole frame blurred with ``cv2.GaussianBlur(frame, (k, k), 0)``,
  the subject's mask drawn with ``cv2.fillConvexPoly`` (anti-aliased) over the convex hull of his
  landmarks, grown by half the feather and softened by a Gaussian blur of the feather's width, and
  the frame composited in float32, ``src * (1 - m) + blur * m``;
* VMM: black frames; FM / AMM: the frames as decoded;
* frames put on the 30 fps grid by timestamp (``ffmpeg -r 30``'s rule:
  :class:`mime_fast.media.FrameStandardiser`), converted back to yuv420p by swscale and encoded with
  the engine's libx264 settings (CRF 18, veryfast, 2 threads; :func:`mime_fast.media.x264_options`);
* audio (FM, FDM, FSM, VMM): the source's audio decoded, resampled to 16 kHz mono and AAC-encoded in
  each of those passes; the 16 kHz wav written once.

Same inputs as the engine: the same per-frame landmarks (a provider with ``points(i)``), the same
kernels and the engine's documented automatic feather (``ops.AUTO_FEATHER_FRACTION`` x sqrt(hull
area)), so the blurred regions must agree with the engine's within encoding noise
(:func:`blurred_region_psnr`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from mime_fast import ops
from mime_fast.media import FrameStandardiser, output_frame_count, probe, write_wav, x264_options

SUBSETS = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
_BLUR = {"FDM": "fdm", "FDAM": "fdm", "FSM": "fsm", "FSAM": "fsm"}
_AUDIO = ("FM", "FDM", "FSM", "VMM")
_COLORSPACE = {"bt709": "ITU709", "bt601": "ITU601"}


def reference_mask(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The subject's mask (``H x W`` uint8): the landmarks' convex hull filled, grown by half the
    feather, softened by a Gaussian blur about the feather wide (so the hull itself stays at 255)."""
    import cv2

    hull = cv2.convexHull(np.asarray(points, np.float32))
    area = float(cv2.contourArea(hull))
    feather = max(1.0, ops.AUTO_FEATHER_FRACTION * math.sqrt(area))
    mask = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(mask, np.round(hull * 16).astype(np.int32), 255, lineType=cv2.LINE_AA, shift=4)
    grow = int(round(feather / 2))
    if grow:
        mask = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1)))
    k = 2 * int(round(feather)) + 1
    return cv2.GaussianBlur(mask, (k, k), 0)


def _degrade(rgb: np.ndarray, points: np.ndarray | None, kernel: int) -> np.ndarray:
    import cv2

    if points is None:
        return rgb
    blurred = cv2.GaussianBlur(rgb, (kernel, kernel), 0)
    m = reference_mask(points, rgb.shape[:2]).astype(np.float32)[..., None] / 255.0
    out = rgb.astype(np.float32) * (1.0 - m) + blurred.astype(np.float32) * m
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def _audio_frames(src: Path, rate: int):
    """The source's audio, resampled to ``rate`` Hz mono (``av.AudioFrame``s, then a flush)."""
    import av

    with av.open(str(src)) as c:
        res = av.AudioResampler(format="fltp", layout="mono", rate=rate)
        for f in c.decode(audio=0):
            f.pts = None
            yield from res.resample(f)
        yield from res.resample(None)


def _one_pass(src: Path, dst: Path, code: str, provider, kernels: dict[str, int], fps: int, crf: int, preset: str,
              threads: int, audio_rate: int) -> None:
    import av

    info = probe(src)
    n_out = output_frame_count(info.duration, fps)
    w, h = info.width - info.width % 2, info.height - info.height % 2
    space = _COLORSPACE[info.matrix]
    dst.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(dst), "w") as oc:
        vs = oc.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.codec_context.time_base = Fraction(1, fps)
        vs.codec_context.thread_count = threads
        vs.options = x264_options(crf, preset)
        vs.codec_context.colorspace, vs.codec_context.color_range = {"bt709": 1, "bt601": 6}[info.matrix], 1
        a_s = None
        if code in _AUDIO and info.has_audio:
            a_s = oc.add_stream("aac", rate=audio_rate, layout="mono")

        def encode(rgb: np.ndarray, i: int) -> None:
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:h, :w]), format="rgb24")
            vf = vf.reformat(format="yuv420p", dst_colorspace=space, dst_color_range="MPEG")
            vf.pts, vf.time_base = i, Fraction(1, fps)
            for p in vs.encode(vf):
                oc.mux(p)

        std = FrameStandardiser(info.start, fps, n_out)
        with av.open(str(src)) as ic:
            for i, frame in enumerate(ic.decode(video=0)):
                rgb = frame.reformat(format="rgb24", src_colorspace=space, src_color_range="MPEG").to_ndarray()
                if code == "VMM":
                    rgb = np.zeros_like(rgb)
                elif code in _BLUR:
                    rgb = _degrade(rgb, provider.points(i), kernels[_BLUR[code]])
                for j, img in std.push(Fraction(frame.pts) * frame.time_base, rgb):
                    encode(img, j)
        for j, img in std.finish():
            encode(img, j)
        for p in vs.encode(None):
            oc.mux(p)
        if a_s is not None:
            limit = Fraction(n_out, fps) * audio_rate  # as long as the video
            done = 0
            for f in _audio_frames(src, audio_rate):
                take = min(f.samples, int(limit) - done)
                if take <= 0:
                    break
                if take < f.samples:
                    arr = f.to_ndarray()[:, :take]
                    f = av.AudioFrame.from_ndarray(np.ascontiguousarray(arr), format="fltp", layout="mono")
                    f.sample_rate = audio_rate
                f.pts, f.time_base = done, Fraction(1, audio_rate)
                done += f.samples
                for p in a_s.encode(f):
                    oc.mux(p)
            for p in a_s.encode(None):
                oc.mux(p)


def reference_subsets(src, out_dir, provider, *, fsm_kernel: int, fdm_kernel: int = 15, fps: int = 30, crf: int = 18,
                      preset: str = "veryfast", threads: int = 2, audio_rate: int = 16000) -> dict[str, Path]:
    """All seven MIME subsets of ``src`` the straightforward way (module docstring):
    ``out_dir/<SUBSET>/<stem>.mp4`` and ``out_dir/audio/<stem>.wav``; ``provider.points(i)``: the
    subject's landmarks in decoded source frame ``i`` (``None``: absent)."""
    src, out_dir = Path(src), Path(out_dir)
    kernels = {"fdm": int(fdm_kernel), "fsm": int(fsm_kernel)}
    outs = {}
    for code in SUBSETS:
        outs[code] = out_dir / code / f"{src.stem}.mp4"
        _one_pass(src, outs[code], code, provider, kernels, fps, crf, preset, threads, audio_rate)
    info = probe(src)
    if info.has_audio:
        frames = [f.to_ndarray()[0] for f in _audio_frames(src, audio_rate)]
        n = int(Fraction(output_frame_count(info.duration, fps), fps) * audio_rate)
        pcm = np.concatenate(frames)[:n] if frames else np.zeros(0, np.float32)
        (out_dir / "audio").mkdir(parents=True, exist_ok=True)
        write_wav(out_dir / "audio" / f"{src.stem}.wav", np.clip(pcm * 32767, -32768, 32767).astype(np.int16)[:, None],
                  audio_rate)
    return outs


def blurred_region_psnr(ref: Path, engine: Path, src: Path, provider, *, every: int = 5, fps: int = 30) -> dict:
    """How far the reference's and the engine's output agree where both blur fully: PSNR (dB, luma
    and chroma in RGB) over the pixels inside the landmarks' hull (both masks 255 there) of every
    ``every``-th output frame, and the IoU of the two masks (> 127) on those frames."""
    from mime_fast.media import iter_display_frames

    info = probe(src)
    # output frame -> source frame, as both pipelines map them
    std = FrameStandardiser(info.start, fps, output_frame_count(info.duration, fps))
    src_of = {}
    for i, t in enumerate(info.frame_times):
        src_of.update({j: k for j, k in std.push(t, i)})
    src_of.update({j: k for j, k in std.finish()})
    se, n, ious = 0.0, 0, []
    for (j, _, a), (_, _, b) in zip(iter_display_frames(ref, probe(ref)), iter_display_frames(engine, probe(engine))):
        pts = provider.points(src_of[j])
        if j % every or pts is None:
            continue
        shape = a.shape[:2]
        mine, _ = ops.hull_mask(np.asarray(pts, np.float32), shape, feather=0.0)
        inside = mine == 255
        theirs = reference_mask(pts, shape)
        eng, _ = ops.hull_mask(np.asarray(pts, np.float32), shape)
        ious.append(float(((theirs > 127) & (eng > 127)).sum() / max(1, ((theirs > 127) | (eng > 127)).sum())))
        d = a[inside].astype(np.float64) - b[inside].astype(np.float64)
        se += float((d * d).sum())
        n += d.size
    mse = se / max(n, 1)
    return {"psnr_db": float("inf") if mse == 0 else 10 * math.log10(255 ** 2 / mse), "values": n,
            "mask_iou": float(np.mean(ious)) if ious else None}
