"""Outputs made without encoding, and how every output reaches its place.

* :func:`remux_video` copies the encoded video packets of an MP4 into a new MP4 without
  re-encoding (packets byte-identical), dropping every other stream.
* :func:`grid_packets` opens a source whose frames already lie on the output grid and hands its
  video stream (an :class:`~mime_fast.media.Mp4Writer` ``video_template``) and its packets,
  byte-identical, with timestamps re-based onto the ``1/fps`` grid (FM's stream copy,
  :func:`mime_fast.fm_copy.fm_copy_reason`).
* :func:`video_digest` is the SHA-256 of a file's video packets: a remux and its base share it.
* :func:`atomic_outputs` hands out temporary names in the destination directories and renames them
  into place only when everything succeeded; on any exception every temporary file is removed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import threading
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import av

from .errors import ClipError, av_path, ffmpeg_detail, interrupted, open_input
from .source import SourceInfo

__all__ = ["MAX_ID_BYTES", "atomic_outputs", "check_writable", "clip_id_problem", "grid_packets", "remux_video",
           "video_digest"]


def remux_video(src, dst) -> int:
    """Copy the first video stream of MP4 ``src`` into a new MP4 ``dst`` without re-encoding.

    Every other stream is dropped.  Returns the number of packets copied.
    """
    n = 0
    with contextlib.closing(av.open(av_path(src), "r")) as ic:
        ivs = ic.streams.video[0]
        with contextlib.closing(av.open(av_path(dst), "w", format="mp4")) as oc:
            ovs = oc.add_stream_from_template(ivs)
            for pkt in ic.demux(ivs):
                if pkt.dts is None and pkt.size == 0:
                    continue
                pkt.stream = ovs
                oc.mux(pkt)
                n += 1
    return n


def video_digest(path: Path) -> str:
    """SHA-256 of the bytes of the video packets of ``path`` (what a remux keeps: FDAM, FSAM and AMM
    share FDM's, FSM's and FM's).  Raises :class:`~mime_fast.media.ClipError` (the file and the
    reason) for a stream that breaks off."""
    h = hashlib.sha256()
    with contextlib.closing(open_input(path)) as c:
        try:
            for p in c.demux(c.streams.video[0]):
                if p.size:
                    h.update(bytes(p))
        except av.FFmpegError as exc:
            interrupted(exc)
            raise ClipError(path, "corrupt or truncated: its video stream breaks off", ffmpeg_detail(exc)) from exc
    return h.hexdigest()


@contextlib.contextmanager
def grid_packets(path, info: SourceInfo, fps) -> Iterator[tuple]:
    """``(stream, packets)`` of the source's video: ``stream`` for :class:`Mp4Writer`'s
    ``video_template``, ``packets`` an iterator of ``(data, pts, dts, duration, keyframe)`` in
    decoding order, ``data`` the source's bytes and the times in ``1/fps``: ``pts`` is the frame's
    rank in presentation order (output frame ``i`` is the ``i``-th source frame: call this only
    when the standardisation maps the source 1:1), ``dts`` the packet's rank in decoding order
    minus the stream's reordering delay (the fewest frames that keep ``dts <= pts``), ``duration`` 1.
    Demuxes the stream twice (decoding-order ranks first), decodes nothing."""
    rank = {t: i for i, t in enumerate(info.frame_times)}
    with contextlib.closing(open_input(path)) as c:
        vs = c.streams[info.stream_index]
        order = [rank[Fraction(p.pts) * vs.time_base] for p in c.demux(vs) if p.size]
    delay = max([0] + [j - k for j, k in enumerate(order)])
    with contextlib.closing(open_input(path)) as c:
        vs = c.streams[info.stream_index]
        packets = ((bytes(p), order[j], j - delay, 1, bool(p.is_keyframe))
                   for j, p in enumerate(p for p in c.demux(vs) if p.size))
        yield vs, packets


class _Outputs:
    def __init__(self):
        self.pairs: list[tuple[Path, Path]] = []

    def temp_for(self, final) -> Path:
        """A temporary path beside ``final``: ``.<name>.tmp-<pid><suffix>`` (keeps the extension so
        FFmpeg picks the right muxer)."""
        final = Path(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.stem}.tmp-{os.getpid()}{final.suffix}")
        self.pairs.append((tmp, final))
        return tmp

    def commit(self) -> None:
        for tmp, final in self.pairs:
            os.replace(tmp, final)
        self.pairs.clear()

    def cleanup(self) -> None:
        for tmp, _ in self.pairs:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self.pairs.clear()


#: Bytes a temporary's name adds to its output's (``.<stem>.<code>.scratch-<pid>``: the longest).
TEMP_NAME_EXTRA = 32


#: The longest clip id, in UTF-8 bytes: its outputs' temporaries (``.<id>.<code>.scratch-<pid>.mp4``)
#: must fit the 255 bytes most file systems allow a name.
MAX_ID_BYTES = 255 - TEMP_NAME_EXTRA - len(".mp4")


def clip_id_problem(clip_id: str) -> str | None:
    """Why ``clip_id`` cannot be a clip's id (it names the clip's files, ``<SUBSET>/<clip_id>.mp4``),
    or ``None`` when it can."""
    if not clip_id or clip_id in (".", "..") or "/" in clip_id or "\\" in clip_id or clip_id.startswith("."):
        return f"clip id {clip_id!r} cannot name a file (empty, hidden or containing a path separator)"
    if len(clip_id.encode("utf-8", "surrogateescape")) > MAX_ID_BYTES:
        return (f"clip id {clip_id[:40]!r}... is too long to name its files "
                f"({len(clip_id.encode('utf-8', 'surrogateescape'))} bytes; at most {MAX_ID_BYTES})")
    return None


def check_writable(folder: Path, names: tuple[str, ...] = ()) -> None:
    """Raise ``OSError`` naming ``folder`` now, before any work, when files cannot be written in it
    (a read-only file system, no permission, a full disk: a byte is written and synced), or when
    one of ``names`` (files to be written there) is too long for it once its temporary's name is
    added (:data:`TEMP_NAME_EXTRA`)."""
    folder = Path(folder)
    # (the corpus's temporary naming: one a killed process leaves is cleaned by the next build)
    probe = folder / f".write-check.tmp-{os.getpid()}.{threading.get_ident()}"
    try:
        try:
            with open(probe, "wb") as f:
                f.write(b"\0")
                f.flush()
                os.fsync(f.fileno())
        finally:
            with contextlib.suppress(FileNotFoundError):
                probe.unlink()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(folder)) from None  # (the folder, not the probe)
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return
    for name in names:
        if len(os.fsencode(name)) + TEMP_NAME_EXTRA > limit:
            raise OSError(errno.ENAMETOOLONG, f"file name too long for {folder} ({len(os.fsencode(name))} bytes; "
                                              f"at most {limit - TEMP_NAME_EXTRA} with its temporary's)", name)


@contextlib.contextmanager
def atomic_outputs():
    """Context manager: ``outs.temp_for(final)`` gives a temp path; on normal exit (after the body
    called ``outs.commit()`` or not) remaining temps are renamed into place; on an exception every temp
    is removed and nothing is renamed."""
    outs = _Outputs()
    try:
        yield outs
    except BaseException:
        outs.cleanup()
        raise
    else:
        try:
            outs.commit()
        except BaseException:
            outs.cleanup()
            raise
