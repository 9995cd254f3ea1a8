// Affine crops of a frame, bit-identical to OpenCV 4.x cv2.warpAffine(frame, M, (size, size),
// INTER_LINEAR, BORDER_CONSTANT, 0) (fixed-point arithmetic in kernels/warp_affine.cuh): n crops of
// one frame in one call, e.g. the face mesh's 192 px crop of every face, SFace's 112 px chips.
#pragma once
#include <vector>

#include "../../kernels/warp_affine.cuh"
#include "../image.hpp"

namespace mf {

constexpr int kWarpMaxSize = 8192;  // largest crop side

// Ms: forward frame -> crop matrices as cv2.warpAffine takes them (inverted here as OpenCV does).
// dst: n x size x size x src.channels, contiguous.
void warp_affine_cpu(const ConstImageU8& src, const std::vector<Affine>& Ms, int size, uint8_t* dst);

// Shared argument checks (both devices): the frame (1 to 4 channels, rows not overlapping), the
// crop size, finite matrices.
void check_warp_affine_args(int height, int width, int channels, long row_stride, const std::vector<Affine>& Ms,
                            int size);

}  // namespace mf
