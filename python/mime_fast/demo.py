"""Demo on embedded defaults: blur the face of scikit-image's astronaut photograph at the MIME
kernel sizes and write the results as PNG files.

    python -m mime_fast.demo [--out DIR]
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path
import struct

import numpy as np

from . import ops

# Landmark-like points around the astronaut's face (x, y in pixels of the 512 x 512 photograph).
_FACE_CENTRE = (250.0, 125.0)
_FACE_RADII = (62.0, 80.0)


def _face_points() -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, 106, endpoint=False)
    cx, cy = _FACE_CENTRE
    rx, ry = _FACE_RADII
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t)], 1).astype(np.float32)


def write_png(path: Path, img: np.ndarray) -> None:
    """Minimal PNG writer (RGB or gray uint8), written to a temporary name and renamed."""
    h, w = img.shape[:2]
    color = 2 if img.ndim == 3 else 0
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(png)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("mime_fast_out"), help="output folder (default: mime_fast_out)")
    args = ap.parse_args(argv)
    try:
        from skimage import data
    except ImportError:
        ap.error("the demo needs scikit-image for its sample photograph: pip install scikit-image")
    frame = np.ascontiguousarray(data.astronaut())
    mask, bbox = ops.hull_mask(_face_points(), frame.shape)
    levels = [15, 35, 55]
    outs = ops.blur_in_mask(frame, mask, levels, bbox=bbox)
    args.out.mkdir(parents=True, exist_ok=True)
    write_png(args.out / "original.png", frame)
    write_png(args.out / "mask.png", mask)
    for k, out in zip(levels, outs):
        write_png(args.out / f"blur_k{k}.png", out)
    print(f"face mask box {bbox}; wrote original.png, mask.png, blur_k15/35/55.png to {args.out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
