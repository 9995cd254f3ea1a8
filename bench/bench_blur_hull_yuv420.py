"""The face subsets' per-frame step on a decoded 720p (and 1080p) frame with a face-sized hull,
FDM's and FSM's levels (k = 15 and 55): the fused blur_hull_yuv420 against the same step done
with the separate operators as build_subsets did before it (hull_mask on the frame, the region
converted to RGB, blur_in_mask, each level patched back with rgb_to_yuv420), on the chosen
device, and the fused step on the CPU as the reference, in one run. Checks that every contender
gives the same samples. Writes bench/results/blur_hull_yuv420-<device>.json.

    python bench/bench_blur_hull_yuv420.py [--repeats 60] [--device cpu|cuda]
"""

from __future__ import annotations

import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import ops

LEVELS = [15, 55]


def planes_of(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, w = rgb.shape[:2]
    (lh, lw), (ch, cw) = ops.yuv420_shapes(h, w)
    planes = (np.empty((lh, lw), np.uint8), np.empty((ch, cw), np.uint8), np.empty((ch, cw), np.uint8))
    ops.rgb_to_yuv420(rgb, planes)
    return planes


def separate(planes, points, outs, device):
    """The operators one after the other over the mask's region (the pre-fused pipeline)."""
    h, w = planes[0].shape
    mask, (x, y, bw, bh) = ops.hull_mask(points, (h, w), device=device)
    r = max(LEVELS) // 2 + 1
    x0, y0 = max(0, x - r) // 2 * 2, max(0, y - r) // 2 * 2
    x1, y1 = min(w, x + bw + r), min(h, y + bh + r)
    x1, y1 = min(w, x1 + x1 % 2), min(h, y1 + y1 % 2)
    src = ops.yuv420_to_rgb(*planes, roi=(x0, y0, x1 - x0, y1 - y0), device=device)
    m = np.ascontiguousarray(mask[y0:y1, x0:x1])
    roi = (x - x0, y - y0, bw, bh)
    for level, o in zip(ops.blur_in_mask(src, m, LEVELS, bbox=roi, device=device), outs):
        sub = (o[0][y0:y1, x0:x1], o[1][y0 // 2 : (y1 + 1) // 2, x0 // 2 : (x1 + 1) // 2],
               o[2][y0 // 2 : (y1 + 1) // 2, x0 // 2 : (x1 + 1) // 2])
        ops.rgb_to_yuv420(level, sub, roi=roi, mask=m, device=device)


def main() -> None:
    args = parse_args(__doc__, repeats=60)
    payload: dict = {"levels": LEVELS, "sizes": {}}
    for h, w in [(720, 1280), (1080, 1920)]:
        rgb, points = face_frame(h, w)
        planes = planes_of(rgb)

        def fresh():
            return [tuple(p.copy() for p in planes) for _ in LEVELS]

        outs = {name: fresh() for name in ("fused_cpu", "fused", "separate")}

        def run(name):
            if name == "fused_cpu":
                return lambda: ops.blur_hull_yuv420(planes, points, outs[name], LEVELS)
            if name == "fused":
                return lambda: ops.blur_hull_yuv420(planes, points, outs[name], LEVELS, device=args.device)
            return lambda: separate(planes, points, outs[name], args.device)

        for name in outs:  # correctness in the same run
            run(name)()
        same = all(np.array_equal(a, b) for name in ("fused", "separate")
                   for lv_a, lv_b in zip(outs[name], outs["fused_cpu"]) for a, b in zip(lv_a, lv_b))
        contenders = {f"{name}_{args.device if name != 'fused_cpu' else 'cpu'}": run(name) for name in outs}
        stats = compare(contenders, args.repeats)
        fused = stats[f"fused_{args.device}"]["median_ms"]
        payload["sizes"][f"{h}p"] = {
            "frame": [h, w],
            "mask_box": list(ops.hull_mask(points, (h, w))[1]),
            "identical_samples": bool(same),
            "fused_frames_per_s": 1000.0 / fused,
            "speedup_fused_vs_separate": stats[f"separate_{args.device}"]["median_ms"] / fused,
            "speedup_vs_fused_cpu": stats["fused_cpu_cpu"]["median_ms"] / fused,
            "timings": stats,
        }
    path = save("blur_hull_yuv420", payload, args.device)
    for size, r in payload["sizes"].items():
        print(f"{size}: fused {r['fused_frames_per_s']:.0f} frames/s on {args.device}, "
              f"{r['speedup_fused_vs_separate']:.2f}x the separate operators, "
              f"{r['speedup_vs_fused_cpu']:.2f}x the fused CPU step, identical={r['identical_samples']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
