"""One probe per clip (:func:`probe_clip`): its displayed size and duration, and frames sampled
across it decoded once at a small size for the watermark detector and the video hash; many clips
probed in worker processes (:func:`probe_all`), with a progress bar, and cached in the output folder
(:class:`ProbeCache`, keyed by the clip's path, size and modification time) so that a rerun is quick.

A probe is a plain JSON object (``width``, ``height``, ``duration``, ``content`` (the picture's
size without black bars), ``hash``, ``flat``, ``overlays``; or ``error``: why the clip cannot be read): what the curation decides from, the same
whether just probed or read back from the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from ..media.errors import av_path, open_input
from ..media.source import main_video_stream
from . import dedup, watermark

__all__ = ["CACHE_NAME", "FRAMES", "ProbeCache", "probe_all", "probe_clip", "sample_frames"]

FRAMES = 12  #: frames sampled per clip, at the middles of twelve equal spans of its duration
SHORT_SIDE = 144  #: the sampled frames' shorter side (pixels)
SEEK_FROM = 60.0  #: clips longer than this (s) are sampled by seeking, shorter ones decoded through
VERSION = 1  #: bump when a probe's meaning changes: the cache's older probes are then redone
CACHE_NAME = "probes.jsonl"


def _analysis_size(width: int, height: int) -> tuple[int, int]:
    scale = SHORT_SIDE / max(1, min(width, height))
    return max(16, round(width * scale / 2) * 2), max(16, round(height * scale / 2) * 2)


def _grey(frame, size: tuple[int, int], rotation: int) -> np.ndarray:
    """The frame grey at ``size`` (its stored orientation), turned as displayed (``rotation``:
    PyAV's, degrees counter-clockwise)."""
    img = frame.reformat(width=size[0], height=size[1], format="gray").to_ndarray()
    return np.ascontiguousarray(np.rot90(img, k=(rotation // 90) % 4)) if rotation % 360 else img


def _first_look(frame, state: dict):
    if "size" not in state:
        state["rotation"] = int(getattr(frame, "rotation", 0) or 0)
        state["size"] = _analysis_size(frame.width, frame.height)
    return _grey(frame, state["size"], state["rotation"])


def _sought(c, vs, tb: float, declared: float, n: int, state: dict) -> list[np.ndarray]:
    """Seeking to each sample's time: the last frame at or before it (as :func:`_decoded` picks)."""
    start = float(vs.start_time * tb) if vs.start_time is not None else 0.0
    frames: list[np.ndarray] = []
    for i in range(n):
        target = start + declared * (i + 0.5) / n
        c.seek(int(target / tb), stream=vs, backward=True)
        chosen = None
        for frame in c.decode(vs):
            if chosen is not None and frame.time is not None and frame.time > target + 1e-6:
                break
            chosen = frame
        if chosen is not None:
            frames.append(_first_look(chosen, state))
        elif frames:  # past the last frame: the last one again
            frames.append(frames[-1])
    return frames


def _decoded(c, vs, n: int, state: dict) -> tuple[list[np.ndarray], float]:
    """Decoding through: every frame shrunk, then the last one at or before each sample's time."""
    rate = float(vs.average_rate or 25)
    frames: list[np.ndarray] = []
    times: list[float] = []
    for frame in c.decode(vs):
        frames.append(_first_look(frame, state))
        times.append(frame.time if frame.time is not None else len(times) / rate)
    if not frames:
        return [], 0.0
    order = np.argsort(np.array(times), kind="stable")
    frames, t = [frames[i] for i in order], np.array(times)[order] - min(times)
    duration = float(t[-1] + (float(np.median(np.diff(t))) if len(t) > 1 else 1 / rate))
    picks = [max(0, int(np.searchsorted(t, duration * (i + 0.5) / n + 1e-6, side="right")) - 1) for i in range(n)]
    return [frames[i] for i in picks], duration


def sample_frames(path: Path, n: int = FRAMES) -> tuple[dict, np.ndarray]:
    """``({"width", "height", "duration"}, frames)``: the clip's displayed size (after rotation) and
    duration (s), and ``n`` grey frames at the middles of ``n`` equal spans of it (``n x H x W``
    uint8, the shorter side :data:`SHORT_SIDE`; a clip longer than :data:`SEEK_FROM` is sought, a
    shorter one decoded through).  Raises ``ValueError`` or PyAV's error when it cannot."""
    with contextlib.closing(open_input(path)) as c:
        vs = main_video_stream(c)
        if vs is None:
            raise ValueError("no video stream")
        vs.thread_type = "AUTO"
        tb = float(vs.time_base or 0) or 1 / 90000
        declared = float(vs.duration * tb) if vs.duration else (c.duration / 1e6 if c.duration else 0.0)
        state: dict = {}
        if declared > SEEK_FROM:
            frames, duration = _sought(c, vs, tb, declared, n, state), declared
        else:
            frames, duration = _decoded(c, vs, n, state)
        if len(frames) != n:
            raise ValueError("no video frame could be decoded")
        cw, ch = vs.codec_context.width, vs.codec_context.height
        w, h = (ch, cw) if state["rotation"] % 180 else (cw, ch)
        return {"width": int(w), "height": int(h), "duration": round(duration, 3)}, np.stack(frames)


def probe_clip(path: str) -> dict:
    """The probe of one clip (a JSON object; ``error`` where it cannot be read)."""
    try:
        facts, frames = sample_frames(Path(path))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - an unreadable clip: excluded with its reason, the batch goes on
        detail = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return {"error": f"unreadable: {' '.join(str(detail).split())}"}
    hashes, flat = dedup.frame_hashes(frames)
    y0, y1, x0, x1 = dedup.content_box(frames)
    h, w = frames.shape[1:]
    content = [round(facts["width"] * (x1 - x0) / w), round(facts["height"] * (y1 - y0) / h)]
    # the overlays of the picture, black bars aside (their border with the picture is a static edge)
    inner = frames[:, y0 + (2 if y0 else 0):y1 - (2 if y1 < h else 0), x0 + (2 if x0 else 0):x1 - (2 if x1 < w else 0)]
    return {**facts, "content": content, "hash": hashes.hex(), "flat": flat, "overlays": watermark.measure(inner)}


def _key(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{VERSION}|{av_path(path)}|{st.st_size}|{st.st_mtime_ns}"


class ProbeCache:
    """The probes of earlier runs, in ``DIR/probes.jsonl`` (one JSON object a line: ``key``, ``probe``)."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / CACHE_NAME
        self.known: dict[str, dict] = {}
        if self.path.is_file():
            for line in self.path.read_text("utf-8", errors="replace").splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    rec = json.loads(line)
                    self.known[rec["key"]] = rec["probe"]

    def write(self, probes: dict[str, dict]) -> None:
        """Keep ``probes`` (key -> probe) as the cache: written to a temporary, then renamed."""
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"key": key, "probe": probes[key]}, sort_keys=True) + "\n" for key in sorted(probes))
        os.replace(tmp, self.path)


def probe_all(paths: Iterable[Path], cache_dir: Path, workers: int = 1, progress: bool = True) -> dict[Path, dict]:
    """The probe of each clip of ``paths``: from the cache in ``cache_dir`` where it holds one for
    the file as it is, else probed (``workers`` processes; 1: in this one), the cache then rewritten."""
    paths = list(dict.fromkeys(Path(p) for p in paths))
    cache = ProbeCache(cache_dir)
    keys = {p: _key(p) for p in paths}
    out: dict[Path, dict] = {}
    todo = []
    for p in paths:
        if keys[p] is None:
            out[p] = {"error": "unreadable: the file cannot be found or read"}
        elif keys[p] in cache.known:
            out[p] = cache.known[keys[p]]
        else:
            todo.append(p)
    bar = _bar(len(todo), progress)
    try:
        if workers <= 1 or len(todo) <= 1:
            for p in todo:
                out[p] = json.loads(json.dumps(probe_clip(str(p))))
                bar.update(1)
        else:
            _in_processes(todo, workers, out, bar)
    finally:
        bar.close()
        done = {keys[p]: out[p] for p in paths if p in out and keys[p] is not None}
        cache.write({**{k: v for k, v in cache.known.items() if k not in done and _still(k)}, **done})
    return out


def _in_processes(todo: list[Path], workers: int, out: dict[Path, dict], bar) -> None:
    """Probe ``todo`` in ``workers`` processes into ``out``.  A process that dies (a crash in a
    decoder) breaks the pool and every probe still in it: those clips are then probed ``workers``
    at a time, and the probes of a batch that breaks again one by one in a process of their own,
    where the clip whose process dies is unreadable; the batch goes on."""
    context = get_context("spawn")
    broken: list[Path] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(probe_clip, str(p)): p for p in todo}
        for fut in as_completed(futures):
            if not _take(fut, futures[fut], out, bar):
                broken.append(futures[fut])
    pool = None
    try:
        for i in range(0, len(broken), workers):
            pool = pool or ProcessPoolExecutor(max_workers=workers, mp_context=context)
            futures = {pool.submit(probe_clip, str(p)): p for p in broken[i:i + workers]}
            again = [futures[f] for f in as_completed(futures) if not _take(f, futures[f], out, bar)]
            if again:
                pool.shutdown()
                pool = None
            for p in again:
                with ProcessPoolExecutor(max_workers=1, mp_context=context) as alone:
                    if not _take(alone.submit(probe_clip, str(p)), p, out, bar):
                        out[p] = {"error": "unreadable: the process probing it died (a crash while decoding)"}
                        bar.update(1)
    finally:
        if pool is not None:
            pool.shutdown()


def _take(fut, path: Path, out: dict[Path, dict], bar) -> bool:
    """The probe of a finished future into ``out``; ``False`` when its process pool broke."""
    try:
        out[path] = json.loads(json.dumps(fut.result()))
    except BrokenProcessPool:
        return False
    bar.update(1)
    return True


def _still(key: str) -> bool:
    """Whether a cached probe's file is still as it was (the cache keeps the probes of files still there)."""
    parts = key.split("|")
    return len(parts) == 4 and _key(Path(parts[1])) == key


def _bar(total: int, shown: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="clip", desc="probing", disable=(not shown) or None, leave=False)
