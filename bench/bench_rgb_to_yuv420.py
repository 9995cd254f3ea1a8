"""RGB -> YUV 4:2:0 for the encoders: mime_fast.ops.rgb_to_yuv420 against FFmpeg's swscale (what
PyAV's ``reformat`` and the encoders use by default) and cv2.cvtColor(COLOR_RGB2YUV_I420) on a
720p frame; plus the pipeline's patch path (copy of the source's planes + conversion of the face
box only).  Writes bench/results/rgb_to_yuv420-<device>.json.

    python bench/bench_rgb_to_yuv420.py [--repeats 60] [--device cpu|cuda]
"""

from __future__ import annotations

import av
import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import frames, ops


def main() -> None:
    args = parse_args(__doc__, repeats=60)
    frame, points = face_frame()
    mask, bbox = ops.hull_mask(points, frame.shape[:2])
    blurred = ops.blur_in_mask(frame, mask, 55, bbox=bbox)[0]
    h, w = frame.shape[:2]
    x, y, bw, bh = bbox  # the pipeline's blurred region: the box grown by the kernel's reach
    x0, y0, x1, y1 = max(0, x - 28) // 2 * 2, max(0, y - 28) // 2 * 2, min(w, x + bw + 28), min(h, y + bh + 28)
    region, region_mask = (np.ascontiguousarray(a[y0:y1, x0:x1]) for a in (blurred, mask))
    out = tuple(np.empty(s, np.uint8) for s in (ops.yuv420_shapes(h, w)[0],) + (ops.yuv420_shapes(h, w)[1],) * 2)
    base = frames.yuv420_frame(frame)
    stats = compare(
        {
            "swscale_rgb24_to_yuv420p": lambda: av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format="yuv420p"),
            "opencv_cvtColor_I420": lambda: cv2.cvtColor(frame, cv2.COLOR_RGB2YUV_I420),
            "mime_fast_whole_frame": lambda: ops.rgb_to_yuv420(frame, out, device=args.device),
            "mime_fast_video_frame": lambda: frames.yuv420_frame(frame),
            "mime_fast_patch_face_box": lambda: frames.patched_frame(base, region, (x0, y0), (x - x0, y - y0, bw, bh),
                                                                     region_mask),
        },
        args.repeats,
    )
    med = {k: v["median_ms"] for k, v in stats.items()}
    payload = {
        "frame": [h, w, 3],
        "face_box": list(bbox),
        "timings": stats,
        "speedup_vs_swscale": med["swscale_rgb24_to_yuv420p"] / med["mime_fast_whole_frame"],
        "speedup_vs_opencv": med["opencv_cvtColor_I420"] / med["mime_fast_whole_frame"],
        "patch_vs_whole_video_frame": med["mime_fast_video_frame"] / med["mime_fast_patch_face_box"],
    }
    print(f"whole frame: {payload['speedup_vs_swscale']:.1f}x swscale, {payload['speedup_vs_opencv']:.1f}x OpenCV; "
          f"face-box patch {payload['patch_vs_whole_video_frame']:.1f}x faster than a whole conversion")
    print(f"wrote {save('rgb_to_yuv420', payload, args.device)}")


if __name__ == "__main__":
    main()
