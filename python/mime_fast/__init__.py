"""mime_fast: high-throughput privacy degradation of emotion video clips (the MIME benchmark
subsets FM, FDM, FSM, VMM, FDAM, FSAM, AMM) on a compiled C++/CUDA core.

The hot-path operators are in :mod:`mime_fast.ops`.
"""

from __future__ import annotations

from . import _core, ops

__version__ = "0.1.0"

__all__ = ["__version__", "cuda_available", "cuda_status", "num_threads", "ops", "set_num_threads"]


def cuda_available() -> bool:
    """True when this build has CUDA kernels and a CUDA device is usable now."""
    return bool(_core.cuda_available())


def cuda_status() -> str:
    """Why CUDA is or is not available (device name, missing driver, CPU-only build)."""
    return str(_core.cuda_status())


def num_threads() -> int:
    """Threads the CPU operators use."""
    return int(_core.num_threads())


def set_num_threads(n: int) -> None:
    """Set the CPU operators' thread count (``n <= 0`` restores the default: the machine's cores,
    or ``MIME_FAST_NUM_THREADS``)."""
    _core.set_num_threads(int(n))
