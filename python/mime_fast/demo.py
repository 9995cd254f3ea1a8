"""The main job on embedded defaults, offline: make a sample clip from a real face photograph that
ships in scikit-image (the astronaut), build all seven MIME subsets of it, and write a preview.

    mime-fast demo [--out DIR] [--seconds S]        (or: python -m mime_fast.demo)

Writes DIR/sources/<clip>.mp4 (+ .npz ground truth), DIR/<SUBSET>/<clip>.mp4, DIR/audio/<clip>.wav
and DIR/preview.png (the middle frame of FM, FDM, FSM and VMM side by side).
"""

from __future__ import annotations

import argparse
import struct
import zlib
from pathlib import Path

import numpy as np


def write_png(path: Path, img: np.ndarray) -> None:
    """Minimal PNG writer (RGB or gray uint8), written to a temporary name and renamed."""
    h = img.shape[0]
    color = 2 if img.ndim == 3 else 0
    raw = b"".join(b"\x00" + np.ascontiguousarray(img[y]).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", img.shape[1], h, 8, color, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(png)
    tmp.replace(path)


def middle_frame(path: Path) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    return frames[len(frames) // 2]


def run(out: Path, seconds: float = 3.0) -> int:
    try:
        from .samples import make_clip
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SystemExit(f"the demo needs scikit-image for its sample face: pip install 'mime_fast[demo]' ({exc})")
    from .subsets import ALL_SUBSETS, build_subsets

    src_dir = out / "sources"
    src_dir.mkdir(parents=True, exist_ok=True)
    clip = make_clip(src_dir / "astronaut_walk.mp4", duration=seconds, fps=25, size=(1280, 720), audio=True)
    print(f"sample clip: {clip.path} ({clip.frames} frames at 25 fps, 48 kHz stereo audio)")
    result = build_subsets(clip.path, out, landmarks=clip.landmarks)
    print(f"built {len(result.outputs)} subsets in {result.elapsed_s:.1f} s "
          f"({result.source_frames / max(result.elapsed_s, 1e-9):.0f} source frames/s), "
          f"FSM kernel {result.fsm_kernel}:")
    for code in ALL_SUBSETS:
        st = result.status[code]
        audio = "16 kHz audio" if st.has_audio else "no audio"
        print(f"  {code:<5} {st.status:<7} {st.frames} frames @ 30 fps, {st.duration:.2f} s, {audio:<12} {st.path}")
    print(f"  audio {result.audio}")
    tiles = [middle_frame(result.outputs[c]) for c in ("FM", "FDM", "FSM", "VMM")]
    preview = np.concatenate([t[::2, ::2] for t in tiles], axis=1)
    write_png(out / "preview.png", preview)
    print(f"preview (FM | FDM | FSM | VMM): {out / 'preview.png'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mime-fast demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("mime_fast_out"), help="output folder (default: mime_fast_out)")
    ap.add_argument("--seconds", type=float, default=3.0, help="sample clip length (default 3)")
    args = ap.parse_args(argv)
    return run(args.out, args.seconds)


if __name__ == "__main__":
    raise SystemExit(main())
