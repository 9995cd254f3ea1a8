// Area-averaging downscale, bit-identical to OpenCV 4.x cv2.resize(..., INTER_AREA) on its
// general path (kernels/area_resize.cuh): the detector's input (the frame's last, non-integer step
// down to the detection size) and the shot detector's thumbnails.
#pragma once
#include <vector>

#include "../../kernels/area_resize.cuh"
#include "../image.hpp"

namespace mf {

// One axis's tables (OpenCV's computeResizeAreaTab, the entries grouped by destination coordinate).
struct AreaTable {
    std::vector<AreaSpan> span;
    std::vector<int> src;
    std::vector<float> weight;
    AreaAxis view() const { return AreaAxis{span.data(), src.data(), weight.data()}; }
};

// The table of an axis of ssize source pixels shrunk to dsize (1 <= dsize <= ssize), with
// OpenCV's scale: 1 / (dsize / ssize) in double.
AreaTable area_table(int ssize, int dsize);

// Arguments both devices check: a 1 to 4 channel image, a destination no larger than the source in
// either axis and not empty, and either exactly half the source in both axes or not a whole-number
// ratio in both axes (OpenCV's fast path for 3:1, 4:1, 1:1 x 2:1, ...). Returns whether it is the
// exact 2:1 shrink.
bool check_area_resize_args(int height, int width, int channels, int dst_width, int dst_height);

// Whether the shrink is one the operator takes (check_area_resize_args's rule, without raising).
bool area_resize_supported(int height, int width, int dst_width, int dst_height);

// dst (dst.height x dst.width x src.channels, contiguous rows) = the area downscale of src.
void area_resize_cpu(const ConstImageU8& src, const ImageU8& dst);

// The CUDA kernel's per-pixel code (kernels/area_resize.cuh) run serially on the CPU (tests).
void area_resize_reference(const ConstImageU8& src, const ImageU8& dst);

}  // namespace mf
