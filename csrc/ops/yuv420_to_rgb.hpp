// YUV 4:2:0 -> RGB conversion (limited range, kernels/yuv420_to_rgb.cuh) of a region of a frame's
// planes, e.g. the planes of a decoded video frame, into an interleaved RGB image.
#pragma once
#include "../../kernels/yuv420_to_rgb.cuh"
#include "../image.hpp"

namespace mf {

struct Yuv420ConstViews {
    ConstImageU8 y, u, v;  // single-channel views, rows may be padded; u and v are ceil(h/2) x ceil(w/2)
};

// m: the colour matrix (kYuvToRgbBt601 or kYuvToRgbBt709).
// roi: luma rectangle to convert (in.y.bounds() for the whole frame; an empty one converts nothing).
// dst: roi.h x roi.w x 3 RGB.
void yuv420_to_rgb_cpu(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m);

// The CUDA kernel's per-pixel code (kernels/yuv420_to_rgb.cuh) run serially on the CPU (tests).
void yuv420_to_rgb_reference(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m);

// Shared argument checks; returns roi.
Rect check_yuv420_to_rgb_args(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst);

}  // namespace mf
