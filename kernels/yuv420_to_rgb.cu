// CUDA kernel of the YUV 4:2:0 -> RGB conversion: one thread per pixel of the region, running the
// shared body of kernels/yuv420_to_rgb.cuh.
#include <cuda_runtime.h>

#include "launch.hpp"
#include "yuv420_to_rgb.cuh"

namespace mf::cuda {
namespace {

__global__ void yuv420_to_rgb_kernel(Yuv420ConstPlanes p, Rect roi, uint8_t* __restrict__ dst, long dst_stride,
                                     YuvToRgbMatrix m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= roi.w || j >= roi.h) return;
    const long c = ((roi.y + j) >> 1) - (roi.y >> 1);  // chroma row, counted from the first uploaded one
    yuv420_to_rgb_pixel(p.y + j * p.y_stride, p.u + c * p.u_stride, p.v + c * p.v_stride, roi.x + i, m,
                        dst + j * dst_stride + 3 * i);
}

}  // namespace

void launch_yuv420_to_rgb(const Yuv420ConstPlanes& planes, Rect roi, uint8_t* dst, long dst_stride,
                          const YuvToRgbMatrix& m, void* stream) {
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((roi.w + kBlockX - 1) / kBlockX, (roi.h + kBlockY - 1) / kBlockY);
    yuv420_to_rgb_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(planes, roi, dst, dst_stride, m);
}

}  // namespace mf::cuda
