#include "gaussian_blur.hpp"

#include <cmath>
#include <string>

#include "../../kernels/blur_tile.cuh"
#include "../../kernels/gaussian_blur.cuh"
#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {

void check_ksize(int ksize) {
    if (ksize < 1 || ksize > kMaxKsize || ksize % 2 == 0)
        invalid("kernel size must be an odd integer in [1, " + std::to_string(kMaxKsize) + "], got " +
                std::to_string(ksize));
}

// Port of OpenCV's getGaussianKernelBitExact + getGaussianKernelFixedPoint_ED (imgproc,
// smooth.dispatch.cpp) for sigma <= 0. OpenCV evaluates in its software double type; IEEE double
// arithmetic gives the same values (checked against cv2 for every odd size up to 255 in
// tests/test_gaussian_blur.py).
std::vector<uint16_t> gaussian_weights_q8(int n) {
    check_ksize(n);
    std::vector<double> k(n);
    if (n <= 7) {
        // Fixed tables for small kernels with sigma <= 0.
        static const double t1[] = {1.0};
        static const double t3[] = {0.25, 0.5, 0.25};
        static const double t5[] = {0.0625, 0.25, 0.375, 0.25, 0.0625};
        static const double t7[] = {0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125};
        const double* t = n == 1 ? t1 : n == 3 ? t3 : n == 5 ? t5 : t7;
        for (int i = 0; i < n; ++i) k[i] = t[i];
    } else {
        const double sigma = std::fma(static_cast<double>(n), 0.15, 0.35);  // 0.3*((n-1)/2 - 1) + 0.8
        const double scale2x = -0.125 / (sigma * sigma);
        const int half = (n - 1) / 2;
        std::vector<double> values(half);
        double sum = 0.0;
        for (int i = 0, x = 1 - n; i < half; ++i, x += 2) {
            values[i] = std::exp(static_cast<double>(x * x) * scale2x);
            sum += values[i];
        }
        sum *= 2.0;
        sum += 1.0;
        const double mul = 1.0 / sum;
        for (int i = 0; i < half; ++i) k[i] = k[n - 1 - i] = values[i] * mul;
        k[half] = mul;
    }
    // Error-diffusion rounding to 8 fractional bits, centre tap takes the remainder.
    std::vector<uint16_t> w(n);
    const int half = n / 2;
    double err = 0.0;
    long sum = 0;
    for (int i = 0; i < half; ++i) {
        const double adj = k[i] * 256.0 + err;
        const double v = std::nearbyint(adj);  // round half to even, as cvRound(softdouble)
        err = adj - v;
        w[i] = w[n - 1 - i] = static_cast<uint16_t>(v);
        sum += static_cast<long>(v);
    }
    w[half] = static_cast<uint16_t>(256 - 2 * sum);
    return w;
}

BlurLevel::BlurLevel(int k) : ksize(k), radius(k / 2), weights(gaussian_weights_q8(k)) {}

namespace {

// Vertical pass over `count` contiguous samples: out[e] = sum_i w[i] * rows[i][e] (folded).
MF_TARGET_CLONES
void vertical_pass(const uint8_t* const* rows, const uint16_t* w, int r, int count, uint16_t* __restrict out) {
    const uint8_t* __restrict c = rows[r];
    const uint16_t wc = w[r];
    for (int e = 0; e < count; ++e) out[e] = vtap_centre(wc, c[e]);
    int i = 1;
    for (; i + 1 <= r; i += 2) {  // two tap pairs per sweep: fewer loads and stores of out
        const uint8_t* __restrict a0 = rows[r - i];
        const uint8_t* __restrict b0 = rows[r + i];
        const uint8_t* __restrict a1 = rows[r - i - 1];
        const uint8_t* __restrict b1 = rows[r + i + 1];
        const uint16_t w0 = w[r - i], w1 = w[r - i - 1];
        for (int e = 0; e < count; ++e) out[e] = vtap_pair(vtap_pair(out[e], w0, a0[e], b0[e]), w1, a1[e], b1[e]);
    }
    for (; i <= r; ++i) {
        const uint8_t* __restrict a = rows[r - i];
        const uint8_t* __restrict b = rows[r + i];
        const uint16_t wi = w[r - i];
        for (int e = 0; e < count; ++e) out[e] = vtap_pair(out[e], wi, a[e], b[e]);
    }
}

// Horizontal pass: acc[e] = sum_j w[j] * v[e + j * step] for e in [0, count) (folded).
MF_TARGET_CLONES
void horizontal_pass(const uint16_t* v, int step, const uint16_t* w, int r, int count, uint32_t* __restrict acc) {
    const uint16_t* __restrict c = v + r * step;
    const uint16_t wc = w[r];
    for (int e = 0; e < count; ++e) acc[e] = htap_centre(wc, c[e]);
    int j = 0;
    for (; j + 2 <= r; j += 2) {
        const uint16_t* __restrict a0 = v + j * step;
        const uint16_t* __restrict b0 = v + (2 * r - j) * step;
        const uint16_t* __restrict a1 = v + (j + 1) * step;
        const uint16_t* __restrict b1 = v + (2 * r - j - 1) * step;
        const uint16_t w0 = w[j], w1 = w[j + 1];
        for (int e = 0; e < count; ++e) acc[e] = htap_pair(htap_pair(acc[e], w0, a0[e], b0[e]), w1, a1[e], b1[e]);
    }
    for (; j < r; ++j) {
        const uint16_t* __restrict a = v + j * step;
        const uint16_t* __restrict b = v + (2 * r - j) * step;
        const uint16_t wj = w[j];
        for (int e = 0; e < count; ++e) acc[e] = htap_pair(acc[e], wj, a[e], b[e]);
    }
}

MF_TARGET_CLONES
void finish_row(const uint32_t* __restrict acc, int count, uint8_t* __restrict out) {
    for (int e = 0; e < count; ++e) out[e] = q16_to_u8(acc[e]);
}

void check_roi(const ConstImageU8& src, Rect roi) {
    if (!rect_inside(roi, src.width, src.height))
        invalid("roi " + rect_str(roi) + " is not a non-empty rectangle inside the " + std::to_string(src.width) +
                "x" + std::to_string(src.height) + " frame");
}

}  // namespace

void blur_row_accumulate(const ConstImageU8& src, const BlurLevel& level, int y, int x0, int x1,
                         BlurRowScratch& s) {
    const int r = level.radius, C = src.channels, W = src.width, H = src.height;
    const int k = 2 * r + 1;
    // Source rows of the vertical window, reflected at the frame's top and bottom.
    const uint8_t* rows[kMaxKsize];
    for (int i = 0; i < k; ++i) rows[i] = src.row(reflect101(y - r + i, H));
    // Padded column range [x0 - r, x1 + r); the part inside the frame is computed, the rest is
    // copied from the reflected columns (the vertical pass commutes with column reflection).
    const int p0 = x0 - r, p1 = x1 + r;
    const int cl = imax(0, p0), cr = imin(W, p1);
    const size_t padded = static_cast<size_t>(p1 - p0) * C;
    if (s.vpad.size() < padded) s.vpad.resize(padded);
    uint16_t* vpad = s.vpad.data();
    const uint8_t* shifted[kMaxKsize];
    for (int i = 0; i < k; ++i) shifted[i] = rows[i] + static_cast<ptrdiff_t>(cl) * C;
    vertical_pass(shifted, level.weights.data(), r, (cr - cl) * C, vpad + static_cast<size_t>(cl - p0) * C);
    for (int p = p0; p < cl; ++p) {
        const int q = reflect101(p, W);
        for (int c = 0; c < C; ++c) vpad[(p - p0) * C + c] = vpad[(q - p0) * C + c];
    }
    for (int p = cr; p < p1; ++p) {
        const int q = reflect101(p, W);
        for (int c = 0; c < C; ++c) vpad[(p - p0) * C + c] = vpad[(q - p0) * C + c];
    }
    const int count = (x1 - x0) * C;
    if (s.acc.size() < static_cast<size_t>(count)) s.acc.resize(count);
    horizontal_pass(vpad, C, level.weights.data(), r, count, s.acc.data());
}

void gaussian_blur_multi_cpu(const ConstImageU8& src, Rect roi, const std::vector<int>& ksizes,
                             const std::vector<ImageU8>& dsts) {
    check_roi(src, roi);
    std::vector<BlurLevel> levels;
    levels.reserve(ksizes.size());
    for (int k : ksizes) levels.emplace_back(k);
    parallel_for(roi.h, 4, [&](int b, int e) {
        BlurRowScratch scratch;
        for (int yy = b; yy < e; ++yy) {
            for (size_t l = 0; l < levels.size(); ++l) {
                blur_row_accumulate(src, levels[l], roi.y + yy, roi.x, roi.x + roi.w, scratch);
                finish_row(scratch.acc.data(), roi.w * src.channels, dsts[l].row(yy));
            }
        }
    });
}

void gaussian_blur_cpu(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst) {
    gaussian_blur_multi_cpu(src, roi, {ksize}, {dst});
}

void gaussian_blur_reference(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst) {
    check_roi(src, roi);
    const BlurLevel level(ksize);
    std::vector<uint16_t> shared(blur_tile_shared_elems(level.radius, src.channels));
    for (int ty = 0; ty < (roi.h + kTileH - 1) / kTileH; ++ty)
        for (int tx = 0; tx < (roi.w + kTileW - 1) / kTileW; ++tx)
            blur_tile(src.data, src.height, src.width, src.channels, src.row_stride, roi, level.weights.data(),
                      level.radius, shared.data(), tx, ty, 0, 1, [] {},
                      [&](int row, int e, uint8_t v) { dst.row(row)[e] = v; });
}

}  // namespace mf
