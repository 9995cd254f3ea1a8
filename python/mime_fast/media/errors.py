"""Input clips that cannot be processed: :class:`ClipError` with a reason in plain words, and
:func:`open_input`, which opens a clip with FFmpeg (PyAV) and tells a file that is not a media file
from a truncated or corrupt one when FFmpeg cannot read it."""

from __future__ import annotations

import os
from pathlib import Path

import av

__all__ = ["ClipError", "av_path", "ffmpeg_detail", "interrupted", "open_input"]


def av_path(path) -> str:
    """``path`` as FFmpeg must be given a local file: absolute.  FFmpeg reads a relative name with a
    colon before any slash (``a:b.mp4``, an output folder ``o:x``) as a protocol and fails with
    "Protocol not found"; an absolute path starts with a slash and is always a file."""
    return os.path.abspath(os.fspath(path))


class ClipError(ValueError):
    """An input clip that cannot be processed.  ``path`` is the clip, ``reason`` says why in plain
    words (``"not a media file"``, ``"truncated: ..."``, ``"corrupt video stream: ..."``, ``"no video
    stream ..."``, ``"a still image ..."``, ``"below the quality gate: ..."``); ``detail`` keeps
    FFmpeg's own message, when there is one, for whoever needs to dig (the manifest's ``detail``)."""

    def __init__(self, path, reason: str, detail: str | None = None):
        self.path = Path(path) if path is not None else None
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}")


def interrupted(exc: BaseException) -> None:
    """Raise the ``KeyboardInterrupt`` an FFmpeg error stands for: a Ctrl-C while FFmpeg reads makes
    PyAV's interrupt callback stop it with AVERROR_EXIT (``av.error.ExitError``), which says nothing
    about the clip."""
    if isinstance(exc, av.error.ExitError):
        raise KeyboardInterrupt from exc


def ffmpeg_detail(exc: BaseException) -> str:
    """FFmpeg's message of ``exc`` without the file name PyAV appends (the row names the clip)."""
    msg = getattr(exc, "strerror", None) or str(exc)
    return f"{type(exc).__name__}: {msg}"


#: Leading bytes of the containers FFmpeg reads that these corpora use: ``(offset, magic, name)``.
_SIGNATURES = (
    (4, b"ftyp", "MP4/MOV"), (4, b"moov", "MP4/MOV"), (4, b"mdat", "MP4/MOV"), (4, b"free", "MP4/MOV"),
    (4, b"wide", "MP4/MOV"), (0, b"\x1a\x45\xdf\xa3", "Matroska/WebM"), (0, b"RIFF", "AVI"),
    (0, b"FLV", "FLV"), (0, b"OggS", "Ogg"), (0, b"\x30\x26\xb2\x75", "ASF/WMV"), (0, b"\x00\x00\x01\xba", "MPEG-PS"),
)


def _mp4_boxes(path: Path, size: int) -> tuple[list[str], bool]:
    """The top-level box types of an MP4/MOV file and whether the last one runs past the end."""
    names: list[str] = []
    with open(path, "rb") as f:
        pos = 0
        while pos + 8 <= size and len(names) < 1000:
            f.seek(pos)
            head = f.read(16)
            n = int.from_bytes(head[:4], "big")
            names.append(head[4:8].decode("latin-1"))
            if n == 1 and len(head) >= 16:
                n = int.from_bytes(head[8:16], "big")
            elif n == 0:  # runs to the end of the file
                n = size - pos
            if n < 8:
                return names, True
            pos += n
        return names, pos > size


def _unreadable(path: Path, exc: BaseException) -> ClipError:
    """The :class:`ClipError` of a file FFmpeg cannot open, in plain words: not a media file, or a
    known container that is truncated (an MP4 whose index, ``moov``, never got written) or corrupt."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(16)
    kind = next((name for off, magic, name in _SIGNATURES if head[off:off + len(magic)] == magic), None)
    if head[:1] == b"\x47" and size >= 376:  # MPEG-TS: a sync byte every 188 bytes
        with open(path, "rb") as f:
            data = f.read(188 * 3)
        if data[188:189] == b"\x47" and data[376:377] == b"\x47":
            kind = "MPEG-TS"
    detail = ffmpeg_detail(exc)
    if kind is None:
        return ClipError(path, "not a media file (no audio or video container FFmpeg recognises)", detail)
    if kind == "MP4/MOV":
        names, cut = _mp4_boxes(path, size)
        if "moov" not in names:
            return ClipError(path, "truncated: an MP4/MOV file without its index ('moov' box missing), "
                                   "as when a download or copy stops early", detail)
        if cut:
            return ClipError(path, "truncated: the MP4/MOV file ends inside a box", detail)
    return ClipError(path, f"corrupt {kind} file: FFmpeg cannot read its structure", detail)


def open_input(path):
    """The clip at ``path`` opened for reading (``av.open``); a file FFmpeg cannot open raises
    :class:`ClipError` saying why."""
    try:
        return av.open(av_path(path), "r")
    except av.FFmpegError as exc:
        interrupted(exc)
        raise _unreadable(Path(path), exc) from exc
    except (OSError, ValueError) as exc:
        raise ClipError(path, f"cannot be read ({exc.strerror or exc})" if isinstance(exc, OSError)
                        else f"cannot be read ({exc})") from exc

