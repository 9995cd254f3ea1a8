// Hull arguments shared by the operators that take landmark points (hull_mask, blur_hull_yuv420).
#pragma once
#include "../ops/hull_mask.hpp"
#include "arrays.hpp"

namespace mf::bind {

inline Hull hull_from_points(const py::object& points) {
    py::array_t<double, py::array::c_style | py::array::forcecast> p;
    try {
        p = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(points);
    } catch (const py::error_already_set&) {
        p = {};
    }
    if (!p || p.ndim() != 2 || p.shape(1) != 2)
        throw py::value_error("points must be an (N, 2) array of (x, y) coordinates");
    const int n = static_cast<int>(p.shape(0));
    return convex_hull(p.data(), n);
}

inline HullMaskParams params_from(const py::object& feather, double margin) {
    HullMaskParams params;
    params.margin = margin;
    if (!feather.is_none()) {
        params.feather = feather.cast<double>();
        if (!(params.feather >= 0.0)) throw py::value_error("feather must be >= 0 pixels (or None for the automatic feather)");
    }
    return params;
}

}  // namespace mf::bind
