// CUDA kernel of the feathered hull mask: one thread per pixel of the reachable box, the same
// per-pixel body as the CPU rasteriser (kernels/hull_mask.cuh).
#include <cuda_runtime.h>

#include "launch.hpp"

namespace mf::cuda {
namespace {

__global__ void hull_mask_kernel(HullGeometry g, Rect reach, uint8_t* __restrict__ mask, int width, int ox, int oy,
                                 int* bbox4) {
    const int x = reach.x + blockIdx.x * blockDim.x + threadIdx.x;
    const int y = reach.y + blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= reach.x + reach.w || y >= reach.y + reach.h) return;
    const uint8_t v = hull_mask_value(g, x, y);
    mask[static_cast<long>(y - oy) * width + (x - ox)] = v;
    if (v) {
        atomicMin(&bbox4[0], x);
        atomicMax(&bbox4[1], x);
        atomicMin(&bbox4[2], y);
        atomicMax(&bbox4[3], y);
    }
}

}  // namespace

void launch_hull_mask(const HullGeometry& g, Rect reach, uint8_t* mask, int width, int* bbox4, void* stream, int ox,
                      int oy) {
    const dim3 block(32, 8);
    const dim3 grid((reach.w + block.x - 1) / block.x, (reach.h + block.y - 1) / block.y);
    hull_mask_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(g, reach, mask, width, ox, oy, bbox4);
}

}  // namespace mf::cuda
