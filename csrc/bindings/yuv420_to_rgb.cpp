#include "../ops/yuv420_to_rgb.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

py::array run_yuv420_to_rgb(const py::array& y, const py::array& u, const py::array& v, const py::object& out_obj,
                            const py::object& roi_obj, const std::string& matrix, const std::string& device,
                            bool reference) {
    const Device dev = parse_device(device);
    if (matrix != "bt601" && matrix != "bt709")
        throw py::value_error("matrix must be 'bt601' or 'bt709', got '" + matrix + "'");
    const RgbMatrix m = matrix == "bt709" ? kRgbBt709 : kRgbBt601;
    const Yuv420ConstViews in{const_plane_view(y, "y"), const_plane_view(u, "u"), const_plane_view(v, "v")};
    Rect roi{0, 0, in.y.width, in.y.height};
    if (!roi_obj.is_none()) roi = rect_from_tuple(roi_obj, "roi");
    if (roi.w < 0 || roi.h < 0) throw py::value_error("roi " + rect_str(roi) + " has a negative size");
    if (roi.empty()) {  // nothing to convert: an empty image
        if (!out_obj.is_none()) throw py::value_error("roi " + rect_str(roi) + " is empty");
        return new_image(roi.h, roi.w, 3, true);
    }
    py::array out;
    if (out_obj.is_none()) {
        out = new_image(roi.h, roi.w, 3, true);
    } else {
        out = py::array::ensure(out_obj);
        if (!out) throw py::type_error("out must be a uint8 array");
    }
    ImageU8 dst = image_view(out, "out");
    if (out.ndim() != 3) throw py::value_error("out must be an (H, W, 3) array");
    if (!out.writeable()) throw py::value_error("out must be writeable");
    for (const py::array* p : {&y, &u, &v})
        if (overlaps(*p, out)) throw py::value_error("out must not share memory with the planes");
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) cuda::yuv420_to_rgb(in, roi, dst, m);
        else if (reference) yuv420_to_rgb_reference(in, roi, dst, m);
        else yuv420_to_rgb_cpu(in, roi, dst, m);
    }
    return out;
}

}  // namespace

void bind_yuv420_to_rgb(py::module_& m) {
    m.def(
        "yuv420_to_rgb",
        [](const py::array& y, const py::array& u, const py::array& v, const py::object& out, const py::object& roi,
           const std::string& matrix, const std::string& device) {
            return run_yuv420_to_rgb(y, u, v, out, roi, matrix, device, false);
        },
        py::arg("y"), py::arg("u"), py::arg("v"), py::arg("out") = py::none(), py::arg("roi") = py::none(),
        py::arg("matrix") = "bt601", py::arg("device") = "cpu");
    m.def(
        "yuv420_to_rgb_reference",
        [](const py::array& y, const py::array& u, const py::array& v, const py::object& out, const py::object& roi,
           const std::string& matrix) { return run_yuv420_to_rgb(y, u, v, out, roi, matrix, "cpu", true); },
        py::arg("y"), py::arg("u"), py::arg("v"), py::arg("out") = py::none(), py::arg("roi") = py::none(),
        py::arg("matrix") = "bt601", "The CUDA kernel's per-pixel code run serially on the CPU (tests).");
}

}  // namespace mf::bind
