"""Issue 12: the whole pipeline on a GPU machine against the encodes it cannot avoid, in one run over
one corpus.  All rates are source frames per second over the corpus (sum of the clips' source
frames / wall time of the contender).

Corpus (prepared once, cached in ``--cache``): 8 synthetic 720p clips (``make_clip``: 10 s, 30 fps,
a face, stereo audio; a different seed (background) and face size each; colour tagged BT.709 as
an HD encoder writes it) and every video of the media folder (``--media``; default
``$MIME_FAST_SHARED_MEDIA``, else ../shared/media), each converted once to 720p H.264 at 30 fps
(libx264 CRF 18, "medium", BT.709, frames put on the 30 fps grid by timestamp, audio copied) unless
it already is one.  No landmarks are given: the subject is detected (default offline stack; with
``device="cuda"`` its torch version, which build_subsets picks itself).

Contenders, interleaved over ``--repeats``:

* ``cpu``: ``run_corpus`` (what ``mime-fast build`` runs) over the corpus, ``device="cpu"``,
  ``--workers`` worker processes (default cores // 2), all seven subsets, default settings;
* ``gpu``: the same with ``device="cuda"`` and ``--gpu-workers`` (default 8);
* ``encoders``: libx264 alone: for each clip, the encodes build_subsets makes (FM unless the
  pipeline stream-copies it, FDM and FSM at the default preset, VMM's shared black packets at
  "ultrafast" when the clip has audio) through the same ``Mp4Writer`` (same x264 options, threads
  and queues: ``_harness.libx264_alone``) of the clip's frames decoded once by PyAV beforehand (raw
  yuv420p files in the cache, memory-mapped), ``--gpu-workers`` clips at a time in worker processes
  started before the clock;
* ``no_encode``: build_subsets with ``device="cuda"`` (``--device``) and every
  ``mime_fast.subsets.Mp4Writer`` replaced by :class:`NullWriter`, which takes the frames and drops
  them.  Included: probe, WAV extraction and the AAC encode of the audio (once per clip), the
  decode passes, the subject detection and tracking, standardisation, FM's frame (handed over as
  decoded) and the masks and blurs of FDM and FSM.  Left out: every libx264 encode, muxing, FM's
  stream copy (``fm_copy=False``: FM's decoded frames go to the null writer) and the remuxes of
  FDAM/FSAM/AMM (only FM, FDM, FSM and VMM are asked for).  Run twice: in this process through
  ``run_corpus`` with one worker (the next clip's subject detected on a second thread, one decode
  pass per clip), and ``--gpu-workers`` clips at a time in worker processes started (models loaded)
  before the clock, each clip a ``build_subsets`` call (detection on the FM/VMM pass, then the
  FDM/FSM pass: what ``run_corpus`` does with several workers);
* ``no_encode_host_frames`` (``device="cuda"`` only): ``no_encode`` with ``device_frames=False``,
  the face models reading host RGB instead of the frames NVDEC left on the GPU
  (``detect.torch_ops.DeviceFrame``): what keeping them there saves;
* ``no_encode_eager`` (``device="cuda"`` only): ``no_encode`` with ``MIME_FAST_CUDA_GRAPHS=0`` in
  its workers, every forward of the face networks launched op by op instead of replayed from a
  CUDA graph (:mod:`mime_fast.detect.cuda_graphs`): what the graphs save.  ``cuda_graphs``
  records the graphs of one ``no_encode`` worker (captures, replays, shapes left eager and why);
* with ``--clips-per-process K``: ``gpu_shared`` (``run_corpus`` with ``clips_per_process=K``: K
  clips on threads of each process, sharing its GPU's models through the model broker,
  :mod:`mime_fast.detect.batching`) and ``no_encode_shared`` (the no-encode clips K at a time on
  threads of ``--gpu-workers / K`` processes); ``batching`` records each broker's forwards and
  items per model (items / forward: how many calls met).

``steady_state_fps``: each contender's rate with every worker busy, as over a corpus long enough
that its last clips (a few workers busy, the others idle) do not count: the source frames over the
clips' summed build times divided by the workers (a no-encode clip's ``build_subsets`` call, an
encoders-alone clip's encodes, a ``run_corpus`` clip's first frames to its end; none for a
``run_corpus`` run with one worker, whose next clip is detected ahead of its first frames).  With 11 clips over 8 workers the wall-clock rate is bounded by the
slowest clip; the targets are on the wall-clock rates.

The ``cpu`` and ``gpu`` runs include what a real run pays: worker processes starting and loading
their models (``first_frames_s`` says when the first frames moved, ``workers_ready_s`` when the
last of the first worker processes had loaded its models).  ``--device cpu`` runs
``cpu``, ``encoders`` and ``no_encode`` on the CPU (a smoke test without a GPU; the GPU figures are
null with the reason).  Targets: ``gpu`` >= 0.9 x ``encoders``; ``no_encode`` with the GPU workers
>= 1500 source fps.  Writes bench/results/pipeline-<device>.json.

``--contenders`` runs some of them, in the order given (the JSON says which were skipped and why: a run
cut short by a time limit keeps the first ones); ``--result NAME``
writes bench/results/NAME-<device>.json instead.  The JSON is written again after each contender
(``complete``: false until the last): a run stopped at a time limit keeps what it measured.  With
``--device cuda`` the run stops at once if ``device="cuda"`` would not load the torch stack on the
GPU; each no-encode clip records its decoder (``nvdec``, or ``pyav: <why>``) and how many times it
was decoded (``decodes``: 1 when the detection pass kept its frames for the face pass).

    python bench/bench_pipeline_cuda.py --device cuda [--repeats 1] [--gpu-workers 8] [--skip-cpu] [--clips-per-process 8]
    python bench/bench_pipeline_cuda.py --device cuda --contenders cpu,gpu,encoders,no_encode   # the targets' four
    python bench/bench_pipeline_cuda.py --device cpu --quick --gpu-workers 2      # smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _harness import REAL_CLIPS, NullWriter, gpu_name, grid_frames, libx264_alone, machine, media_dir, save, scaled_copy

import mime_fast
from mime_fast import subsets as _subsets
from mime_fast.corpus import VIDEO_EXTENSIONS, ClipSpec, run_corpus, worker_threads
from mime_fast.manifest import compact, read_rows
from mime_fast.corpus.progress import Monitor
from mime_fast.spec import CODES, ENCODED_SUBSETS, plan
from mime_fast.subsets import Settings, build_subsets, fm_copy_reason
from mime_fast.media import probe

FPS = 30
HEIGHT = 720
ENCODED = tuple(c.value for c in ENCODED_SUBSETS)  # the outputs build_subsets encodes (the others are remuxes)
FACE_SCALES = (1.0, 0.8, 1.2, 0.9, 1.1, 0.75, 1.3, 1.0)  # x make_clip's default face size (0.3 x height)
TARGET_RATIO = 0.9
TARGET_NO_ENCODE_FPS = 1500.0
#: Every contender, in the order they run (``--contenders`` picks some; the module's text says what each is).
CONTENDERS = ("cpu", "gpu", "encoders", "no_encode_1", "no_encode", "no_encode_host_frames", "no_encode_eager",
              "gpu_shared", "no_encode_shared")


# ------------------------------------------------------------------------------------------ corpus


@dataclasses.dataclass
class Clip:
    name: str
    path: Path
    raw: Path  # its output-grid yuv420p frames, for the encoders-alone contender
    origin: str  # "synthetic" or the media file it was made from
    frames: int = 0  # source frames (= output frames: 30 fps on the grid)
    size: tuple[int, int] = (0, 0)
    matrix: str = "bt601"
    audio: bool = False
    fm: str = ""  # what the pipeline should do with FM's video: "copy" or "encode: <why>"
    encodes: tuple[str, ...] = ()  # the libx264 encodes build_subsets makes for it


def _cached(dst: Path, make) -> Path:
    """``dst``, made by ``make(tmp)`` unless it exists (written beside it, renamed when complete)."""
    if not dst.exists():
        tmp = dst.with_name(f".{dst.stem}.part-{os.getpid()}{dst.suffix}")
        make(tmp)
        os.replace(tmp, dst)
    return dst


def _make_synthetic(dst: Path, seed: int, seconds: float) -> None:
    from mime_fast.samples import make_clip

    make_clip(dst, duration=seconds, fps=FPS, size=(1280, HEIGHT), audio=True, seed=seed,
              face_scale=FACE_SCALES[seed % len(FACE_SCALES)] * 0.3 * HEIGHT / 116.0, color="bt709", save_npz=False)


def _make_real(dst: Path, src: Path, seconds: float | None) -> None:
    info = probe(src)
    on_grid = abs(info.fps - FPS) < 0.01 and info.height == HEIGHT and info.codec == "h264"
    if on_grid and seconds is None:
        shutil.copyfile(src, dst)
    else:
        scaled_copy(src, dst, HEIGHT, fps=FPS, seconds=seconds, crf=18, preset="medium", color="bt709")


def _dump_raw(dst: Path, clip: Path) -> None:
    """The clip's frames as build_subsets hands them to FM's encoder, concatenated yuv420p planes."""
    from mime_fast.frames import yuv420_planes

    with open(dst, "wb") as f:
        for vf in grid_frames(clip, FPS):
            for plane in yuv420_planes(vf):
                f.write(plane.tobytes())


def _prepare(job: tuple) -> None:
    kind, dst, raw, arg, seconds = job
    if kind == "synthetic":
        _cached(dst, lambda tmp: _make_synthetic(tmp, arg, seconds))
    else:
        _cached(dst, lambda tmp: _make_real(tmp, arg, seconds))
    _cached(raw, lambda tmp: _dump_raw(tmp, dst))


def prepare_corpus(cache: Path, media: Path, quick: bool, fm_copy: bool, jobs: int) -> tuple[list[Clip], str]:
    """The corpus (cached under ``cache``) and a note on the real clips found."""
    cache.mkdir(parents=True, exist_ok=True)
    seconds = 2.0 if quick else 10.0
    todo: list[tuple] = []
    clips: list[Clip] = []
    for i in range(2 if quick else 8):
        name = f"synthetic{i}"
        clips.append(Clip(name, cache / f"{name}.mp4", cache / f"{name}.yuv", "synthetic"))
        todo.append(("synthetic", clips[-1].path, clips[-1].raw, i, seconds))
    real = sorted(p for p in media.glob("*") if p.suffix.lower() in VIDEO_EXTENSIONS) if media.is_dir() else []
    note = f"{len(real)} real clips from {media}" if real else f"no real clips: no videos in {media}"
    if real and not {p.stem for p in real} >= set(REAL_CLIPS):
        note += f" (expected {', '.join(REAL_CLIPS)})"
    for src in real:
        name = f"{src.stem}@720p30"
        clips.append(Clip(name, cache / f"{name}.mp4", cache / f"{name}.yuv", src.name))
        todo.append(("real", clips[-1].path, clips[-1].raw, src, 2.0 if quick else None))
    with _pool(min(jobs, len(todo))) as pool:
        list(pool.map(_prepare, todo))
    st = Settings(fm_copy=fm_copy)
    for c in clips:
        info = probe(c.path)
        c.frames, c.size, c.matrix, c.audio = info.video_frames, (info.width, info.height), info.matrix, info.has_audio
        p = plan(CODES, has_audio=info.has_audio, fm_copy=fm_copy_reason(info, st))  # as build_subsets plans it
        c.fm = p.fm_video if p.fm_video == "copy" else f"encode: {p.fm_video_reason}"
        c.encodes = p.encoded
    return clips, note


# ------------------------------------------------------------------------------------- contenders


class Clock(Monitor):
    """When a run_corpus run moved its first frames, when its worker processes had all loaded their
    models (the pool's status line ends), and when each clip moved its first frames and finished
    (s since the run started)."""

    def start(self, pending, passes) -> None:
        self.t0, self.first, self.started, self.done = time.perf_counter(), None, {}, {}
        self.loading, self.ready = False, None

    def status(self, text) -> None:
        if text is not None and text.startswith("worker processes loading"):
            self.loading = True
        elif text is None and self.loading and self.ready is None:
            self.ready = round(time.perf_counter() - self.t0, 2)

    def frames(self, clip_id: str, n: int) -> None:
        now = time.perf_counter() - self.t0
        if self.first is None:
            self.first = now
        self.started.setdefault(clip_id, now)

    def clip_done(self, clip_id: str, reason, frames: int) -> None:
        self.done[clip_id] = round(time.perf_counter() - self.t0, 2)


@contextlib.contextmanager
def no_encoding():
    """build_subsets with :class:`NullWriter` for every output (the name ``mime_fast.subsets`` uses)."""
    saved, _subsets.Mp4Writer = _subsets.Mp4Writer, NullWriter
    try:
        yield
    finally:
        _subsets.Mp4Writer = saved


NO_ENCODE = {"subsets": list(ENCODED), "fm_copy": False}  # build_subsets arguments of the no-encode runs


def specs(clips: list[Clip]) -> list[ClipSpec]:
    return [ClipSpec(c.name, c.path) for c in clips]  # landmarks=None: detected


def run_pipeline(clips: list[Clip], out: Path, workers: int, **kw) -> dict:
    """One run_corpus over the corpus into the fresh folder ``out`` (removed after)."""
    clock = Clock()
    t = time.perf_counter()
    summary = run_corpus(specs(clips), out, workers=workers, monitor=clock, **kw)
    wall = time.perf_counter() - t
    per_clip: dict = {}
    for r in compact(read_rows(out)):
        c = r["clip_id"]
        # (one worker: the next clip is detected ahead, before its first frames count: no busy time)
        busy = clock.done[c] - clock.started[c] if workers > 1 and c in clock.done and c in clock.started else None
        d = per_clip.setdefault(c, {"done_s": clock.done.get(c), "busy_s": None if busy is None else round(busy, 2)})
        if r["subset"] == "FM":
            d["fm"] = r.get("fm_video")
            d["tracking"] = r.get("tracking_status")
        if r["status"] != "ok":
            d.setdefault("not_ok", {})[r["subset"]] = f"{r['status']}: {r['reason']}"
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": wall, "frames": summary.frames, "failed": summary.failed,
            "first_frames_s": None if clock.first is None else round(clock.first, 2),
            "workers_ready_s": clock.ready, "clips": per_clip}


_WORKER: dict = {}


def _init_worker(barrier, device: str | None, threads: int, env: dict) -> None:
    """A worker of the encoders-alone (``device`` None) or no-encode pool, with its share of the
    cores as run_corpus's workers have (``mime_fast.corpus.share_cores``) and ``env`` set."""
    from mime_fast.corpus import share_cores

    os.environ.update(env)
    share_cores(threads)
    _WORKER["barrier"] = barrier
    if device is not None:
        from mime_fast.detect.stacks import default_stack

        _subsets.Mp4Writer = NullWriter  # (this process only)
        _WORKER["stack"] = getattr(default_stack(device), "name", "?")


def _ready(_) -> int:
    _WORKER["barrier"].wait(timeout=600)  # returns once every worker has started
    return os.getpid()


@contextlib.contextmanager
def _pool(workers: int, device: str | None = None, warm: bool = False, env: dict | None = None):
    ctx = multiprocessing.get_context("spawn")  # as run_corpus: never a fork of a process with threads
    barrier = ctx.Barrier(workers) if warm else None
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(barrier, device, worker_threads(workers), env or {}))
    try:
        if warm:
            assert len(set(pool.map(_ready, range(workers)))) == workers
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _encode_clip(job: tuple) -> float:
    raw, n, size, matrix, codes, out = job
    import av
    import numpy as np

    from mime_fast.frames import yuv420_planes

    w, h = size
    data = np.memmap(raw, dtype=np.uint8, mode="r", shape=(n, w * h * 3 // 2))
    cuts = np.cumsum([0, w * h, w * h // 4, w * h // 4])

    def frames():
        for i in range(n):
            vf = av.VideoFrame(w, h, "yuv420p")
            for k, plane in enumerate(yuv420_planes(vf)):
                np.copyto(plane, data[i, cuts[k]:cuts[k + 1]].reshape(plane.shape))
            yield vf

    try:
        return libx264_alone(frames(), out, size, matrix, codes)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_encoders(clips: list[Clip], out: Path, workers: int) -> dict:
    jobs = [(c.raw, c.frames, c.size, c.matrix, c.encodes, out / c.name) for c in clips]
    with _pool(workers, warm=True) as pool:
        t = time.perf_counter()
        seconds = list(pool.map(_encode_clip, jobs))
        wall = time.perf_counter() - t
    return {"wall_s": wall, "frames": sum(c.frames for c in clips),
            "clips": {c.name: {"encode_s": round(s, 2), "encodes": list(c.encodes)} for c, s in zip(clips, seconds)}}


def _no_encode_clip(job: tuple) -> dict:
    path, out, name, device, extra = job
    from mime_fast.detect.cuda_graphs import graph_stats
    from mime_fast.detect.stacks import default_stack

    t = time.perf_counter()
    r = build_subsets(path, out, clip_id=name, device=device, **NO_ENCODE, **extra)
    return {"source_frames": r.source_frames, "busy_s": round(time.perf_counter() - t, 2), "stack": _WORKER["stack"],
            "decoder": r.decoder if r.decoder != "pyav" or not r.decoder_reason else f"pyav: {r.decoder_reason}",
            "decodes": r.decodes, "graphs": graph_stats(default_stack(device)),
            "tracking": getattr(r.tracking, "status", None)}


def run_no_encode(clips: list[Clip], out: Path, workers: int, device: str, env: dict | None = None,
                  **extra) -> dict:
    if workers == 1:  # in this process, as `mime-fast build --workers 1`
        with no_encoding():
            res = run_pipeline(clips, out, 1, device=device, **NO_ENCODE, **extra)
        return res
    jobs = [(c.path, out, c.name, device, extra) for c in clips]
    with _pool(workers, device, warm=True, env=env) as pool:
        t = time.perf_counter()
        done = list(pool.map(_no_encode_clip, jobs))
        wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": wall, "frames": sum(d["source_frames"] for d in done),
            "clips": {c.name: d for c, d in zip(clips, done)}}


def _no_encode_clips(jobs: list[tuple], threads: int) -> tuple[list[dict], dict | None]:
    """In a worker: ``jobs`` built ``threads`` at a time on threads of this process (their models
    shared through the process's model broker on a GPU); the broker's counts after them."""
    from concurrent.futures import ThreadPoolExecutor

    from mime_fast.detect.stacks import default_stack

    with ThreadPoolExecutor(max_workers=threads) as ex:
        done = list(ex.map(_no_encode_clip, jobs))
    broker = getattr(default_stack(jobs[0][3]), "broker", None)
    return done, None if broker is None else broker.stats()


def run_no_encode_shared(clips: list[Clip], out: Path, workers: int, per_process: int, device: str) -> dict:
    """No-encode with ``per_process`` clips on threads of each of ``workers / per_process``
    processes (run_corpus's ``clips_per_process``), clips dealt out round-robin."""
    procs = -(-workers // per_process)
    jobs = [(c.path, out, c.name, device, {}) for c in clips]
    with _pool(procs, device, warm=True) as pool:
        t = time.perf_counter()
        parts = list(pool.map(_no_encode_clips, [jobs[p::procs] for p in range(procs)], [per_process] * procs))
        wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    done = {j[2]: d for p in range(procs) for j, d in zip(jobs[p::procs], parts[p][0])}
    return {"wall_s": wall, "frames": sum(d["source_frames"] for d in done.values()), "clips": done,
            "batching": [b for _, b in parts]}


# ------------------------------------------------------------------------------------------- main


def main() -> None:
    cores = os.cpu_count() or 2
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"], help="cuda (default), or cpu: smoke test")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=max(1, cores // 2), help="CPU path workers (default cores // 2)")
    ap.add_argument("--gpu-workers", type=int, default=8, help="GPU path, encoders-alone and no-encode workers")
    ap.add_argument("--media", type=Path, default=media_dir(), help="real clips (default $MIME_FAST_SHARED_MEDIA "
                    "or ../shared/media)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "mime_fast_bench_pipeline",
                    help="prepared corpus (kept between runs)")
    ap.add_argument("--quick", action="store_true", help="2 synthetic clips of 2 s, real clips cut to 2 s")
    ap.add_argument("--skip-cpu", action="store_true", help="leave the CPU path out")
    ap.add_argument("--no-fm-copy", dest="fm_copy", action="store_false", help="FM always encoded")
    ap.add_argument("--clips-per-process", type=int, default=0, metavar="K",
                    help="also run the GPU path and no-encode with K clips on threads of each process, sharing "
                         "its models (run_corpus's clips_per_process; default: not run)")
    ap.add_argument("--contenders", metavar="A,B,...",
                    help=f"run only these, in this order ({', '.join(CONTENDERS)}; default: every one that applies)")
    ap.add_argument("--result", default="pipeline", metavar="NAME",
                    help="bench/results/NAME-<device>.json (default pipeline); written again after each contender")
    args = ap.parse_args()
    wanted = None if not args.contenders else [c.strip() for c in args.contenders.split(",") if c.strip()]
    if wanted is not None and not set(wanted) <= set(CONTENDERS):
        ap.error(f"--contenders: unknown {sorted(set(wanted) - set(CONTENDERS))} (known: {', '.join(CONTENDERS)})")
    dev, gw = args.device, args.gpu_workers
    if dev == "cuda" and not mime_fast.cuda_available():
        ap.exit(2, f"bench_pipeline_cuda: --device cuda but {mime_fast.cuda_status()} (--device cpu: smoke test)\n")

    clips, media_note = prepare_corpus(args.cache / ("quick" if args.quick else "full"), args.media, args.quick,
                                       args.fm_copy, cores)
    total = sum(c.frames for c in clips)
    print(f"corpus: {len(clips)} clips, {total} source frames ({media_note})", flush=True)

    from mime_fast.detect.stacks import default_stack

    stacks = {"cpu": default_stack("cpu").name}  # loaded here before any clock (run_corpus loads them too)
    if dev == "cuda":
        stacks["cuda"] = default_stack("cuda").name
        if stacks["cuda"] != "offline-torch":  # the GPU contenders would measure the CPU models
            ap.exit(2, f"bench_pipeline_cuda: device='cuda' loads the {stacks['cuda']!r} stack, not the torch "
                       "stack on the GPU (torch with CUDA importable? see the log of mime_fast.detect.stacks)\n")
    contenders = {}  # name -> (workers, device, run(out))
    skipped = {}
    if args.skip_cpu:
        skipped["cpu"] = "--skip-cpu"
    else:
        contenders["cpu"] = (args.workers, "cpu", lambda out: run_pipeline(clips, out, args.workers, device="cpu",
                                                                           fm_copy=args.fm_copy))
    if dev == "cuda":
        contenders["gpu"] = (gw, "cuda", lambda out: run_pipeline(clips, out, gw, device="cuda", fm_copy=args.fm_copy))
    else:
        skipped["gpu"] = skipped["no_encode (cuda)"] = "--device cpu: no GPU contender (no_encode runs on the CPU)"
    contenders["encoders"] = (gw, None, lambda out: run_encoders(clips, out, gw))
    contenders["no_encode_1"] = (1, dev, lambda out: run_no_encode(clips, out, 1, dev))
    contenders["no_encode"] = (gw, dev, lambda out: run_no_encode(clips, out, gw, dev))
    if dev == "cuda":  # the same with the models reading host RGB (device_frames=False): what DeviceFrame saves
        contenders["no_encode_host_frames"] = (gw, dev, lambda out: run_no_encode(clips, out, gw, dev,
                                                                                  device_frames=False))
        # ... and with the face networks launched op by op (no CUDA graphs): what the graphs save
        contenders["no_encode_eager"] = (gw, dev, lambda out: run_no_encode(clips, out, gw, dev,
                                                                            env={"MIME_FAST_CUDA_GRAPHS": "0"}))
    k = args.clips_per_process
    if k > 0:
        if dev == "cuda":
            contenders["gpu_shared"] = (gw, "cuda", lambda out: run_pipeline(clips, out, gw, device="cuda",
                                                                             fm_copy=args.fm_copy, clips_per_process=k))
        contenders["no_encode_shared"] = (gw, dev, lambda out: run_no_encode_shared(clips, out, gw, k, dev))
    if wanted is not None:
        for name in [n for n in contenders if n not in wanted]:
            skipped[name] = "not in --contenders"
            del contenders[name]
        for name in [n for n in wanted if n not in contenders and n not in skipped]:
            skipped[name] = f"does not apply here (--device {dev}, --clips-per-process {args.clips_per_process})"
        contenders = {name: contenders[name] for name in wanted if name in contenders}  # in the order given

    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory(prefix="bench_pipeline-") as tmp:
        for rep in range(args.repeats):
            for name, (workers, _, run) in contenders.items():
                r = run(Path(tmp) / f"{name}-{rep}")
                r["fps"] = r["frames"] / r["wall_s"]
                runs[name].append(r)
                bad = f", FAILED {r['failed']}" if r.get("failed") else ""
                print(f"  repeat {rep} {name:12s} workers {workers:2d}: {r['wall_s']:7.1f} s, {r['fps']:7.1f} "
                      f"source fps{bad}", flush=True)
                # what is measured so far, saved: a run stopped at a time limit keeps it
                path = save(args.result, report(args, clips, media_note, contenders, skipped, stacks, runs,
                                   complete=False),
                            device=dev)
    payload = report(args, clips, media_note, contenders, skipped, stacks, runs, complete=True)
    path = save(args.result, payload, device=dev)
    summary(args, clips, contenders, skipped, stacks, runs, payload, path)


def report(args, clips: list[Clip], media_note: str, contenders: dict, skipped: dict, stacks: dict, runs: dict, *,
           complete: bool) -> dict:
    """The JSON of the runs so far (``complete``: every contender and repeat done)."""
    dev = args.device
    total = sum(c.frames for c in clips)

    def fps(name):  # median over the repeats
        if not runs.get(name):
            return None
        v = sorted(r["fps"] for r in runs[name])
        return v[len(v) // 2]

    pipe = (runs.get("gpu") or runs.get("cpu") or [{}])[-1]
    no_encode = next((runs[n][-1] for n in ("no_encode", "no_encode_host_frames", "no_encode_eager") if runs.get(n)),
                     {})  # (a no-encode run in worker processes: each clip's stack, decoder and graphs)
    per_clip = []
    for c in clips:
        seen = pipe.get("clips", {}).get(c.name, {})
        fm = seen.get("fm")
        per_clip.append({"clip": c.name, "origin": c.origin, "size": list(c.size), "source_frames": c.frames,
                         "audio": c.audio, "fm": c.fm, "encodes": list(c.encodes),
                         "fm_in_pipeline": fm, "plan_matches_pipeline": fm is None or c.fm.startswith(fm),
                         "not_ok": seen.get("not_ok"),
                         "stack": no_encode.get("clips", {}).get(c.name, {}).get("stack", stacks.get(dev)),
                         "decoder": no_encode.get("clips", {}).get(c.name, {}).get("decoder"),
                         "decodes": no_encode.get("clips", {}).get(c.name, {}).get("decodes")})

    def steady(name):  # every worker busy: source frames / (the clips' summed build times / workers)
        if not runs.get(name):
            return None
        r = runs[name][-1]
        busy = [c.get("busy_s", c.get("encode_s")) for c in r.get("clips", {}).values() if isinstance(c, dict)]
        if not busy or any(b is None for b in busy) or not sum(busy):
            return None
        return r["frames"] / (sum(busy) / contenders[name][0])

    gpu_fps, enc_fps = fps("gpu"), fps("encoders")
    no_key = "gpu" if dev == "cuda" else "cpu"
    payload = {
        "machine": {**machine(), "gpu": gpu_name() if dev == "cuda" else None},
        "quick": args.quick,
        "complete": complete,
        "done": {name: len(r) for name, r in runs.items()},
        "cpu_corpus_fps": fps("cpu"),
        "gpu_corpus_fps": gpu_fps,
        "encoders_alone_fps": enc_fps,
        "ratio_vs_encoders_alone": gpu_fps / enc_fps if gpu_fps and enc_fps else None,
        f"{no_key}_no_encode_fps": fps("no_encode"),
        f"{no_key}_no_encode_single_process_fps": fps("no_encode_1"),
        "gpu_no_encode_host_frames_fps": fps("no_encode_host_frames"),
        "gpu_no_encode_eager_fps": fps("no_encode_eager"),
        "cuda_graphs": next((c["graphs"] for c in no_encode.get("clips", {}).values()
                             if isinstance(c, dict) and c.get("graphs")), None),
        "clips_per_process": args.clips_per_process or None,
        "gpu_shared_corpus_fps": fps("gpu_shared"),
        f"{no_key}_no_encode_shared_fps": fps("no_encode_shared"),
        "batching": runs["no_encode_shared"][-1].get("batching") if runs.get("no_encode_shared") else None,
        # the rates with every worker busy, as in a corpus long enough that its tail does not count
        # (the targets are on the wall-clock rates above)
        "steady_state_fps": {name: steady(name) for name in contenders},
        "target_ratio_vs_encoders_alone": TARGET_RATIO,
        "target_gpu_no_encode_fps": TARGET_NO_ENCODE_FPS,
        "skipped": skipped,
        "workers": {name: w for name, (w, _, _) in contenders.items()},
        "stacks": stacks,
        "settings": {**Settings().flat(), "fm_copy": args.fm_copy, "device": dev},
        "no_encode_settings": NO_ENCODE,
        "corpus": {"clips": len(clips), "source_frames": total, "media": media_note, "cache": str(args.cache)},
        "clips": per_clip,
        "runs": runs,
    }
    if dev != "cuda":
        payload.update(gpu_corpus_fps=None, gpu_no_encode_fps=None, ratio_vs_encoders_alone=None)
    return payload


def summary(args, clips: list[Clip], contenders: dict, skipped: dict, stacks: dict, runs: dict, payload: dict,
            path: Path) -> None:
    dev, total, cores = args.device, sum(c.frames for c in clips), os.cpu_count() or 2
    per_clip = payload["clips"]

    def fps(name):
        v = sorted(r["fps"] for r in runs[name])
        return v[len(v) // 2]

    print(f"\npipeline over {len(clips)} clips, {total} source frames, device {dev}"
          f"{' (' + payload['machine']['gpu'] + ')' if payload['machine']['gpu'] else ''}, {cores} cores"
          f"{', QUICK' if args.quick else ''}")
    print(f"{'contender':34s} {'workers':>7s} {'wall s':>8s} {'source fps':>11s} {'1st frames s':>12s} "
          f"{'all busy fps':>12s}")
    labels = {"cpu": "cpu pipeline (run_corpus)", "gpu": "gpu pipeline (run_corpus)",
              "encoders": "libx264 alone (same encodes)", "no_encode_1": f"{dev} no-encode, 1 process",
              "no_encode": f"{dev} no-encode, workers",
              "no_encode_host_frames": f"{dev} no-encode, host RGB frames",
              "no_encode_eager": f"{dev} no-encode, no CUDA graphs",
              "gpu_shared": f"gpu pipeline, {args.clips_per_process} clips/process",
              "no_encode_shared": f"{dev} no-encode, {args.clips_per_process} clips/process"}
    for name, (workers, _, _) in contenders.items():
        wall = sorted(r["wall_s"] for r in runs[name])[len(runs[name]) // 2]
        first = runs[name][-1].get("first_frames_s")  # run_corpus runs: when the first frames moved
        busy = payload["steady_state_fps"][name]
        print(f"{labels[name]:34s} {workers:7d} {wall:8.1f} {fps(name):11.1f} {'' if first is None else first:>12} "
              f"{'' if busy is None else f'{busy:.1f}':>12}")
    for name, why in skipped.items():
        print(f"{name:34s} skipped: {why}")
    fm = {c['clip']: c['fm'].split(':')[0] for c in per_clip}
    print(f"FM: {sum(v == 'copy' for v in fm.values())} clips copied, {sum(v == 'encode' for v in fm.values())} "
          f"encoded; stacks {stacks}; mismatches plan/pipeline: "
          f"{[c['clip'] for c in per_clip if not c['plan_matches_pipeline']] or 'none'}")
    decoders = sorted({str(c["decoder"]) for c in per_clip if c.get("decoder")})
    if decoders:
        print(f"no-encode decoders: {decoders}")
    if payload["ratio_vs_encoders_alone"] is not None:
        print(f"ratio gpu / encoders alone: {payload['ratio_vs_encoders_alone']:.2f} (target {TARGET_RATIO})")
    if payload.get("gpu_no_encode_fps") is not None:
        print(f"gpu no-encode {payload['gpu_no_encode_fps']:.0f} fps (target {TARGET_NO_ENCODE_FPS:.0f})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
