"""Shared benchmark harness: interleaved repetitions (so background load hits every contender
alike), medians and ratios, machine metadata, JSON results under bench/results/."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import time
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: The three real clips of the shared media folder (``media_dir``).
REAL_CLIPS = ("crowd_1080p", "two_people_hug_1080p", "arm_wrestling_340x256")


def media_dir() -> Path:
    """The folder of real clips: ``$MIME_FAST_SHARED_MEDIA``, else ``../shared/media`` beside the
    repository (as the tests find it)."""
    env = os.environ.get("MIME_FAST_SHARED_MEDIA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "media"


def upper_median(v: list[float]) -> float:
    """The median of a benchmark's repeats (the upper one of an even count: a measured value)."""
    return sorted(v)[len(v) // 2]


def real_clip_args(doc: str | None, name: str, *, device: bool = False, schedule: bool = False) -> argparse.Namespace:
    """The options of the benchmarks over the real clips (``--repeats``, ``--media``, ``--only``;
    ``device``: ``--device cpu|cuda`` too; ``schedule``: ``--schedule``, the tracker's detection
    schedule); exits saying so when the folder has no real clips."""
    import sys

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--media", type=Path, default=media_dir(),
                    help="real clips (default: $MIME_FAST_SHARED_MEDIA or ../shared/media)")
    ap.add_argument("--only", default=None, help="comma-separated clip names")
    if device:
        ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where build_subsets and the detection pass run (default: cpu)")
    if schedule:
        from mime_fast.options import DETECT_DEFAULTS, SCHEDULES

        ap.add_argument("--schedule", choices=SCHEDULES, default=DETECT_DEFAULTS.schedule,
                        help=f"the subject tracker's detection schedule (default: {DETECT_DEFAULTS.schedule}; the "
                             "results file is named after it when it is not the default)")
    args = ap.parse_args()
    if not (args.media / "crowd_1080p.mp4").is_file():
        sys.exit(f"{name}: no real clips in {args.media} (pass --media)")
    return args


def gpu_name() -> str | None:
    """The GPU's name (nvidia-smi, else torch), or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=False, timeout=30).stdout.strip()
        if out:
            return out.splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - no torch, or no usable CUDA: no name
        return None


def parse_args(doc: str | None, repeats: int) -> argparse.Namespace:
    """The options every benchmark takes: --repeats and --device."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=repeats, help=f"timed repetitions per contender (default {repeats})")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    return ap.parse_args()


def machine() -> dict:
    import cv2

    import mime_fast

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "opencv_threads": cv2.getNumThreads(),
        "mime_fast": mime_fast.__version__,
        "mime_fast_threads": mime_fast.num_threads(),
        "cuda": mime_fast.cuda_status(),
        "git_commit": commit,
    }


def compare(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 3) -> dict[str, dict]:
    """Time each contender `repeats` times, interleaved; return per-contender stats in ms."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {
        name: {
            "median_ms": float(np.median(ts)),
            "p10_ms": float(np.percentile(ts, 10)),
            "p90_ms": float(np.percentile(ts, 90)),
            "repeats": len(ts),
        }
        for name, ts in times.items()
    }


def save(name: str, payload: dict, device: str = "cpu") -> Path:
    """Write ``payload`` as bench/results/NAME-DEVICE.json; ``name`` may be a path (another folder,
    made if missing), whose last part names the benchmark."""
    path = RESULTS / f"{name}-{device}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": Path(name).name, "device": device, "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


class NullWriter:
    """Stands in for :class:`mime_fast.media.Mp4Writer` in build_subsets (the no-encode contender):
    every frame, still picture, packet and audio call is taken and dropped; the file is created empty
    so the outputs are renamed into place as usual."""

    def __init__(self, path, width: int, height: int, **_):
        self.path = Path(path)
        self.path.touch()
        self.audio = None  # no audio stream: build_subsets muxes no audio into it
        self.frames = 0

    def write_frame(self, *_) -> None:
        self.frames += 1

    write_still = write_packet = write_rgb = write_frame

    def write_audio_until(self, *_) -> None:
        pass

    write_audio = write_audio_until

    def close(self) -> None:
        pass

    abort = close


def face_frame(height: int = 720, width: int = 1280) -> tuple[np.ndarray, np.ndarray]:
    """A 720p frame with a real face (scikit-image's astronaut, scaled up) and 106 landmark-like
    points whose hull is about 250 x 320 px."""
    import cv2
    from skimage import data

    face = cv2.resize(data.astronaut(), (600, 600), interpolation=cv2.INTER_CUBIC)
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    frame = cv2.GaussianBlur(frame, (9, 9), 0)  # textured background
    y0, x0 = (height - 600) // 2, (width - 600) // 2
    frame[y0 : y0 + 600, x0 : x0 + 600] = face
    t = np.linspace(0, 2 * np.pi, 33, endpoint=False)
    cx, cy = x0 + 293, y0 + 150
    outline = np.stack([cx + 125 * np.cos(t), cy + 160 * np.sin(t)], 1)
    inner = np.stack([cx + rng.uniform(-90, 90, 73), cy + rng.uniform(-110, 110, 73)], 1)
    return np.ascontiguousarray(frame), np.concatenate([outline, inner]).astype(np.float32)


def pipeline_with_hulls(src, out_dir, landmarks, **settings) -> tuple[float, float]:
    """``(seconds, masking seconds)`` of ``build_subsets`` given ``landmarks`` (the detected hulls),
    with the time spent in ``ops.hull_mask``, ``ops.blur_in_mask`` and the fused
    ``ops.blur_hull_yuv420`` summed apart: the mask+blur stage; the rest is decode, standardise and
    encode."""
    from mime_fast import build_subsets, ops

    acc = [0.0]
    hm, bm, fused = ops.hull_mask, ops.blur_in_mask, ops.blur_hull_yuv420

    def timed(fn):
        def w(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[0] += time.perf_counter() - t0
        return w

    ops.hull_mask, ops.blur_in_mask, ops.blur_hull_yuv420 = timed(hm), timed(bm), timed(fused)
    try:
        t = time.perf_counter()
        build_subsets(src, out_dir, landmarks=landmarks, **settings)
        return time.perf_counter() - t, acc[0]
    finally:
        ops.hull_mask, ops.blur_in_mask, ops.blur_hull_yuv420 = hm, bm, fused


def stage_seconds(detect_s: float, timers: dict[str, float], masked_s: float, pipeline_s: float) -> dict[str, float]:
    """Seconds per pipeline stage of one clip: ``detect_s`` the detection pass (decode + models,
    ``timers`` its model timers), ``masked_s`` the mask + blur work, ``pipeline_s`` the encoding
    pipeline with it (decode, standardise, libx264, AAC, remux)."""
    return {
        "decode": max(0.0, detect_s - sum(timers.values())),
        "shots": timers.get("shots", 0.0),
        "detect": timers.get("detect", 0.0),
        "landmarks": timers.get("landmarks", 0.0),
        "embed": timers.get("embed", 0.0),
        "persons": timers.get("persons", 0.0),
        "mask+blur": masked_s,
        "encode": max(0.0, pipeline_s - masked_s),
    }


def scaled_copy(src: Path, dst: Path, height: int, *, fps: int | None = None, seconds: float | None = None,
                crf: int = 16, preset: str = "ultrafast", color: str | None = None) -> Path:
    """``src`` scaled to ``height`` (width by the aspect ratio, even), the video re-encoded with
    libx264 (CRF ``crf``, ``preset``), the audio packets copied as they are.  ``fps``: the frames
    put on that constant-rate grid by timestamp (:class:`mime_fast.media.FrameStandardiser`: frames
    repeated or dropped, as ``ffmpeg -r`` does), else the source's timestamps kept.  ``seconds``:
    only the first ``seconds`` of video and audio.  ``color`` ``"bt709"`` / ``"bt601"``: the frames
    converted with that matrix and the stream tagged with it (limited range), else swscale's
    default conversion, untagged."""
    import av
    import cv2

    from mime_fast.frames import yuv420_frame
    from mime_fast.media import FrameStandardiser, output_frame_count, probe, x264_options

    info = probe(src)
    end = info.start + Fraction(seconds).limit_denominator(1000) if seconds is not None else None
    with av.open(str(src)) as ic, av.open(str(dst), "w") as oc:
        iv = ic.streams.video[0]
        w = int(round(iv.codec_context.width * height / iv.codec_context.height / 2)) * 2
        ov = oc.add_stream("libx264", rate=Fraction(fps) if fps else (iv.average_rate or Fraction(25)))
        ov.width, ov.height, ov.pix_fmt = w, height, "yuv420p"
        ov.codec_context.time_base = Fraction(1, fps) if fps else iv.time_base
        ov.options = x264_options(crf, preset)
        if color is not None:
            ov.codec_context.colorspace, ov.codec_context.color_range = {"bt709": 1, "bt601": 6}[color], 1
        std = None
        if fps:
            dur = info.duration if end is None else min(info.duration, end - info.start)
            std = FrameStandardiser(info.start, fps, output_frame_count(dur, fps))
        streams = [iv]
        oa = None
        if ic.streams.audio:
            ia = ic.streams.audio[0]
            oa = oc.add_stream_from_template(ia)
            streams.append(ia)

        def encode(img: np.ndarray, pts: int, tb) -> None:
            interp = cv2.INTER_AREA if height < img.shape[0] else cv2.INTER_CUBIC
            img = np.ascontiguousarray(cv2.resize(img, (w, height), interpolation=interp))
            if color is not None:
                nf = yuv420_frame(img, matrix=color)
                nf.colorspace, nf.color_range = ov.codec_context.colorspace, 1
            else:
                nf = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p")
            nf.pts, nf.time_base = pts, tb
            for p in ov.encode(nf):
                oc.mux(p)

        for pkt in ic.demux(*streams):
            if pkt.stream.type == "audio":
                if pkt.dts is not None and (end is None or pkt.pts is None or pkt.pts * pkt.time_base < end):
                    pkt.stream = oa
                    oc.mux(pkt)
                continue
            for f in pkt.decode():  # (the last, empty packet flushes the decoder)
                t = Fraction(f.pts) * f.time_base
                if end is not None and t >= end:
                    continue
                if std is None:
                    encode(f.to_ndarray(format="rgb24"), f.pts, f.time_base)
                    continue
                for i, img in std.push(t, f.to_ndarray(format="rgb24")):
                    encode(img, i, ov.codec_context.time_base)
        if std is not None:
            for i, img in std.finish():
                encode(img, i, ov.codec_context.time_base)
        for p in ov.encode(None):
            oc.mux(p)
    return dst


def grid_frames(src: Path, fps: int) -> Iterable:
    """The yuv420p frames ``build_subsets`` encodes into FM for ``src`` at ``fps``: each decoded
    frame (converted from RGB where the pipeline converts it), put on the output grid by timestamp
    (:class:`mime_fast.media.FrameStandardiser`; a repeated frame is the same object)."""
    from mime_fast.frames import yuv420_frame
    from mime_fast.media import FrameStandardiser, iter_display_frames, output_frame_count, probe

    info = probe(src)
    std = FrameStandardiser(info.start, fps, output_frame_count(info.duration, fps))
    for _, t, img, decoded in iter_display_frames(src, info, rgb=False, keep_yuv=True):
        vf = decoded if decoded is not None else yuv420_frame(img, matrix=info.matrix)
        yield from (f for _, f in std.push(t, vf))
    yield from (f for _, f in std.finish())


def libx264_alone(frames: Iterable, out_dir: Path, size: tuple[int, int], matrix: str,
                  codes: Iterable[str] = ("FM", "FDM", "FSM", "VMM"), **settings) -> float:
    """Seconds to encode ``frames`` (yuv420p ``av.VideoFrame``s of ``size`` (w, h), output frame
    ``i`` at index ``i``) into the outputs ``codes`` exactly as ``build_subsets`` does with
    ``settings`` (the same :class:`mime_fast.media.Mp4Writer`, libx264 options, threads and queues,
    the encoders side by side): FM gets each frame itself, FDM and FSM a copy each, VMM muxes the
    process's shared black packets (:meth:`~mime_fast.media.Mp4Writer.write_still` with
    :data:`~mime_fast.frames.BLACK`, "ultrafast").
    The encode work alone: no decode (the caller has the frames), no audio, no masks, no remux."""
    from mime_fast.subsets import Settings
    from mime_fast.frames import BLACK, copy_frame
    from mime_fast.media import Mp4Writer

    enc = Settings(**settings).encode
    codes = list(codes)
    out_dir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    writers = {c: Mp4Writer(out_dir / f"{c}.mp4", *size, fps=enc.fps, crf=enc.crf,
                            preset="ultrafast" if c == "VMM" else enc.preset, threads=enc.threads,
                            queue_size=enc.queue_size, matrix=matrix) for c in codes}
    try:
        for i, vf in enumerate(frames):
            for c, wr in writers.items():
                if c == "VMM":
                    wr.write_still(i, BLACK)
                else:
                    wr.write_frame(vf if c == "FM" else copy_frame(vf), i)
        for wr in writers.values():
            wr.close()
    finally:
        for wr in writers.values():
            wr.abort()
    return time.perf_counter() - t


def cpu_seconds() -> float:
    """This process's CPU time so far: user + system, every thread (libx264's and the models' too)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def encoders_alone(src: Path, out_dir: Path) -> tuple[float, float]:
    """``(seconds, CPU seconds)`` of the clip's encoders alone as issue 37 defines them: the source
    decoded once, its standardised frames streamed into FM, FDM and FSM (default libx264 settings)
    and VMM's black frames as they are decoded (:func:`grid_frames` into :func:`libx264_alone`):
    what ``build_subsets`` could not do with less, without detection, masks, audio or remuxes."""
    from mime_fast.subsets import Settings
    from mime_fast.media import probe

    info = probe(src)
    c, t = cpu_seconds(), time.perf_counter()
    libx264_alone(grid_frames(src, Settings().encode.fps), out_dir,
                  (info.width - info.width % 2, info.height - info.height % 2), info.matrix)
    return time.perf_counter() - t, cpu_seconds() - c


def libx264_floor(src: Path, out_dir: Path) -> float:
    """Seconds to encode the clip's standardised frames (decoded into memory first) into FM, FDM
    and FSM with the default libx264 settings and VMM's black frames (:func:`libx264_alone`)."""
    from mime_fast.subsets import Settings
    from mime_fast.media import probe

    info = probe(src)
    frames = list(grid_frames(src, Settings().encode.fps))
    return libx264_alone(frames, out_dir, (info.width - info.width % 2, info.height - info.height % 2), info.matrix)


def proof_clips(media: Path, tmp: Path, *, seconds: float = 4.0,
                only: str | None = None) -> dict[str, tuple[Path, dict, Path | None]]:
    """The clips the comparisons with other implementations run on (bench_vs_reference.py,
    bench_vs_deface.py): name -> (clip, extra settings for ``build_subsets``, ground-truth landmarks
    or ``None``).  The synthetic 720p composite (``seconds`` long, 25 fps, its ``.npz`` landmarks)
    and every real clip of ``media`` at its own size (the quality gate lowered for the 340x256 one);
    ``only``: comma-separated names to keep (``--only``)."""
    from mime_fast.samples import make_clip

    synth = make_clip(tmp / "synthetic.mp4", duration=seconds, fps=25, size=(1280, 720), audio=True)
    out: dict[str, tuple[Path, dict, Path | None]] = {"synthetic@720p": (synth.path, {}, synth.npz)}
    for name in REAL_CLIPS:
        out[name] = (media / f"{name}.mp4", {"min_height": 0} if name.startswith("arm") else {}, None)
    if only:
        out = {k: v for k, v in out.items() if k in set(only.split(","))}
    return out


#: What every comparison's JSON says about the machine it ran on.
SHARED_MACHINE_NOTE = ("2 cores shared with other jobs: the contenders ran interleaved, so background load hit "
                       "both alike, but absolute times are noisy")
