// CUDA kernel of the NV12 chroma split: one thread per chroma sample of the rectangle, running the
// shared body of kernels/nv12_split.cuh.
#include <cuda_runtime.h>

#include "launch.hpp"
#include "nv12_split.cuh"

namespace mf::cuda {
namespace {

__global__ void nv12_split_kernel(const uint8_t* __restrict__ uv, long uv_pitch, Rect c, uint8_t* __restrict__ u,
                                  uint8_t* __restrict__ v, long pitch) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= c.w || j >= c.h) return;
    nv12_split_sample(uv + (c.y + j) * uv_pitch, c.x + i, u + j * pitch, v + j * pitch, i);
}

}  // namespace

void launch_nv12_split(const uint8_t* uv, long uv_pitch, Rect chroma, uint8_t* u, uint8_t* v, long pitch,
                       void* stream) {
    if (chroma.empty()) return;
    const dim3 block(kBlockX, kBlockY);
    const dim3 grid((chroma.w + kBlockX - 1) / kBlockX, (chroma.h + kBlockY - 1) / kBlockY);
    nv12_split_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(uv, uv_pitch, chroma, u, v, pitch);
}

}  // namespace mf::cuda
