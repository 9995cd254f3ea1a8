"""Masked face blur at three levels (k = 15, 35, 55) on a 720p frame with a face-sized hull:
mime_fast's hull_mask + fused blur_in_mask against the straightforward OpenCV pipeline
(fillConvexPoly + GaussianBlur feathering of the mask + full-frame GaussianBlur per level + float
alpha composite), in one run. Writes bench/results/blur_in_mask-<device>.json.

    python bench/bench_blur_in_mask.py [--repeats 60] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import ops

LEVELS = (15, 35, 55)


def opencv_pipeline(frame: np.ndarray, points: np.ndarray, levels: tuple[int, ...], feather_k: int) -> list[np.ndarray]:
    mask = np.zeros(frame.shape[:2], np.uint8)
    hull = cv2.convexHull(points).astype(np.int32)
    cv2.fillConvexPoly(mask, hull, 255, cv2.LINE_AA)
    alpha = cv2.GaussianBlur(mask, (feather_k, feather_k), 0).astype(np.float32)[..., None] / 255.0
    outs = []
    for k in levels:
        blurred = cv2.GaussianBlur(frame, (k, k), 0)
        outs.append((frame * (1.0 - alpha) + blurred * alpha + 0.5).astype(np.uint8))
    return outs


def main() -> None:
    args = parse_args(__doc__, repeats=60)

    frame, points = face_frame()
    hull = ops.convex_hull(points)
    feather_k = 2 * int(round(hull.feather)) + 1  # comparable softening for the OpenCV mask
    out_buffers = [np.empty_like(frame) for _ in LEVELS]

    def mime(levels: tuple[int, ...], out: list[np.ndarray] | None = None):
        def run():
            mask, bbox = ops.hull_mask(points, frame.shape, device=args.device)
            return ops.blur_in_mask(frame, mask, list(levels), bbox=bbox, out=out, device=args.device)

        return run

    # Correctness in the same run: fully masked pixels equal cv2.GaussianBlur exactly.
    mask, bbox = ops.hull_mask(points, frame.shape, device=args.device)
    inside = mask == 255
    exact = {}
    for k, out in zip(LEVELS, mime(LEVELS)()):
        exact[str(k)] = bool(np.array_equal(out[inside], cv2.GaussianBlur(frame, (k, k), 0)[inside]))

    contenders = {
        "opencv_all_levels": lambda: opencv_pipeline(frame, points, LEVELS, feather_k),
        "mime_fast_all_levels": mime(LEVELS),
        "mime_fast_all_levels_out": mime(LEVELS, out_buffers),
    }
    for k in LEVELS:
        contenders[f"opencv_k{k}"] = lambda k=k: opencv_pipeline(frame, points, (k,), feather_k)
        contenders[f"mime_fast_k{k}"] = mime((k,))
    stats = compare(contenders, args.repeats)
    ratio = {"all_levels": stats["opencv_all_levels"]["median_ms"] / stats["mime_fast_all_levels"]["median_ms"],
             "all_levels_preallocated_out": stats["opencv_all_levels"]["median_ms"]
             / stats["mime_fast_all_levels_out"]["median_ms"]}
    for k in LEVELS:
        ratio[f"k{k}"] = stats[f"opencv_k{k}"]["median_ms"] / stats[f"mime_fast_k{k}"]["median_ms"]
    payload = {
        "frame": list(frame.shape),
        "hull_box": list(bbox),
        "hull_area_px": hull.area,
        "feather_px": hull.feather,
        "levels": list(LEVELS),
        "bit_exact_inside_mask": exact,
        "target_speedup": 15.0,
        "speedup_vs_opencv": ratio,
        "timings": stats,
    }
    path = save("blur_in_mask", payload, args.device)
    for name, r in ratio.items():
        print(f"speedup {name:>28}: {r:6.1f}x")
    print(f"bit-exact inside mask: {exact}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
