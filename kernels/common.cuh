// Shared helpers for code that compiles both as host C++ and as CUDA device code.
// Everything in kernels/*.cuh is the single arithmetic body of an operator: the CPU path
// (csrc/ops/*.cpp) and the CUDA kernels (kernels/*.cu) both call these functions, so the CPU
// tests check the same arithmetic the GPU runs.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MF_HD __host__ __device__ __forceinline__
#else
#define MF_HD inline __attribute__((always_inline))
#endif

namespace mf {

// Index of position p in [0, n) under OpenCV's BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba),
// valid for any p, also when the reflection wraps several times (n smaller than the kernel).
MF_HD int reflect101(int p, int n) {
    if (n == 1) return 0;
    const int period = 2 * (n - 1);
    p %= period;
    if (p < 0) p += period;
    return p < n ? p : period - p;
}

MF_HD int imin(int a, int b) { return a < b ? a : b; }
MF_HD int imax(int a, int b) { return a > b ? a : b; }

}  // namespace mf
