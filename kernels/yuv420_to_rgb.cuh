// YUV 4:2:0 -> RGB, limited range (Y 16..235, Cb/Cr 16..240), in 16-bit fixed point: the inverse
// of kernels/rgb_to_yuv420.cuh, used to read decoded video frames. With Y' = Y - 16, U' = Cb - 128,
// V' = Cr - 128:
//     R = (cy Y' + crv V'          + 2^15) >> 16
//     G = (cy Y' + cgu U' + cgv V' + 2^15) >> 16          each clamped to 0..255
//     B = (cy Y' + cbu U'          + 2^15) >> 16
// cy = 255/219 and the chroma terms 255/224 times the standard's matrix, scaled by 2^16 and rounded:
// BT.601 (76309, 104597, -25675, -53279, 132201), BT.709 (76309, 117489, -13975, -34925, 138438).
// The shift is a floor: a bias of 512 * 2^16 keeps every sum non-negative before it (the sums lie
// in about (-225, 540) * 2^16) and is taken off after. Pixel (x, y) takes the chroma of its 2x2
// block, (x / 2, y / 2): the structural inverse of rgb_to_yuv420's block average, and what FFmpeg's
// own unscaled converter does.
#pragma once
#include "../csrc/image.hpp"
#include "common.cuh"

namespace mf {

struct RgbMatrix {
    int cy, crv, cgu, cgv, cbu;
};
constexpr RgbMatrix kRgbBt601{76309, 104597, -25675, -53279, 132201};
constexpr RgbMatrix kRgbBt709{76309, 117489, -13975, -34925, 138438};

constexpr int kRgbBias = (512 << 16) + (1 << 15);  // floor bias + rounding

MF_HD uint8_t rgb_clamp(int v) {  // v: the biased sum
    const int x = (v >> 16) - 512;
    return static_cast<uint8_t>(x < 0 ? 0 : (x > 255 ? 255 : x));
}

// Chroma terms of one block: what every pixel of the block adds to its luma term.
struct RgbChroma {
    int r, g, b;
};
MF_HD RgbChroma rgb_chroma(const RgbMatrix& m, int u, int v) {
    const int up = u - 128, vp = v - 128;
    return RgbChroma{m.crv * vp + kRgbBias, m.cgu * up + m.cgv * vp + kRgbBias, m.cbu * up + kRgbBias};
}

MF_HD void rgb_pixel(const RgbMatrix& m, int y, const RgbChroma& c, uint8_t* out) {
    const int l = m.cy * (y - 16);
    out[0] = rgb_clamp(l + c.r);
    out[1] = rgb_clamp(l + c.g);
    out[2] = rgb_clamp(l + c.b);
}

// Read-only planes of a 4:2:0 frame (strides in bytes).
struct Yuv420ConstPlanes {
    const uint8_t* y;
    const uint8_t* u;
    const uint8_t* v;
    long y_stride, u_stride, v_stride;
};

// Pixel (x, y) of the frame into out (3 bytes).
MF_HD void yuv420_to_rgb_pixel(const Yuv420ConstPlanes& p, const RgbMatrix& m, int x, int y, uint8_t* out) {
    const RgbChroma c = rgb_chroma(m, p.u[(y / 2) * p.u_stride + x / 2], p.v[(y / 2) * p.v_stride + x / 2]);
    rgb_pixel(m, p.y[y * p.y_stride + x], c, out);
}

}  // namespace mf
