// CUDA kernel of the RGB -> YUV 4:2:0 conversion: one thread per 2x2 block (chroma sample) of
// the region, running the shared body of kernels/rgb_to_yuv420.cuh.
#include <cuda_runtime.h>

#include "launch.hpp"
#include "rgb_to_yuv420.cuh"

namespace mf::cuda {
namespace {

__global__ void rgb_to_yuv420_kernel(const uint8_t* __restrict__ src, long stride, int channels, int width, int height,
                                     int cx0, int cy0, int cx1, int cy1, Yuv420Planes p,
                                     YuvMatrix m, YuvSelect sel) {
    const int cx = cx0 + blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = cy0 + blockIdx.y * blockDim.y + threadIdx.y;
    if (cx >= cx1 || cy >= cy1) return;
    yuv420_block(src, stride, channels, width, height, cx, cy, p, m, sel);
}

}  // namespace

void launch_rgb_to_yuv420(const uint8_t* src, int height, int width, int channels, long stride, Rect roi,
                          const Yuv420Planes& planes, const YuvMatrix& m, YuvSelect sel, void* stream) {
    int cx0, cx1, cy0, cy1;
    yuv420_block_range(roi, cx0, cx1, cy0, cy1);
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((cx1 - cx0 + kBlockX - 1) / kBlockX, (cy1 - cy0 + kBlockY - 1) / kBlockY);
    rgb_to_yuv420_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(src, stride, channels, width, height,
                                                                                cx0, cy0, cx1, cy1, planes, m, sel);
}

}  // namespace mf::cuda
