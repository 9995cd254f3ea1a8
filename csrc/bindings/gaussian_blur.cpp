#include "../ops/gaussian_blur.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

py::array_t<uint8_t> run_blur(const py::array& frame, int ksize, const py::object& roi_obj, const std::string& device,
                              bool reference) {
    const Device dev = parse_device(device);
    const ImageU8 src = image_view(frame, "frame");
    check_ksize(ksize);
    const Rect roi = roi_obj.is_none() ? src.bounds() : rect_from_tuple(roi_obj, "roi");
    if (!rect_inside(roi, src.width, src.height))
        throw py::value_error("roi " + rect_str(roi) + " must be a non-empty rectangle inside the " +
                              std::to_string(src.width) + "x" + std::to_string(src.height) + " frame");
    auto out = new_image(roi.h, roi.w, src.channels, frame.ndim() == 3);
    const ImageU8 dst = mutable_view(out, src.channels);
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) cuda::gaussian_blur(as_const(src), roi, ksize, dst);
        else if (reference) gaussian_blur_reference(as_const(src), roi, ksize, dst);
        else gaussian_blur_cpu(as_const(src), roi, ksize, dst);
    }
    return out;
}

py::list run_blur_levels(const py::array& frame, const std::vector<int>& ksizes, const py::object& roi_obj) {
    const ImageU8 src = image_view(frame, "frame");
    if (ksizes.empty()) throw py::value_error("ksizes must name at least one kernel size");
    for (int k : ksizes) check_ksize(k);
    const Rect roi = roi_obj.is_none() ? src.bounds() : rect_from_tuple(roi_obj, "roi");
    if (!rect_inside(roi, src.width, src.height))
        throw py::value_error("roi " + rect_str(roi) + " must be a non-empty rectangle inside the " +
                              std::to_string(src.width) + "x" + std::to_string(src.height) + " frame");
    py::list outs;
    std::vector<ImageU8> dsts;
    for (size_t i = 0; i < ksizes.size(); ++i) {
        auto out = new_image(roi.h, roi.w, src.channels, frame.ndim() == 3);
        dsts.push_back(mutable_view(out, src.channels));
        outs.append(out);
    }
    {
        py::gil_scoped_release release;
        gaussian_blur_multi_cpu(as_const(src), roi, ksizes, dsts);
    }
    return outs;
}

}  // namespace

void bind_gaussian_blur(py::module_& m) {
    m.def(
        "gaussian_blur",
        [](const py::array& frame, int ksize, const py::object& roi, const std::string& device) {
            return run_blur(frame, ksize, roi, device, false);
        },
        py::arg("frame"), py::arg("ksize"), py::arg("roi") = py::none(), py::arg("device") = "cpu");
    m.def("gaussian_blur_levels", &run_blur_levels, py::arg("frame"), py::arg("ksizes"), py::arg("roi") = py::none());
    m.def(
        "gaussian_blur_reference",
        [](const py::array& frame, int ksize, const py::object& roi) { return run_blur(frame, ksize, roi, "cpu", true); },
        py::arg("frame"), py::arg("ksize"), py::arg("roi") = py::none(),
        "Per-sample scalar path with the CUDA kernel's structure (tests).");
    m.def(
        "gaussian_weights_q8",
        [](int ksize) {
            const auto w = gaussian_weights_q8(ksize);
            return py::array_t<uint16_t>(static_cast<py::ssize_t>(w.size()), w.data());
        },
        py::arg("ksize"));
}

}  // namespace mf::bind
