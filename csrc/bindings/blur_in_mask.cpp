#include "../ops/blur_in_mask.hpp"
#include "../ops/gaussian_blur.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

void bind_blur_in_mask(py::module_& m) {
    m.def(
        "blur_in_mask",
        [](const py::array& frame, const py::array& mask, const std::vector<int>& ksizes, const py::object& bbox_obj,
           const py::object& out_obj, const std::string& device) {
            const Device dev = parse_device(device);
            const ImageU8 src = image_view(frame, "frame");
            const ImageU8 msk = image_view(mask, "mask", true);
            if (msk.height != src.height || msk.width != src.width)
                throw py::value_error("mask shape (" + std::to_string(msk.height) + ", " + std::to_string(msk.width) +
                                      ") differs from the frame's (" + std::to_string(src.height) + ", " +
                                      std::to_string(src.width) + ")");
            if (ksizes.empty()) throw py::value_error("ksizes must name at least one kernel size");
            for (int k : ksizes) check_ksize(k);
            Rect bbox;
            if (bbox_obj.is_none()) {
                py::gil_scoped_release release;
                bbox = nonzero_bbox(as_const(msk));
            } else {
                bbox = rect_from_tuple(bbox_obj, "bbox");
                if (bbox.w == 0 || bbox.h == 0) bbox = Rect{};
                else if (!rect_inside(bbox, src.width, src.height))
                    throw py::value_error("bbox " + rect_str(bbox) + " is not inside the frame");
            }
            py::list outs;
            std::vector<ImageU8> views;
            if (out_obj.is_none()) {
                for (size_t i = 0; i < ksizes.size(); ++i) {
                    auto o = new_image(src.height, src.width, src.channels, frame.ndim() == 3);
                    views.push_back(mutable_view(o, src.channels));
                    outs.append(o);
                }
            } else {
                py::list given(out_obj);
                if (given.size() != ksizes.size())
                    throw py::value_error("out must hold one frame per kernel size (" + std::to_string(ksizes.size()) + ")");
                for (size_t i = 0; i < given.size(); ++i) {
                    if (!py::isinstance<py::array>(given[i])) throw py::type_error("out entries must be numpy arrays");
                    py::array o = py::reinterpret_borrow<py::array>(given[i]);
                    if (o.ndim() != frame.ndim() || !o.writeable())
                        throw py::value_error("out frames must be writeable arrays shaped like frame");
                    const ImageU8 v = image_view(o, "out frame");
                    if (v.height != src.height || v.width != src.width || v.channels != src.channels)
                        throw py::value_error("out frames must be shaped like frame");
                    if (overlaps(o, frame) || overlaps(o, mask))
                        throw py::value_error("out frames must not share memory with frame or mask");
                    for (size_t j = 0; j < i; ++j)
                        if (overlaps(o, py::reinterpret_borrow<py::array>(given[j])))
                            throw py::value_error("out frames must not share memory with each other");
                    views.push_back(v);
                    outs.append(o);
                }
            }
            {
                py::gil_scoped_release release;
                if (dev == Device::cuda) cuda::blur_in_mask(as_const(src), as_const(msk), bbox, ksizes, views);
                else blur_in_mask_cpu(as_const(src), as_const(msk), bbox, ksizes, views);
            }
            return outs;
        },
        py::arg("frame"), py::arg("mask"), py::arg("ksizes"), py::arg("bbox") = py::none(), py::arg("out") = py::none(),
        py::arg("device") = "cpu");
    m.def(
        "nonzero_bbox",
        [](const py::array& mask) {
            const ImageU8 v = image_view(mask, "mask", true);
            return rect_tuple(nonzero_bbox(as_const(v)));
        },
        py::arg("mask"));
}

}  // namespace mf::bind
