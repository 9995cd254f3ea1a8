"""What this machine offers the pipeline: CUDA devices, NVDEC, NVENC, and how many clips to build
at once on them (``mime-fast info``, ``mime-fast build --device cuda``)."""

from __future__ import annotations

import importlib.util
import os

from .detect.cuda_graphs import ENV as GRAPHS_ENV, graphs_wanted
from .media import nvdec_available


def gpu_count() -> int:
    """CUDA devices visible to this process (0 without a CUDA build or driver)."""
    from . import cuda_available  # lazy: the package root sits above every module

    if not cuda_available():
        return 0
    if importlib.util.find_spec("torch") is not None:
        import torch

        return int(torch.cuda.device_count())
    return 1  # the compiled core sees one; without torch it uses the first only


#: The most clips one GPU builds at once: past that the clips only wait on each other's kernels,
#: and each one's CUDA context and kept frames cost device memory (:func:`auto_workers`; with Ray,
#: each clip's task asks for this share of a GPU).
MAX_CLIPS_PER_GPU = 8


def auto_workers(device: str, *, cores: int | None = None, gpus: int | None = None) -> int:
    """Clips built at once when ``--workers`` is not given: one on the CPU (each clip already
    uses several threads); with ``device="cuda"`` the GPUs do decoding, detection, masks and blur,
    and the CPU only encodes, so one clip per two cores (each clip's encoders run with two threads
    and overlap), at most eight per GPU (past that the clips only wait on each other's kernels and
    each worker's CUDA context costs device memory)."""
    if device != "cuda":
        return 1
    cores = cores or os.cpu_count() or 1
    gpus = gpu_count() if gpus is None else gpus
    return max(1, min(cores // 2, MAX_CLIPS_PER_GPU * max(1, gpus)))


def nvenc_status() -> str:
    """Whether the GPU has a video encoder (NVENC), in words.  H100 and H200 have none: the
    outputs are encoded by libx264 on the CPU on every machine; an NVENC encoder is not used even
    where one exists (its bytes would differ from libx264's)."""
    from . import cuda_available  # lazy: the package root sits above every module

    if not cuda_available():
        return "absent (no CUDA device)"
    if importlib.util.find_spec("PyNvVideoCodec") is None:
        return "unknown (PyNvVideoCodec is not installed)"
    try:
        import PyNvVideoCodec as nvc

        enc = nvc.CreateEncoder(256, 256, "NV12", True)  # a session on host input, then closed
        del enc
    except Exception as exc:  # noqa: BLE001 - the library raises its own types
        return f"absent (an encoder session could not be opened: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"
    return "present (not used: libx264 encodes every output)"


def report() -> list[tuple[str, str]]:
    """``(what, status)`` lines for ``mime-fast info``."""
    from . import cuda_status  # lazy: the package root sits above every module

    n = gpu_count()
    lines = [("CUDA", cuda_status()), ("GPUs", str(n))]
    why = nvdec_available() if n else "no CUDA device"
    lines.append(("NVDEC decode", "available (--device cuda)" if why is None else f"not used: {why}"))
    lines.append(("NVENC encode", nvenc_status()))
    if n:
        lines.append(("CUDA graphs (face models)", f"on ({GRAPHS_ENV}=0 turns them off)" if graphs_wanted("cuda")
                      else f"off ({GRAPHS_ENV}=0)"))
        lines.append(("workers for --device cuda", f"{auto_workers('cuda', gpus=n)} (auto)"))
    lines.append(("encoder", encoder_status()))
    return lines


def encoder_status() -> str:
    """What encodes every output, in words: libx264 through PyAV's FFmpeg, with the instruction-set
    pin that keeps its bytes the same on every x86 machine (:func:`mime_fast.media.x264_asm`)."""
    import av

    from .media import x264_asm

    avcodec = ".".join(map(str, av.library_versions.get("libavcodec", ())))
    asm = x264_asm()
    pin = f"instruction sets up to {asm}" if asm else "x264's own instruction-set choice"
    return f"libx264 on the CPU (PyAV {av.__version__}, libavcodec {avcodec}), {pin}"
