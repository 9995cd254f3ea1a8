#include "rgb_to_yuv420.hpp"

#include <string>

#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {
namespace {

Yuv420Planes planes(const Yuv420Views& o) {
    return Yuv420Planes{o.y.data, o.u.data, o.v.data, static_cast<long>(o.y.row_stride),
                        static_cast<long>(o.u.row_stride), static_cast<long>(o.v.row_stride)};
}

YuvSelect select(const ConstImageU8& mask) {
    return YuvSelect{mask.data, static_cast<long>(mask.row_stride)};
}

// Two full luma rows and their chroma row, for the blocks [cx0, cx1) that lie wholly inside the
// frame (both columns and both rows exist). Same arithmetic as yuv420_block, laid out so the
// compiler vectorises it. Masked: m0/m1 are the two mask rows; unselected samples keep their value.
template <int C, bool Masked>
MF_TARGET_CLONES void row_pair(const uint8_t* __restrict r0, const uint8_t* __restrict r1, int cx0, int cx1,
                               uint8_t* __restrict y0, uint8_t* __restrict y1, uint8_t* __restrict u,
                               uint8_t* __restrict v, const uint8_t* __restrict m0, const uint8_t* __restrict m1,
                               const YuvMatrix m) {
    for (int cx = cx0; cx < cx1; ++cx) {
        const uint8_t* a = r0 + 2 * cx * C;
        const uint8_t* b = r1 + 2 * cx * C;
        const int ra = a[0], ga = a[1], ba = a[2], rb = a[C], gb = a[C + 1], bb = a[C + 2];
        const int rc = b[0], gc = b[1], bc = b[2], rd = b[C], gd = b[C + 1], bd = b[C + 2];
        const uint8_t ya = yuv_luma(m, ra, ga, ba), yb = yuv_luma(m, rb, gb, bb);
        const uint8_t yc = yuv_luma(m, rc, gc, bc), yd = yuv_luma(m, rd, gd, bd);
        const int r4 = ra + rb + rc + rd, g4 = ga + gb + gc + gd, b4 = ba + bb + bc + bd;
        const uint8_t cb = yuv_cb_sum4(m, r4, g4, b4), cr = yuv_cr_sum4(m, r4, g4, b4);
        if constexpr (Masked) {
            const bool sa = m0[2 * cx] != 0, sb = m0[2 * cx + 1] != 0, sc = m1[2 * cx] != 0, sd = m1[2 * cx + 1] != 0;
            const bool any = sa | sb | sc | sd;
            y0[2 * cx] = sa ? ya : y0[2 * cx];
            y0[2 * cx + 1] = sb ? yb : y0[2 * cx + 1];
            y1[2 * cx] = sc ? yc : y1[2 * cx];
            y1[2 * cx + 1] = sd ? yd : y1[2 * cx + 1];
            u[cx] = any ? cb : u[cx];
            v[cx] = any ? cr : v[cx];
        } else {
            y0[2 * cx] = ya;
            y0[2 * cx + 1] = yb;
            y1[2 * cx] = yc;
            y1[2 * cx + 1] = yd;
            u[cx] = cb;
            v[cx] = cr;
        }
    }
}

template <int C>
void row_pair_any(const uint8_t* r0, const uint8_t* r1, int cx0, int cx1, uint8_t* y0, uint8_t* y1, uint8_t* u,
                  uint8_t* v, const uint8_t* m0, const uint8_t* m1, const YuvMatrix& m) {
    if (m0 != nullptr) row_pair<C, true>(r0, r1, cx0, cx1, y0, y1, u, v, m0, m1, m);
    else row_pair<C, false>(r0, r1, cx0, cx1, y0, y1, u, v, m0, m1, m);
}

void convert_rows(const ConstImageU8& src, const Yuv420Planes& p, const YuvMatrix& m, YuvSelect sel, int cx0, int cx1,
                  int cy_begin, int cy_end) {
    const int full_cx1 = imin(cx1, src.width / 2);  // blocks with both columns inside the frame
    const long stride = static_cast<long>(src.row_stride);
    for (int cy = cy_begin; cy < cy_end; ++cy) {
        const int y0 = 2 * cy;
        if (y0 + 1 < src.height && cx0 < full_cx1) {
            const uint8_t* r0 = src.row(y0);
            const uint8_t* r1 = src.row(y0 + 1);
            uint8_t* py0 = p.y + y0 * p.y_stride;
            uint8_t* pu = p.u + cy * p.u_stride;
            uint8_t* pv = p.v + cy * p.v_stride;
            const uint8_t* m0 = sel.data == nullptr ? nullptr : sel.data + y0 * sel.stride;
            const uint8_t* m1 = m0 == nullptr ? nullptr : m0 + sel.stride;
            if (src.channels == 3) row_pair_any<3>(r0, r1, cx0, full_cx1, py0, py0 + p.y_stride, pu, pv, m0, m1, m);
            else row_pair_any<4>(r0, r1, cx0, full_cx1, py0, py0 + p.y_stride, pu, pv, m0, m1, m);
            for (int cx = full_cx1; cx < cx1; ++cx)  // odd width: the last column's block
                yuv420_block(src.data, stride, src.channels, src.width, src.height, cx, cy, p, m, sel);
        } else {
            for (int cx = cx0; cx < cx1; ++cx)
                yuv420_block(src.data, stride, src.channels, src.width, src.height, cx, cy, p, m, sel);
        }
    }
}

}  // namespace

Rect check_rgb_to_yuv420_args(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const ConstImageU8& mask) {
    if (src.channels != 3 && src.channels != 4) invalid("frame must have 3 (RGB) or 4 (RGBX) channels");
    check_plane(as_const(out.y), src.height, src.width, "y");
    check_plane(as_const(out.u), (src.height + 1) / 2, (src.width + 1) / 2, "u");
    check_plane(as_const(out.v), (src.height + 1) / 2, (src.width + 1) / 2, "v");
    if (mask.data != nullptr && (mask.channels != 1 || mask.height != src.height || mask.width != src.width))
        invalid("mask must be " + std::to_string(src.height) + "x" + std::to_string(src.width) +
                " (the frame's size), got " + std::to_string(mask.height) + "x" + std::to_string(mask.width));
    if (roi.w == 0 && roi.h == 0 && roi.x == 0 && roi.y == 0) return src.bounds();
    if (!rect_inside(roi, src.width, src.height)) invalid("roi " + rect_str(roi) + " is not inside the frame");
    return roi;
}

namespace {

// What both paths convert: the checked region's blocks [cx0, cx1) x [cy0, cy1), planes and selection.
struct Job {
    int cx0, cx1, cy0, cy1;
    Yuv420Planes p;
    YuvSelect sel;
};

Job prepare(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const ConstImageU8& mask) {
    Job j{};
    yuv420_block_range(check_rgb_to_yuv420_args(src, roi, out, mask), j.cx0, j.cx1, j.cy0, j.cy1);
    j.p = planes(out);
    j.sel = select(mask);
    return j;
}

}  // namespace

void rgb_to_yuv420_cpu(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                       const ConstImageU8& mask) {
    const Job j = prepare(src, roi, out, mask);
    // about 16k pixels per chunk
    const int grain = imax(1, 4096 / imax(1, j.cx1 - j.cx0));
    parallel_for(j.cy1 - j.cy0, grain,
                 [&](int b, int e) { convert_rows(src, j.p, m, j.sel, j.cx0, j.cx1, j.cy0 + b, j.cy0 + e); });
}

void rgb_to_yuv420_reference(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                             const ConstImageU8& mask) {
    const Job j = prepare(src, roi, out, mask);
    for (int cy = j.cy0; cy < j.cy1; ++cy)
        for (int cx = j.cx0; cx < j.cx1; ++cx)
            yuv420_block(src.data, static_cast<long>(src.row_stride), src.channels, src.width, src.height, cx, cy, j.p,
                         m, j.sel);
}

}  // namespace mf
