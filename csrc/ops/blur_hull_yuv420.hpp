// The face subsets' per-frame step, fused, on a decoded 4:2:0 frame: the subject's feathered hull
// mask (hull_mask), the multi-level masked blur (blur_in_mask) and the conversion of the blurred
// pixels back to 4:2:0 (rgb_to_yuv420 with the mask as selection), reading and writing only the
// region the blur can reach. The result is, sample for sample, what the three operators give when
// run one after the other on the whole frame (yuv420_to_rgb first): the masked samples of each
// output are replaced, every other sample keeps the input's value.
#pragma once
#include <vector>

#include "../image.hpp"
#include "hull_mask.hpp"
#include "rgb_to_yuv420.hpp"
#include "yuv420_to_rgb.hpp"

namespace mf {

// Where the step works. reach: the pixels the mask can cover (hull_reach); region: reach grown by
// the largest kernel's radius + 1 (every pixel the blur reads, and whole 2x2 blocks around the
// reach), even origin, clipped to the frame. Both empty when the hull's reach misses the frame.
struct HullRegion {
    Rect reach, region;
};
HullRegion plan_hull_region(const Hull& hull, double feather, double margin, int max_ksize, int width, int height);

struct ColourMatrices {
    YuvToRgbMatrix to_rgb;  // decoding the input's samples
    YuvMatrix to_yuv;       // encoding the blurred ones (the same standard)
};

// outs[i]: the planes of the output for ksizes[i] (distinct sizes), the input's size, each holding
// a copy of `in` (only the samples the mask selects are rewritten). Returns the bounding box of the
// mask's non-zero pixels (empty: no output changed).
Rect blur_hull_yuv420_cpu(const Yuv420ConstViews& in, const Hull& hull, const HullMaskParams& params,
                          const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs,
                          const ColourMatrices& m);

// Shared argument checks of the CPU and CUDA paths (outputs of an h x w frame; and with its input).
void check_blur_hull_outputs(int h, int w, const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs);
void check_blur_hull_yuv420_args(const Yuv420ConstViews& in, const std::vector<int>& ksizes,
                                 const std::vector<Yuv420Views>& outs);

}  // namespace mf
