// The tiled blur shared by the gaussian_blur and blur_in_mask CUDA kernels. A block computes a
// kTileW x kTileH tile of a region of interest: first the vertical sums of its rows over the
// tile's padded columns (reflect-101 at the frame edges) into shared memory, then the horizontal
// sums, handing each rounded byte to `store`. Arithmetic: kernels/gaussian_blur.cuh.
#pragma once
#include "../csrc/image.hpp"
#include "gaussian_blur.cuh"

namespace mf::cuda {

constexpr int kTileW = 32;
constexpr int kTileH = 16;
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

// Shared memory bytes for one tile at this radius and channel count.
inline size_t blur_tile_shared_bytes(int radius, int channels) {
    return static_cast<size_t>(kTileH) * (kTileW + 2 * radius) * channels * sizeof(uint16_t);
}

template <class Store>
__device__ void blur_tile(const uint8_t* __restrict__ src, int height, int width, int channels, long stride, Rect roi,
                          const uint16_t* __restrict__ w, int r, uint16_t* vs, Store store) {
    const int tx0 = blockIdx.x * kTileW, ty0 = blockIdx.y * kTileH;  // tile origin, roi-relative
    const int rows = imin(kTileH, roi.h - ty0);
    const int cols = imin(kTileW, roi.w - tx0);
    const int pw = (kTileW + 2 * r) * channels;  // padded row of vertical sums, elements
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
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
    __syncthreads();
    const int n = cols * channels;
    for (int idx = tid; idx < rows * n; idx += nt) {
        const int ty = idx / n, e = idx - ty * n;
        const uint32_t acc = horizontal_sum(&vs[ty * pw + e + r * channels], channels, w, r);
        store(ty0 + ty, tx0 * channels + e, q16_to_u8(acc));
    }
}

}  // namespace mf::cuda
