// OpenCV-exact Gaussian blur of uint8 images (cv::GaussianBlur(src, dst, Size(k, k), 0) with the
// default BORDER_REFLECT_101), limited to a region of interest whose border pixels read their
// real neighbours in the frame.
#pragma once
#include <cstdint>
#include <vector>

#include "../image.hpp"

namespace mf {

// Throws std::invalid_argument unless ksize is odd and in [1, kMaxKsize].
void check_ksize(int ksize);

// The 8.8 fixed-point taps OpenCV uses for CV_8U with sigma <= 0 (sum exactly 256).
std::vector<uint16_t> gaussian_weights_q8(int ksize);

// One kernel size, ready to run.
struct BlurLevel {
    explicit BlurLevel(int ksize);
    int ksize;
    int radius;
    std::vector<uint16_t> weights;
};

// Per-thread scratch of the row engine.
struct BlurRowScratch {
    std::vector<uint16_t> vpad;  // vertical sums over the padded column range
    std::vector<uint32_t> acc;   // 16.16 accumulators of one output row span
};

// The row engine: 16.16 accumulators of the blurred samples of row y, columns [x0, x1), written
// to scratch.acc[(x - x0) * C + c]. q16_to_u8 turns them into the blurred bytes.
void blur_row_accumulate(const ConstImageU8& src, const BlurLevel& level, int y, int x0, int x1,
                         BlurRowScratch& scratch);

// Blurred pixels of `roi` into dst (roi.h x roi.w x C). Multi-threaded, vectorised.
void gaussian_blur_cpu(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst);

// Several kernel sizes of the same roi in one pass over its rows (the source rows each output row
// reads stay in cache across the levels).
void gaussian_blur_multi_cpu(const ConstImageU8& src, Rect roi, const std::vector<int>& ksizes,
                             const std::vector<ImageU8>& dsts);

// The CUDA kernel's tile code (kernels/blur_tile.cuh) run serially on the CPU, one tile at a time:
// the tests check the GPU path's indexing and arithmetic with it.
void gaussian_blur_reference(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst);

}  // namespace mf
