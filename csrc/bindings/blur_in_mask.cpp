#include "../ops/blur_in_mask.hpp"

#include "../cuda_backend.hpp"
#include "../ops/gaussian_blur.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

Rect resolve_bbox(const py::object& bbox_obj, const ImageU8& src, const ImageU8& msk) {
    if (bbox_obj.is_none()) {
        py::gil_scoped_release release;
        return nonzero_bbox(as_const(msk));
    }
    const Rect bbox = rect_from_tuple(bbox_obj, "bbox");
    if (bbox.w == 0 || bbox.h == 0) return Rect{};
    if (!rect_inside(bbox, src.width, src.height)) throw py::value_error("bbox " + rect_str(bbox) + " is not inside the frame");
    return bbox;
}

// Output frames: new arrays, or the caller's (checked for shape and aliasing).
py::list output_frames(const py::object& out_obj, const py::array& frame, const py::array& mask, const ImageU8& src,
                       size_t count, std::vector<ImageU8>& views) {
    py::list outs;
    if (out_obj.is_none()) {
        for (size_t i = 0; i < count; ++i) {
            auto o = new_image(src.height, src.width, src.channels, frame.ndim() == 3);
            views.push_back(mutable_view(o, src.channels));
            outs.append(o);
        }
        return outs;
    }
    py::list given(out_obj);
    if (given.size() != count)
        throw py::value_error("out must hold one frame per kernel size (" + std::to_string(count) + ")");
    for (size_t i = 0; i < given.size(); ++i) {
        if (!py::isinstance<py::array>(given[i])) throw py::type_error("out entries must be numpy arrays");
        py::array o = py::reinterpret_borrow<py::array>(given[i]);
        if (o.ndim() != frame.ndim() || !o.writeable()) throw py::value_error("out frames must be writeable arrays shaped like frame");
        const ImageU8 v = image_view(o, "out frame");
        if (v.height != src.height || v.width != src.width || v.channels != src.channels)
            throw py::value_error("out frames must be shaped like frame");
        if (overlaps(o, frame) || overlaps(o, mask)) throw py::value_error("out frames must not share memory with frame or mask");
        for (size_t j = 0; j < i; ++j)
            if (overlaps(o, py::reinterpret_borrow<py::array>(given[j])))
                throw py::value_error("out frames must not share memory with each other");
        views.push_back(v);
        outs.append(o);
    }
    return outs;
}

py::list run_blur_in_mask(const py::array& frame, const py::array& mask, const std::vector<int>& ksizes,
                          const py::object& bbox_obj, const py::object& out_obj, const std::string& device,
                          bool reference) {
    const Device dev = parse_device(device);
    const ImageU8 src = image_view(frame, "frame");
    const ImageU8 msk = image_view(mask, "mask", true);
    if (msk.height != src.height || msk.width != src.width)
        throw py::value_error("mask shape (" + std::to_string(msk.height) + ", " + std::to_string(msk.width) +
                              ") differs from the frame's (" + std::to_string(src.height) + ", " +
                              std::to_string(src.width) + ")");
    if (ksizes.empty()) throw py::value_error("ksizes must name at least one kernel size");
    for (int k : ksizes) check_ksize(k);
    const Rect bbox = resolve_bbox(bbox_obj, src, msk);
    std::vector<ImageU8> views;
    py::list outs = output_frames(out_obj, frame, mask, src, ksizes.size(), views);
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) cuda::blur_in_mask(as_const(src), as_const(msk), bbox, ksizes, views);
        else if (reference) blur_in_mask_reference(as_const(src), as_const(msk), bbox, ksizes, views);
        else blur_in_mask_cpu(as_const(src), as_const(msk), bbox, ksizes, views);
    }
    return outs;
}

}  // namespace

void bind_blur_in_mask(py::module_& m) {
    m.def(
        "blur_in_mask",
        [](const py::array& frame, const py::array& mask, const std::vector<int>& ksizes, const py::object& bbox,
           const py::object& out, const std::string& device) {
            return run_blur_in_mask(frame, mask, ksizes, bbox, out, device, false);
        },
        py::arg("frame"), py::arg("mask"), py::arg("ksizes"), py::arg("bbox") = py::none(), py::arg("out") = py::none(),
        py::arg("device") = "cpu");
    m.def(
        "blur_in_mask_reference",
        [](const py::array& frame, const py::array& mask, const std::vector<int>& ksizes, const py::object& bbox) {
            return run_blur_in_mask(frame, mask, ksizes, bbox, py::none(), "cpu", true);
        },
        py::arg("frame"), py::arg("mask"), py::arg("ksizes"), py::arg("bbox") = py::none(),
        "The CUDA kernel's tile code run serially on the CPU (tests).");
    m.def(
        "nonzero_bbox",
        [](const py::array& mask) {
            const ImageU8 v = image_view(mask, "mask", true);
            return rect_tuple(nonzero_bbox(as_const(v)));
        },
        py::arg("mask"));
}

}  // namespace mf::bind
