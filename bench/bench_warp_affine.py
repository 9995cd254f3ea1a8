"""Affine face crops (the torch face mesh's 192 px crops): mime_fast.ops.warp_affine against
cv2.warpAffine (INTER_LINEAR, BORDER_CONSTANT 0; the op is OpenCV 4.x's, bit for bit) for 1 and
4 crops of a 720p frame, and the torch emulation it replaces in the face models
(torch_models.warp_affine_u8) where torch imports.  With --device cuda: the op with a host frame
(upload, kernel, download), the op on a frame already in a CUDA tensor (what TorchFaceMesh calls),
and the torch emulation on the GPU.  Writes bench/results/warp_affine-<device>.json.

    python bench/bench_warp_affine.py [--repeats 200] [--device cpu|cuda]
"""

from __future__ import annotations

import cv2
import numpy as np

from _harness import compare, face_frame, parse_args, save

from mime_fast import _core, ops

SIZE = 192


def face_matrices(n: int, frame_hw: tuple[int, int]) -> np.ndarray:
    """``n`` frame -> crop matrices like the face mesh's: a ~380 px box around a point of the frame,
    rotated a little, scaled to 192 px (the first on the test face, the others spread out)."""
    h, w = frame_hw
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        c = (w / 2 - 7, h / 2 - 150) if i == 0 else (rng.uniform(100, w - 100), rng.uniform(100, h - 100))
        M = cv2.getRotationMatrix2D(c, float(rng.uniform(-20, 20)), SIZE / rng.uniform(300, 460))
        M[:, 2] += np.array([SIZE / 2, SIZE / 2]) - np.array(c)
        out.append(M)
    return np.array(out)


def main() -> None:
    args = parse_args(__doc__, repeats=200)
    frame, _ = face_frame()
    h, w = frame.shape[:2]
    contenders, exact, slow = {}, {}, {}
    try:
        import torch

        from mime_fast.detect.torch_models import warp_affine_u8
    except ImportError:
        torch = None
    for n in (1, 4):
        Ms = face_matrices(n, (h, w))
        ref = np.stack([cv2.warpAffine(frame, M, (SIZE, SIZE), flags=cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_CONSTANT, borderValue=0) for M in Ms])
        exact[f"{n}_crops_equal_opencv"] = bool(np.array_equal(ops.warp_affine(frame, Ms, SIZE), ref))
        opencv = lambda Ms=Ms: [cv2.warpAffine(frame, M, (SIZE, SIZE), flags=cv2.INTER_LINEAR,  # noqa: E731
                                               borderMode=cv2.BORDER_CONSTANT, borderValue=0) for M in Ms]
        if args.device == "cpu":
            contenders[f"mime_fast_{n}"] = lambda Ms=Ms: ops.warp_affine(frame, Ms, SIZE)
            if torch is not None:
                buf = torch.from_numpy(np.concatenate([frame.reshape(-1), np.zeros(3, np.uint8)]))
                slow[f"torch_emulation_{n}"] = lambda Ms=Ms, buf=buf, n=n: warp_affine_u8(
                    buf, [0] * n, [(h, w)] * n, [(0, 0)] * n, list(Ms), SIZE)
            contenders[f"opencv_warpAffine_{n}"] = opencv
            continue
        contenders[f"mime_fast_cuda_host_frame_{n}"] = lambda Ms=Ms: ops.warp_affine(frame, Ms, SIZE, device="cuda")
        exact[f"{n}_crops_cuda_equal_cpu"] = bool(np.array_equal(ops.warp_affine(frame, Ms, SIZE, device="cuda"),
                                                                 ops.warp_affine(frame, Ms, SIZE)))
        if torch is not None and torch.cuda.is_available():
            src = torch.from_numpy(frame).cuda()
            buf = torch.cat([src.reshape(-1), src.new_zeros(3)])
            out = torch.empty((n, SIZE, SIZE, 3), dtype=torch.uint8, device="cuda")

            def device_op(Ms=Ms, src=src, out=out):
                _core.cuda_warp_affine(src.data_ptr(), h, w, 3, w * 3, out.data_ptr(), Ms, SIZE,
                                       torch.cuda.current_stream().cuda_stream)

            def emulation(Ms=Ms, buf=buf, n=n):
                warp_affine_u8(buf, [0] * n, [(h, w)] * n, [(0, 0)] * n, list(Ms), SIZE)
                torch.cuda.synchronize()

            contenders[f"mime_fast_cuda_device_frame_{n}"] = device_op
            contenders[f"torch_emulation_cuda_{n}"] = emulation
        contenders[f"opencv_warpAffine_{n}"] = opencv
    # Interleaved, OpenCV after the others: its worker threads spin for a while after each call and
    # take a core from a multi-threaded contender right behind them. Then the op and OpenCV each alone.
    stats = compare(contenders, args.repeats)
    alone = {name: compare({name: fn}, args.repeats)[name] for name, fn in contenders.items()
             if name.startswith(("opencv", "mime_fast"))}
    if slow:  # the torch emulation on the CPU (tens of ms): fewer repeats
        stats.update(compare(slow, max(5, args.repeats // 20), warmup=1))
    med = {k: v["median_ms"] for k, v in alone.items()}
    ratios = {}
    for n in (1, 4):
        for name in list(med):
            if name.endswith(f"_{n}") and not name.startswith("opencv"):
                ratios[f"{name}_vs_opencv"] = med[f"opencv_warpAffine_{n}"] / med[name]
    payload = {"frame": [h, w, 3], "size": SIZE, "timings": stats, "timings_alone": alone, "speedup_alone": ratios,
               "bit_exact": exact,
               "opencv_is_4x": int(cv2.__version__.split(".")[0]) < 5}
    for name, v in stats.items():
        print(f"{name:36s} {v['median_ms']:8.3f} ms interleaved"
              + (f", {med[name]:8.3f} ms alone" if name in med else ""))
    print(exact)
    print(f"wrote {save('warp_affine', payload, args.device)}")


if __name__ == "__main__":
    main()
