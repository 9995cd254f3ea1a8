"""The offline stack's three face models, CPU stack (onnxruntime / OpenCV DNN) against the torch
stack (:mod:`mime_fast.detect.torch_models`) on ``--device``, at batch sizes 1, 8 and 32: ms per
frame (detector) and per face (face mesh, SFace), medians of interleaved repeats.

* detector: a batch of B decoded 1080p frames (the crowd clip from ``$MIME_FAST_MEDIA_DIR``,
  ``$MIME_FAST_SHARED_MEDIA`` or ``../shared/media``; a synthetic 720p face frame when absent),
  each downscaled to 384 px inside the model as in the pipeline (``max_size=384``).  CPU: ``detect`` per frame; torch:
  ``detect_batch`` of the numpy frames (upload included) and, as ``torch_on_device``, of a uint8
  tensor already on the device (a GPU decode's frames).
* face mesh / SFace: B faces of one frame (the crowd frame's faces repeated to B) in one call; the
  CPU models run them one by one (mesh) or in one onnxruntime batch (SFace), the torch ones in one
  forward with the crops made on the device.
* on CUDA, ``torch`` replays each face network's forward from a CUDA graph
  (:mod:`mime_fast.detect.cuda_graphs`; captured in the warm-up) and ``torch_eager`` is the same
  model launching its forward op by op (``graphs=False``).
* persons (batches 1 and 8 only): the HOG people detector at its default 640 px on B 1080p frames;
  CPU: ``HogPersonDetector`` (cv2.HOGDescriptor, OpenCV 4.x) per frame; torch:
  ``TorchHogPersons.detect_batch`` (one pyramid for the B frames), numpy frames and on-device tensor.

Writes bench/results/models-<device>.json.

    python bench/bench_models.py [--repeats 5] [--device cpu|cuda]
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from _harness import compare, face_frame, media_dir, parse_args, save

BATCHES = (1, 8, 32)
PERSON_BATCH_MAX = 8  # the HOG pyramid of 32 1080p frames: seconds per repeat on a CPU


def _frames(n: int) -> tuple[list[np.ndarray], str]:
    d = Path(os.environ.get("MIME_FAST_MEDIA_DIR") or media_dir())  # (or $MIME_FAST_SHARED_MEDIA, ../shared/media)
    clip = d / "crowd_1080p.mp4"
    if clip.is_file():
        from mime_fast.media import iter_display_frames, probe

        out = []
        for _, _, rgb in iter_display_frames(clip, probe(clip)):
            out.append(np.ascontiguousarray(rgb))
            if len(out) == n:
                break
        return out, "crowd_1080p.mp4"
    frame, _ = face_frame()
    return [frame] * n, "synthetic 720p astronaut frame"


def main() -> None:
    args = parse_args(__doc__, repeats=5)
    import torch

    from mime_fast.detect.models import (Faces, HogPersonDetector, MediaPipeFaceMesh, ModelNotAvailable,
                                         RetinaFaceDetector, SFaceEmbedder)
    from mime_fast.detect.torch_models import TorchFaceMesh, TorchHogPersons, TorchRetinaFace, TorchSFace

    dev = args.device
    frames, source = _frames(max(BATCHES))
    cpu = {}
    for name, make in (("detector", lambda: RetinaFaceDetector(max_size=384)), ("mesh", MediaPipeFaceMesh),
                       ("sface", SFaceEmbedder), ("persons", HogPersonDetector)):
        try:
            cpu[name] = make()
        except ModelNotAvailable as e:  # e.g. an OpenCV without the TFLite importer: torch alone
            print(f"CPU {name} not available ({e}): torch only")
    tor = {"detector": TorchRetinaFace(device=dev, max_size=384), "mesh": TorchFaceMesh(device=dev),
           "sface": TorchSFace(device=dev), "persons": TorchHogPersons(device=dev)}
    eager = {}  # on CUDA: the face models without CUDA graphs
    if dev == "cuda":
        eager = {"detector": TorchRetinaFace(device=dev, max_size=384, graphs=False),
                 "mesh": TorchFaceMesh(device=dev, graphs=False), "sface": TorchSFace(device=dev, graphs=False)}
    if "persons" in cpu and cpu["persons"].backend != "opencv":  # OpenCV 5: it would be the torch port
        del cpu["persons"]

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    faces0 = (cpu.get("detector") or tor["detector"]).detect(frames[0])
    assert len(faces0), "no face in the benchmark frame"
    results: dict = {"detector": {}, "mesh": {}, "sface": {}, "persons": {}}
    unit = {"detector": "ms_per_frame", "mesh": "ms_per_face", "sface": "ms_per_face", "persons": "ms_per_frame"}
    for B in BATCHES:
        fr = frames[:B]
        on_dev = torch.from_numpy(np.stack(fr)).to(dev)
        idx = np.arange(B) % len(faces0)
        faces = Faces(faces0.boxes[idx], faces0.scores[idx], faces0.keypoints[idx])
        contenders = {
            "detector": {"cpu_stack": lambda: [cpu["detector"].detect(f) for f in fr],
                         "torch": lambda: (tor["detector"].detect_batch(fr), sync()),
                         "torch_on_device": lambda: (tor["detector"].detect_batch(on_dev), sync())},
            "mesh": {"cpu_stack": lambda: cpu["mesh"].landmarks(frames[0], faces),
                     "torch": lambda: (tor["mesh"].landmarks(frames[0], faces), sync())},
            "sface": {"cpu_stack": lambda: cpu["sface"].embed(frames[0], faces),
                      "torch": lambda: (tor["sface"].embed(frames[0], faces), sync())},
            "persons": {"cpu_stack": lambda: [cpu["persons"].detect(f) for f in fr],
                        "torch": lambda: (tor["persons"].detect_batch(fr), sync()),
                        "torch_on_device": lambda: (tor["persons"].detect_batch(on_dev), sync())},
        }
        if eager:
            contenders["detector"]["torch_eager"] = lambda: (eager["detector"].detect_batch(fr), sync())
            contenders["mesh"]["torch_eager"] = lambda: (eager["mesh"].landmarks(frames[0], faces), sync())
            contenders["sface"]["torch_eager"] = lambda: (eager["sface"].embed(frames[0], faces), sync())
        if B > PERSON_BATCH_MAX:
            del contenders["persons"]
        for m, fns in contenders.items():
            if m not in cpu:
                fns.pop("cpu_stack")
            r = compare(fns, args.repeats, warmup=4)  # (a CUDA graph is captured at a shape's third call)
            results[m][str(B)] = {k: {**v, unit[m]: v["median_ms"] / B} for k, v in r.items()}
        line = "  ".join(f"{m} {results[m][str(B)].get('cpu_stack', {}).get(unit[m], float('nan')):.2f}"
                         f" -> {results[m][str(B)]['torch'][unit[m]]:.2f}" for m in results if str(B) in results[m])
        line += f"  (detector, frames already on the device: {results['detector'][str(B)]['torch_on_device'][unit['detector']]:.2f})"
        print(f"B={B:2d} ms per frame / face, cpu stack -> torch {dev}: {line}", flush=True)
    meta = {"torch": torch.__version__, "torch_threads": torch.get_num_threads(), "frames": source,
            "frame_size": list(frames[0].shape[:2]), "faces_in_frame": len(faces0), "batches": list(BATCHES),
            # what "cpu_stack" ran per model (with OpenCV 5 the mesh's CPU model is its torch port)
            "cpu_stack": {m: f"{type(c).__name__} ({getattr(c, 'backend', None) or 'onnxruntime'})"
                          for m, c in cpu.items()}}
    if dev == "cuda":
        from mime_fast.detect.cuda_graphs import GraphedNet

        meta["gpu"] = torch.cuda.get_device_name(0)
        meta["cuda_graphs"] = {m: tor[m].net.stats() for m in ("detector", "mesh", "sface")
                               if isinstance(tor[m].net, GraphedNet)}
    path = save("models", {"setup": meta, "results": results}, device=dev)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
