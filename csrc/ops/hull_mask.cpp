#include "hull_mask.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "../parallel.hpp"
#include "../simd.hpp"

namespace mf {

namespace {
// The largest coordinate a hull's point may have (2^24: float32 holds every integer up to it).
constexpr double kMaxCoordinate = 16777216.0;
}  // namespace

double auto_feather(double hull_area) { return std::max(1.0, kAutoFeatherFraction * std::sqrt(hull_area)); }

HullGeometry Hull::geometry(float feather, float margin) const {
    HullGeometry g;
    g.ax = ax.data();
    g.ay = ay.data();
    g.ux = ux.data();
    g.uy = uy.data();
    g.len = len.data();
    g.n = size();
    g.ramp_end = margin + feather + 0.5f;
    g.inv_width = 1.0f / (feather + 1.0f);
    return g;
}

Hull convex_hull(const double* xy, int n) {
    if (n < 3) invalid("a hull needs at least 3 points, got " + std::to_string(n));
    struct P {
        double x, y;
    };
    std::vector<P> p(n);
    for (int i = 0; i < n; ++i) {
        p[i] = {xy[2 * i], xy[2 * i + 1]};
        if (!std::isfinite(p[i].x) || !std::isfinite(p[i].y))
            invalid("point " + std::to_string(i) + " is not finite (NaN or inf)");
        // The masks' geometry runs in float32, exact for integers to 2^24: a point farther out is
        // no frame coordinate (landmarks gone wrong), and would only read as a degenerate hull.
        if (std::abs(p[i].x) > kMaxCoordinate || std::abs(p[i].y) > kMaxCoordinate) {
            char at[96];
            std::snprintf(at, sizeof at, "(%.6g, %.6g)", p[i].x, p[i].y);
            invalid("point " + std::to_string(i) + " is at " + at + ", beyond +-16777216 px (2^24): not a frame coordinate");
        }
    }
    std::sort(p.begin(), p.end(), [](const P& a, const P& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
    double extent = 0.0;
    for (const P& q : p) extent = std::max({extent, std::abs(q.x - p[0].x), std::abs(q.y - p[0].y)});
    // Andrew's monotone chain; turns smaller than eps count as straight (drops collinear points).
    const double eps = 1e-12 * std::max(1.0, extent * extent);
    auto cross = [](const P& o, const P& a, const P& b) { return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x); };
    std::vector<P> h(2 * n);
    int k = 0;
    for (int i = 0; i < n; ++i) {
        while (k >= 2 && cross(h[k - 2], h[k - 1], p[i]) <= eps) --k;
        h[k++] = p[i];
    }
    for (int i = n - 2, t = k + 1; i >= 0; --i) {
        while (k >= t && cross(h[k - 2], h[k - 1], p[i]) <= eps) --k;
        h[k++] = p[i];
    }
    h.resize(std::max(0, k - 1));
    double area2 = 0.0;
    for (size_t i = 0; i < h.size(); ++i) {
        const P& a = h[i];
        const P& b = h[(i + 1) % h.size()];
        area2 += a.x * b.y - b.x * a.y;
    }
    if (h.size() < 3 || area2 <= 2.0 * eps)
        invalid("the points are collinear (or coincide): their convex hull has no area");
    Hull hull;
    hull.area = 0.5 * area2;
    hull.min_x = hull.max_x = h[0].x;
    hull.min_y = hull.max_y = h[0].y;
    for (size_t i = 0; i < h.size(); ++i) {
        const P& a = h[i];
        const P& b = h[(i + 1) % h.size()];
        const double dx = b.x - a.x, dy = b.y - a.y, l = std::hypot(dx, dy);
        hull.ax.push_back(static_cast<float>(a.x));
        hull.ay.push_back(static_cast<float>(a.y));
        hull.ux.push_back(static_cast<float>(dx / l));
        hull.uy.push_back(static_cast<float>(dy / l));
        hull.len.push_back(static_cast<float>(l));
        hull.perimeter += l;
        hull.min_x = std::min(hull.min_x, a.x);
        hull.max_x = std::max(hull.max_x, a.x);
        hull.min_y = std::min(hull.min_y, a.y);
        hull.max_y = std::max(hull.max_y, a.y);
    }
    return hull;
}

double resolve_feather(const Hull& hull, const HullMaskParams& params) {
    if (!std::isfinite(params.margin) || params.margin < 0.0 || params.margin > 1e5)
        invalid("margin must be a finite number of pixels >= 0, got " + std::to_string(params.margin));
    if (std::isnan(params.feather) || params.feather > 1e5)
        invalid("feather must be a finite number of pixels >= 0, got " + std::to_string(params.feather));
    return params.feather < 0.0 ? auto_feather(hull.area) : params.feather;
}

Rect hull_reach(const Hull& hull, double feather, double margin, int width, int height) {
    const double grow = margin + feather + 1.0;
    const double fx0 = std::floor(hull.min_x - grow), fx1 = std::ceil(hull.max_x + grow);
    const double fy0 = std::floor(hull.min_y - grow), fy1 = std::ceil(hull.max_y + grow);
    const int x0 = static_cast<int>(std::max(0.0, fx0));
    const int y0 = static_cast<int>(std::max(0.0, fy0));
    const int x1 = static_cast<int>(std::min(static_cast<double>(width - 1), fx1));
    const int y1 = static_cast<int>(std::min(static_cast<double>(height - 1), fy1));
    if (x1 < x0 || y1 < y0) return Rect{};
    return Rect{x0, y0, x1 - x0 + 1, y1 - y0 + 1};
}

namespace {

void check_mask(const ImageU8& mask) {
    if (mask.channels != 1) invalid("mask must have one channel");
    if (mask.height <= 0 || mask.width <= 0) invalid("mask shape must be positive");
}

void clear(const ImageU8& mask) {
    for (int y = 0; y < mask.height; ++y) std::memset(mask.row(y), 0, static_cast<size_t>(mask.width));
}

// Columns [lo, hi] (inclusive, may be empty) of row y inside every edge half-plane shifted
// outwards by t: { x : s_i(x, y) <= t for all i }, with s_i the signed distance to edge line i.
void row_interval(const Hull& h, double y, double t, double& lo, double& hi) {
    lo = -std::numeric_limits<double>::infinity();
    hi = std::numeric_limits<double>::infinity();
    for (int i = 0; i < h.size(); ++i) {
        // s = (x - ax) * uy - (y - ay) * ux <= t
        const double uy = h.uy[i], ux = h.ux[i];
        const double rhs = t + (y - h.ay[i]) * ux;
        if (std::abs(uy) < 1e-12) {
            if (rhs < 0.0) {
                lo = 1.0;
                hi = 0.0;
                return;
            }
            continue;
        }
        const double bound = h.ax[i] + rhs / uy;
        if (uy > 0) hi = std::min(hi, bound);
        else lo = std::max(lo, bound);
    }
}

// hull_mask_value for pixels x0 .. x0 + count - 1 of row y, vectorised across the pixels: the
// shared per-edge body in the same order as the per-pixel path, so the bytes are identical.
MF_TARGET_CLONES
void hull_row_values(const HullGeometry& g, int y, int x0, int count, float* __restrict dmax,
                     float* __restrict best, uint8_t* __restrict out) {
    const float py = static_cast<float>(y);
    for (int e = 0; e < count; ++e) {
        dmax[e] = -INFINITY;
        best[e] = INFINITY;
    }
    for (int i = 0; i < g.n; ++i) {
        const Edge edge = edge_at(g, i);
        for (int e = 0; e < count; ++e) dmax[e] = side_max_update(dmax[e], edge_side(edge, static_cast<float>(x0 + e), py));
    }
    bool outside = false;
    for (int e = 0; e < count; ++e) outside |= dmax[e] > 0.0f;
    if (outside)
        for (int i = 0; i < g.n; ++i) {
            const Edge edge = edge_at(g, i);
            for (int e = 0; e < count; ++e) {
                const float px = static_cast<float>(x0 + e);
                best[e] = outside_min_update(best[e], edge_side(edge, px, py), edge_dist2(edge, px, py));
            }
        }
    for (int e = 0; e < count; ++e) out[e] = hull_alpha_u8(g, signed_distance_from(dmax[e], best[e]));
}

struct RowExtent {
    int first = std::numeric_limits<int>::max();
    int last = -1;
};

Rect extent_to_rect(const std::vector<RowExtent>& rows, int y0) {
    int x0 = std::numeric_limits<int>::max(), x1 = -1, top = -1, bottom = -1;
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].last < 0) continue;
        x0 = std::min(x0, rows[i].first);
        x1 = std::max(x1, rows[i].last);
        if (top < 0) top = static_cast<int>(i);
        bottom = static_cast<int>(i);
    }
    if (x1 < 0) return Rect{};
    return Rect{x0, y0 + top, x1 - x0 + 1, bottom - top + 1};
}

}  // namespace

Rect hull_mask_cpu(const Hull& hull, const HullMaskParams& params, const ImageU8& mask) {
    return hull_mask_region_cpu(hull, params, mask, 0, 0, mask.width, mask.height);
}

Rect hull_mask_region_cpu(const Hull& hull, const HullMaskParams& params, const ImageU8& mask, int ox, int oy,
                          int width, int height) {
    check_mask(mask);
    const double feather = resolve_feather(hull, params);
    const double margin = params.margin;
    clear(mask);
    const Rect reach = hull_reach(hull, feather, margin, width, height);
    if (reach.empty()) return Rect{};
    if (reach.x < ox || reach.y < oy || reach.x + reach.w > ox + mask.width || reach.y + reach.h > oy + mask.height)
        invalid("the mask region " + rect_str(Rect{ox, oy, mask.width, mask.height}) + " does not hold the hull's reach " +
                rect_str(reach));
    const HullGeometry g = hull.geometry(static_cast<float>(feather), static_cast<float>(margin));
    // Pixels whose distance is below t_full are certainly 255, above t_zero certainly 0 (one pixel
    // of slack on each side keeps float rounding out of the decision); the band between them is
    // evaluated exactly with the shared body.
    const double t_full = std::min(margin - 0.5, 0.0) - 1.0;
    const double t_zero = margin + feather + 0.5 + 1.0;
    std::vector<RowExtent> extents(reach.h);
    parallel_for(reach.h, 16, [&](int b, int e) {
        std::vector<float> dmax(reach.w), best(reach.w);
        for (int i = b; i < e; ++i) {
            const int y = reach.y + i;
            uint8_t* const row0 = mask.row(y - oy);
            const auto at = [&](int x) { return row0 + (x - ox); };  // frame column x >= ox
            double olo, ohi, ilo, ihi;
            row_interval(hull, y, t_zero, olo, ohi);
            const int ox0 = static_cast<int>(std::max<double>(reach.x, std::ceil(olo)));
            const int ox1 = static_cast<int>(std::min<double>(reach.x + reach.w - 1, std::floor(ohi)));
            if (ox1 < ox0) continue;
            row_interval(hull, y, t_full, ilo, ihi);
            int ix0 = static_cast<int>(std::max<double>(ox0, std::ceil(ilo)));
            int ix1 = static_cast<int>(std::min<double>(ox1, std::floor(ihi)));
            if (ix1 < ix0) {  // no certainly-full run: the whole span is band
                ix0 = ox1 + 1;
                ix1 = ox1;
            }
            RowExtent ext;
            auto band = [&](int a, int b) {  // evaluate [a, b)
                if (b <= a) return;
                hull_row_values(g, y, a, b - a, dmax.data(), best.data(), at(a));
                for (int x = a; x < b; ++x)
                    if (*at(x)) {
                        ext.first = std::min(ext.first, x);
                        break;
                    }
                for (int x = b - 1; x >= a; --x)
                    if (*at(x)) {
                        ext.last = std::max(ext.last, x);
                        break;
                    }
            };
            band(ox0, std::min(ix0, ox1 + 1));
            if (ix0 <= ix1) {
                std::memset(at(ix0), 255, static_cast<size_t>(ix1 - ix0 + 1));
                ext.first = std::min(ext.first, ix0);
                ext.last = std::max(ext.last, ix1);
            }
            band(std::max(ix1 + 1, ox0), ox1 + 1);
            extents[i] = ext;
        }
    });
    return extent_to_rect(extents, reach.y);
}

Rect hull_mask_reference(const Hull& hull, const HullMaskParams& params, const ImageU8& mask) {
    check_mask(mask);
    const double feather = resolve_feather(hull, params);
    clear(mask);
    const Rect reach = hull_reach(hull, feather, params.margin, mask.width, mask.height);
    if (reach.empty()) return Rect{};
    const HullGeometry g = hull.geometry(static_cast<float>(feather), static_cast<float>(params.margin));
    std::vector<RowExtent> extents(reach.h);
    for (int i = 0; i < reach.h; ++i) {
        const int y = reach.y + i;
        for (int x = reach.x; x < reach.x + reach.w; ++x) {
            const uint8_t v = hull_mask_value(g, x, y);
            mask.row(y)[x] = v;
            if (v) {
                extents[i].first = std::min(extents[i].first, x);
                extents[i].last = std::max(extents[i].last, x);
            }
        }
    }
    return extent_to_rect(extents, reach.y);
}

}  // namespace mf
