// YUV 4:2:0 -> RGB, limited range (Y 16..235, Cb/Cr 16..240), the inverse of
// kernels/rgb_to_yuv420.cuh, in 16-bit fixed point. With Y' = Y - 16, U' = Cb - 128, V' = Cr - 128:
//     R = clamp((cy Y'           + crv V' + 2^15) >> 16)
//     G = clamp((cy Y' + cgu U'  + cgv V' + 2^15) >> 16)
//     B = clamp((cy Y' + cbu U'           + 2^15) >> 16)          clamp to 0..255, >> a floor division
// BT.601: cy 76309, crv 104597, cgu -25675, cgv -53279, cbu 132201.
// BT.709: cy 76309, crv 117489, cgu -13975, cgv -34925, cbu 138438.
// The coefficients are 255/219 (luma) and 255/224 (chroma) times the standard's inverse matrix,
// scaled by 2^16 and rounded. Chroma is replicated: pixel (x, y) uses the Cb, Cr sample
// (x / 2, y / 2), the structural inverse of rgb_to_yuv420's 2x2 box average (OpenCV's I420
// converter does the same).
// The sums lie in (-2^25, 2^26); kYuvToRgbBias = 512 * 2^16 is added before the shift and 512
// subtracted after, so no negative number is ever right-shifted and the shift is the floor
// division on every compiler. Integer arithmetic only: every path gives the same bytes.
#pragma once
#include "rect.cuh"
#include "common.cuh"

namespace mf {

struct YuvToRgbMatrix {
    int cy, crv, cgu, cgv, cbu;
};
constexpr YuvToRgbMatrix kYuvToRgbBt601{76309, 104597, -25675, -53279, 132201};
constexpr YuvToRgbMatrix kYuvToRgbBt709{76309, 117489, -13975, -34925, 138438};
constexpr int kYuvToRgbBias = 512 << 16;

// Everything of a channel's biased sum but the luma product cy * Y: the luma offset -16 cy, the
// chroma products, the rounding 2^15 and the bias. In [2^23, 2^26) for both matrices.
MF_HD int yuv_rgb_offset(const YuvToRgbMatrix& m) { return kYuvToRgbBias + (1 << 15) - 16 * m.cy; }
MF_HD int yuv_rgb_term_r(const YuvToRgbMatrix& m, int u, int v) { return m.crv * (v - 128) + yuv_rgb_offset(m); }
MF_HD int yuv_rgb_term_g(const YuvToRgbMatrix& m, int u, int v) {
    return m.cgu * (u - 128) + m.cgv * (v - 128) + yuv_rgb_offset(m);
}
MF_HD int yuv_rgb_term_b(const YuvToRgbMatrix& m, int u, int v) { return m.cbu * (u - 128) + yuv_rgb_offset(m); }

// A channel from cy * Y plus its term: the shift, the bias taken off, the clamp.
MF_HD uint8_t yuv_rgb_channel(int sum) {
    const int c = (sum >> 16) - 512;
    return static_cast<uint8_t>(c < 0 ? 0 : (c > 255 ? 255 : c));
}

MF_HD void yuv_to_rgb(const YuvToRgbMatrix& m, int y, int u, int v, uint8_t* rgb) {
    const int l = m.cy * y;
    rgb[0] = yuv_rgb_channel(l + yuv_rgb_term_r(m, u, v));
    rgb[1] = yuv_rgb_channel(l + yuv_rgb_term_g(m, u, v));
    rgb[2] = yuv_rgb_channel(l + yuv_rgb_term_b(m, u, v));
}

// Pixel x of a luma row, given the chroma rows of its 2x2 block: R, G, B into rgb.
MF_HD void yuv420_to_rgb_pixel(const uint8_t* yrow, const uint8_t* urow, const uint8_t* vrow, int x,
                               const YuvToRgbMatrix& m, uint8_t* rgb) {
    yuv_to_rgb(m, yrow[x], urow[x >> 1], vrow[x >> 1], rgb);
}

// Read-only planes of a 4:2:0 frame (strides in bytes).
struct Yuv420ConstPlanes {
    const uint8_t* y;
    const uint8_t* u;
    const uint8_t* v;
    long y_stride, u_stride, v_stride;
};

}  // namespace mf
