"""OpenCV-exact Gaussian blur: mime_fast.ops.gaussian_blur against cv2.GaussianBlur on a 720p
frame (whole frame, and a face-sized region of interest for mime_fast), per kernel size.
Writes bench/results/gaussian_blur-<device>.json.

    python bench/bench_gaussian_blur.py [--repeats 40] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import ops


def main() -> None:
    args = parse_args(__doc__, repeats=40)
    frame, _ = face_frame()
    roi = (515, 190, 250, 320)
    results = {}
    for k in (15, 35, 55):
        assert np.array_equal(ops.gaussian_blur(frame, k, device=args.device), cv2.GaussianBlur(frame, (k, k), 0))
        stats = compare(
            {
                "opencv_full_frame": lambda k=k: cv2.GaussianBlur(frame, (k, k), 0),
                "mime_fast_full_frame": lambda k=k: ops.gaussian_blur(frame, k, device=args.device),
                "mime_fast_face_roi": lambda k=k: ops.gaussian_blur(frame, k, roi=roi, device=args.device),
            },
            args.repeats,
        )
        results[str(k)] = {
            "timings": stats,
            "full_frame_ratio_vs_opencv": stats["opencv_full_frame"]["median_ms"] / stats["mime_fast_full_frame"]["median_ms"],
            "roi_ratio_vs_opencv_full_frame": stats["opencv_full_frame"]["median_ms"] / stats["mime_fast_face_roi"]["median_ms"],
        }
        print(f"k={k}: full frame {results[str(k)]['full_frame_ratio_vs_opencv']:.2f}x of OpenCV, "
              f"face roi {results[str(k)]['roi_ratio_vs_opencv_full_frame']:.1f}x")
    print(f"wrote {save('gaussian_blur', {'frame': list(frame.shape), 'roi': list(roi), 'bit_exact': True, 'levels': results}, args.device)}")


if __name__ == "__main__":
    main()
