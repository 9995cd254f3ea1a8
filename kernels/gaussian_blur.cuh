// OpenCV-exact separable Gaussian blur arithmetic for uint8 images (cv::GaussianBlur, CV_8U,
// sigma derived from ksize). Weights are unsigned 8.8 fixed point summing to exactly 256
// (see csrc/ops/gaussian_blur.cpp: gaussian_weights_q8). With h[i] = vertical taps and
// w[j] = horizontal taps the result is
//     dst(y, x) = (sum_i sum_j h[i] * w[j] * src(y+i-r, x+j-r) + 2^15) >> 16
// computed without intermediate rounding: one pass sums u8 * q8 into 16 bits (never more than
// 255 * 256 = 65280), the other sums u16 * q8 into 32 bits. Because nothing is rounded between
// the passes, the pass order is free; mime_fast runs the vertical pass first (contiguous rows).
// All partial sums of non-negative terms are bounded by the full sum, so the folded symmetric
// forms below never overflow.
#pragma once
#include "common.cuh"

namespace mf {

constexpr int kMaxKsize = 255;  // largest kernel size accepted (radius 127)

// Vertical pass, one folded tap pair: acc + w * (a + b) with a, b the two source samples at
// distance +-i from the centre row. Exact in 16 bits (see header comment).
MF_HD uint16_t vtap_pair(uint16_t acc, uint16_t w, uint8_t a, uint8_t b) {
    return static_cast<uint16_t>(acc + w * static_cast<uint16_t>(a + b));
}
// Vertical pass, centre tap.
MF_HD uint16_t vtap_centre(uint16_t w, uint8_t a) { return static_cast<uint16_t>(w * a); }

// Horizontal pass on the 16-bit vertical sums, one folded tap pair, exact in 32 bits.
MF_HD uint32_t htap_pair(uint32_t acc, uint16_t w, uint16_t a, uint16_t b) {
    return acc + static_cast<uint32_t>(w) * (static_cast<uint32_t>(a) + b);
}
MF_HD uint32_t htap_centre(uint16_t w, uint16_t a) {
    return static_cast<uint32_t>(w) * a;
}

// 16.16 fixed point -> uint8 with OpenCV's rounding: (x + 2^15) >> 16. The sum of weights is
// 2^16, so the result never exceeds 255 and needs no saturation.
MF_HD uint8_t q16_to_u8(uint32_t acc) { return static_cast<uint8_t>((acc + 32768u) >> 16); }

// Full folded 1-D sums, used by the CUDA kernels (one thread per output sample) and by the
// scalar reference in the CPU tests. `stride` is the distance between taps in elements.
MF_HD uint16_t vertical_sum(const uint8_t* centre, long stride, const uint16_t* w, int r) {
    uint16_t acc = vtap_centre(w[r], centre[0]);
    for (int i = 1; i <= r; ++i) acc = vtap_pair(acc, w[r - i], centre[-i * stride], centre[i * stride]);
    return acc;
}
MF_HD uint32_t horizontal_sum(const uint16_t* centre, int stride, const uint16_t* w, int r) {
    uint32_t acc = htap_centre(w[r], centre[0]);
    for (int j = 1; j <= r; ++j) acc = htap_pair(acc, w[r - j], centre[-j * stride], centre[j * stride]);
    return acc;
}

}  // namespace mf
