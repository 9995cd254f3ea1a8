#include "../ops/area_resize.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

py::array run_area_resize(const py::array& src, int width, int height, const std::string& device, bool reference) {
    const Device dev = parse_device(device);
    const ImageU8 in = image_view(src, "src");
    check_area_resize_args(in.height, in.width, in.channels, width, height);
    py::array_t<uint8_t> out = new_image(height, width, in.channels, src.ndim() == 3);
    const ImageU8 dst = mutable_view(out, in.channels);
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) cuda::area_resize(as_const(in), dst);
        else if (reference) area_resize_reference(as_const(in), dst);
        else area_resize_cpu(as_const(in), dst);
    }
    return out;
}

void run_cuda_area_resize(uintptr_t src, int height, int width, int channels, long stride, uintptr_t dst,
                          int dst_width, int dst_height, long dst_stride, uintptr_t stream, int count, long src_step,
                          long dst_step) {
    cuda::DeviceImage img{reinterpret_cast<const uint8_t*>(src), height, width, channels, stride};
    py::gil_scoped_release release;
    cuda::area_resize_device(img, reinterpret_cast<uint8_t*>(dst), dst_width, dst_height, dst_stride,
                             reinterpret_cast<void*>(stream), count, src_step, dst_step);
}

}  // namespace

void bind_area_resize(py::module_& m) {
    m.def(
        "area_resize",
        [](const py::array& src, int width, int height, const std::string& device) {
            return run_area_resize(src, width, height, device, false);
        },
        py::arg("src"), py::arg("width"), py::arg("height"), py::arg("device") = "cpu");
    m.def(
        "area_resize_reference",
        [](const py::array& src, int width, int height) { return run_area_resize(src, width, height, "cpu", true); },
        py::arg("src"), py::arg("width"), py::arg("height"));
    m.def("area_resize_supported", &area_resize_supported, py::arg("height"), py::arg("width"), py::arg("dst_width"),
          py::arg("dst_height"));
    m.def("cuda_area_resize", &run_cuda_area_resize, py::arg("src"), py::arg("height"), py::arg("width"),
          py::arg("channels"), py::arg("stride"), py::arg("dst"), py::arg("dst_width"), py::arg("dst_height"),
          py::arg("dst_stride"), py::arg("stream") = 0, py::arg("count") = 1, py::arg("src_step") = 0,
          py::arg("dst_step") = 0,
          "area_resize of images in device memory (address src, row stride in bytes) into the device buffer dst "
          "(row stride dst_stride bytes); `count` images of one size in one launch, image k at src + k src_step and "
          "dst + k dst_step; work queued on `stream` (a cudaStream_t as an integer, 0: the legacy default stream) is "
          "finished before the images are read, and dst is complete on return.");
}

}  // namespace mf::bind
