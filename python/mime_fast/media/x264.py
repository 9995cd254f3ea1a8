"""libx264 as every encoder of this package sets it up: :func:`x264_options` (CRF, preset and the
instruction-set pin of :func:`x264_asm`) and :func:`add_x264_stream`, the yuv420p output stream.

Determinism: libx264 is run with an explicit ``threads`` count (never "auto", which depends on the
machine) and below AVX-512 (:func:`x264_asm`), and PyAV's MP4 muxer writes no creation time, so the
same input and settings give byte-identical files with the same PyAV/FFmpeg build.
"""

from __future__ import annotations

import functools
import platform
from fractions import Fraction

from ..frames import COLORSPACE

__all__ = ["add_x264_stream", "x264_asm", "x264_options"]


#: x264's instruction-set levels (its ``asm`` option names) and the CPU flags each needs, as
#: ``/proc/cpuinfo`` spells them, best first.  AVX-512 is left out on purpose: see :func:`x264_asm`.
_X264_LEVELS = (
    ("AVX2", ("avx2", "fma", "bmi1", "bmi2", "abm", "avx", "sse4_2", "ssse3", "sse2")),
    ("AVX", ("avx", "sse4_2", "sse4_1", "ssse3", "sse3", "sse2")),
    ("SSE4.2", ("sse4_2", "sse4_1", "ssse3", "sse3", "sse2")),
    ("SSSE3", ("ssse3", "sse3", "sse2")),
    ("SSE2", ("sse2",)),
)


def _cpu_flags() -> set[str] | None:
    """The CPU's feature flags (``/proc/cpuinfo`` names), ``None`` where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    try:  # other systems: numpy's own dispatch table (no BMI/LZCNT there; every AVX2 CPU has them)
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as feats
        except ImportError:  # numpy 1.x
            from numpy.core._multiarray_umath import __cpu_features__ as feats
    except ImportError:
        return None
    names = {"SSE2": "sse2", "SSE3": "sse3", "SSSE3": "ssse3", "SSE41": "sse4_1", "SSE42": "sse4_2",
             "AVX": "avx", "FMA3": "fma", "AVX2": "avx2"}
    flags = {v for k, v in names.items() if feats.get(k)}
    if "avx2" in flags:
        flags |= {"bmi1", "bmi2", "abm"}
    return flags


@functools.lru_cache(maxsize=None)
def x264_asm() -> str | None:
    """The value of libx264's ``asm`` option every encoder of this package uses: the best of x264's
    x86 instruction-set levels this CPU has, **AVX-512 excluded**; ``None`` (x264's own choice)
    off x86 or where the flags cannot be read.

    Why: the AVX-512 code of libx264 (as bundled in PyAV's wheels) reads memory it never wrote,
    so on a CPU with AVX-512 the same frames encode to different packets depending on what earlier
    allocations of the process left behind (reproduced with ``MALLOC_PERTURB_``: every value gives
    other bytes; ``tests/test_determinism.py``).  Up to AVX2 the output does not depend on it and
    is the same bytes at every level from SSSE3 to AVX2 (tested), so outputs are also identical
    across x86 machines with and without AVX-512 (CPUs with SSE2 alone, from before 2006, give other
    bytes; so would the C code, and ARM's NEON code is not compared).  Encoding speed is unchanged (AVX2 and AVX-512
    measured within noise on 720p veryfast).
    """
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return None
    flags = _cpu_flags()
    if flags is None:
        return None
    if "bmi1" not in flags and "bmi" in flags:  # /proc/cpuinfo spells BMI1 "bmi1"; tolerate "bmi"
        flags.add("bmi1")
    for name, need in _X264_LEVELS:
        if all(f in flags for f in need):
            return name
    return None


def x264_options(crf: int, preset: str) -> dict[str, str]:
    """libx264's options for an encode of this package (outputs and generated sample clips):
    ``crf``, ``preset`` and the instruction-set pin of :func:`x264_asm` that keeps its output
    independent of memory it never wrote."""
    opts = {"crf": str(crf), "preset": str(preset)}
    asm = x264_asm()
    if asm is not None:
        opts["x264-params"] = f"asm={asm}"
    return opts


def add_x264_stream(c, width: int, height: int, fps: Fraction, crf: int, preset: str, threads: int, matrix: str,
                    sar: Fraction | None = None):
    """The libx264 yuv420p stream of every output (one place, so cached packets match a writer's).
    ``sar``: the frames' sample aspect ratio where the pixels are not square (the source's, as
    displayed: :attr:`mime_fast.media.SourceInfo.output_sar`), written in the H.264 VUI and the
    MP4's ``pasp`` box so players show the picture as the source shows it."""
    vs = c.add_stream("libx264", rate=fps)
    vs.width, vs.height = width, height
    vs.pix_fmt = "yuv420p"
    vs.codec_context.time_base = 1 / fps
    vs.codec_context.thread_count = threads
    vs.codec_context.thread_type = "FRAME" if threads != 1 else "SLICE"
    vs.options = x264_options(crf, preset)
    # the colour matrix the frames were converted with, limited range
    vs.codec_context.colorspace = COLORSPACE[matrix]
    vs.codec_context.color_range = 1
    if sar is not None and sar != 1:
        vs.codec_context.sample_aspect_ratio = Fraction(sar)
    return vs

