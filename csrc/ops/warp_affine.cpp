#include "warp_affine.hpp"

#include <cmath>
#include <string>

#include "../parallel.hpp"

namespace mf {
namespace {

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
        for (int x = 0; x < size; ++x)
            warp_affine_pixel<C>(src.data, src.height, src.width, stride, X0 + adelta[x], Y0 + bdelta[x],
                                 out + x * C);
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
