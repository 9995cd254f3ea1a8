// YUV 4:2:0 -> RGB conversion (limited range, BT.601 or BT.709, kernels/yuv420_to_rgb.cuh) of a
// whole frame or of one rectangle of it, e.g. straight from a decoded video frame's planes.
#pragma once
#include "../../kernels/yuv420_to_rgb.cuh"
#include "../image.hpp"

namespace mf {

struct Yuv420ConstViews {
    ConstImageU8 y, u, v;  // single-channel views; u and v are ceil(h/2) x ceil(w/2)
};

// roi: the rectangle of the frame to convert (an empty Rect: the whole frame); out: roi.h x roi.w
// x 3 (RGB).
void yuv420_to_rgb_cpu(const Yuv420ConstViews& in, Rect roi, const ImageU8& out, const RgbMatrix& m);

// The CUDA kernel's per-pixel code (kernels/yuv420_to_rgb.cuh) run serially on the CPU (tests).
void yuv420_to_rgb_reference(const Yuv420ConstViews& in, Rect roi, const ImageU8& out, const RgbMatrix& m);

// Shared argument checks; returns the rectangle to convert (the whole frame for an empty roi).
Rect check_yuv420_to_rgb_args(const Yuv420ConstViews& in, Rect roi, const ImageU8& out);

}  // namespace mf
