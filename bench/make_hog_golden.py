"""Writes tests/data/hog_golden.npz: OpenCV 4.x's HOG people detections (cv2.HOGDescriptor through
:class:`mime_fast.detect.models.HogPersonDetector`) on fixed frames, so that tests/test_torch_hog.py
can compare :class:`mime_fast.detect.hog.TorchHogPersons` with OpenCV where OpenCV has no HOG (5.x).

Frames: the shared media clips (``../shared/media`` or ``$MIME_FAST_SHARED_MEDIA``), stored as clip
name + frame index (decoded with mime_fast.media, display order) plus a CRC-32 of the decoded RGB
so a different decode is reported; and two scikit-image photographs.  Stored per frame: the boxes
and scores of ``HogPersonDetector.detect`` (frame pixels) and the raw ``detectMultiScale`` rects and
weights on the 640 px gray image.

    python bench/make_hog_golden.py
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "hog_golden.npz"
CLIPS = {"crowd_1080p.mp4": (0, 40, 80, 100), "two_people_hug_1080p.mp4": (0, 20, 40, 60)}
SKIMAGE = ("astronaut", "rocket")


def media_dir() -> Path:
    return Path(os.environ.get("MIME_FAST_SHARED_MEDIA") or ROOT / ".." / "shared" / "media").resolve()


def decode(path: Path, wanted) -> list[np.ndarray]:
    from mime_fast.media import decode_frames

    return decode_frames(path, wanted)


def golden_frames(media: Path) -> list[tuple[str, np.ndarray]]:
    """``(source, RGB frame)`` in the golden file's order: ``clip:index`` then ``skimage:name``."""
    from skimage import data

    out = []
    for clip, idx in CLIPS.items():
        out += [(f"{clip}:{i}", f) for i, f in zip(idx, decode(media / clip, idx))]
    for name in SKIMAGE:
        out.append((f"skimage:{name}", np.ascontiguousarray(getattr(data, name)()[..., :3])))
    return out


def crc(frame: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(frame).tobytes())


def main() -> None:
    import cv2

    from mime_fast.detect.interface import _downscale
    from mime_fast.detect.models import HogPersonDetector

    det = HogPersonDetector()
    assert det.backend == "opencv", f"needs cv2.HOGDescriptor (OpenCV 4.x); this is OpenCV {cv2.__version__}"
    arrays: dict = {"sources": [], "crc": [], "n": [], "boxes": [], "scores": [], "n_raw": [], "rects": [], "weights": []}
    for src, frame in golden_frames(media_dir()):
        p = det.detect(frame)
        small, _ = _downscale(frame, det.max_size)
        gray = cv2.cvtColor(small, cv2.COLOR_RGB2GRAY)
        r, w = det._hog.detectMultiScale(gray, hitThreshold=0, winStride=(8, 8), padding=(8, 8), scale=1.05)
        r, w = np.asarray(r, np.int32).reshape(-1, 4), np.asarray(w, np.float64).reshape(-1)
        arrays["sources"].append(src)
        arrays["crc"].append(crc(frame))
        arrays["n"].append(len(p))
        arrays["boxes"].append(p.boxes)
        arrays["scores"].append(p.scores)
        arrays["n_raw"].append(len(r))
        arrays["rects"].append(r)
        arrays["weights"].append(w)
        print(f"{src}: {len(p)} persons")
    np.savez_compressed(
        OUT, sources=np.array(arrays["sources"]), crc=np.array(arrays["crc"], np.uint32), n=np.array(arrays["n"]),
        boxes=np.concatenate(arrays["boxes"]).astype(np.float32), scores=np.concatenate(arrays["scores"]).astype(np.float32),
        n_raw=np.array(arrays["n_raw"]), rects=np.concatenate(arrays["rects"]), weights=np.concatenate(arrays["weights"]),
        opencv=np.array(cv2.__version__))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
