#include "../ops/hull_mask.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"
#include "hull_args.hpp"

namespace mf::bind {

namespace {

py::tuple run_hull_mask(const py::object& points, int height, int width, const py::object& feather, double margin,
                        const std::string& device, bool reference) {
    const Device dev = parse_device(device);
    if (height <= 0 || width <= 0) throw py::value_error("shape must be two positive integers (H, W)");
    const Hull hull = hull_from_points(points);
    const HullMaskParams params = params_from(feather, margin);
    resolve_feather(hull, params);  // validate before allocating
    auto mask = new_image(height, width, 1, false);
    const ImageU8 view = mutable_view(mask, 1);
    Rect bbox;
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) bbox = cuda::hull_mask(hull, params, view);
        else if (reference) bbox = hull_mask_reference(hull, params, view);
        else bbox = hull_mask_cpu(hull, params, view);
    }
    return py::make_tuple(mask, rect_tuple(bbox));
}

}  // namespace

void bind_hull_mask(py::module_& m) {
    m.def(
        "hull_mask",
        [](const py::object& points, int height, int width, const py::object& feather, double margin,
           const std::string& device) { return run_hull_mask(points, height, width, feather, margin, device, false); },
        py::arg("points"), py::arg("height"), py::arg("width"), py::arg("feather") = py::none(),
        py::arg("margin") = 0.0, py::arg("device") = "cpu");
    m.def(
        "hull_mask_reference",
        [](const py::object& points, int height, int width, const py::object& feather, double margin) {
            return run_hull_mask(points, height, width, feather, margin, "cpu", true);
        },
        py::arg("points"), py::arg("height"), py::arg("width"), py::arg("feather") = py::none(),
        py::arg("margin") = 0.0, "Every pixel through the shared per-pixel body, as the CUDA kernel (tests).");
    m.def(
        "convex_hull",
        [](const py::object& points, const py::object& feather, double margin) {
            const Hull hull = hull_from_points(points);
            const double f = resolve_feather(hull, params_from(feather, margin));
            py::array_t<double> v({hull.size(), 2});
            auto a = v.mutable_unchecked<2>();
            for (int i = 0; i < hull.size(); ++i) {
                a(i, 0) = hull.ax[i];
                a(i, 1) = hull.ay[i];
            }
            py::dict info;
            info["vertices"] = v;
            info["area"] = hull.area;
            info["perimeter"] = hull.perimeter;
            info["feather"] = f;
            info["margin"] = margin;
            return info;
        },
        py::arg("points"), py::arg("feather") = py::none(), py::arg("margin") = 0.0);
    m.attr("AUTO_FEATHER_FRACTION") = kAutoFeatherFraction;
}

}  // namespace mf::bind
