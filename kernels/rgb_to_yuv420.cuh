// RGB -> YUV 4:2:0, limited range (Y 16..235, Cb/Cr 16..240), the colour model of the H.264
// outputs, in 16-bit fixed point. BT.601:
//     Y  = 16  + ( 16829 R + 33039 G +  6416 B) / 2^16            (rounded)
//     Cb = 128 + ( -9714 R - 19070 G + 28784 B) / 2^16            over the mean of a 2x2 block
//     Cr = 128 + ( 28784 R - 24103 G -  4681 B) / 2^16            over the mean of a 2x2 block
// BT.709: Y (11966, 40254, 4064), Cb (-6596, -22188, 28784), Cr (28784, -26145, -2639).
// The coefficients are 219/255 (luma) and 224/255 (chroma) times the standard's matrix, scaled by
// 2^16 and rounded; each chroma row sums to 0, so grey maps to Cb = Cr = 128 exactly. Chroma uses the box
// average of its 2x2 luma block (centre siting); at an odd right or bottom edge the last column or
// row stands in for the missing one. Every intermediate is non-negative, so the shifts round.
// With a selection mask (one byte per pixel, frame-sized), a luma sample is written only where its
// mask value is non-zero and a block's chroma only where any of the block's mask values is: the
// rest of the planes keeps what it held (e.g. the decoded samples outside a blurred face).
#pragma once
#include "rect.cuh"
#include "common.cuh"

namespace mf {

struct YuvMatrix {
    int yr, yg, yb, cbr, cbg, cbb, crr, crg, crb;
};
constexpr YuvMatrix kBt601{16829, 33039, 6416, -9714, -19070, 28784, 28784, -24103, -4681};
constexpr YuvMatrix kBt709{11966, 40254, 4064, -6596, -22188, 28784, 28784, -26145, -2639};

MF_HD uint8_t yuv_luma(const YuvMatrix& m, int r, int g, int b) {
    return static_cast<uint8_t>((m.yr * r + m.yg * g + m.yb * b + (16 << 16) + (1 << 15)) >> 16);
}

// Chroma from the sums of the four pixels of a 2x2 block (each sum in [0, 1020]).
MF_HD uint8_t yuv_cb_sum4(const YuvMatrix& m, int r4, int g4, int b4) {
    return static_cast<uint8_t>((m.cbr * r4 + m.cbg * g4 + m.cbb * b4 + (128 << 18) + (1 << 17)) >> 18);
}
MF_HD uint8_t yuv_cr_sum4(const YuvMatrix& m, int r4, int g4, int b4) {
    return static_cast<uint8_t>((m.crr * r4 + m.crg * g4 + m.crb * b4 + (128 << 18) + (1 << 17)) >> 18);
}

// Planes of a 4:2:0 frame: Y is height x width, Cb and Cr are ceil(height/2) x ceil(width/2);
// strides in bytes.
struct Yuv420Planes {
    uint8_t* y;
    uint8_t* u;
    uint8_t* v;
    long y_stride, u_stride, v_stride;
};

// Optional selection mask: data == nullptr selects every pixel; stride in bytes.
struct YuvSelect {
    const uint8_t* data;
    long stride;
};

// The 2x2 block of chroma sample (cx, cy): its (up to four) luma samples and one Cb, Cr.
// src: interleaved RGB (channels >= 3, the first three R, G, B), row stride in bytes.
MF_HD void yuv420_block(const uint8_t* src, long stride, int channels, int width, int height, int cx, int cy,
                        const Yuv420Planes& p, const YuvMatrix& m, YuvSelect sel = YuvSelect{nullptr, 0}) {
    const int x0 = 2 * cx, y0 = 2 * cy;
    const int x1 = imin(x0 + 1, width - 1), y1 = imin(y0 + 1, height - 1);
    const int xs[2] = {x0, x1}, ys[2] = {y0, y1};
    int r4 = 0, g4 = 0, b4 = 0;
    bool any = sel.data == nullptr;
    for (int j = 0; j < 2; ++j) {
        const uint8_t* row = src + ys[j] * stride;
        for (int i = 0; i < 2; ++i) {
            const uint8_t* px = row + xs[i] * channels;
            const int r = px[0], g = px[1], b = px[2];
            r4 += r;
            g4 += g;
            b4 += b;
            if (x0 + i < width && y0 + j < height) {
                const bool on = sel.data == nullptr || sel.data[(y0 + j) * sel.stride + x0 + i] != 0;
                any = any || on;
                if (on) p.y[(y0 + j) * p.y_stride + x0 + i] = yuv_luma(m, r, g, b);
            }
        }
    }
    if (!any) return;
    p.u[cy * p.u_stride + cx] = yuv_cb_sum4(m, r4, g4, b4);
    p.v[cy * p.v_stride + cx] = yuv_cr_sum4(m, r4, g4, b4);
}

// The chroma blocks that cover a luma rectangle (x, y, w, h): [cx0, cx1) x [cy0, cy1).
MF_HD void yuv420_block_range(Rect roi, int& cx0, int& cx1, int& cy0, int& cy1) {
    cx0 = roi.x / 2;
    cy0 = roi.y / 2;
    cx1 = (roi.x + roi.w + 1) / 2;
    cy1 = (roi.y + roi.h + 1) / 2;
}

}  // namespace mf
