// CUDA kernel of the OpenCV-exact Gaussian blur of a region of interest.
#include <cuda_runtime.h>

#include "blur_tile.cuh"
#include "launch.hpp"

namespace mf::cuda {
namespace {

__global__ void gaussian_blur_kernel(const uint8_t* __restrict__ src, int height, int width, int channels, long stride,
                                     Rect roi, const uint16_t* __restrict__ w, int r, uint8_t* __restrict__ dst,
                                     long dst_stride) {
    extern __shared__ uint16_t vs[];
    blur_tile(src, height, width, channels, stride, roi, w, r, vs, blockIdx.x, blockIdx.y,
              threadIdx.y * blockDim.x + threadIdx.x, blockDim.x * blockDim.y, [] { __syncthreads(); },
              [&](int row, int e, uint8_t v) { dst[row * dst_stride + e] = v; });
}

}  // namespace

void launch_gaussian_blur(const uint8_t* src, int height, int width, int channels, long stride, Rect roi,
                          const uint16_t* weights, int radius, uint8_t* dst, long dst_stride, void* stream) {
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((roi.w + kTileW - 1) / kTileW, (roi.h + kTileH - 1) / kTileH);
    const size_t shared = blur_tile_shared_elems(radius, channels) * sizeof(uint16_t);
    gaussian_blur_kernel<<<grid, block, shared, static_cast<cudaStream_t>(stream)>>>(
        src, height, width, channels, stride, roi, weights, radius, dst, dst_stride);
}

}  // namespace mf::cuda
