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
    m.def(
        "cuda_nv12_to_rgb",
        [](uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width, uintptr_t dst,
           long dst_stride, const std::string& matrix, uintptr_t stream) {
            if (matrix != "bt601" && matrix != "bt709")
                throw py::value_error("matrix must be 'bt601' or 'bt709', got '" + matrix + "'");
            const YuvToRgbMatrix mat = matrix == "bt709" ? kYuvToRgbBt709 : kYuvToRgbBt601;
            const cuda::Nv12Device f = nv12_device(y, uv, y_pitch, uv_pitch, height, width);
            py::gil_scoped_release release;
            cuda::nv12_to_rgb_device(f, reinterpret_cast<uint8_t*>(dst), dst_stride, mat,
                                     reinterpret_cast<void*>(stream));
        },
        py::arg("y"), py::arg("uv"), py::arg("y_pitch"), py::arg("uv_pitch"), py::arg("height"), py::arg("width"),
        py::arg("dst"), py::arg("dst_stride"), py::arg("matrix") = "bt601", py::arg("stream") = 0,
        "An NV12 frame in device memory into the RGB device buffer dst (height x width x 3, row stride dst_stride "
        "bytes): yuv420_to_rgb's samples of its planes, complete on return.");
}

cuda::Nv12Device nv12_device_from(uintptr_t y, uintptr_t uv, long y_pitch, long uv_pitch, int height, int width) {
    return nv12_device(y, uv, y_pitch, uv_pitch, height, width);
}

}  // namespace mf::bind
