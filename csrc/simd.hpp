// Portable vectorisation for the CPU hot loops: on x86-64 with GCC or Clang the marked functions
// are compiled twice (baseline and AVX2) and the loader picks the best for the running CPU, so one
// binary is both portable and fast. Elsewhere the attribute is empty and the compiler's default
// target is used.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(MIME_FAST_NO_TARGET_CLONES)
#define MF_TARGET_CLONES __attribute__((target_clones("default", "avx2")))
#else
#define MF_TARGET_CLONES
#endif
