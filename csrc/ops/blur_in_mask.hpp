// Fused masked blur: for each kernel size, a full frame equal to the source where the mask is 0,
// to cv::GaussianBlur(src, (k, k), 0) where it is 255, and to the rounded blend in between
// (kernels/blur_in_mask.cuh). Only the mask's rows and column spans are blurred; the blurred
// frame is never materialised.
#pragma once
#include <vector>

#include "../image.hpp"

namespace mf {

// outs: one full frame per kernel size, same shape as src, not overlapping src or each other.
// bbox: the rectangle that holds every non-zero mask pixel (pixels outside it are treated as 0).
void blur_in_mask_cpu(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox, const std::vector<int>& ksizes,
                      const std::vector<ImageU8>& outs);

// The CUDA kernel's tile code (kernels/blur_tile.cuh) run serially on the CPU (tests).
void blur_in_mask_reference(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox,
                            const std::vector<int>& ksizes, const std::vector<ImageU8>& outs);

// Bounding box of the non-zero pixels of a single-channel mask ({0,0,0,0} when all zero).
Rect nonzero_bbox(const ConstImageU8& mask);

// Shared argument checks of the CPU and CUDA paths.
void check_blur_in_mask_args(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox,
                             const std::vector<int>& ksizes, const std::vector<ImageU8>& outs);

}  // namespace mf
