#include "yuv420_to_rgb.hpp"

#include <string>

#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {
namespace {

Yuv420ConstPlanes planes(const Yuv420ConstViews& in) {
    return Yuv420ConstPlanes{in.y.data, in.u.data, in.v.data, static_cast<long>(in.y.row_stride),
                             static_cast<long>(in.u.row_stride), static_cast<long>(in.v.row_stride)};
}

constexpr int kSpan = 256;  // pixels per pass over a row: the temporaries stay in L1

// Pixels [x0, x0 + n) of one row (n <= kSpan, x0 even): the same arithmetic as yuv420_to_rgb_pixel,
// in passes that vectorise: each block's chroma terms applied to its two pixels, one channel
// plane at a time, then the three planes interleaved.
MF_TARGET_CLONES void row_span(const uint8_t* __restrict y, const uint8_t* __restrict u, const uint8_t* __restrict v,
                               int n, uint8_t* __restrict out, const RgbMatrix m) {
    uint8_t r8[kSpan + 1], g8[kSpan + 1], b8[kSpan + 1];
    const int pairs = n / 2;
    for (int k = 0; k < pairs; ++k) {
        const int up = u[k] - 128, vp = v[k] - 128;
        const int cr = m.crv * vp + kRgbBias, cg = m.cgu * up + m.cgv * vp + kRgbBias, cb = m.cbu * up + kRgbBias;
        const int l0 = m.cy * (y[2 * k] - 16), l1 = m.cy * (y[2 * k + 1] - 16);
        r8[2 * k] = rgb_clamp(l0 + cr);
        r8[2 * k + 1] = rgb_clamp(l1 + cr);
        g8[2 * k] = rgb_clamp(l0 + cg);
        g8[2 * k + 1] = rgb_clamp(l1 + cg);
        b8[2 * k] = rgb_clamp(l0 + cb);
        b8[2 * k + 1] = rgb_clamp(l1 + cb);
    }
    if (n % 2) {  // an odd last column: the left pixel of its block
        uint8_t px[3];
        rgb_pixel(m, y[n - 1], rgb_chroma(m, u[pairs], v[pairs]), px);
        r8[n - 1] = px[0];
        g8[n - 1] = px[1];
        b8[n - 1] = px[2];
    }
    for (int i = 0; i < n; ++i) {
        out[3 * i] = r8[i];
        out[3 * i + 1] = g8[i];
        out[3 * i + 2] = b8[i];
    }
}

void convert_rows(const Yuv420ConstPlanes& p, Rect r, const ImageU8& out, const RgbMatrix& m, int row_begin,
                  int row_end) {
    for (int j = row_begin; j < row_end; ++j) {
        const int y = r.y + j;
        uint8_t* dst = out.row(j);
        int x = r.x;
        if (x % 2) {  // an odd first column: its block's right pixel alone
            yuv420_to_rgb_pixel(p, m, x, y, dst);
            ++x;
            dst += 3;
        }
        const uint8_t* py = p.y + y * p.y_stride;
        const uint8_t* pu = p.u + (y / 2) * p.u_stride;
        const uint8_t* pv = p.v + (y / 2) * p.v_stride;
        const int x1 = r.x + r.w;
        while (x < x1) {
            const int n = imin(kSpan, x1 - x);
            row_span(py + x, pu + x / 2, pv + x / 2, n, dst, m);
            x += n;
            dst += 3 * n;
        }
    }
}

void check_plane(const ConstImageU8& v, int h, int w, const char* name) {
    if (v.channels != 1 || v.height != h || v.width != w)
        invalid(std::string(name) + " plane must be " + std::to_string(h) + "x" + std::to_string(w) + ", got " +
                std::to_string(v.height) + "x" + std::to_string(v.width));
    if (v.row_stride < w) invalid(std::string(name) + " plane rows overlap (row stride below its width)");
}

}  // namespace

Rect check_yuv420_to_rgb_args(const Yuv420ConstViews& in, Rect roi, const ImageU8& out) {
    const int h = in.y.height, w = in.y.width;
    check_plane(in.y, h, w, "y");
    check_plane(in.u, (h + 1) / 2, (w + 1) / 2, "u");
    check_plane(in.v, (h + 1) / 2, (w + 1) / 2, "v");
    Rect r = roi;
    if (roi.w == 0 && roi.h == 0 && roi.x == 0 && roi.y == 0) r = Rect{0, 0, w, h};
    else if (!rect_inside(roi, w, h)) invalid("roi " + rect_str(roi) + " is not inside the frame");
    if (out.channels != 3 || out.height != r.h || out.width != r.w)
        invalid("out must be " + std::to_string(r.h) + "x" + std::to_string(r.w) + "x3, got " +
                std::to_string(out.height) + "x" + std::to_string(out.width) + "x" + std::to_string(out.channels));
    return r;
}

void yuv420_to_rgb_cpu(const Yuv420ConstViews& in, Rect roi, const ImageU8& out, const RgbMatrix& m) {
    const Rect r = check_yuv420_to_rgb_args(in, roi, out);
    const Yuv420ConstPlanes p = planes(in);
    const int grain = imax(1, 16384 / imax(1, r.w));  // about 16k pixels per chunk
    parallel_for(r.h, grain, [&](int b, int e) { convert_rows(p, r, out, m, b, e); });
}

void yuv420_to_rgb_reference(const Yuv420ConstViews& in, Rect roi, const ImageU8& out, const RgbMatrix& m) {
    const Rect r = check_yuv420_to_rgb_args(in, roi, out);
    const Yuv420ConstPlanes p = planes(in);
    for (int j = 0; j < r.h; ++j)
        for (int i = 0; i < r.w; ++i) yuv420_to_rgb_pixel(p, m, r.x + i, r.y + j, out.row(j) + 3 * i);
}

}  // namespace mf
