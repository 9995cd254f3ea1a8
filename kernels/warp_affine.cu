// CUDA kernel of the affine crops: one thread per output pixel of every crop (grid z: the crop),
// running the shared body of kernels/warp_affine.cuh.
#include <cuda_runtime.h>

#include "launch.hpp"
#include "warp_affine.cuh"

namespace mf::cuda {
namespace {

template <int C>
__global__ void warp_affine_kernel(const uint8_t* __restrict__ src, int height, int width, long stride,
                                   const Affine* __restrict__ inv, int size, uint8_t* __restrict__ dst) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= size || y >= size) return;
    const int k = blockIdx.z;
    const Affine m = inv[k];
    int64_t X0, Y0;
    warp_row_origin(m, y, X0, Y0);
    uint8_t* out = dst + ((static_cast<size_t>(k) * size + y) * size + x) * C;
    warp_affine_pixel<C>(src, height, width, stride, X0 + warp_delta(m.m[0], x), Y0 + warp_delta(m.m[3], x), out);
}

}  // namespace

void launch_warp_affine(const uint8_t* src, int height, int width, int channels, long stride, const Affine* inv,
                        int n, int size, uint8_t* dst, void* stream) {
    if (n <= 0) return;
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((size + kBlockX - 1) / kBlockX, (size + kBlockY - 1) / kBlockY, n);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    switch (channels) {
        case 1: warp_affine_kernel<1><<<grid, block, 0, st>>>(src, height, width, stride, inv, size, dst); break;
        case 2: warp_affine_kernel<2><<<grid, block, 0, st>>>(src, height, width, stride, inv, size, dst); break;
        case 3: warp_affine_kernel<3><<<grid, block, 0, st>>>(src, height, width, stride, inv, size, dst); break;
        default: warp_affine_kernel<4><<<grid, block, 0, st>>>(src, height, width, stride, inv, size, dst); break;
    }
}

}  // namespace mf::cuda
