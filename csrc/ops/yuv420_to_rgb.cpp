#include "yuv420_to_rgb.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {
namespace {

// The fast path computes the channels in 16-bit lanes (twice as many per vector as int32). With T
// a channel's term (yuv_rgb_term_*, in [2^23, 2^26)), cy = 2^16 + k (0 <= k < 2^16) and
// k Y = 2^16 ph + pl:
//     (cy Y + T) >> 16 = Y + ph + (T >> 16) + carry,   carry = 1 if pl + (T mod 2^16) >= 2^16
// so the channel, yuv_rgb_channel(cy Y + T), is clamp(Y + ph + hi + carry) with hi = (T >> 16) - 512,
// every value an int16: the same integer, exactly. The carry is pl > 2^16 - 1 - (T mod 2^16), an
// unsigned compare, made one signed compare instruction by flipping the top bits: lo holds
// (2^16 - 1 - T mod 2^16) ^ 0x8000 = (T mod 2^16) ^ 0x7fff and the pixel loop compares pl ^ 0x8000.
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// The chroma stage works in 16-bit lanes too. A channel's term is T = off + cu U + cv V with U, V
// the raw samples (0..255) and off = yuv_rgb_offset - 128 (cu + cv); T >= 2^23 (see the header).
// With every constant split as 2^16 h + 2^8 mid + low (mid, low in 0..255), T >> 16 is assembled
// from byte-sized partial products, carrying 8 bits at a time; for one product
//     s0 = off.low + cu.low U,   s1 = (s0 >> 8) + off.mid + cu.mid U,   T >> 16 = off.h + cu.h U + (s1 >> 8)
// with every partial sum in 0..65535 (a second product adds its low and mid parts to the bytes
// s0 & 255 and s1 & 255 the same way), and T mod 2^16 is plain wrapping 16-bit arithmetic.
struct Split {
    int16_t h;
    uint16_t mid, low;
    uint16_t mod16() const { return static_cast<uint16_t>(mid << 8 | low); }
};

Split split(int c) {
    int rest = c % 65536;  // 0..65535, also for c < 0 (no shift of a negative number)
    if (rest < 0) rest += 65536;
    return Split{static_cast<int16_t>((c - rest) / 65536), static_cast<uint16_t>(rest >> 8),
                 static_cast<uint16_t>(rest & 255)};
}

struct ChromaSplit {
    Split off_r, off_g, off_b, crv, cgu, cgv, cbu;
};

ChromaSplit chroma_split(const YuvToRgbMatrix& m) {
    const int off = yuv_rgb_offset(m);
    return ChromaSplit{split(off - 128 * m.crv), split(off - 128 * (m.cgu + m.cgv)), split(off - 128 * m.cbu),
                       split(m.crv), split(m.cgu), split(m.cgv), split(m.cbu)};
}

// lo, hi of T = off + c x (see above).
inline void split_term1(uint16_t x, Split off, Split c, int16_t& lo, int16_t& hi) {
    const uint16_t s0 = static_cast<uint16_t>(off.low + c.low * x);
    const uint16_t s1 = static_cast<uint16_t>((s0 >> 8) + off.mid + c.mid * x);
    hi = static_cast<int16_t>(off.h + c.h * x + (s1 >> 8) - 512);
    lo = static_cast<int16_t>(static_cast<uint16_t>(off.mod16() + c.mod16() * x) ^ 0x7fff);
}

// lo, hi of T = off + cu u + cv v.
inline void split_term2(uint16_t u, uint16_t v, Split off, Split cu, Split cv, int16_t& lo, int16_t& hi) {
    const uint16_t s0 = static_cast<uint16_t>(off.low + cu.low * u);
    const uint16_t s0v = static_cast<uint16_t>((s0 & 255) + cv.low * v);
    const uint16_t s1 = static_cast<uint16_t>((s0 >> 8) + off.mid + cu.mid * u);
    const uint16_t s1v = static_cast<uint16_t>((s1 & 255) + (s0v >> 8) + cv.mid * v);
    hi = static_cast<int16_t>(off.h + cu.h * u + cv.h * v + (s1 >> 8) + (s1v >> 8) - 512);
    lo = static_cast<int16_t>(static_cast<uint16_t>(off.mod16() + cu.mod16() * u + cv.mod16() * v) ^ 0x7fff);
}

// The split terms of the chroma samples [0, n) of a chroma row, per channel.
MF_TARGET_CLONES void chroma_terms(const uint8_t* __restrict u, const uint8_t* __restrict v, int n,
                                   const ChromaSplit k, int16_t* __restrict lr, int16_t* __restrict lg,
                                   int16_t* __restrict lb, int16_t* __restrict hr, int16_t* __restrict hg,
                                   int16_t* __restrict hb) {
    for (int c = 0; c < n; ++c) {
        const uint16_t uc = u[c], vc = v[c];
        split_term1(vc, k.off_r, k.crv, lr[c], hr[c]);
        split_term2(uc, vc, k.off_g, k.cgu, k.cgv, lg[c], hg[c]);
        split_term1(uc, k.off_b, k.cbu, lb[c], hb[c]);
    }
}

// One channel, 0..255, from the pixel's pl ^ 0x8000 and Y + ph, and the split term.
inline uint16_t channel16(int16_t plx, int16_t base, int16_t lo, int16_t hi) {
    int16_t t = static_cast<int16_t>(base + hi + (plx > lo));
    t = t < 0 ? 0 : t;
    t = t > 255 ? 255 : t;
    return static_cast<uint16_t>(t);
}

// Pixels [0, 2n) of a luma row whose pair c shares chroma sample c, into interleaved RGB. Luma is
// read, and RGB written, as 16-bit words (little endian: the even pixel in the low byte), three
// output words per pair, so the compiler interleaves words, not bytes.
MF_TARGET_CLONES void rgb_pairs(const uint8_t* __restrict y, int n, uint16_t k, const int16_t* __restrict lr,
                                const int16_t* __restrict lg, const int16_t* __restrict lb,
                                const int16_t* __restrict hr, const int16_t* __restrict hg,
                                const int16_t* __restrict hb, uint8_t* __restrict out) {
    for (int c = 0; c < n; ++c) {
        uint16_t pair;
        std::memcpy(&pair, y + 2 * c, 2);
        const uint16_t y0 = pair & 0xff, y1 = pair >> 8;
        const int16_t plx0 = static_cast<int16_t>(static_cast<uint16_t>(y0 * k) ^ 0x8000);
        const int16_t plx1 = static_cast<int16_t>(static_cast<uint16_t>(y1 * k) ^ 0x8000);
        const int16_t base0 = static_cast<int16_t>(y0 + static_cast<uint16_t>((static_cast<uint32_t>(y0) * k) >> 16));
        const int16_t base1 = static_cast<int16_t>(y1 + static_cast<uint16_t>((static_cast<uint32_t>(y1) * k) >> 16));
        const uint16_t r0 = channel16(plx0, base0, lr[c], hr[c]);
        const uint16_t g0 = channel16(plx0, base0, lg[c], hg[c]);
        const uint16_t b0 = channel16(plx0, base0, lb[c], hb[c]);
        const uint16_t r1 = channel16(plx1, base1, lr[c], hr[c]);
        const uint16_t g1 = channel16(plx1, base1, lg[c], hg[c]);
        const uint16_t b1 = channel16(plx1, base1, lb[c], hb[c]);
        const uint16_t w0 = static_cast<uint16_t>(r0 | g0 << 8), w1 = static_cast<uint16_t>(b0 | r1 << 8),
                       w2 = static_cast<uint16_t>(g1 | b1 << 8);
        std::memcpy(out + 6 * c, &w0, 2);
        std::memcpy(out + 6 * c + 2, &w1, 2);
        std::memcpy(out + 6 * c + 4, &w2, 2);
    }
}

// The rows of r in the chroma rows [cy_begin, cy_end).
void convert_rows(const Yuv420ConstViews& in, Rect r, const ImageU8& dst, const YuvToRgbMatrix& m, int cy_begin,
                  int cy_end) {
    // Whole chroma pairs [xa, xa + 2n) by the 16-bit path; the pixel before (odd origin) and after
    // (odd end) by the shared per-pixel body, as is everything where the split does not apply.
    const int x1 = r.x + r.w;
    const int xa = imin(r.x + (r.x & 1), x1);
    const bool split = kLittleEndian && m.cy >= (1 << 16) && m.cy < (1 << 17);
    const int n = split ? (x1 - xa) / 2 : 0;
    const uint16_t k = static_cast<uint16_t>(m.cy - (1 << 16));
    const ChromaSplit ks = chroma_split(m);
    std::vector<int16_t> lo(3 * static_cast<size_t>(n)), hi(3 * static_cast<size_t>(n));
    for (int cy = cy_begin; cy < cy_end; ++cy) {
        const uint8_t* urow = in.u.row(cy);
        const uint8_t* vrow = in.v.row(cy);
        if (n > 0)
            chroma_terms(urow + xa / 2, vrow + xa / 2, n, ks, lo.data(), lo.data() + n, lo.data() + 2 * n, hi.data(),
                         hi.data() + n, hi.data() + 2 * n);
        const int row_end = imin(2 * cy + 2, r.y + r.h);
        for (int y = imax(2 * cy, r.y); y < row_end; ++y) {
            const uint8_t* yrow = in.y.row(y);
            uint8_t* drow = dst.row(y - r.y);
            for (int x = r.x; x < xa; ++x) yuv420_to_rgb_pixel(yrow, urow, vrow, x, m, drow + 3 * (x - r.x));
            if (n > 0)
                rgb_pairs(yrow + xa, n, k, lo.data(), lo.data() + n, lo.data() + 2 * n, hi.data(), hi.data() + n,
                          hi.data() + 2 * n, drow + 3 * (xa - r.x));
            for (int x = xa + 2 * n; x < x1; ++x) yuv420_to_rgb_pixel(yrow, urow, vrow, x, m, drow + 3 * (x - r.x));
        }
    }
}

}  // namespace

Rect check_yuv420_to_rgb_args(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst) {
    const int h = in.y.height, w = in.y.width;
    if (h <= 0 || w <= 0) invalid("y plane is empty");
    check_plane(in.y, h, w, "y");
    check_plane(in.u, (h + 1) / 2, (w + 1) / 2, "u");
    check_plane(in.v, (h + 1) / 2, (w + 1) / 2, "v");
    if (roi.w < 0 || roi.h < 0 || roi.x < 0 || roi.y < 0 || roi.x > w - roi.w || roi.y > h - roi.h)
        invalid("roi " + rect_str(roi) + " is not inside the " + std::to_string(w) + "x" + std::to_string(h) +
                " frame");
    if (dst.channels != 3 || dst.height != roi.h || dst.width != roi.w)
        invalid("out must be " + std::to_string(roi.h) + "x" + std::to_string(roi.w) + "x3, got " +
                std::to_string(dst.height) + "x" + std::to_string(dst.width) + "x" + std::to_string(dst.channels));
    if (dst.row_stride < 3 * static_cast<std::ptrdiff_t>(roi.w))
        invalid("out rows overlap (row stride below 3 x width)");
    return roi;
}

void yuv420_to_rgb_cpu(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m) {
    const Rect r = check_yuv420_to_rgb_args(in, roi, dst);
    if (r.empty()) return;
    const int cy0 = r.y / 2, cy1 = (r.y + r.h + 1) / 2;
    // about 16k pixels per chunk (two luma rows per chroma row)
    const int grain = imax(1, 8192 / r.w);
    parallel_for(cy1 - cy0, grain, [&](int b, int e) { convert_rows(in, r, dst, m, cy0 + b, cy0 + e); });
}

void yuv420_to_rgb_reference(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m) {
    const Rect r = check_yuv420_to_rgb_args(in, roi, dst);
    for (int j = 0; j < r.h; ++j) {
        const int y = r.y + j;
        for (int i = 0; i < r.w; ++i)
            yuv420_to_rgb_pixel(in.y.row(y), in.u.row(y >> 1), in.v.row(y >> 1), r.x + i, m, dst.row(j) + 3 * i);
    }
}

}  // namespace mf
