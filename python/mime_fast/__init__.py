"""mime_fast: high-throughput privacy degradation of emotion video clips (the MIME benchmark
subsets FM, FDM, FSM, VMM, FDAM, FSAM, AMM) on a compiled C++/CUDA core.

- :func:`build_subsets` / :func:`degrade`: a clip in, the MIME subsets out (:mod:`mime_fast.subsets`),
  with :class:`Settings`, the option groups of :mod:`mime_fast.options` (:class:`EncodeOptions`, ...).
- :mod:`mime_fast.ops`: the hot-path operators (OpenCV-exact blur, hull masks, fused masked blur).
- :func:`evaluate` (:mod:`mime_fast.evaluation`): a multimodal model's emotion recognition on a
  built corpus, subset by subset, with the degradation steps' paired tests.
- :func:`audit` (:mod:`mime_fast.audit`): can an independent face recogniser still tell who the
  blurred face of a built corpus is?

The video pipeline (and PyAV) is imported on first use, so ``import mime_fast`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core, ops

__version__ = "0.1.0"

__all__ = [
    "AudioOptions",
    "ClipError",
    "ClipResult",
    "DetectOptions",
    "DeviceOptions",
    "EncodeOptions",
    "GateOptions",
    "MaskOptions",
    "Settings",
    "__version__",
    "audit",
    "build_subsets",
    "cuda_available",
    "cuda_status",
    "degrade",
    "evaluate",
    "num_threads",
    "ops",
    "set_num_threads",
]

_PIPELINE = {"build_subsets", "degrade", "ClipResult", "Settings", "ClipError"}
_OPTIONS = {"AudioOptions", "DetectOptions", "DeviceOptions", "EncodeOptions", "GateOptions", "MaskOptions"}

if TYPE_CHECKING:
    from .options import AudioOptions, DetectOptions, DeviceOptions, EncodeOptions, GateOptions, MaskOptions
    from .subsets import ClipError, ClipResult, Settings, build_subsets, degrade


def __getattr__(name: str) -> Any:  # lazy: the package root sits above every module, and stays light
    if name in _PIPELINE:
        from . import subsets

        return getattr(subsets, name)
    if name in _OPTIONS:
        from . import options

        return getattr(options, name)
    if name == "evaluate":  # mime-fast eval (mime_fast.evaluation)
        from .evaluation import evaluate

        return evaluate
    if name == "audit":  # the module, callable: mime_fast.audit(out_dir, ...) is mime_fast.audit.audit
        import importlib

        return importlib.import_module(".audit", __name__)
    raise AttributeError(f"module 'mime_fast' has no attribute {name!r}")


def cuda_available() -> bool:
    """True when this build has CUDA kernels and a CUDA device is usable now."""
    return bool(_core.cuda_available())


#: What the CUDA runtime says where the machine has no NVIDIA GPU or driver (it reads as a version
#: mismatch: "CUDA driver version is insufficient for CUDA runtime version"), and what is said instead.
_NO_DRIVER = ("driver version is insufficient", "no CUDA-capable device")


def cuda_status() -> str:
    """Why CUDA is or is not available (device name, missing driver, CPU-only build).  Where the
    machine has no NVIDIA GPU or driver, it says so first (the CUDA runtime's own words follow in
    parentheses: they read as a version mismatch)."""
    status = str(_core.cuda_status())
    if any(s in status for s in _NO_DRIVER):
        return f"no NVIDIA GPU or driver found on this machine ({status})"
    return status


def num_threads() -> int:
    """Threads the CPU operators use."""
    return int(_core.num_threads())


def set_num_threads(n: int) -> None:
    """Set the CPU operators' thread count (``n <= 0`` restores the default: the machine's cores,
    or ``MIME_FAST_NUM_THREADS``)."""
    _core.set_num_threads(int(n))
