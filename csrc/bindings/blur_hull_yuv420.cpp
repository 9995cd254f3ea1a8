#include "../ops/blur_hull_yuv420.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"
#include "hull_args.hpp"

namespace mf::bind {

cuda::Nv12Device nv12_device_from(uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width);

namespace {

ColourMatrices matrices(const std::string& matrix) {
    if (matrix == "bt601") return ColourMatrices{kYuvToRgbBt601, kBt601};
    if (matrix == "bt709") return ColourMatrices{kYuvToRgbBt709, kBt709};
    throw py::value_error("matrix must be 'bt601' or 'bt709', got '" + matrix + "'");
}

std::vector<py::array> plane_triple(const py::handle& h, const char* what) {
    py::tuple t;
    try {
        t = py::tuple(py::reinterpret_borrow<py::object>(h));
    } catch (const py::error_already_set&) {
        throw py::type_error(std::string(what) + " must be a (y, u, v) tuple of arrays");
    }
    if (t.size() != 3) throw py::value_error(std::string(what) + " must be a (y, u, v) tuple of arrays");
    std::vector<py::array> out;
    for (const auto& a : t) {
        if (!py::isinstance<py::array>(a)) throw py::type_error(std::string(what) + " must hold numpy arrays");
        out.push_back(py::reinterpret_borrow<py::array>(a));
    }
    return out;
}

std::vector<Yuv420Views> output_planes(const py::list& outs_obj, std::vector<std::vector<py::array>>& arrays,
                                       const std::vector<py::array>& inputs) {
    std::vector<Yuv420Views> outs;
    for (const auto& o : outs_obj) {
        arrays.push_back(plane_triple(o, "each entry of outs"));
        const auto& a = arrays.back();
        outs.push_back(Yuv420Views{plane_view(a[0], "output y"), plane_view(a[1], "output u"),
                                   plane_view(a[2], "output v")});
    }
    for (size_t i = 0; i < arrays.size(); ++i)
        for (const py::array& a : arrays[i]) {
            for (const py::array& b : inputs)
                if (spans_overlap(a, b)) throw py::value_error("output planes must not share memory with the input's");
            for (size_t j = 0; j < i; ++j)
                for (const py::array& b : arrays[j])
                    if (spans_overlap(a, b)) throw py::value_error("output planes must not share memory with each other");
        }
    return outs;
}

py::tuple run(const py::object& planes, const py::object& points, const py::list& outs_obj,
              const std::vector<int>& ksizes, const py::object& feather, double margin, const std::string& matrix,
              const std::string& device) {
    const Device dev = parse_device(device);
    const ColourMatrices m = matrices(matrix);
    const std::vector<py::array> in_arrays = plane_triple(planes, "planes");
    const Yuv420ConstViews in{const_plane_view(in_arrays[0], "y"), const_plane_view(in_arrays[1], "u"),
                              const_plane_view(in_arrays[2], "v")};
    const Hull hull = hull_from_points(points);
    const HullMaskParams params = params_from(feather, margin);
    std::vector<std::vector<py::array>> out_arrays;
    const std::vector<Yuv420Views> outs = output_planes(outs_obj, out_arrays, in_arrays);
    Rect bbox;
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) bbox = cuda::blur_hull_yuv420(in, hull, params, ksizes, outs, m);
        else bbox = blur_hull_yuv420_cpu(in, hull, params, ksizes, outs, m);
    }
    return rect_tuple(bbox);
}

py::tuple run_nv12(uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width,
                   const py::object& points, const py::list& outs_obj, const std::vector<int>& ksizes,
                   const py::object& feather, double margin, const std::string& matrix) {
    const ColourMatrices m = matrices(matrix);
    const Hull hull = hull_from_points(points);
    const HullMaskParams params = params_from(feather, margin);
    std::vector<std::vector<py::array>> out_arrays;
    const std::vector<Yuv420Views> outs = output_planes(outs_obj, out_arrays, {});
    const cuda::Nv12Device f = nv12_device_from(y, uv, y_pitch, uv_pitch, height, width);
    Rect bbox;
    {
        py::gil_scoped_release release;
        bbox = cuda::blur_hull_nv12(f, hull, params, ksizes, outs, m);
    }
    return rect_tuple(bbox);
}

}  // namespace

void bind_blur_hull_yuv420(py::module_& m) {
    m.def("blur_hull_yuv420", &run, py::arg("planes"), py::arg("points"), py::arg("outs"), py::arg("ksizes"),
          py::arg("feather") = py::none(), py::arg("margin") = 0.0, py::arg("matrix") = "bt601",
          py::arg("device") = "cpu");
    m.def("cuda_blur_hull_nv12", &run_nv12, py::arg("y"), py::arg("uv"), py::arg("y_pitch"), py::arg("uv_pitch"),
          py::arg("height"), py::arg("width"), py::arg("points"), py::arg("outs"), py::arg("ksizes"),
          py::arg("feather") = py::none(), py::arg("margin") = 0.0, py::arg("matrix") = "bt601",
          "blur_hull_yuv420 on an NV12 frame in device memory (plane addresses as integers).");
}

}  // namespace mf::bind
