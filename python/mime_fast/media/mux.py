"""PyAV's write loop, once: an output container that leaves no partial file (:func:`writing`) and a
frame encoded on a stream with every packet muxed, or the encoder flushed (:func:`encode_into`) --
what the sample clips' writers (:mod:`mime_fast.samples`) and the AAC track
(:class:`~mime_fast.media.audio.AacTrack`) each spelled out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import av_path

__all__ = ["encode_into", "writing"]


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Any]:
    """An output container for ``path``; on any error it is closed and the partial file removed."""
    import av

    c = av.open(av_path(path), "w")
    try:
        yield c
    except BaseException:
        c.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise
    c.close()


def encode_into(container: Any, stream: Any, frame: Any) -> None:
    """Encode ``frame`` (a PyAV frame; ``None``: flush the encoder, after the last frame) on ``stream``
    and mux every packet it gives into ``container``."""
    for packet in stream.encode(frame):
        container.mux(packet)
