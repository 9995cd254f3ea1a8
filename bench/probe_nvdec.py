"""Probe PyNvVideoCodec on a GPU machine: its API as installed, and whether NVDEC's NV12 equals
PyAV's yuv420p frame for frame on the given clips. Prints what it finds; writes
$OUT/nvdec_probe.json when OUT is set.

    python bench/probe_nvdec.py CLIP [CLIP ...]
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import numpy as np


def attrs(o) -> list[str]:
    return [a for a in dir(o) if not a.startswith("__") or a in ("__dlpack__", "__cuda_array_interface__")]


def pyav_planes(path):
    import av

    out = []
    with av.open(path) as c:
        for f in c.decode(video=0):
            a = f.to_ndarray(format="yuv420p") if f.format.name != "yuv420p" else None
            if a is None:
                from mime_fast.frames import yuv420_planes

                out.append((f.pts, [np.array(p) for p in yuv420_planes(f)]))
            else:
                h, w = f.height, f.width
                out.append((f.pts, [a[:h], a[h : h + h // 4].reshape(h // 2, w // 2), a[h + h // 4 :].reshape(h // 2, w // 2)]))
    return out


def main() -> None:
    import PyNvVideoCodec as nvc
    import torch

    report: dict = {"module": attrs(nvc), "clips": {}}
    print("PyNvVideoCodec", getattr(nvc, "__version__", "?"), "attrs:", report["module"])
    for path in sys.argv[1:]:
        r: dict = {}
        report["clips"][path] = r
        try:
            dmx = nvc.CreateDemuxer(filename=path)
            r["demuxer"] = attrs(dmx)
            for m in ("GetNvCodecId", "Width", "Height", "FrameRate", "ChromaFormat", "BitDepth", "ColorSpace",
                      "ColorRange", "GetNvCodecId"):
                try:
                    r[m] = str(getattr(dmx, m)())
                except Exception as e:  # noqa: BLE001
                    r[m] = f"error: {e}"
            dec = nvc.CreateDecoder(gpuid=0, codec=dmx.GetNvCodecId(), cudacontext=0, cudastream=0, usedevicememory=True)
            r["decoder"] = attrs(dec)
            frames = []
            t0 = time.perf_counter()
            first = True
            npk = 0
            for pkt in dmx:
                npk += 1
                if first:
                    r["packet"] = attrs(pkt)
                    for m in ("pts", "dts", "bsl", "key"):
                        r[f"packet.{m}"] = str(getattr(pkt, m, "n/a"))
                for f in dec.Decode(pkt):
                    if first:
                        r["frame"] = attrs(f)
                        for m in ("getPTS", "GetPtrToPlane", "shape", "strides", "format", "cuda", "nvcv_image",
                                  "framesize"):
                            try:
                                v = getattr(f, m)
                                r[f"frame.{m}"] = str(v() if callable(v) and m in ("getPTS", "framesize", "shape") else v)[:300]
                            except Exception as e:  # noqa: BLE001
                                r[f"frame.{m}"] = f"error: {e}"
                        try:
                            r["frame.cuda()"] = str([str(p.__cuda_array_interface__) for p in f.cuda()])[:600]
                        except Exception as e:  # noqa: BLE001
                            r["frame.cuda()"] = f"error: {e}"
                        try:
                            r["frame.__cuda_array_interface__"] = str(f.__cuda_array_interface__)[:400]
                        except Exception as e:  # noqa: BLE001
                            r["frame.__cuda_array_interface__"] = f"error: {e}"
                        first = False
                    t = torch.from_dlpack(f)
                    frames.append((f.getPTS(), t.clone()))
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            r["packets"] = npk
            r["frames"] = len(frames)
            r["decode_fps_incl_clone"] = len(frames) / dt
            if frames:
                r["tensor"] = f"{tuple(frames[0][1].shape)} {frames[0][1].dtype} strides {frames[0][1].stride()}"
            ref = pyav_planes(path)
            r["pyav_frames"] = len(ref)
            r["pyav_pts_head"] = [p for p, _ in ref[:8]]
            r["nvdec_pts_head"] = [p for p, _ in frames[:8]]
            same = 0
            first_diff = None
            for i, ((_, t), (_, planes)) in enumerate(zip(frames, ref)):
                a = t.cpu().numpy()
                h, w = planes[0].shape
                y = a[:h, :w]
                uv = a[h : h + (h + 1) // 2, : 2 * ((w + 1) // 2)]
                u, v = uv[:, 0::2], uv[:, 1::2]
                ok = np.array_equal(y, planes[0]) and np.array_equal(u, planes[1]) and np.array_equal(v, planes[2])
                same += ok
                if not ok and first_diff is None:
                    first_diff = i
            r["identical_frames"] = same
            r["first_differing_frame"] = first_diff
        except Exception:  # noqa: BLE001
            r["error"] = traceback.format_exc()[-2000:]
        print(json.dumps(r, indent=1, default=str)[:6000])
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "nvdec_probe.json"), "w") as fh:
            json.dump(report, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
