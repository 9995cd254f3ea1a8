"""Before a run with ``transport="frames"``: does the degradation survive the pictures sent?

FDM's light blur can vanish once a frame is scaled down to ``frame_size`` and JPEG-compressed: the
model would then see FM twice. :func:`check_frames_keep_blur` compares the face detail of FM and
FDM on the JPEGs actually sent -- the same frames, encoded as :func:`mime_fast.coe.client.encode_jpeg`
encodes them -- inside the face region, found where FM and FDM differ at full resolution (where the
blur was applied). Face detail is the variance of the Laplacian there; the share of it the blur
removes is measured at full resolution (``removed_source``) and on the pictures sent
(``removed_sent``). The degradation is kept when the pictures sent keep at least
:data:`KEEP_SHARE` of the removal the source shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..coe.client import MediaOptions, encode_jpeg, sample_frames

__all__ = ["DIFF_LEVEL", "KEEP_SHARE", "check_frames_keep_blur", "laplacian_variance"]

#: Grey levels by which FDM must differ from FM for a pixel to be in the blurred face region.
DIFF_LEVEL = 8
#: The least share of the source's loss of face detail the pictures sent must keep.
KEEP_SHARE = 0.5


def laplacian_variance(gray: np.ndarray, mask: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of ``gray`` over the interior pixels of ``mask``."""
    g = gray.astype(np.float64)
    lap = 4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:]
    inside = lap[mask[1:-1, 1:-1]]
    return float(inside.var()) if inside.size else 0.0


def _gray_jpeg(data: bytes) -> np.ndarray:
    import av

    dec = av.CodecContext.create("mjpeg", "r")
    (frame,) = dec.decode(av.Packet(data))
    return frame.to_ndarray(format="gray")


def _nearest(mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    rows = (np.arange(shape[0]) * mask.shape[0] // shape[0]).clip(0, mask.shape[0] - 1)
    cols = (np.arange(shape[1]) * mask.shape[1] // shape[1]).clip(0, mask.shape[1] - 1)
    return mask[np.ix_(rows, cols)]


def check_frames_keep_blur(corpus: Path, pairs: list[tuple[dict[str, Any], dict[str, Any]]],
                           opts: MediaOptions) -> dict[str, Any]:
    """Face detail of FM and FDM on the frames ``opts`` sends, for the (FM row, FDM row) ``pairs``:
    ``{"frames", "removed_source", "removed_sent", "kept", "warning"}`` (``kept`` ``None`` where no
    frame has a blurred region to measure)."""
    sums = np.zeros(4)  # FM source, FDM source, FM sent, FDM sent
    frames = 0
    for fm, fdm in pairs:
        clear = sample_frames(Path(corpus) / fm["path"], opts.frames, fm.get("frames"))
        blurred = sample_frames(Path(corpus) / fdm["path"], opts.frames, fdm.get("frames"))
        for a, b in zip(clear, blurred):
            ga, gb = a.to_ndarray(format="gray"), b.to_ndarray(format="gray")
            mask = np.abs(ga.astype(np.int16) - gb.astype(np.int16)) > DIFF_LEVEL
            if mask.sum() < 16:
                continue
            sa, sb = (_gray_jpeg(encode_jpeg(f, opts.frame_size, opts.quality)) for f in (a, b))
            small = _nearest(mask, sa.shape)
            sums += [laplacian_variance(ga, mask), laplacian_variance(gb, mask),
                     laplacian_variance(sa, small), laplacian_variance(sb, small)]
            frames += 1
    if not frames or sums[0] <= 0 or sums[2] <= 0:
        return {"frames": frames, "removed_source": None, "removed_sent": None, "kept": None,
                "warning": None if pairs else "no clip has both FM and FDM: the transport's blur was not checked"}
    removed_source, removed_sent = 1 - sums[1] / sums[0], 1 - sums[3] / sums[2]
    kept = bool(removed_sent >= KEEP_SHARE * removed_source)
    warning = None if kept else (
        f"the frames sent ({opts.frame_size} px, qscale {opts.quality}) lose FDM's blur: the face detail FDM "
        f"removes is {removed_source:.0%} at full size but {removed_sent:.0%} on the JPEGs sent, so FM and FDM "
        "look alike to the model (send larger frames, a better --frame-quality, or --transport video)")
    return {"frames": frames, "removed_source": float(removed_source), "removed_sent": float(removed_sent),
            "kept": kept, "warning": warning}
