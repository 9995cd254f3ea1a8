#include "../ops/yuv420_to_rgb.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

// out: a new (h, w, 3) array, or the caller's, checked.
py::array output_image(const py::object& out_obj, int h, int w, const py::array& y, const py::array& u,
                       const py::array& v) {
    if (out_obj.is_none()) return new_image(h, w, 3, true);
    if (!py::isinstance<py::array>(out_obj)) throw py::type_error("out must be a numpy array");
    py::array out = py::reinterpret_borrow<py::array>(out_obj);
    if (!py::isinstance<py::array_t<uint8_t>>(out) || out.dtype().kind() != 'u' || out.itemsize() != 1)
        throw py::type_error("out must be a uint8 array, got dtype " + std::string(py::str(out.dtype())));
    if (out.ndim() != 3 || out.shape(0) != h || out.shape(1) != w || out.shape(2) != 3)
        throw py::value_error("out must be a (" + std::to_string(h) + ", " + std::to_string(w) +
                              ", 3) array, got shape " + std::string(py::str(py::tuple(out.attr("shape")))));
    if (!(out.flags() & py::array::c_style)) throw py::value_error("out must be C-contiguous");
    if (!out.writeable()) throw py::value_error("out must be writeable");
    for (const py::array* p : {&y, &u, &v})
        if (spans_overlap(out, *p)) throw py::value_error("out must not share memory with the planes");
    return out;
}

py::array run_yuv420_to_rgb(const py::array& y, const py::array& u, const py::array& v, const py::object& out_obj,
                            const py::object& roi_obj, const std::string& matrix, const std::string& device,
                            bool reference) {
    const Device dev = parse_device(device);
    if (matrix != "bt601" && matrix != "bt709")
        throw py::value_error("matrix must be 'bt601' or 'bt709', got '" + matrix + "'");
    const YuvToRgbMatrix m = matrix == "bt709" ? kYuvToRgbBt709 : kYuvToRgbBt601;
    const Yuv420ConstViews in{const_plane_view(y, "y"), const_plane_view(u, "u"), const_plane_view(v, "v")};
    const Rect roi = roi_obj.is_none() ? in.y.bounds() : rect_from_tuple(roi_obj, "roi");
    if (roi.w < 0 || roi.h < 0) throw py::value_error("roi " + rect_str(roi) + " has a negative size");
    py::array out = output_image(out_obj, roi.h, roi.w, y, u, v);
    ImageU8 dst;
    dst.data = static_cast<uint8_t*>(out.mutable_data());
    dst.height = roi.h;
    dst.width = roi.w;
    dst.channels = 3;
    dst.row_stride = static_cast<std::ptrdiff_t>(roi.w) * 3;
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
        py::arg("matrix") = "bt601",
        "The CUDA kernel's per-pixel code run serially on the CPU (tests).");
}

}  // namespace mf::bind
