// Area-averaging downscale of an 8-bit interleaved image (1 to 4 channels), bit-identical to
// OpenCV 4.x cv2.resize(src, (dw, dh), interpolation=INTER_AREA) on its general path (imgproc
// resize.cpp: computeResizeAreaTab + ResizeArea_Invoker<uchar, float>), which it takes for every
// downscale whose two ratios are not both whole numbers (those take resizeAreaFast):
//   * per axis, scale = 1 / (dsize / ssize) in double, and for each destination coordinate d the
//     source cells it covers, in order: a partial first cell, whole cells, a partial last cell, each
//     with the float weight (covered part) / (cell width) (csrc/ops/area_resize.cpp builds these
//     tables on the host, exactly as OpenCV does, for both devices);
//   * per destination pixel and channel, in float and in this order (no fused multiply-add: the
//     build passes -ffp-contract=off and --fmad=false):
//         for each source row j of the pixel (weight beta_j):
//             b = 0;  for each source column k (weight alpha_k):  b = b + S[j][k] * alpha_k
//             acc = (j first) ? beta_j * b : acc + beta_j * b
//         out = saturate_cast<uchar>(acc)   (to nearest, ties to even; clamped to 0..255)
//     which is the order of OpenCV's row buffer (buf) and row sums (sum).
// A shrink by exactly 2 in both axes is OpenCV's fast path instead (resizeAreaFast): with s the
// sum of the pixel's 2 x 2 block, out = (s + 2) >> 2 per channel for 1, 3 and 4 channels (its SIMD
// body) and s / 4 rounded half to even for 2 (its scalar body, saturate_cast(s * 0.25f)), integers
// only (area_halve_pixel). The detector's downscale halves by it before the last, general step.
// Same floats in the same order on the CPU and the GPU: every path gives the same bytes.
#pragma once
#include <math.h>

#include <cstdint>

#include "common.cuh"

namespace mf {

// The cells of one destination coordinate: entries [start, start + count) of the axis's tables.
struct AreaSpan {
    int start, count;
};

// Read-only view of an axis's tables (device or host memory, as the caller runs).
struct AreaAxis {
    const AreaSpan* span;  // one per destination coordinate
    const int* src;        // source coordinate of each entry
    const float* weight;   // its weight
};

MF_HD uint8_t area_saturate(float v) {
    const float r = rintf(v);
    return static_cast<uint8_t>(r <= 0.0f ? 0 : (r >= 255.0f ? 255 : static_cast<int>(r)));
}

// Destination pixel (dx, dy) of a C-channel image src (row stride in bytes) into out[0 .. C).
template <int C>
MF_HD void area_resize_pixel(const uint8_t* src, long stride, const AreaAxis& xs, const AreaAxis& ys, int dx, int dy,
                             uint8_t* out) {
    const AreaSpan sx = xs.span[dx], sy = ys.span[dy];
    float acc[C];
    for (int c = 0; c < C; ++c) acc[c] = 0.0f;
    for (int j = 0; j < sy.count; ++j) {
        const uint8_t* row = src + static_cast<long>(ys.src[sy.start + j]) * stride;
        const float beta = ys.weight[sy.start + j];
        float b[C];
        for (int c = 0; c < C; ++c) b[c] = 0.0f;
        for (int k = 0; k < sx.count; ++k) {
            const uint8_t* p = row + static_cast<long>(xs.src[sx.start + k]) * C;
            const float alpha = xs.weight[sx.start + k];
            for (int c = 0; c < C; ++c) b[c] = b[c] + static_cast<float>(p[c]) * alpha;
        }
        for (int c = 0; c < C; ++c) acc[c] = j == 0 ? beta * b[c] : acc[c] + beta * b[c];
    }
    for (int c = 0; c < C; ++c) out[c] = area_saturate(acc[c]);
}

// Destination pixel (dx, dy) of the exact 2:1 shrink: the rounded mean of source pixels
// (2 dx .. 2 dx + 1, 2 dy .. 2 dy + 1).
template <int C>
MF_HD void area_halve_pixel(const uint8_t* src, long stride, int dx, int dy, uint8_t* out) {
    const uint8_t* a = src + static_cast<long>(2 * dy) * stride + 2 * dx * C;
    const uint8_t* b = a + stride;
    for (int c = 0; c < C; ++c) {
        const int sum = a[c] + a[C + c] + b[c] + b[C + c];
        if (C == 2) {  // half to even: up when the remainder is 3, or 2 with an odd quotient
            const int q = sum >> 2, r = sum & 3;
            out[c] = static_cast<uint8_t>(q + (r > 2 || (r == 2 && (q & 1))));
        } else {
            out[c] = static_cast<uint8_t>((sum + 2) >> 2);
        }
    }
}

}  // namespace mf
