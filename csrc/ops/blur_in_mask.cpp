#include "blur_in_mask.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "../../kernels/blur_in_mask.cuh"
#include "../../kernels/blur_tile.cuh"
#include "../../kernels/gaussian_blur.cuh"
#include "../parallel.hpp"
#include "../simd.hpp"
#include "gaussian_blur.hpp"

namespace mf {
namespace {

MF_TARGET_CLONES
void composite_row(const uint8_t* __restrict src, const uint32_t* __restrict acc, const uint8_t* __restrict m,
                   int count, uint8_t* __restrict out) {
    for (int e = 0; e < count; ++e) out[e] = composite(src[e], q16_to_u8(acc[e]), m[e]);
}

}  // namespace

Rect nonzero_bbox(const ConstImageU8& mask) {
    int x0 = mask.width, x1 = -1, y0 = -1, y1 = -1;
    for (int y = 0; y < mask.height; ++y) {
        const uint8_t* row = mask.row(y);
        int a = 0;
        while (a < mask.width && !row[a]) ++a;
        if (a == mask.width) continue;
        int b = mask.width - 1;
        while (!row[b]) --b;
        x0 = std::min(x0, a);
        x1 = std::max(x1, b);
        if (y0 < 0) y0 = y;
        y1 = y;
    }
    if (y0 < 0) return Rect{};
    return Rect{x0, y0, x1 - x0 + 1, y1 - y0 + 1};
}

void check_blur_in_mask_args(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox,
                             const std::vector<int>& ksizes, const std::vector<ImageU8>& outs) {
    if (mask.channels != 1 || mask.height != src.height || mask.width != src.width)
        invalid("mask must be a single-channel " + std::to_string(src.height) + "x" + std::to_string(src.width) +
                " array (the frame's height and width)");
    if (ksizes.empty()) invalid("ksizes must name at least one kernel size");
    for (int k : ksizes) check_ksize(k);
    if (outs.size() != ksizes.size()) invalid("one output frame per kernel size is needed");
    for (const ImageU8& o : outs)
        if (o.height != src.height || o.width != src.width || o.channels != src.channels)
            invalid("output frames must have the source frame's shape");
    if (!bbox.empty() && !rect_inside(bbox, src.width, src.height))
        invalid("bbox " + rect_str(bbox) + " is not inside the frame");
}

void blur_in_mask_cpu(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox, const std::vector<int>& ksizes,
                      const std::vector<ImageU8>& outs) {
    check_blur_in_mask_args(src, mask, bbox, ksizes, outs);
    const int C = src.channels;
    const size_t row_bytes = static_cast<size_t>(src.width) * C;
    parallel_for(src.height, 32, [&](int b, int e) {
        for (int y = b; y < e; ++y)
            for (const ImageU8& o : outs) std::memcpy(o.row(y), src.row(y), row_bytes);
    });
    if (bbox.empty()) return;
    std::vector<BlurLevel> levels;
    levels.reserve(ksizes.size());
    for (int k : ksizes) levels.emplace_back(k);
    parallel_for(bbox.h, 8, [&](int b, int e) {
        BlurRowScratch scratch;
        std::vector<uint8_t> mc(static_cast<size_t>(bbox.w) * C);
        for (int i = b; i < e; ++i) {
            const int y = bbox.y + i;
            const uint8_t* mrow = mask.row(y);
            int x0 = bbox.x, x1 = bbox.x + bbox.w - 1;
            while (x0 <= x1 && !mrow[x0]) ++x0;
            if (x0 > x1) continue;
            while (!mrow[x1]) --x1;
            const int span = x1 - x0 + 1;
            for (int x = 0; x < span; ++x)
                for (int c = 0; c < C; ++c) mc[x * C + c] = mrow[x0 + x];
            const size_t off = static_cast<size_t>(x0) * C;
            for (size_t l = 0; l < levels.size(); ++l) {
                blur_row_accumulate(src, levels[l], y, x0, x1 + 1, scratch);
                composite_row(src.row(y) + off, scratch.acc.data(), mc.data(), span * C, outs[l].row(y) + off);
            }
        }
    });
}

void blur_in_mask_reference(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox,
                            const std::vector<int>& ksizes, const std::vector<ImageU8>& outs) {
    check_blur_in_mask_args(src, mask, bbox, ksizes, outs);
    const size_t frame = static_cast<size_t>(src.height) * src.width * src.channels;
    for (const ImageU8& o : outs) std::memcpy(o.data, src.data, frame);  // contiguous images
    if (bbox.empty()) return;
    for (size_t l = 0; l < ksizes.size(); ++l) {
        const BlurLevel level(ksizes[l]);
        std::vector<uint16_t> shared(blur_tile_shared_elems(level.radius, src.channels));
        for (int ty = 0; ty < (bbox.h + kTileH - 1) / kTileH; ++ty)
            for (int tx = 0; tx < (bbox.w + kTileW - 1) / kTileW; ++tx) {
                if (!mask_tile_any(mask.data, mask.width, bbox, tx, ty, 0, 1)) continue;
                blur_in_mask_tile(src.data, mask.data, src.height, src.width, src.channels, bbox, level.weights.data(),
                                  level.radius, outs[l].data, shared.data(), tx, ty, 0, 1, [] {});
            }
    }
}

}  // namespace mf
