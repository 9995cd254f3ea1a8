"""Contact sheets for looking rather than reading: one row per MIME subset (FM, FDM, FSM, VMM,
FDAM, FSAM, AMM), one column per time point, each tile labelled, with the outline of the blurred
face region drawn in yellow (found where the FSM frame differs from the FM frame) and a bar under the
label that is green when the subset has audio and grey when it has none.

    mime-fast preview CLIP_ID --dir OUT [--times 4] [--out sheet.png]
    mime-fast preview OUT/FSM/CLIP_ID.mp4
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from pathlib import Path

import numpy as np

from .corpus.inputs import clip_id_problem
from .manifest import atomic_write, compact, read_rows
from .media import ClipError, probe, video_digest
from .media.errors import ffmpeg_detail, interrupted, open_input
from .spec import CODES, spec

__all__ = ["NO_AUDIO", "ClipFailed", "contact_sheet", "draw_text", "no_vmm_for_lack_of_audio", "write_contact_sheet",
           "write_png"]

#: The rows of a sheet, in the MIME order.
SUBSETS = CODES

# 5 x 7 bitmap glyphs for the labels (rows top to bottom, bit 4 = leftmost column).
_GLYPHS = {
    "A": (0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11), "D": (0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E),
    "F": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10), "M": (0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11),
    "S": (0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E), "V": (0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04),
    "0": (0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E), "1": (0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "2": (0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F), "3": (0x1E, 0x01, 0x01, 0x0E, 0x01, 0x01, 0x1E),
    "4": (0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02), "5": (0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E),
    "6": (0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E), "7": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08),
    "8": (0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E), "9": (0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C),
    ".": (0, 0, 0, 0, 0, 0x0C, 0x0C), "s": (0, 0, 0x0F, 0x10, 0x0E, 0x01, 0x1E), " ": (0,) * 7,
    "k": (0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12), "=": (0, 0, 0x1F, 0, 0x1F, 0, 0),
    "n": (0, 0, 0x16, 0x19, 0x11, 0x11, 0x11), "o": (0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E),
    "a": (0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F), "u": (0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D),
    "d": (0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F), "i": (0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E),
}

#: What a sheet's VMM row says where the source has no audio (VMM is its audio over black frames).
NO_AUDIO = "no audio"


class ClipFailed(FileNotFoundError):
    """The clip has no outputs because its build failed; the message says why (the manifest's
    reason)."""


def write_png(path: Path, img: np.ndarray) -> None:
    """Minimal PNG writer (RGB or gray uint8), written to a temporary name and renamed
    (:func:`mime_fast.manifest.atomic_write`)."""
    h = img.shape[0]
    color = 2 if img.ndim == 3 else 0
    raw = b"".join(b"\x00" + np.ascontiguousarray(img[y]).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", img.shape[1], h, 8, color, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    atomic_write(Path(path), lambda tmp: tmp.write_bytes(png))


def draw_text(img: np.ndarray, text: str, x: int, y: int, scale: int = 2, color=(255, 255, 255)) -> None:
    """Draw ``text`` (the characters of the subset labels and of "no audio": A D F M S V a d i k n o s u
    = . digits, space) into the
    RGB ``img`` with its top-left corner at ``(x, y)``, each glyph 5 x 7 cells of ``scale`` pixels."""
    for ch in text:
        glyph = _GLYPHS.get(ch, _GLYPHS[" "])
        for r, bits in enumerate(glyph):
            for c in range(5):
                if bits & (0x10 >> c):
                    img[y + r * scale : y + (r + 1) * scale, x + c * scale : x + (c + 1) * scale] = color
        x += 6 * scale


def _frames_at(path: Path, n: int) -> tuple[list[np.ndarray], list[float], bool]:
    """``n`` RGB frames of the output at ``path``, evenly spread from its first to its last frame (the
    middle one for ``n`` = 1), their times (seconds from the first frame, from the packets' timestamps:
    any frame rate) and whether the file has audio.  The frames are counted
    from the packets (:func:`~mime_fast.media.probe`) and decoded once, in order, up to the last one
    chosen: only the chosen frames are converted to RGB and kept, whatever the clip's length.  Raises
    :class:`~mime_fast.media.ClipError` (the file and the reason) for a file that cannot be read."""
    import av

    info = probe(path)
    count = info.video_frames
    idx = np.linspace(0, count - 1, n).round().astype(int) if n > 1 else np.array([count // 2])
    wanted = set(idx.tolist())
    got: dict[int, np.ndarray] = {}
    decoded = 0
    with contextlib.closing(open_input(path)) as c:
        try:
            for frame in c.decode(c.streams[info.stream_index]):
                if decoded in wanted:
                    got[decoded] = frame.to_ndarray(format="rgb24")
                decoded += 1
                if len(got) == len(wanted):
                    break
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, f"corrupt video stream: decoding fails after {decoded} frames",
                            ffmpeg_detail(exc)) from exc
    if len(got) < len(wanted):
        raise ClipError(path, f"decoded only {decoded} of {count} video frames (truncated or corrupt)")
    return [got[i] for i in idx], [float(info.frame_times[i] - info.frame_times[0]) for i in idx], info.has_audio


def _dense(changed: np.ndarray, r: int = 6, share: float = 0.35) -> np.ndarray:
    """Pixels whose (2r+1)^2 neighbourhood is mostly changed: drops the isolated differences that
    coding noise leaves outside the blurred region."""
    c = np.pad(changed.astype(np.int32), ((r + 1, r), (r + 1, r))).cumsum(0).cumsum(1)
    k = 2 * r + 1
    box = c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]
    return box >= share * k * k


def _largest_blob(mask: np.ndarray, cell: int = 4) -> np.ndarray:
    """``mask`` restricted to its largest 8-connected component, found on a ``cell``-times coarser
    grid (a flood fill over the set cells only)."""
    from collections import deque

    h, w = mask.shape
    gh, gw = -(-h // cell), -(-w // cell)
    grid = np.zeros((gh * cell, gw * cell), bool)
    grid[:h, :w] = mask
    grid = grid.reshape(gh, cell, gw, cell).any(axis=(1, 3))
    label = np.zeros(grid.shape, np.int32)
    sizes = [0]
    for start in zip(*np.nonzero(grid)):
        if label[start]:
            continue
        sizes.append(0)
        n = len(sizes) - 1
        label[start] = n
        todo = deque([start])
        while todo:
            y, x = todo.popleft()
            sizes[n] += 1
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < gh and 0 <= xx < gw and grid[yy, xx] and not label[yy, xx]:
                        label[yy, xx] = n
                        todo.append((yy, xx))
    if len(sizes) == 1:
        return mask
    keep = np.repeat(np.repeat(label == int(np.argmax(sizes)), cell, 0), cell, 1)[:h, :w]
    return mask & keep


def _filled(changed: np.ndarray) -> np.ndarray:
    """The region between the first and last changed pixel of every row and of every column (the
    blurred face hull is convex, while smooth skin barely changes under blur)."""
    h, w = changed.shape
    out = np.ones_like(changed)
    for axis, n in ((1, w), (0, h)):
        any_ = changed.any(axis=axis)
        first = changed.argmax(axis=axis)
        last = n - 1 - np.flip(changed, axis=axis).argmax(axis=axis)
        pos = np.arange(n)
        fill = (pos[None, :] >= first[:, None]) & (pos[None, :] <= last[:, None]) & any_[:, None]
        out &= fill if axis == 1 else fill.T
    return out


def _outline(changed: np.ndarray) -> np.ndarray:
    """Boundary pixels of a boolean region (pixels of the region with a 4-neighbour outside it)."""
    inner = changed.copy()
    inner[1:] &= changed[:-1]
    inner[:-1] &= changed[1:]
    inner[:, 1:] &= changed[:, :-1]
    inner[:, :-1] &= changed[:, 1:]
    edge = changed & ~inner
    thick = edge.copy()  # two pixels wide, visible after downscaling
    thick[1:] |= edge[:-1]
    thick[:, 1:] |= edge[:, :-1]
    return thick


def _decoded(out_dir: Path, clip_id: str, present: list[str], times: int) -> dict[str, tuple]:
    """:func:`_frames_at` of each subset in ``present``; a remux (FDAM, FSAM, AMM) whose video packets
    are its base's (:func:`~mime_fast.media.video_digest`) shows the base's frames, not decoded again
    (three decodes of seven), with its own audio flag."""
    out: dict[str, tuple] = {}
    digests: dict[str, str] = {}

    def digest(code: str) -> str:
        if code not in digests:
            digests[code] = video_digest(out_dir / code / f"{clip_id}.mp4")
        return digests[code]

    for s in present:
        path = out_dir / s / f"{clip_id}.mp4"
        base = spec(s).remux_of
        if base in out and digest(s) == digest(base):
            frames, at, _ = out[base]
            out[s] = (frames, at, probe(path).has_audio)
        else:
            out[s] = _frames_at(path, times)
    return out


def no_vmm_for_lack_of_audio(out_dir: str | Path, clip_id: str) -> bool:
    """Whether ``clip_id`` has no VMM because its source has no audio: FM is there without audio (FM
    carries the source's audio) and VMM, the audio over black frames, is not."""
    out_dir = Path(out_dir)
    fm = out_dir / "FM" / f"{clip_id}.mp4"
    return fm.is_file() and not (out_dir / "VMM" / f"{clip_id}.mp4").is_file() and not probe(fm).has_audio


def contact_sheet(out_dir: str | Path, clip_id: str, *, times: int = 4, tile_width: int = 320) -> np.ndarray:
    """The sheet as an RGB array (rows: subsets present on disk, columns: ``times`` time points).
    A clip whose source has no audio keeps a VMM row that says so ("no audio", grey tiles): it has
    no VMM (:func:`no_vmm_for_lack_of_audio`).
    Raises ``ValueError`` for a ``clip_id`` that cannot name a clip's files (a path, ``..``)."""
    out_dir = Path(out_dir)
    problem = clip_id_problem(clip_id)  # "../sources/x" would read (and name a sheet) outside the folder
    if problem:
        raise ValueError(problem)
    present = [s for s in SUBSETS if (out_dir / s / f"{clip_id}.mp4").is_file()]
    if not present:
        _raise_failed(out_dir, clip_id)
        raise FileNotFoundError(f"no subset of clip {clip_id!r} under {out_dir}")
    decoded = _decoded(out_dir, clip_id, present, times)
    region = None
    if "FM" in decoded and "FSM" in decoded:  # the blurred face region, per time point
        region = [_filled(_largest_blob(_dense(np.abs(a.astype(np.int16) - b).max(axis=2) > 8)))
                  for a, b in zip(decoded["FM"][0], decoded["FSM"][0])]
    if "VMM" not in present and "FM" in decoded and not decoded["FM"][2]:  # no VMM: the source has no audio
        present = [s for s in SUBSETS if s in present or s == "VMM"]
    h, w = decoded[present[0]][0][0].shape[:2]
    step = max(1, int(np.ceil(w / tile_width)))
    th, tw = -(-h // step), -(-w // step)
    label_w, pad, header = 90, 4, 24
    sheet = np.full((header + len(present) * (th + pad), label_w + times * (tw + pad), 3), 24, np.uint8)
    for j, t in enumerate(decoded[present[0]][1]):
        draw_text(sheet, f"{t:.1f}s", label_w + j * (tw + pad) + 4, 5)
    for i, s in enumerate(present):
        y = header + i * (th + pad)
        draw_text(sheet, s, 6, y + th // 2 - 10)
        if s not in decoded:  # VMM of a source without audio: said in its row, in every tile
            sheet[y + th // 2 + 8 : y + th // 2 + 14, 6:60] = (90, 90, 90)
            for j in range(times):
                x = label_w + j * (tw + pad)
                sheet[y : y + th, x : x + tw] = 48
                draw_text(sheet, NO_AUDIO, x + 6, y + th // 2 - 7, scale=max(1, min(2, tw // 60)))
            continue
        frames, _, has_audio = decoded[s]
        sheet[y + th // 2 + 8 : y + th // 2 + 14, 6:60] = (60, 200, 80) if has_audio else (90, 90, 90)
        for j, f in enumerate(frames):
            tile = f[::step, ::step].copy()
            if region is not None and spec(s).video != "black" and j < len(region):
                tile[_outline(region[j][::step, ::step])] = (255, 220, 0)
            x = label_w + j * (tw + pad)
            sheet[y : y + tile.shape[0], x : x + tile.shape[1]] = tile
    return sheet


def _raise_failed(out_dir: Path, clip_id: str) -> None:
    """Raise :class:`ClipFailed` with the manifest's reason when the latest run of ``clip_id`` failed."""
    failed = [r for r in compact(read_rows(out_dir)) if r["clip_id"] == clip_id and r["status"] == "failed"]
    if failed:
        reasons = "; ".join(dict.fromkeys(str(r["reason"]) for r in failed))
        raise ClipFailed(f"clip {clip_id!r} failed, so it has no outputs: {reasons}")


def write_contact_sheet(out_dir: str | Path, clip_id: str, png: str | Path | None = None, *, times: int = 4) -> Path:
    """Write the contact sheet of ``clip_id`` (default: ``out_dir/previews/<clip_id>.png``)."""
    png = Path(png) if png is not None else Path(out_dir) / "previews" / f"{clip_id}.png"
    sheet = contact_sheet(out_dir, clip_id, times=times)
    png.parent.mkdir(parents=True, exist_ok=True)
    write_png(png, sheet)
    return png
