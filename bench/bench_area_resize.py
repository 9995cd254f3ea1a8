"""Area downscale (the detector's input and the shot thumbnails): mime_fast.ops.area_resize
against cv2.resize(..., INTER_AREA) (the op is OpenCV 4.x's general area path, bit for bit) at the
sizes the tracker asks for: the last step to the detector's 384 px from 1080p (480x270, after
two halvings) and from 720p (640x360, after one), straight from 720p, the person detector's 640 px
from 1080p (960x540), and the shot thumbnail.  Also the whole detector downscale of a 1080p and a
720p frame (detect.interface._downscale: OpenCV's halvings, then the op) against OpenCV alone.
With --device cuda: the op with a host image (upload, kernel, download) and on an image already in
a CUDA tensor.  Writes bench/results/area_resize-<device>.json.

    python bench/bench_area_resize.py [--repeats 200] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import _core, ops
from mime_fast.detect.interface import _downscale

CASES = {  # name: (source w, h), (destination w, h)
    "1080p_last_step_480x270_to_384": ((480, 270), (384, 216)),
    "720p_last_step_640x360_to_384": ((640, 360), (384, 216)),
    "720p_straight_to_384": ((1280, 720), (384, 216)),
    "persons_960x540_to_640": ((960, 540), (640, 360)),
    "shot_thumbnail_275x155_to_64": ((275, 155), (64, 36)),
}


def opencv_downscale(frame: np.ndarray, max_size: int) -> np.ndarray:
    """detect.interface._downscale as it was: every step by OpenCV."""
    H, W = frame.shape[:2]
    s = max_size / max(H, W)
    tw, th = max(1, round(W * s)), max(1, round(H * s))
    img = frame
    while img.shape[1] // 2 >= tw and img.shape[0] // 2 >= th:
        h2, w2 = img.shape[0] // 2, img.shape[1] // 2
        img = cv2.resize(img[: 2 * h2, : 2 * w2], (w2, h2), interpolation=cv2.INTER_AREA)
    return img if img.shape[:2] == (th, tw) else cv2.resize(img, (tw, th), interpolation=cv2.INTER_AREA)


def main() -> None:
    args = parse_args(__doc__, repeats=200)
    frame, _ = face_frame()
    contenders, exact, pairs = {}, {}, []
    torch = None
    if args.device == "cuda":
        try:
            import torch
        except ImportError:
            torch = None
    for name, (src_size, dst) in CASES.items():
        img = np.ascontiguousarray(cv2.resize(frame, src_size, interpolation=cv2.INTER_AREA))
        ref = cv2.resize(img, dst, interpolation=cv2.INTER_AREA)
        cpu = ops.area_resize(img, *dst)
        exact[name] = bool(np.array_equal(cpu, ref))  # (OpenCV 4.x's bytes; OpenCV 5's may differ)
        if args.device == "cpu":
            contenders[f"mime_fast_{name}"] = lambda img=img, dst=dst: ops.area_resize(img, *dst)
        else:
            contenders[f"mime_fast_cuda_host_{name}"] = lambda img=img, dst=dst: ops.area_resize(img, *dst, device="cuda")
            exact[f"{name}_cuda_equal_cpu"] = bool(np.array_equal(ops.area_resize(img, *dst, device="cuda"), cpu))
            if torch is not None and torch.cuda.is_available():
                src = torch.from_numpy(img).cuda()
                out = torch.empty((dst[1], dst[0], 3), dtype=torch.uint8, device="cuda")
                contenders[f"mime_fast_cuda_device_{name}"] = lambda src=src, out=out, dst=dst: _core.cuda_area_resize(
                    src.data_ptr(), src.shape[0], src.shape[1], 3, src.stride(0), out.data_ptr(), dst[0], dst[1],
                    out.stride(0), torch.cuda.current_stream().cuda_stream)
        contenders[f"opencv_{name}"] = lambda img=img, dst=dst: cv2.resize(img, dst, interpolation=cv2.INTER_AREA)
        pairs.append(name)
    if args.device == "cpu":
        for label, size in (("1080p", (1920, 1080)), ("720p", (1280, 720))):
            f = np.ascontiguousarray(cv2.resize(frame, size, interpolation=cv2.INTER_LINEAR))
            name = f"detector_downscale_{label}_to_384"
            exact[name] = bool(np.array_equal(_downscale(f, 384)[0], opencv_downscale(f, 384)))
            contenders[f"mime_fast_{name}"] = lambda f=f: _downscale(f, 384)
            contenders[f"opencv_{name}"] = lambda f=f: opencv_downscale(f, 384)
            pairs.append(name)
    # Interleaved (OpenCV after the op: its worker threads spin after each call), then each alone.
    stats = compare(contenders, args.repeats)
    alone = {name: compare({name: fn}, args.repeats)[name] for name, fn in contenders.items()}
    med = {k: v["median_ms"] for k, v in alone.items()}
    ratios = {}
    for name in pairs:
        for k in med:
            if k.startswith("mime_fast") and k.endswith(name):
                ratios[f"{k}_vs_opencv"] = med[f"opencv_{name}"] / med[k]
    payload = {"frame": list(frame.shape), "timings": stats, "timings_alone": alone, "speedup_alone": ratios,
               "bit_exact": exact, "opencv_is_4x": int(cv2.__version__.split(".")[0]) < 5}
    for name, v in stats.items():
        print(f"{name:60s} {v['median_ms']:8.3f} ms interleaved, {med[name]:8.3f} ms alone")
    for k, r in ratios.items():
        print(f"{k:70s} {r:5.2f}x")
    print(exact)
    print(f"wrote {save('area_resize', payload, args.device)}")


if __name__ == "__main__":
    main()
