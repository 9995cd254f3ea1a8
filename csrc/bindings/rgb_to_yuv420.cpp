#include "../ops/rgb_to_yuv420.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

void run_rgb_to_yuv420(const py::array& frame, const py::array& y, const py::array& u, const py::array& v,
                       const py::object& roi_obj, const std::string& matrix, const py::object& mask_obj,
                       const std::string& device, bool reference) {
    const Device dev = parse_device(device);
    if (matrix != "bt601" && matrix != "bt709")
        throw py::value_error("matrix must be 'bt601' or 'bt709', got '" + matrix + "'");
    const YuvMatrix m = matrix == "bt709" ? kBt709 : kBt601;
    const ImageU8 src = image_view(frame, "frame");
    if (frame.ndim() != 3) throw py::value_error("frame must be an (H, W, 3) RGB or (H, W, 4) RGBX array");
    const Yuv420Views out{plane_view(y, "y"), plane_view(u, "u"), plane_view(v, "v")};
    for (const py::array* p : {&y, &u, &v})
        if (overlaps(*p, frame)) throw py::value_error("output planes must not share memory with frame");
    ImageU8 mask{};
    if (!mask_obj.is_none()) {
        const py::array mask_arr = py::array::ensure(mask_obj);
        if (!mask_arr) throw py::type_error("mask must be a uint8 array");
        mask = image_view(mask_arr, "mask", true);
        for (const py::array* p : {&y, &u, &v})
            if (overlaps(*p, mask_arr)) throw py::value_error("output planes must not share memory with mask");
    }
    Rect roi{};
    if (!roi_obj.is_none()) {
        roi = rect_from_tuple(roi_obj, "roi");
        if (roi.empty()) return;
    }
    py::gil_scoped_release release;
    if (dev == Device::cuda) cuda::rgb_to_yuv420(as_const(src), roi, out, m, as_const(mask));
    else if (reference) rgb_to_yuv420_reference(as_const(src), roi, out, m, as_const(mask));
    else rgb_to_yuv420_cpu(as_const(src), roi, out, m, as_const(mask));
}

}  // namespace

void bind_rgb_to_yuv420(py::module_& m) {
    m.def(
        "rgb_to_yuv420",
        [](const py::array& frame, const py::array& y, const py::array& u, const py::array& v, const py::object& roi,
           const std::string& matrix, const py::object& mask, const std::string& device) {
            run_rgb_to_yuv420(frame, y, u, v, roi, matrix, mask, device, false);
        },
        py::arg("frame"), py::arg("y"), py::arg("u"), py::arg("v"), py::arg("roi") = py::none(),
        py::arg("matrix") = "bt601", py::arg("mask") = py::none(), py::arg("device") = "cpu");
    m.def(
        "rgb_to_yuv420_reference",
        [](const py::array& frame, const py::array& y, const py::array& u, const py::array& v, const py::object& roi,
           const std::string& matrix, const py::object& mask) {
            run_rgb_to_yuv420(frame, y, u, v, roi, matrix, mask, "cpu", true);
        },
        py::arg("frame"), py::arg("y"), py::arg("u"), py::arg("v"), py::arg("roi") = py::none(),
        py::arg("matrix") = "bt601", py::arg("mask") = py::none(),
        "The CUDA kernel's per-block code run serially on the CPU (tests).");
}

}  // namespace mf::bind
