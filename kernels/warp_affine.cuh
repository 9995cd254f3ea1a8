// Affine warp of an 8-bit interleaved image (1 to 4 channels), bit-identical to OpenCV 4.x
//     cv2.warpAffine(src, M, (size, size), flags=INTER_LINEAR, borderMode=BORDER_CONSTANT, borderValue=0)
// which works in fixed point (imgwarp.cpp, WarpAffineInvoker + remapBilinear):
//   * M (frame -> crop) is inverted in double as cv::invertAffineTransform does (warp_invert);
//     with the inverse m (crop -> frame), per output row y and pixel x (AB_BITS 10, INTER_BITS 5)
//         X0 = round((m01 y + m02) 1024) + 16,   adelta = round(m00 x 1024)
//         Y0 = round((m11 y + m12) 1024) + 16,   bdelta = round(m10 x 1024)
//         X = (X0 + adelta) >> 5,  Y = (Y0 + bdelta) >> 5           (source position in 1/32 px)
//     round = saturate_cast<int>(double) = cvRound, to nearest, ties to even; >> a floor division.
//     Every double operation is a single IEEE multiply or add (no contraction: the build passes
//     -ffp-contract=off and --fmad=false), so host and device compute the same integers.
//   * the source pixel (X >> 5, Y >> 5) (saturated to int16, as OpenCV's map) and its right, lower
//     and diagonal neighbours, weighted (32 - fx)(32 - fy), fx (32 - fy), (32 - fx) fy, fx fy with
//     fx = X & 31, fy = Y & 31 (OpenCV's INTER_REMAP_COEF_BITS 15 table holds these times 32:
//     exact, but for fx = fy = 0 where 32768 is stored as 32767 + 1 on a neighbour, which rounds
//     to the same byte), out = (sum + 512) >> 10;
//   * BORDER_CONSTANT 0: a neighbour outside the image contributes 0.
// Integer arithmetic after the rounding: every path gives the same bytes.
#pragma once
#include <math.h>

#include <cstdint>

#include "common.cuh"

namespace mf {

constexpr int kWarpAbBits = 10;                             // OpenCV's AB_BITS
constexpr int kWarpInterBits = 5;                           // INTER_BITS: 1/32 px
constexpr int kWarpTab = 1 << kWarpInterBits;               // INTER_TAB_SIZE
constexpr int kWarpRoundDelta = kWarpTab / 2;               // round_delta of INTER_LINEAR
constexpr double kWarpAbScale = double(1 << kWarpAbBits);  // AB_SCALE

// A 2x3 affine matrix, row-major: x' = m[0] x + m[1] y + m[2], y' = m[3] x + m[4] y + m[5].
struct Affine {
    double m[6];
};

// cv::invertAffineTransform, as warpAffine runs it on the matrix it is given (singular: all 0).
MF_HD Affine warp_invert(const Affine& a) {
    double D = a.m[0] * a.m[4] - a.m[1] * a.m[3];
    D = D != 0.0 ? 1.0 / D : 0.0;
    const double A11 = a.m[4] * D, A22 = a.m[0] * D, A12 = -a.m[1] * D, A21 = -a.m[3] * D;
    const double b1 = -A11 * a.m[2] - A12 * a.m[5];
    const double b2 = -A21 * a.m[2] - A22 * a.m[5];
    return Affine{{A11, A12, b1, A21, A22, b2}};
}

// saturate_cast<int>(double): to nearest, ties to even (the default rounding mode); clamped to the
// int range (OpenCV's conversion is undefined there; only absurd matrices get that far).
MF_HD int warp_round(double v) {
    v = rint(v);
    return v >= 2147483647.0 ? 2147483647 : (v <= -2147483648.0 ? (-2147483647 - 1) : static_cast<int>(v));
}

// X0, Y0 of output row y (the round_delta included), in 1/1024 px.
MF_HD void warp_row_origin(const Affine& inv, int y, int64_t& X0, int64_t& Y0) {
    X0 = static_cast<int64_t>(warp_round((inv.m[1] * y + inv.m[2]) * kWarpAbScale)) + kWarpRoundDelta;
    Y0 = static_cast<int64_t>(warp_round((inv.m[4] * y + inv.m[5]) * kWarpAbScale)) + kWarpRoundDelta;
}

// adelta (m = inv.m[0]) or bdelta (m = inv.m[3]) of output column x.
MF_HD int warp_delta(double m, int x) { return warp_round(m * x * kWarpAbScale); }

MF_HD int warp_clamp_short(int64_t v) { return v < -32768 ? -32768 : (v > 32767 ? 32767 : static_cast<int>(v)); }

// Output pixel from its X0 + adelta and Y0 + bdelta: C channels of the source image (height h,
// width w, row stride `stride` bytes) into out.
template <int C>
MF_HD void warp_affine_pixel(const uint8_t* src, int h, int w, long stride, int64_t xa, int64_t yb, uint8_t* out) {
    const int64_t X = xa >> (kWarpAbBits - kWarpInterBits), Y = yb >> (kWarpAbBits - kWarpInterBits);
    const int ix = warp_clamp_short(X >> kWarpInterBits), iy = warp_clamp_short(Y >> kWarpInterBits);
    const int fx = static_cast<int>(X & (kWarpTab - 1)), fy = static_cast<int>(Y & (kWarpTab - 1));
    const int w00 = (kWarpTab - fx) * (kWarpTab - fy), w01 = fx * (kWarpTab - fy), w10 = (kWarpTab - fx) * fy,
              w11 = fx * fy;
    if (static_cast<unsigned>(ix) < static_cast<unsigned>(w - 1) && static_cast<unsigned>(iy) < static_cast<unsigned>(h - 1)) {
        const uint8_t* p = src + static_cast<long>(iy) * stride + ix * C;
        for (int c = 0; c < C; ++c) {
            const int s = p[c] * w00 + p[C + c] * w01 + p[stride + c] * w10 + p[stride + C + c] * w11;
            out[c] = static_cast<uint8_t>((s + 512) >> 10);
        }
        return;
    }
    if (ix >= w || ix + 1 < 0 || iy >= h || iy + 1 < 0) {  // all four outside
        for (int c = 0; c < C; ++c) out[c] = 0;
        return;
    }
    const bool x0 = ix >= 0, x1 = ix + 1 < w, y0 = iy >= 0, y1 = iy + 1 < h;
    const long r0 = static_cast<long>(iy) * stride, r1 = r0 + stride;  // offsets: only those of inside pixels are read
    for (int c = 0; c < C; ++c) {
        int s = 0;
        if (y0 && x0) s += src[r0 + ix * C + c] * w00;
        if (y0 && x1) s += src[r0 + (ix + 1) * C + c] * w01;
        if (y1 && x0) s += src[r1 + ix * C + c] * w10;
        if (y1 && x1) s += src[r1 + (ix + 1) * C + c] * w11;
        out[c] = static_cast<uint8_t>((s + 512) >> 10);
    }
}

}  // namespace mf
