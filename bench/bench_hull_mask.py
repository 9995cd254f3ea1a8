"""Feathered hull mask of a face-sized hull on a 720p frame: mime_fast.ops.hull_mask against
OpenCV's fillConvexPoly (anti-aliased) + GaussianBlur feathering. Writes
bench/results/hull_mask-<device>.json.

    python bench/bench_hull_mask.py [--repeats 60] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import ops


def main() -> None:
    args = parse_args(__doc__, repeats=60)
    frame, points = face_frame()
    hull = ops.convex_hull(points)
    fk = 2 * int(round(hull.feather)) + 1

    def opencv() -> np.ndarray:
        mask = np.zeros(frame.shape[:2], np.uint8)
        cv2.fillConvexPoly(mask, cv2.convexHull(points).astype(np.int32), 255, cv2.LINE_AA)
        return cv2.GaussianBlur(mask, (fk, fk), 0)

    stats = compare(
        {
            "opencv_fill_and_blur": opencv,
            "mime_fast_auto_feather": lambda: ops.hull_mask(points, frame.shape, device=args.device),
            "mime_fast_hard_edge": lambda: ops.hull_mask(points, frame.shape, feather=0, device=args.device),
        },
        args.repeats,
    )
    ratio = stats["opencv_fill_and_blur"]["median_ms"] / stats["mime_fast_auto_feather"]["median_ms"]
    print(f"hull_mask: {ratio:.1f}x OpenCV fill + blur (feather {hull.feather:.1f} px)")
    print(f"wrote {save('hull_mask', {'frame': list(frame.shape), 'feather_px': hull.feather, 'ratio_vs_opencv': ratio, 'timings': stats}, args.device)}")


if __name__ == "__main__":
    main()
