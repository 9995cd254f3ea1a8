// CUDA kernel of the fused masked blur: blockIdx.z selects the kernel size; tiles whose mask is
// all zero return at once (their output already holds the source copy).
#include <cuda_runtime.h>

#include "blur_tile.cuh"
#include "launch.hpp"

namespace mf::cuda {
namespace {

__global__ void blur_in_mask_kernel(const uint8_t* __restrict__ src, const uint8_t* __restrict__ mask, int height,
                                    int width, int channels, Rect bbox, BlurLevels levels) {
    extern __shared__ uint16_t vs[];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
    if (!__syncthreads_or(mask_tile_any(mask, width, bbox, blockIdx.x, blockIdx.y, tid, nt))) return;
    const int level = blockIdx.z;
    blur_in_mask_tile(src, mask, height, width, channels, bbox, levels.weights[level], levels.radius[level],
                      levels.out[level], vs, blockIdx.x, blockIdx.y, tid, nt, [] { __syncthreads(); });
}

}  // namespace

void launch_blur_in_mask(const uint8_t* src, const uint8_t* mask, int height, int width, int channels, Rect bbox,
                         const BlurLevels& levels, void* stream) {
    int rmax = 0;
    for (int l = 0; l < levels.count; ++l) rmax = imax(rmax, levels.radius[l]);
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((bbox.w + kTileW - 1) / kTileW, (bbox.h + kTileH - 1) / kTileH, levels.count);
    const size_t shared = blur_tile_shared_elems(rmax, channels) * sizeof(uint16_t);
    blur_in_mask_kernel<<<grid, block, shared, static_cast<cudaStream_t>(stream)>>>(src, mask, height, width, channels,
                                                                                    bbox, levels);
}

}  // namespace mf::cuda
