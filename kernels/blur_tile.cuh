// The tiled blur of the gaussian_blur and blur_in_mask CUDA kernels. A block computes a
// kTileW x kTileH tile of a region of interest: first the vertical sums of its rows over the
// tile's padded columns (reflect-101 at the frame edges) into shared memory, then the horizontal
// sums, handing each rounded byte to `store`. Arithmetic: kernels/gaussian_blur.cuh.
//
// The tile functions take the block's tile index, the thread's index and the thread count, and a
// `sync` callable, instead of reading blockIdx / threadIdx / __syncthreads directly: the CUDA
// kernels pass their own, and the CPU reference (csrc/ops/*_reference) runs every tile with one
// thread and a no-op sync, so the tests run this exact code on the CPU.
#pragma once
#include "rect.cuh"
#include "blur_in_mask.cuh"
#include "gaussian_blur.cuh"

namespace mf {

constexpr int kTileW = 32;
constexpr int kTileH = 16;

// uint16 vertical sums one tile keeps in shared memory, at this radius and channel count.
MF_HD int blur_tile_shared_elems(int radius, int channels) { return kTileH * (kTileW + 2 * radius) * channels; }

template <class Sync, class Store>
MF_HD void blur_tile(const uint8_t* __restrict__ src, int height, int width, int channels, long stride, Rect roi,
                     const uint16_t* __restrict__ w, int r, uint16_t* vs, int tile_x, int tile_y, int tid, int nt,
                     Sync sync, Store store) {
    const int tx0 = tile_x * kTileW, ty0 = tile_y * kTileH;  // tile origin, roi-relative
    const int rows = imin(kTileH, roi.h - ty0);
    const int cols = imin(kTileW, roi.w - tx0);
    const int pw = (kTileW + 2 * r) * channels;  // padded row of vertical sums, elements
    for (int idx = tid; idx < rows * pw; idx += nt) {
        const int ty = idx / pw, e = idx - ty * pw;
        const int p = e / channels, c = e - p * channels;
        const int sx = reflect101(roi.x + tx0 - r + p, width);
        const int y = roi.y + ty0 + ty;
        const uint8_t* col = src + static_cast<long>(sx) * channels + c;
        uint16_t acc = vtap_centre(w[r], col[y * stride]);
        for (int i = 1; i <= r; ++i)
            acc = vtap_pair(acc, w[r - i], col[reflect101(y - i, height) * stride], col[reflect101(y + i, height) * stride]);
        vs[ty * pw + e] = acc;
    }
    sync();
    const int n = cols * channels;
    for (int idx = tid; idx < rows * n; idx += nt) {
        const int ty = idx / n, e = idx - ty * n;
        const uint32_t acc = horizontal_sum(&vs[ty * pw + e + r * channels], channels, w, r);
        store(ty0 + ty, tx0 * channels + e, q16_to_u8(acc));
    }
}

// Whether any mask pixel of tile (tile_x, tile_y) of bbox is non-zero, as seen by one thread
// (the kernel combines the threads' answers with __syncthreads_or).
MF_HD int mask_tile_any(const uint8_t* __restrict__ mask, int width, Rect bbox, int tile_x, int tile_y, int tid, int nt) {
    const int tx0 = bbox.x + tile_x * kTileW, ty0 = bbox.y + tile_y * kTileH;
    const int tw = imin(kTileW, bbox.x + bbox.w - tx0), th = imin(kTileH, bbox.y + bbox.h - ty0);
    int any = 0;
    for (int i = tid; i < tw * th; i += nt) any |= mask[static_cast<long>(ty0 + i / tw) * width + tx0 + i % tw];
    return any;
}

// One level of the fused masked blur on one tile: blur of bbox composited into `out` (which
// holds a copy of src) with the mask's weights.
template <class Sync>
MF_HD void blur_in_mask_tile(const uint8_t* __restrict__ src, const uint8_t* __restrict__ mask, int height, int width,
                             int channels, Rect bbox, const uint16_t* __restrict__ w, int r, uint8_t* __restrict__ out,
                             uint16_t* vs, int tile_x, int tile_y, int tid, int nt, Sync sync) {
    const long stride = static_cast<long>(width) * channels;
    blur_tile(src, height, width, channels, stride, bbox, w, r, vs, tile_x, tile_y, tid, nt, sync,
              [&](int row, int e, uint8_t blurred) {
                  const long y = bbox.y + row;
                  const long o = y * stride + static_cast<long>(bbox.x) * channels + e;
                  const uint8_t m = mask[y * width + bbox.x + e / channels];
                  out[o] = composite(src[o], blurred, m);
              });
}

}  // namespace mf
