// Masked composite of a blurred and a source pixel:
//     out = round((src * (255 - m) + blur * m) / 255)
// m = 0 gives src exactly, m = 255 gives blur exactly. The numerator is at most 255 * 255 and
// x / 255 never has a fractional part of exactly one half, so "round" is unambiguous; it is
// computed as ((x + 128) + ((x + 128) >> 8)) >> 8, which equals floor(x / 255 + 1/2) for every
// x in [0, 255 * 255] (checked exhaustively in tests/test_blur_in_mask.py).
#pragma once
#include "common.cuh"

namespace mf {

MF_HD uint32_t div255_round(uint32_t x) {
    const uint32_t t = x + 128u;
    return (t + (t >> 8)) >> 8;
}

MF_HD uint8_t composite(uint8_t src, uint8_t blur, uint8_t m) {
    const uint32_t x = static_cast<uint32_t>(src) * (255u - m) + static_cast<uint32_t>(blur) * m;
    return static_cast<uint8_t>(div255_round(x));
}

}  // namespace mf
