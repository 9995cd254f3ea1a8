#include "blur_hull_yuv420.hpp"

#include <algorithm>
#include <string>

#include "blur_in_mask.hpp"
#include "gaussian_blur.hpp"

namespace mf {

HullRegion plan_hull_region(const Hull& hull, double feather, double margin, int max_ksize, int width, int height) {
    HullRegion p;
    p.reach = hull_reach(hull, feather, margin, width, height);
    if (p.reach.empty()) return p;
    const Rect& r = p.reach;
    const int grow = max_ksize / 2 + 1;  // + 1: the 2x2 blocks covering the reach lie inside the region
    const int x0 = std::max(0, r.x - grow) / 2 * 2, y0 = std::max(0, r.y - grow) / 2 * 2;
    int x1 = std::min(width, r.x + r.w + grow), y1 = std::min(height, r.y + r.h + grow);
    x1 = std::min(width, x1 + x1 % 2);
    y1 = std::min(height, y1 + y1 % 2);
    p.region = Rect{x0, y0, x1 - x0, y1 - y0};
    return p;
}

void check_blur_hull_outputs(int h, int w, const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs) {
    const int ch = (h + 1) / 2, cw = (w + 1) / 2;
    if (ksizes.empty()) invalid("ksizes must name at least one kernel size");
    for (size_t i = 0; i < ksizes.size(); ++i) {
        check_ksize(ksizes[i]);
        for (size_t j = 0; j < i; ++j)
            if (ksizes[j] == ksizes[i]) invalid("kernel size " + std::to_string(ksizes[i]) + " is given twice");
    }
    if (outs.size() != ksizes.size()) invalid("one output frame (y, u, v) per kernel size is needed");
    for (const Yuv420Views& o : outs) {
        check_plane(as_const(o.y), h, w, "output y");
        check_plane(as_const(o.u), ch, cw, "output u");
        check_plane(as_const(o.v), ch, cw, "output v");
    }
}

void check_blur_hull_yuv420_args(const Yuv420ConstViews& in, const std::vector<int>& ksizes,
                                 const std::vector<Yuv420Views>& outs) {
    const int h = in.y.height, w = in.y.width, ch = (h + 1) / 2, cw = (w + 1) / 2;
    check_plane(in.y, h, w, "y");
    check_plane(in.u, ch, cw, "u");
    check_plane(in.v, ch, cw, "v");
    check_blur_hull_outputs(h, w, ksizes, outs);
}

Rect blur_hull_yuv420_cpu(const Yuv420ConstViews& in, const Hull& hull, const HullMaskParams& params,
                          const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs,
                          const ColourMatrices& m) {
    check_blur_hull_yuv420_args(in, ksizes, outs);
    const int H = in.y.height, W = in.y.width;
    const double feather = resolve_feather(hull, params);
    const HullRegion plan = plan_hull_region(hull, feather, params.margin,
                                             *std::max_element(ksizes.begin(), ksizes.end()), W, H);
    if (plan.reach.empty()) return Rect{};
    const Rect g = plan.region;
    // The mask, rasterised over the reach only (zero elsewhere in the region).
    std::vector<uint8_t> mask_buf(static_cast<size_t>(g.w) * g.h, 0);
    const ImageU8 mask{mask_buf.data(), g.h, g.w, 1, g.w};
    const Rect bbox = hull_mask_region_cpu(hull, params, mask, g.x, g.y, W, H);
    if (bbox.empty()) return Rect{};
    // The region in RGB, blurred at every level inside the mask.
    const size_t rgb_bytes = static_cast<size_t>(g.w) * g.h * 3;
    std::vector<uint8_t> rgb(rgb_bytes * (1 + ksizes.size()));
    const ImageU8 src{rgb.data(), g.h, g.w, 3, 3L * g.w};
    yuv420_to_rgb_cpu(in, g, src, m.to_rgb);
    std::vector<ImageU8> levels;
    for (size_t l = 0; l < ksizes.size(); ++l)
        levels.push_back(ImageU8{rgb.data() + rgb_bytes * (l + 1), g.h, g.w, 3, 3L * g.w});
    const Rect roi{plan.reach.x - g.x, plan.reach.y - g.y, plan.reach.w, plan.reach.h};
    blur_in_mask_cpu(as_const(src), as_const(mask), roi, ksizes, levels);
    // Back to 4:2:0 where the mask selects, in place in each output's planes.
    const int cx = g.x / 2, cy = g.y / 2, cw = (g.w + 1) / 2, ch = (g.h + 1) / 2;
    for (size_t l = 0; l < ksizes.size(); ++l) {
        const Yuv420Views& o = outs[l];
        const Yuv420Views sub{ImageU8{o.y.row(g.y) + g.x, g.h, g.w, 1, o.y.row_stride},
                              ImageU8{o.u.row(cy) + cx, ch, cw, 1, o.u.row_stride},
                              ImageU8{o.v.row(cy) + cx, ch, cw, 1, o.v.row_stride}};
        rgb_to_yuv420_cpu(as_const(levels[l]), roi, sub, m.to_yuv, as_const(mask));
    }
    return bbox;
}

}  // namespace mf
