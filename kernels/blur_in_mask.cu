// CUDA kernel of the fused masked blur: blockIdx.z selects the kernel size; tiles whose mask is
// all zero return at once (their output already holds the source copy).
#include <cuda_runtime.h>

#include "blur_in_mask.cuh"
#include "blur_tile.cuh"
#include "launch.hpp"

namespace mf::cuda {
namespace {

__global__ void blur_in_mask_kernel(const uint8_t* __restrict__ src, const uint8_t* __restrict__ mask, int height,
                                    int width, int channels, Rect bbox, BlurLevels levels) {
    extern __shared__ uint16_t vs[];
    const int level = blockIdx.z;
    const long stride = static_cast<long>(width) * channels;
    // Skip tiles with no mask pixel.
    const int tx0 = bbox.x + blockIdx.x * kTileW, ty0 = bbox.y + blockIdx.y * kTileH;
    const int tw = imin(kTileW, bbox.x + bbox.w - tx0), th = imin(kTileH, bbox.y + bbox.h - ty0);
    int any = 0;
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < tw * th; i += blockDim.x * blockDim.y)
        any |= mask[static_cast<long>(ty0 + i / tw) * width + tx0 + i % tw];
    if (!__syncthreads_or(any)) return;
    uint8_t* out = levels.out[level];
    blur_tile(src, height, width, channels, stride, bbox, levels.weights[level], levels.radius[level], vs,
              [&](int row, int e, uint8_t blurred) {
                  const long y = bbox.y + row;
                  const long o = y * stride + static_cast<long>(bbox.x) * channels + e;
                  const uint8_t m = mask[y * width + bbox.x + e / channels];
                  out[o] = composite(src[o], blurred, m);
              });
}

}  // namespace

void launch_blur_in_mask(const uint8_t* src, const uint8_t* mask, int height, int width, int channels, Rect bbox,
                         const BlurLevels& levels, void* stream) {
    int rmax = 0;
    for (int l = 0; l < levels.count; ++l) rmax = imax(rmax, levels.radius[l]);
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((bbox.w + kTileW - 1) / kTileW, (bbox.h + kTileH - 1) / kTileH, levels.count);
    blur_in_mask_kernel<<<grid, block, blur_tile_shared_bytes(rmax, channels), static_cast<cudaStream_t>(stream)>>>(
        src, mask, height, width, channels, bbox, levels);
}

}  // namespace mf::cuda
