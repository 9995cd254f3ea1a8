#include "area_resize.hpp"

#include <cfloat>
#include <cmath>
#include <string>

#include <algorithm>
#include <vector>

#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {

AreaTable area_table(int ssize, int dsize) {
    // OpenCV: inv_scale = (double)dsize / ssize in cv::resize, scale = 1. / inv_scale in hal::resize.
    const double scale = 1.0 / (static_cast<double>(dsize) / ssize);
    AreaTable t;
    t.span.resize(static_cast<size_t>(dsize));
    t.src.reserve(static_cast<size_t>(ssize) * 2);
    t.weight.reserve(static_cast<size_t>(ssize) * 2);
    const auto add = [&](int s, float w) {
        t.src.push_back(s);
        t.weight.push_back(w);
    };
    for (int dx = 0; dx < dsize; ++dx) {
        const int start = static_cast<int>(t.src.size());
        const double fsx1 = dx * scale;
        const double fsx2 = fsx1 + scale;
        const double cell = std::min(scale, ssize - fsx1);
        int sx1 = static_cast<int>(std::ceil(fsx1)), sx2 = static_cast<int>(std::floor(fsx2));
        sx2 = std::min(sx2, ssize - 1);
        sx1 = std::min(sx1, sx2);
        if (sx1 - fsx1 > 1e-3) add(sx1 - 1, static_cast<float>((sx1 - fsx1) / cell));
        for (int sx = sx1; sx < sx2; ++sx) add(sx, static_cast<float>(1.0 / cell));
        if (fsx2 - sx2 > 1e-3) add(sx2, static_cast<float>(std::min(std::min(fsx2 - sx2, 1.0), cell) / cell));
        t.span[static_cast<size_t>(dx)] = AreaSpan{start, static_cast<int>(t.src.size()) - start};
    }
    return t;
}

bool area_whole_ratio(int height, int width, int dst_width, int dst_height) {
    const double sx = 1.0 / (static_cast<double>(dst_width) / width);
    const double sy = 1.0 / (static_cast<double>(dst_height) / height);
    return std::abs(sx - std::nearbyint(sx)) < DBL_EPSILON && std::abs(sy - std::nearbyint(sy)) < DBL_EPSILON;
}

bool area_resize_supported(int height, int width, int dst_width, int dst_height) {
    if (dst_width < 1 || dst_height < 1 || dst_width > width || dst_height > height) return false;
    return (2 * dst_width == width && 2 * dst_height == height) || !area_whole_ratio(height, width, dst_width, dst_height);
}

bool check_area_resize_args(int height, int width, int channels, int dst_width, int dst_height) {
    if (channels < 1 || channels > 4) invalid("area_resize: 1 to 4 channels, got " + std::to_string(channels));
    if (dst_width < 1 || dst_height < 1 || dst_width > width || dst_height > height)
        invalid("area_resize shrinks: the destination " + std::to_string(dst_width) + "x" + std::to_string(dst_height) +
                " must be non-empty and within the source " + std::to_string(width) + "x" + std::to_string(height));
    if (2 * dst_width == width && 2 * dst_height == height) return true;
    if (area_whole_ratio(height, width, dst_width, dst_height))
        invalid("area_resize: " + std::to_string(width) + "x" + std::to_string(height) + " -> " +
                std::to_string(dst_width) + "x" + std::to_string(dst_height) +
                " is a whole-number ratio in both axes other than 2:1, which OpenCV takes by another path "
                "(resizeAreaFast)");
    return false;
}

namespace {

AreaAxis checked_tables(const ConstImageU8& src, const ImageU8& dst, AreaTable& tx, AreaTable& ty, AreaAxis& ys) {
    tx = area_table(src.width, dst.width);
    ty = area_table(src.height, dst.height);
    ys = ty.view();
    return tx.view();
}

// The fast path computes the same floats in the same order as area_resize_pixel, split in two
// passes: a source row's horizontal sums b (which depend on the row and the destination column
// only) once per row, then per destination row acc = beta_0 b_0, acc = acc + beta_j b_j. A source
// row shared by two destination rows gives the same b to both, as it does in the per-pixel body.
// The source row as floats (exact), then per destination column its sum in registers, entries in
// order: b = 0, b = b + S[k] alpha_k.
MF_TARGET_CLONES
void row_to_float(const uint8_t* __restrict row, float* __restrict f, int n) {
    for (int i = 0; i < n; ++i) f[i] = static_cast<float>(row[i]);
}

template <int C>
void horizontal(const uint8_t* row, int sw, const AreaAxis& xs, int dw, float* f, float* out) {
    row_to_float(row, f, sw * C);
    for (int dx = 0; dx < dw; ++dx) {
        const AreaSpan sp = xs.span[dx];
        const int* s = xs.src + sp.start;
        const float* w = xs.weight + sp.start;
        float b[C];
        for (int c = 0; c < C; ++c) b[c] = 0.0f;
        for (int k = 0; k < sp.count; ++k) {
            const float* p = f + s[k] * C;
            const float alpha = w[k];
            for (int c = 0; c < C; ++c) b[c] = b[c] + p[c] * alpha;
        }
        for (int c = 0; c < C; ++c) out[dx * C + c] = b[c];
    }
}

template <int C>
void rows(const ConstImageU8& src, const ImageU8& dst, const AreaAxis& xs, const AreaAxis& ys, int y0, int y1) {
    const int n = dst.width * C;
    const int first = ys.src[ys.span[y0].start];
    const AreaSpan last_span = ys.span[y1 - 1];
    const int last = ys.src[last_span.start + last_span.count - 1];
    std::vector<float> sums(static_cast<size_t>(last - first + 1) * n), acc(static_cast<size_t>(n)),
        f(static_cast<size_t>(src.width) * C);
    for (int sy = first; sy <= last; ++sy)
        horizontal<C>(src.row(sy), src.width, xs, dst.width, f.data(), sums.data() + static_cast<size_t>(sy - first) * n);
    for (int dy = y0; dy < y1; ++dy) {
        const AreaSpan sp = ys.span[dy];
        for (int j = 0; j < sp.count; ++j) {
            const float beta = ys.weight[sp.start + j];
            const float* b = sums.data() + static_cast<size_t>(ys.src[sp.start + j] - first) * n;
            float* a = acc.data();
            if (j == 0)
                for (int i = 0; i < n; ++i) a[i] = beta * b[i];
            else
                for (int i = 0; i < n; ++i) a[i] = a[i] + beta * b[i];
        }
        uint8_t* out = dst.row(dy);
        for (int i = 0; i < n; ++i) out[i] = area_saturate(acc[i]);
    }
}

template <int C>
void reference_rows(const ConstImageU8& src, const ImageU8& dst, const AreaAxis& xs, const AreaAxis& ys) {
    for (int dy = 0; dy < dst.height; ++dy)
        for (int dx = 0; dx < dst.width; ++dx)
            area_resize_pixel<C>(src.data, static_cast<long>(src.row_stride), xs, ys, dx, dy, dst.row(dy) + dx * C);
}

// One output row of the (s + 2) >> 2 halving: the two source rows summed in 16-bit lanes (a
// contiguous, vectorised pass), then each pixel's pair of column sums.
MF_TARGET_CLONES
void halve_row_sums(const uint8_t* __restrict a, const uint8_t* __restrict b, uint16_t* __restrict v, int n) {
    for (int i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(a[i] + b[i]);
}

// Each pixel's pair of column sums: h[k] = v[k] + v[k + C] for every k (a contiguous, vectorised
// pass), then every other pixel of h kept, (h + 2) >> 2.
MF_TARGET_CLONES
void halve_pairs(const uint16_t* __restrict v, uint16_t* __restrict h, int n, int C) {
    for (int k = 0; k < n; ++k) h[k] = static_cast<uint16_t>(v[k] + v[k + C] + 2);
}

template <int C>
void halve_row(const uint16_t* __restrict v, uint16_t* __restrict h, uint8_t* __restrict out, int n) {
    halve_pairs(v, h, 2 * n * C - C, C);
    for (int dx = 0; dx < n; ++dx)
        for (int c = 0; c < C; ++c) out[dx * C + c] = static_cast<uint8_t>(h[2 * dx * C + c] >> 2);
}

template <int C>
void halve_rows(const ConstImageU8& src, const ImageU8& dst, int y0, int y1) {
    const long stride = static_cast<long>(src.row_stride);
    std::vector<uint16_t> v(static_cast<size_t>(2 * dst.width * C)), h(v.size());
    for (int dy = y0; dy < y1; ++dy) {
        const uint8_t* a = src.row(2 * dy);
        uint8_t* out = dst.row(dy);
        const int n = dst.width;
        if (C == 2) {  // OpenCV's scalar body: the shared one
            for (int dx = 0; dx < n; ++dx) area_halve_pixel<C>(a, stride, dx, 0, out + dx * C);
            continue;
        }
        halve_row_sums(a, a + stride, v.data(), 2 * n * C);
        halve_row<C>(v.data(), h.data(), out, n);
    }
}

template <int C>
void halve_reference(const ConstImageU8& src, const ImageU8& dst) {
    for (int dy = 0; dy < dst.height; ++dy)
        for (int dx = 0; dx < dst.width; ++dx)
            area_halve_pixel<C>(src.data, static_cast<long>(src.row_stride), dx, dy, dst.row(dy) + dx * C);
}

// Both halving paths: rows in parallel (fast) or the shared body serially (reference).
void halve(const ConstImageU8& src, const ImageU8& dst, bool reference) {
    if (reference) {
        switch (src.channels) {
            case 1: halve_reference<1>(src, dst); break;
            case 2: halve_reference<2>(src, dst); break;
            case 3: halve_reference<3>(src, dst); break;
            default: halve_reference<4>(src, dst); break;
        }
        return;
    }
    parallel_for(dst.height, std::max(1, 16384 / std::max(1, dst.width)), [&](int y0, int y1) {
        switch (src.channels) {
            case 1: halve_rows<1>(src, dst, y0, y1); break;
            case 2: halve_rows<2>(src, dst, y0, y1); break;
            case 3: halve_rows<3>(src, dst, y0, y1); break;
            default: halve_rows<4>(src, dst, y0, y1); break;
        }
    });
}

bool checked(const ConstImageU8& src, const ImageU8& dst) {
    const bool half = check_area_resize_args(src.height, src.width, src.channels, dst.width, dst.height);
    if (dst.channels != src.channels) invalid("area_resize: the destination must have the source's channels");
    return half;
}

}  // namespace

void area_resize_cpu(const ConstImageU8& src, const ImageU8& dst) {
    if (checked(src, dst)) return halve(src, dst, false);
    AreaTable tx, ty;
    AreaAxis ys;
    const AreaAxis xs = checked_tables(src, dst, tx, ty, ys);
    const int grain = std::max(1, 8192 / std::max(1, dst.width));
    parallel_for(dst.height, grain, [&](int y0, int y1) {
        switch (src.channels) {
            case 1: rows<1>(src, dst, xs, ys, y0, y1); break;
            case 2: rows<2>(src, dst, xs, ys, y0, y1); break;
            case 3: rows<3>(src, dst, xs, ys, y0, y1); break;
            default: rows<4>(src, dst, xs, ys, y0, y1); break;
        }
    });
}

void area_resize_reference(const ConstImageU8& src, const ImageU8& dst) {
    if (checked(src, dst)) return halve(src, dst, true);
    AreaTable tx, ty;
    AreaAxis ys;
    const AreaAxis xs = checked_tables(src, dst, tx, ty, ys);
    switch (src.channels) {
        case 1: reference_rows<1>(src, dst, xs, ys); break;
        case 2: reference_rows<2>(src, dst, xs, ys); break;
        case 3: reference_rows<3>(src, dst, xs, ys); break;
        default: reference_rows<4>(src, dst, xs, ys); break;
    }
}

}  // namespace mf
