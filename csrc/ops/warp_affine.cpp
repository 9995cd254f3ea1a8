#include "warp_affine.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "../parallel.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mf {
namespace {

#if defined(__SSE2__)
// An interior pixel of a 3- or 4-channel image, the shared body's sums in SSE2 (baseline x86-64):
// each row's two neighbours interleaved per channel as int16, times their weights by pmaddwd, so
//     p00 w00 + p01 w01 + p10 w10 + p11 w11, (+ 512) >> 10
// are the same integers. Reads 4 bytes at every neighbour: for C = 3 one byte beyond it, which
// the caller keeps inside the image.
template <int C>
inline void blend_interior(const uint8_t* p, long stride, int w00, int w01, int w10, int w11, uint8_t* out) {
    uint32_t a, b, c, d;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + C, 4);
    std::memcpy(&c, p + stride, 4);
    std::memcpy(&d, p + stride + C, 4);
    const __m128i z = _mm_setzero_si128();
    const __m128i top = _mm_unpacklo_epi8(
        _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi32_si128(static_cast<int>(b))), z);
    const __m128i bot = _mm_unpacklo_epi8(
        _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(c)), _mm_cvtsi32_si128(static_cast<int>(d))), z);
    __m128i s = _mm_add_epi32(_mm_madd_epi16(top, _mm_set1_epi32(w01 << 16 | w00)),
                              _mm_madd_epi16(bot, _mm_set1_epi32(w11 << 16 | w10)));
    s = _mm_srai_epi32(_mm_add_epi32(s, _mm_set1_epi32(512)), 10);
    s = _mm_packus_epi16(_mm_packs_epi32(s, s), z);
    const uint32_t r = static_cast<uint32_t>(_mm_cvtsi128_si32(s));
    std::memcpy(out, &r, C);
}
#endif

// Output rows [begin, end) of crop k (inverse matrix inv): the shared per-pixel body, with the
// column deltas of the crop computed once per chunk.
template <int C>
void warp_rows(const ConstImageU8& src, const Affine& inv, int size, int begin, int end, uint8_t* crop,
               std::vector<int>& adelta, std::vector<int>& bdelta) {
    adelta.resize(size);
    bdelta.resize(size);
    for (int x = 0; x < size; ++x) {
        adelta[x] = warp_delta(inv.m[0], x);
        bdelta[x] = warp_delta(inv.m[3], x);
    }
    const long stride = static_cast<long>(src.row_stride);
    for (int y = begin; y < end; ++y) {
        int64_t X0, Y0;
        warp_row_origin(inv, y, X0, Y0);
        uint8_t* out = crop + static_cast<size_t>(y) * size * C;
        for (int x = 0; x < size; ++x) {
            const int64_t xa = X0 + adelta[x], yb = Y0 + bdelta[x];
#if defined(__SSE2__)
            if (C >= 3) {  // interior pixels (the shared body's first case) vectorised
                const int64_t X = xa >> (kWarpAbBits - kWarpInterBits), Y = yb >> (kWarpAbBits - kWarpInterBits);
                const int ix = warp_clamp_short(X >> kWarpInterBits), iy = warp_clamp_short(Y >> kWarpInterBits);
                if (static_cast<unsigned>(ix) < static_cast<unsigned>(src.width - 1) &&
                    static_cast<unsigned>(iy) < static_cast<unsigned>(src.height - 1) &&
                    (C == 4 || ix < src.width - 2 || iy < src.height - 2)) {
                    const int fx = static_cast<int>(X & (kWarpTab - 1)), fy = static_cast<int>(Y & (kWarpTab - 1));
                    blend_interior<C>(src.data + static_cast<long>(iy) * stride + ix * C, stride,
                                      (kWarpTab - fx) * (kWarpTab - fy), fx * (kWarpTab - fy), (kWarpTab - fx) * fy,
                                      fx * fy, out + x * C);
                    continue;
                }
            }
#endif
            warp_affine_pixel<C>(src.data, src.height, src.width, stride, xa, yb, out + x * C);
        }
    }
}

}  // namespace

void check_warp_affine_args(int height, int width, int channels, long row_stride, const std::vector<Affine>& Ms,
                            int size) {
    if (height <= 0 || width <= 0) invalid("frame is empty");
    if (height > 32767 || width > 32767) invalid("frame must be at most 32767 px on a side (OpenCV's map range)");
    if (channels < 1 || channels > 4) invalid("frame must have 1 to 4 channels, got " + std::to_string(channels));
    if (row_stride < static_cast<long>(width) * channels) invalid("frame rows overlap (row stride below width x channels)");
    if (size < 1 || size > kWarpMaxSize)
        invalid("size must be 1.." + std::to_string(kWarpMaxSize) + ", got " + std::to_string(size));
    for (size_t k = 0; k < Ms.size(); ++k)
        for (double v : Ms[k].m)
            if (!std::isfinite(v)) invalid("matrix " + std::to_string(k) + " has a non-finite entry");
}

void warp_affine_cpu(const ConstImageU8& src, const std::vector<Affine>& Ms, int size, uint8_t* dst) {
    check_warp_affine_args(src.height, src.width, src.channels, static_cast<long>(src.row_stride), Ms, size);
    const int n = static_cast<int>(Ms.size());
    if (n == 0) return;
    std::vector<Affine> inv(Ms.size());
    for (int k = 0; k < n; ++k) inv[k] = warp_invert(Ms[k]);
    const size_t crop_bytes = static_cast<size_t>(size) * size * src.channels;
    // chunks of rows within one crop, about 8k pixels each
    const int grain = imax(1, 8192 / size), chunks = (size + grain - 1) / grain;
    parallel_for(n * chunks, 1, [&](int b, int e) {
        std::vector<int> adelta, bdelta;
        for (int i = b; i < e; ++i) {
            const int k = i / chunks, y0 = (i % chunks) * grain, y1 = imin(size, y0 + grain);
            uint8_t* crop = dst + k * crop_bytes;
            switch (src.channels) {
                case 1: warp_rows<1>(src, inv[k], size, y0, y1, crop, adelta, bdelta); break;
                case 2: warp_rows<2>(src, inv[k], size, y0, y1, crop, adelta, bdelta); break;
                case 3: warp_rows<3>(src, inv[k], size, y0, y1, crop, adelta, bdelta); break;
                default: warp_rows<4>(src, inv[k], size, y0, y1, crop, adelta, bdelta); break;
            }
        }
    });
}

}  // namespace mf
