// CUDA kernel of the area downscale: one thread per destination pixel, running the shared body of
// kernels/area_resize.cuh on the axis tables the host built (csrc/ops/area_resize.cpp).
#include <cuda_runtime.h>

#include "area_resize.cuh"
#include "launch.hpp"

namespace mf::cuda {
namespace {

template <int C>
__global__ void area_resize_kernel(const uint8_t* __restrict__ src, long stride, long src_step, AreaAxis xs, AreaAxis ys,
                                   int dw, int dh, uint8_t* __restrict__ dst, long dst_stride, long dst_step) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh) return;
    const long k = blockIdx.z;  // the image of the batch
    area_resize_pixel<C>(src + k * src_step, stride, xs, ys, x, y, dst + k * dst_step + y * dst_stride + x * C);
}

template <int C>
__global__ void area_halve_kernel(const uint8_t* __restrict__ src, long stride, long src_step, int dw, int dh,
                                  uint8_t* __restrict__ dst, long dst_stride, long dst_step) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh) return;
    const long k = blockIdx.z;
    area_halve_pixel<C>(src + k * src_step, stride, x, y, dst + k * dst_step + y * dst_stride + x * C);
}

}  // namespace

void launch_area_halve(const uint8_t* src, int channels, long stride, int dw, int dh, uint8_t* dst, long dst_stride,
                       void* stream, int count, long src_step, long dst_step) {
    if (dw <= 0 || dh <= 0 || count <= 0) return;
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((dw + kBlockX - 1) / kBlockX, (dh + kBlockY - 1) / kBlockY, count);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (channels) {
        case 1: area_halve_kernel<1><<<grid, block, 0, st>>>(src, stride, src_step, dw, dh, dst, dst_stride, dst_step); break;
        case 2: area_halve_kernel<2><<<grid, block, 0, st>>>(src, stride, src_step, dw, dh, dst, dst_stride, dst_step); break;
        case 3: area_halve_kernel<3><<<grid, block, 0, st>>>(src, stride, src_step, dw, dh, dst, dst_stride, dst_step); break;
        default: area_halve_kernel<4><<<grid, block, 0, st>>>(src, stride, src_step, dw, dh, dst, dst_stride, dst_step); break;
    }
}

void launch_area_resize(const uint8_t* src, int channels, long stride, const AreaAxis& xs, const AreaAxis& ys, int dw,
                        int dh, uint8_t* dst, long dst_stride, void* stream, int count, long src_step, long dst_step) {
    if (dw <= 0 || dh <= 0 || count <= 0) return;
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((dw + kBlockX - 1) / kBlockX, (dh + kBlockY - 1) / kBlockY, count);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (channels) {
        case 1: area_resize_kernel<1><<<grid, block, 0, st>>>(src, stride, src_step, xs, ys, dw, dh, dst, dst_stride, dst_step); break;
        case 2: area_resize_kernel<2><<<grid, block, 0, st>>>(src, stride, src_step, xs, ys, dw, dh, dst, dst_stride, dst_step); break;
        case 3: area_resize_kernel<3><<<grid, block, 0, st>>>(src, stride, src_step, xs, ys, dw, dh, dst, dst_stride, dst_step); break;
        default: area_resize_kernel<4><<<grid, block, 0, st>>>(src, stride, src_step, xs, ys, dw, dh, dst, dst_stride, dst_step); break;
    }
}

}  // namespace mf::cuda
