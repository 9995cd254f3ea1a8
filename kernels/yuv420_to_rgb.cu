// CUDA kernel of the YUV 4:2:0 -> RGB conversion: one thread per pixel of the rectangle, running
// the shared body of kernels/yuv420_to_rgb.cuh.
#include <cuda_runtime.h>

#include "launch.hpp"
#include "yuv420_to_rgb.cuh"

namespace mf::cuda {
namespace {

__global__ void yuv420_to_rgb_kernel(Yuv420ConstPlanes p, int x0, int y0, int w, int h, uint8_t* __restrict__ out,
                                     long out_stride, RgbMatrix m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= w || j >= h) return;
    yuv420_to_rgb_pixel(p, m, x0 + i, y0 + j, out + j * out_stride + 3 * i);
}

}  // namespace

void launch_yuv420_to_rgb(const Yuv420ConstPlanes& planes, Rect roi, uint8_t* out, long out_stride, const RgbMatrix& m,
                          void* stream) {
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((roi.w + kBlockX - 1) / kBlockX, (roi.h + kBlockY - 1) / kBlockY);
    yuv420_to_rgb_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(planes, roi.x, roi.y, roi.w, roi.h, out,
                                                                               out_stride, m);
}

}  // namespace mf::cuda
