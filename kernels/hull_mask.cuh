// Feathered convex-hull mask arithmetic, shared by the CPU rasteriser and the CUDA kernel.
//
// Geometry. Pixel (x, y) is the unit square centred on the point (x, y) (OpenCV's convention:
// integer coordinates are pixel centres). d(p) is the signed Euclidean distance from the pixel
// centre p to the hull boundary: negative inside, positive outside, where "outside" distance is to
// the nearest edge or vertex (so a positive margin grows the hull with rounded corners, as a
// Minkowski sum with a disk would).
//
// Ramp. With margin m >= 0 and feather f >= 0 (pixels):
//     alpha(d) = clamp((m + f + 0.5 - d) / (f + 1), 0, 1),   mask = floor(255 * alpha + 0.5)
// alpha is 1 for d <= m - 0.5 and 0 for d >= m + f + 0.5. With f = 0 this is the usual one-pixel
// anti-aliased edge (a pixel whose centre lies on the edge is half covered); a feather f widens it
// outwards, so every pixel of the (margin-grown) hull is fully masked and the softening happens
// outside it. The mask's sum approximates the area of the hull grown by m + f/2.
//
// Floating point: all arithmetic is single precision with explicit operations and no fused
// multiply-add contraction (host: -ffp-contract=off, device: --fmad=false), so the CPU and the GPU
// produce identical masks.
#pragma once
#include "common.cuh"
#include <math.h>

namespace mf {

// Edges of a convex polygon in counter-clockwise order (positive shoelace area): edge i runs from
// vertex (ax[i], ay[i]) along the unit direction (ux[i], uy[i]) for len[i] pixels; its outward
// normal is (uy[i], -ux[i]).
struct HullGeometry {
    const float* ax;
    const float* ay;
    const float* ux;
    const float* uy;
    const float* len;
    int n;
    float ramp_end;   // m + f + 0.5: alpha reaches 0 at this distance
    float inv_width;  // 1 / (f + 1)
};

// One edge, as scalars: vertex (ax, ay), unit direction (ux, uy), length len.
struct Edge {
    float ax, ay, ux, uy, len;
};
MF_HD Edge edge_at(const HullGeometry& g, int i) { return Edge{g.ax[i], g.ay[i], g.ux[i], g.uy[i], g.len[i]}; }

// Signed distance of point (px, py) to the edge's line (positive on the outer side).
MF_HD float edge_side(const Edge& e, float px, float py) {
    const float rx = px - e.ax;
    const float ry = py - e.ay;
    return rx * e.uy - ry * e.ux;
}

// Squared distance of point (px, py) to the edge's segment.
MF_HD float edge_dist2(const Edge& e, float px, float py) {
    const float rx = px - e.ax;
    const float ry = py - e.ay;
    float t = rx * e.ux + ry * e.uy;
    t = t < 0.0f ? 0.0f : (t > e.len ? e.len : t);
    const float qx = rx - t * e.ux;
    const float qy = ry - t * e.uy;
    return qx * qx + qy * qy;
}

// Running updates of the two reductions below; the CPU rasteriser runs them over a row of pixels
// (vectorised), the CUDA kernel per pixel: the same operations in the same order.
MF_HD float side_max_update(float dmax, float s) { return s > dmax ? s : dmax; }
MF_HD float outside_min_update(float best, float s, float d2) { return (s > 0.0f && d2 < best) ? d2 : best; }
MF_HD float signed_distance_from(float dmax, float best) { return dmax <= 0.0f ? dmax : sqrtf(best); }

// d(p): inside, the distance to the nearest edge line (max of the edge sides, all <= 0); outside,
// the distance to the nearest boundary point, which lies on an edge facing the point (side > 0).
MF_HD float hull_signed_distance(const HullGeometry& g, float px, float py) {
    float dmax = -INFINITY;
    for (int i = 0; i < g.n; ++i) dmax = side_max_update(dmax, edge_side(edge_at(g, i), px, py));
    if (dmax <= 0.0f) return dmax;
    float best = INFINITY;
    for (int i = 0; i < g.n; ++i) {
        const Edge e = edge_at(g, i);
        best = outside_min_update(best, edge_side(e, px, py), edge_dist2(e, px, py));
    }
    return signed_distance_from(dmax, best);
}

MF_HD uint8_t hull_alpha_u8(const HullGeometry& g, float d) {
    float a = (g.ramp_end - d) * g.inv_width;
    a = a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a);
    return static_cast<uint8_t>(floorf(a * 255.0f + 0.5f));
}

MF_HD uint8_t hull_mask_value(const HullGeometry& g, int x, int y) {
    return hull_alpha_u8(g, hull_signed_distance(g, static_cast<float>(x), static_cast<float>(y)));
}

}  // namespace mf
