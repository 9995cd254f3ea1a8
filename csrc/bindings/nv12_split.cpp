#include "../ops/nv12_split.hpp"

#include "../cuda_backend.hpp"
#include "arrays.hpp"

namespace mf::bind {

namespace {

cuda::Nv12Device nv12_device(uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width) {
    cuda::Nv12Device f;
    f.y = reinterpret_cast<const uint8_t*>(y);
    f.uv = reinterpret_cast<const uint8_t*>(uv);
    f.y_pitch = y_pitch;
    f.uv_pitch = uv_pitch;
    f.width = width;
    f.height = height;
    return f;
}

}  // namespace

void bind_nv12_split(py::module_& m) {
    m.def(
        "nv12_split",
        [](const py::array& uv, const py::array& u, const py::array& v) {
            const ConstImageU8 in = const_plane_view(uv, "uv");
            const ImageU8 uo = plane_view(u, "u"), vo = plane_view(v, "v");
            py::gil_scoped_release release;
            nv12_split_cpu(in, uo, vo);
        },
        py::arg("uv"), py::arg("u"), py::arg("v"));
    m.def(
        "cuda_download_nv12",
        [](uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width, const py::array& yo,
           const py::array& uo, const py::array& vo) {
            const Yuv420Views out{plane_view(yo, "y"), plane_view(uo, "u"), plane_view(vo, "v")};
            const cuda::Nv12Device f = nv12_device(y, uv, y_pitch, uv_pitch, height, width);
            py::gil_scoped_release release;
            cuda::download_nv12(f, out);
        },
        py::arg("y"), py::arg("uv"), py::arg("y_pitch"), py::arg("uv_pitch"), py::arg("height"), py::arg("width"),
        py::arg("out_y"), py::arg("out_u"), py::arg("out_v"),
        "An NV12 frame in device memory (plane addresses as integers) into host yuv420p planes.");
}

cuda::Nv12Device nv12_device_from(uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width) {
    return nv12_device(y, uv, y_pitch, uv_pitch, height, width);
}

}  // namespace mf::bind
