// Feathered convex-hull masks from landmark points (arithmetic: kernels/hull_mask.cuh).
#pragma once
#include <cstdint>
#include <vector>

#include "../../kernels/hull_mask.cuh"
#include "../image.hpp"

namespace mf {

// Feather used when the caller gives none: 6% of the hull's size, sqrt(area), at least 1 px.
// For a 250 x 320 px face this is about 10 px: a seam-free transition over roughly the radius
// of the light (k = 15) blur kernel, scaled with the face so small faces keep a tight mask.
constexpr double kAutoFeatherFraction = 0.06;
double auto_feather(double hull_area);

// A convex polygon (float vertices, counter-clockwise) with its edge data for HullGeometry.
struct Hull {
    std::vector<float> ax, ay, ux, uy, len;
    double area = 0.0;       // shoelace area of the hull, px^2
    double perimeter = 0.0;  // px
    double min_x = 0, min_y = 0, max_x = 0, max_y = 0;
    int size() const { return static_cast<int>(ax.size()); }
    HullGeometry geometry(float feather, float margin) const;
};

// Convex hull of n points (xy interleaved). Throws std::invalid_argument for n < 3, non-finite
// coordinates or points that are all (nearly) collinear.
Hull convex_hull(const double* xy, int n);

struct HullMaskParams {
    double feather = -1.0;  // < 0: auto_feather(hull area)
    double margin = 0.0;    // outward growth of the hull, px, >= 0
};

// Resolved feather for a hull and parameters (validates them).
double resolve_feather(const Hull& hull, const HullMaskParams& params);

// Rasterise into mask (H x W, fully written: zero outside the hull's reach). Returns the bounding
// box of the non-zero pixels ({0,0,0,0} when the hull lies outside the frame).
Rect hull_mask_cpu(const Hull& hull, const HullMaskParams& params, const ImageU8& mask);

// The same mask written into a region of the frame: mask's pixel (0, 0) is the frame's (ox, oy),
// the frame is width x height, and the region must hold the hull's reach (hull_reach). The
// returned box is in frame coordinates.
Rect hull_mask_region_cpu(const Hull& hull, const HullMaskParams& params, const ImageU8& mask, int ox, int oy,
                          int width, int height);

// Every pixel of the reachable box evaluated with hull_mask_value, as the CUDA kernel does; the
// tests check that the fast CPU rasteriser matches it exactly.
Rect hull_mask_reference(const Hull& hull, const HullMaskParams& params, const ImageU8& mask);

// Pixels that can be non-zero: the hull's bounds grown by margin + feather + 1, clipped to the frame.
Rect hull_reach(const Hull& hull, double feather, double margin, int width, int height);

}  // namespace mf
