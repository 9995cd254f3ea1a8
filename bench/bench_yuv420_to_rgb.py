"""YUV 4:2:0 -> RGB for the decoded frames: mime_fast.ops.yuv420_to_rgb against FFmpeg's swscale
(what PyAV's ``VideoFrame.to_ndarray(format="rgb24")`` uses) and cv2.cvtColor(COLOR_YUV2RGB_I420)
on a 720p frame; plus the face box alone (roi) and the scalar per-pixel body (the CUDA kernel's
code run serially on the CPU: what the vectorised fast path gains).  Writes
bench/results/yuv420_to_rgb-<device>.json.

    python bench/bench_yuv420_to_rgb.py [--repeats 200] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import _core, frames, ops


def main() -> None:
    args = parse_args(__doc__, repeats=200)
    frame, points = face_frame()
    _, bbox = ops.hull_mask(points, frame.shape[:2])
    h, w = frame.shape[:2]
    vf = frames.yuv420_frame(frame)  # a yuv420p av.VideoFrame (padded plane rows), like a decoded frame
    planes = frames.yuv420_planes(vf)
    y, u, v = (np.ascontiguousarray(p) for p in planes)
    i420 = np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(h * 3 // 2, w)
    out = np.empty((h, w, 3), np.uint8)
    cv_out = np.empty((h, w, 3), np.uint8)
    ref = ops.yuv420_to_rgb(*planes)
    assert np.array_equal(ref, _core.yuv420_to_rgb_reference(y, u, v))
    # Order matters: OpenCV's worker threads spin for a while after each call and would take a core
    # from a multi-threaded contender right behind them (measured: mime_fast 0.41 instead of 0.21 ms),
    # so the single-threaded swscale follows OpenCV.
    contenders = {
        "mime_fast_whole_frame": lambda: ops.yuv420_to_rgb(y, u, v, device=args.device),
        "mime_fast_whole_frame_into_out": lambda: ops.yuv420_to_rgb(y, u, v, out, device=args.device),
        "mime_fast_video_frame_planes": lambda: ops.yuv420_to_rgb(*planes, device=args.device),
        "mime_fast_face_box": lambda: ops.yuv420_to_rgb(*planes, roi=bbox, device=args.device),
        "opencv_cvtColor_I420": lambda: cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420),
        "opencv_cvtColor_I420_into_dst": lambda: cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420, dst=cv_out),
        "swscale_yuv420p_to_rgb24": lambda: vf.to_ndarray(format="rgb24"),
    }
    stats = compare(contenders, args.repeats)
    # the whole-frame contenders once more, each on its own (no neighbour's caches or threads)
    whole_frame = ("mime_fast_whole_frame", "opencv_cvtColor_I420", "swscale_yuv420p_to_rgb24")
    alone = {name: compare({name: contenders[name]}, args.repeats)[name] for name in whole_frame}
    # the per-pixel body, serially (slow: fewer repeats)
    stats.update(compare({"mime_fast_scalar_body": lambda: _core.yuv420_to_rgb_reference(y, u, v)},
                         max(10, args.repeats // 20)))
    med = {k: v["median_ms"] for k, v in stats.items()}
    whole = med["mime_fast_whole_frame"]
    med_alone = {k: v["median_ms"] for k, v in alone.items()}
    payload = {
        "frame": [h, w, 3],
        "face_box": list(bbox),
        "timings": stats,
        "timings_alone": alone,
        "speedup_vs_swscale": med["swscale_yuv420p_to_rgb24"] / whole,
        "speedup_vs_opencv": med["opencv_cvtColor_I420"] / whole,
        "speedup_vs_swscale_alone": med_alone["swscale_yuv420p_to_rgb24"] / med_alone["mime_fast_whole_frame"],
        "speedup_vs_opencv_alone": med_alone["opencv_cvtColor_I420"] / med_alone["mime_fast_whole_frame"],
        "speedup_vs_opencv_into_dst": med["opencv_cvtColor_I420_into_dst"] / med["mime_fast_whole_frame_into_out"],
        "face_box_vs_whole_frame": med["mime_fast_video_frame_planes"] / med["mime_fast_face_box"],
        "vectorised_vs_scalar_body": med["mime_fast_scalar_body"] / whole,
        "max_abs_diff_vs_opencv": int(np.abs(ref.astype(int) - cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420)).max()),
        "max_abs_diff_vs_swscale": int(np.abs(ref.astype(int) - vf.to_ndarray(format="rgb24")).max()),
        "mean_abs_diff_vs_swscale": float(np.abs(ref.astype(int) - vf.to_ndarray(format="rgb24")).mean()),
    }
    print(f"whole frame {whole:.3f} ms: {payload['speedup_vs_swscale']:.2f}x swscale, "
          f"{payload['speedup_vs_opencv']:.2f}x OpenCV ({payload['speedup_vs_opencv_into_dst']:.2f}x into a given "
          f"array; each on its own: {payload['speedup_vs_swscale_alone']:.2f}x, "
          f"{payload['speedup_vs_opencv_alone']:.2f}x); face box {payload['face_box_vs_whole_frame']:.1f}x faster "
          f"than the whole frame; {payload['vectorised_vs_scalar_body']:.0f}x the scalar body")
    print(f"wrote {save('yuv420_to_rgb', payload, args.device)}")


if __name__ == "__main__":
    main()
