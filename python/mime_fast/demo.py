"""The main job on embedded defaults, offline: make two sample clips from a real face photograph
that ships in scikit-image (the astronaut), build all seven MIME subsets of each as a corpus run,
and write the manifest and a preview.

    mime-fast demo [--out DIR] [--seconds S]        (or: python -m mime_fast.demo)

Writes DIR/sources/ (clips, landmarks, clips.jsonl), DIR/<SUBSET>/<clip>.mp4, DIR/audio/<clip>.wav,
DIR/manifest.jsonl + .parquet and DIR/preview.png (middle frame of FM, FDM, FSM and VMM, each
labelled with its subset and blur kernel).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .corpus import discover, run_corpus
from .manifest import compact, read_rows
from .preview import draw_text, write_png
from .samples import make_clip
from .spec import ENCODED_SUBSETS

#: The subsets side by side in DIR/preview.png: the encoded ones (the others are their videos
#: without audio).
PREVIEW_SUBSETS = tuple(c.value for c in ENCODED_SUBSETS)


def preview_labels(kernels: dict[str, int | None]) -> list[str]:
    """The column labels of the preview: the subset, and its blur kernel when it has one
    (``kernels``: subset -> the manifest's kernel), e.g. ``["FM", "FDM k=15", "FSM k=55", "VMM"]``."""
    return [f"{c} k={kernels[c]}" if kernels.get(c) else c for c in PREVIEW_SUBSETS]


def labelled_row(tiles: list[np.ndarray], labels: list[str], header: int = 24) -> np.ndarray:
    """``tiles`` side by side under a dark strip of ``header`` pixels holding each tile's label."""
    row = np.concatenate(tiles, axis=1)
    img = np.full((header + row.shape[0], row.shape[1], 3), 24, np.uint8)
    img[header:] = row
    x = 0
    for tile, label in zip(tiles, labels):
        draw_text(img, label, x + 6, 5)
        x += tile.shape[1]
    return img


def middle_frame(path: Path) -> np.ndarray:
    import av
    from .media import av_path

    with av.open(av_path(path)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    return frames[len(frames) // 2]


def run(out: Path, seconds: float = 3.0) -> int:
    src_dir = out / "sources"
    src_dir.mkdir(parents=True, exist_ok=True)
    clips = [
        (make_clip(src_dir / "astronaut_walk.mp4", duration=seconds, fps=25, size=(1280, 720), seed=1), "Happy"),
        (make_clip(src_dir / "astronaut_ntsc.mp4", duration=seconds, fps="30000/1001", size=(1280, 720), seed=2),
         "Neutral"),
    ]
    listing = src_dir / "clips.jsonl"
    listing.write_text("".join(
        json.dumps({"path": c.path.name, "clip_id": c.path.stem, "emotion": label, "dataset": "demo"}) + "\n"
        for c, label in clips))
    print(f"sample clips (720p, 25 and 29.97 fps, 48 kHz stereo audio, landmarks beside them): {src_dir}")
    summary = run_corpus(discover(listing), out, progress=lambda line: print("  " + line))
    rows = [r for r in compact(read_rows(out)) if r["clip_id"] == "astronaut_walk" and r["status"] == "ok"]
    print(f"built {len(summary.done)} clips in {summary.elapsed_s:.1f} s; first clip's outputs:")
    for r in rows:
        audio = "16 kHz audio" if r["has_audio"] else "no audio"
        frames = f"{r['frames']} frames @ 30 fps" if r["frames"] is not None else ""
        print(f"  {r['subset']:<5} {frames:<20} {r['duration_s']:.2f} s  {audio:<12} {out / r['path']}")
    print(f"manifest: {out / 'manifest.jsonl'} and {out / 'manifest.parquet'}")
    labels = preview_labels({r["subset"]: r["kernel"] for r in rows})
    tiles = [middle_frame(out / code / "astronaut_walk.mp4")[::2, ::2] for code in PREVIEW_SUBSETS]
    write_png(out / "preview.png", labelled_row(tiles, labels))
    print(f"preview ({' | '.join(labels)}): {out / 'preview.png'}")
    return 0 if summary.ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mime-fast demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("mime_fast_out"), help="output folder (default: mime_fast_out)")
    ap.add_argument("--seconds", type=float, default=3.0, help="sample clip length (default 3)")
    args = ap.parse_args(argv)
    return run(args.out, args.seconds)


if __name__ == "__main__":
    raise SystemExit(main())
