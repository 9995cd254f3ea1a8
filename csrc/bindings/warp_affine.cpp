#include "../ops/warp_affine.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

// Ms: an (n, 2, 3) array of float64 (or anything numpy converts to one).
std::vector<Affine> matrices_from(const py::object& obj) {
    py::array_t<double, py::array::c_style | py::array::forcecast> a;
    try {
        a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(obj);
    } catch (const py::error_already_set&) {
        a = {};
    }
    if (!a) throw py::type_error("Ms must be an (n, 2, 3) array of numbers");
    if (a.ndim() != 3 || a.shape(1) != 2 || a.shape(2) != 3)
        throw py::value_error("Ms must be an (n, 2, 3) array, got shape " + std::string(py::str(py::tuple(a.attr("shape")))));
    std::vector<Affine> Ms(static_cast<size_t>(a.shape(0)));
    const double* p = a.data();
    for (size_t k = 0; k < Ms.size(); ++k)
        for (int i = 0; i < 6; ++i) Ms[k].m[i] = p[6 * k + i];
    return Ms;
}

py::array run_warp_affine(const py::array& frame, const py::object& Ms_obj, int size, const std::string& device) {
    const Device dev = parse_device(device);
    const ImageU8 src = image_view(frame, "frame");
    const std::vector<Affine> Ms = matrices_from(Ms_obj);
    check_warp_affine_args(src.height, src.width, src.channels, static_cast<long>(src.row_stride), Ms, size);
    const py::ssize_t n = static_cast<py::ssize_t>(Ms.size());
    py::array_t<uint8_t> out = frame.ndim() == 3 ? py::array_t<uint8_t>({n, py::ssize_t(size), py::ssize_t(size),
                                                                         py::ssize_t(src.channels)})
                                                 : py::array_t<uint8_t>({n, py::ssize_t(size), py::ssize_t(size)});
    {
        py::gil_scoped_release release;
        if (dev == Device::cuda) cuda::warp_affine(as_const(src), Ms, size, out.mutable_data());
        else warp_affine_cpu(as_const(src), Ms, size, out.mutable_data());
    }
    return out;
}

void run_cuda_warp_affine(uintptr_t src, int height, int width, int channels, long stride, uintptr_t dst,
                          const py::object& Ms_obj, int size, uintptr_t stream) {
    const std::vector<Affine> Ms = matrices_from(Ms_obj);
    cuda::DeviceImage img{reinterpret_cast<const uint8_t*>(src), height, width, channels, stride};
    py::gil_scoped_release release;
    cuda::warp_affine_device(img, Ms, size, reinterpret_cast<uint8_t*>(dst), reinterpret_cast<void*>(stream));
}

}  // namespace

void bind_warp_affine(py::module_& m) {
    m.def("warp_affine", &run_warp_affine, py::arg("frame"), py::arg("Ms"), py::arg("size"),
          py::arg("device") = "cpu");
    m.def("cuda_warp_affine", &run_cuda_warp_affine, py::arg("src"), py::arg("height"), py::arg("width"),
          py::arg("channels"), py::arg("stride"), py::arg("dst"), py::arg("Ms"), py::arg("size"),
          py::arg("stream") = 0,
          "warp_affine on a frame in device memory (address src, row stride in bytes) into the contiguous "
          "(n, size, size, channels) device buffer dst; work queued on `stream` (a cudaStream_t as an integer, "
          "0: the legacy default stream) is finished before the frame is read, and the crops are complete on "
          "return.");
}

}  // namespace mf::bind
