// RGB -> YUV 4:2:0 conversion (BT.601 limited range, kernels/rgb_to_yuv420.cuh) into caller-owned
// planes, e.g. the planes of an encoder's frame. With a region, only the chroma blocks that cover
// it (and their luma samples) are written; everything else in the planes is left as it was.
#pragma once
#include "../../kernels/rgb_to_yuv420.cuh"
#include "../image.hpp"

namespace mf {

struct Yuv420Views {
    ImageU8 y, u, v;  // single-channel views; u and v are ceil(h/2) x ceil(w/2)
};

// m: the colour matrix (kBt601 or kBt709).
// roi: luma rectangle to convert (widened to whole 2x2 blocks); an empty Rect means the whole frame.
// mask: optional selection (frame-sized, one channel; data == nullptr: none): only selected luma
// samples, and the chroma of blocks with any selected pixel, are written (kernels/rgb_to_yuv420.cuh).
void rgb_to_yuv420_cpu(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                       const ConstImageU8& mask = {});

// The CUDA kernel's per-block code (kernels/rgb_to_yuv420.cuh) run serially on the CPU (tests).
void rgb_to_yuv420_reference(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                             const ConstImageU8& mask = {});

// Shared argument checks; returns the region to convert (the whole frame for an empty roi).
Rect check_rgb_to_yuv420_args(const ConstImageU8& src, Rect roi, const Yuv420Views& out,
                              const ConstImageU8& mask = {});

}  // namespace mf
