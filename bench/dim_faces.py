"""Can a dim face be read?  SFace cosines of faces lit, darkened and darkened then contrast-stretched,
against the subject's lit views (issue 50, item 4: dim faces in a shot he is not in).

His faces: the face of the hug's and of the crowd's subject (as :func:`mime_fast.subject.detect_subject`
selects him, its ground truth as ``bench/privacy_variants.py`` takes it); other people: every other
face of the crowd, of the hug (the other man) and of the arm wrestlers (720p).  Each sampled frame
(every ``--every`` frames, 1280x720) is detected lit (RetinaFace), and each face >= 24 px embedded
from the lit frame, from the frame graded (``dark``: :func:`edited_variants.darken`, the night grade
of ``cut_mix_dark``; ``dim``: :func:`edited_variants.dim`, x 0.38 and sensor noise, the stage light
of the ``stage`` variants, luma 40 - 70) and
from the graded frame with the face's region contrast-stretched before the embedder reads it
(``stretch``: the crop normalised to the mean / std of a lit face; ``clahe``: CLAHE on the crop's luma).
Cosines are each face's best against his lit views at least 15 frames away (the same clip: his own
faces; the strangers against their clip's subject, the arm wrestlers against the hug's).

    python bench/dim_faces.py [--every 6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import media_dir, save  # noqa: E402
from edited_variants import Clip, darken, dim  # noqa: E402

from mime_fast.detect import load_offline_stack  # noqa: E402
from mime_fast.detect.interface import Faces  # noqa: E402
from mime_fast.subject.appearance import view_crop  # noqa: E402
from mime_fast.subject.face_tracks import MIN_CONTRAST, detect_at, face_contrast  # noqa: E402
from mime_fast.subject.geometry import _size  # noqa: E402

#: a lit face's contrast / luma (face_contrast's measure; the real clips at 720p: 26 - 44)
TARGET_STD, TARGET_MEAN = 36.0, 128.0


def stretch(crop: np.ndarray, face: Faces, how: str) -> np.ndarray:
    """A copy of ``crop`` (the region the embedder reads) with its contrast stretched, measured over
    the face's centre (as face_contrast)."""
    x0, y0, x1, y1 = face.boxes[0]
    w, h = x1 - x0, y1 - y0
    a0, b0, a1, b1 = int(max(0, x0 + .1 * w)), int(max(0, y0 + .1 * h)), int(x1 - .1 * w), int(y1 - .1 * h)
    c = crop.astype(np.float32)
    if how == "stretch":
        core = c[b0:b1, a0:a1]
        m, s = core.mean(), max(float(core[..., 1].std()), 1.0)
        return np.clip((c - m) * (TARGET_STD / s) + TARGET_MEAN, 0, 255).astype(np.uint8)
    ycc = cv2.cvtColor(crop, cv2.COLOR_RGB2YCrCb)
    ycc[..., 0] = cv2.createCLAHE(clipLimit=3.0, tileGridSize=(4, 4)).apply(ycc[..., 0])
    return cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)


def luma(frame, box) -> float:
    x0, y0, x1, y1 = (int(v) for v in box)
    g = frame[max(0, y0):y1, max(0, x0):x1].astype(np.float32)
    return float((0.299 * g[..., 0] + 0.587 * g[..., 1] + 0.114 * g[..., 2]).mean())


def truth_boxes(media: Path, name: str, scale: float) -> list:
    from privacy_variants import ground_truth

    return [None if b is None else np.asarray(b) * scale for b in ground_truth(media, name)]


def faces_of(stack, clip: str, imgs, truth, every: int, grades) -> list[dict]:
    out = []
    for k in range(0, len(imgs), every):
        lit = imgs[k]
        faces = detect_at(stack.detector, lit, 1280)
        graded = {g: fn(lit) for g, fn in grades.items()}
        for i in range(len(faces)):
            b = faces.boxes[i]
            if _size(b) < 24:
                continue
            his = False
            if truth is not None and truth[k] is not None:
                t = truth[k]
                cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
                his = bool(t[0] <= cx <= t[2] and t[1] <= cy <= t[3])
            crop, face = view_crop(lit, faces, i)
            row = {"clip": clip, "frame": k, "size": round(float(_size(b)), 1), "his": his,
                   "lit": stack.embedder.embed(crop, face)[0], "contrast_lit": face_contrast(lit, b)}
            for g, img in graded.items():
                crop, face = view_crop(img, faces, i)
                row[g] = stack.embedder.embed(crop, face)[0]
                row[f"contrast_{g}"] = face_contrast(img, b)
                row[f"luma_{g}"] = luma(img, b)
                for how in ("stretch", "clahe"):
                    s = stretch(crop, face, how)
                    row[f"{g}_{how}"] = stack.embedder.embed(s, face)[0]
                    row[f"contrast_{g}_{how}"] = face_contrast(s, face.boxes[0])
            out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    stack = load_offline_stack(persons=False)
    emb = stack.embedder
    grades = {"dark": darken, "dim": dim}
    rows = []
    for name in ("hug", "crowd"):
        c = Clip.load(name, args.media).resize(1280, 720)
        truth = truth_boxes(args.media, name, 1280 / 1920)
        rows += faces_of(stack, name, c.imgs, truth, args.every, grades)
    arm = Clip.load("arm", args.media).resize(956, 720, cv2.INTER_CUBIC)
    rows += faces_of(stack, "arm", arm.imgs, None, 2 * args.every, grades)
    views = {n: [(r["frame"], r["lit"]) for r in rows if r["clip"] == n and r["his"] and r["contrast_lit"] >= MIN_CONTRAST]
             for n in ("hug", "crowd")}

    def best(r, key):
        ref = views["hug" if r["clip"] == "arm" else r["clip"]]
        v = [e for f, e in ref if abs(f - r["frame"]) >= 15 or r["clip"] == "arm"]
        return float(max(float(r[key] @ e) for e in v)) if v else None

    keys = ["lit"] + [f"{g}{h}" for g in grades for h in ("", "_stretch", "_clahe")]
    table = []
    for r in rows:
        t = {k: r[k] for k in ("clip", "frame", "size", "his")}
        t.update({k: round(float(v), 2) for k, v in r.items() if k.startswith(("contrast", "luma"))})
        t.update({f"cos_{k}": None if best(r, k) is None else round(best(r, k), 3) for k in keys})
        table.append(t)

    def summary(sel):
        s = {}
        for k in keys:
            v = np.array([t[f"cos_{k}"] for t in sel if t[f"cos_{k}"] is not None])
            if len(v):
                s[k] = {"n": int(len(v)), "min": round(float(v.min()), 3), "p10": round(float(np.percentile(v, 10)), 3),
                        "median": round(float(np.median(v)), 3), "p90": round(float(np.percentile(v, 90)), 3),
                        "max": round(float(v.max()), 3), "above_min_cos": int((v >= emb.min_cos).sum())}
        for g in grades:
            c = np.array([t[f"contrast_{g}"] for t in sel])
            lu = np.array([t[f"luma_{g}"] for t in sel])
            s[f"contrast_{g}"] = [round(float(np.percentile(c, p)), 1) for p in (10, 50, 90)]
            s[f"luma_{g}"] = [round(float(np.percentile(lu, p)), 1) for p in (10, 50, 90)]
        return s

    def by_contrast(his):
        """Per grade and bin of the graded face's contrast: the cosines raw and stretched (min, max, n)."""
        bins = [0, 5, 8, 12, MIN_CONTRAST, 1e9]
        s = {}
        for g in grades:
            for lo, hi in zip(bins, bins[1:]):
                sel = [t for t in table if t["his"] == his and lo <= t[f"contrast_{g}"] < hi and t[f"cos_{g}"] is not None]
                if sel:
                    s[f"{g} {lo:g}-{hi:g}"] = {
                        k: [round(min(t[f"cos_{g}{k}"] for t in sel), 3), round(max(t[f"cos_{g}{k}"] for t in sel), 3), len(sel)]
                        for k in ("", "_stretch", "_clahe")}
        return s

    out = {"min_cos": emb.min_cos, "strong_cos": emb.strong_cos, "every": args.every,
           "his": summary([t for t in table if t["his"]]),
           "his_hug": summary([t for t in table if t["his"] and t["clip"] == "hug"]),
           "his_crowd": summary([t for t in table if t["his"] and t["clip"] == "crowd"]),
           "others": summary([t for t in table if not t["his"]]),
           "others_40_120px": summary([t for t in table if not t["his"] and 40 <= t["size"] <= 120]),
           "his_by_contrast": by_contrast(True), "others_by_contrast": by_contrast(False),
           "stretched_contrast": {k: [round(float(np.percentile([t[f"contrast_{k}"] for t in table], p)), 1) for p in (10, 50, 90)]
                                  for k in ("dark_stretch", "dark_clahe", "dim_stretch", "dim_clahe")},
           "faces": table}
    for k in ("his_by_contrast", "others_by_contrast", "stretched_contrast"):
        print(k, out[k])
    for k in ("his", "his_hug", "his_crowd", "others", "others_40_120px"):
        print(k, {kk: (vv if not isinstance(vv, dict) else (vv["min"], vv["median"], vv["max"], vv["above_min_cos"], vv["n"]))
                  for kk, vv in out[k].items()})
    if not args.no_save:
        print(save("dim_faces", out))


if __name__ == "__main__":
    main()
