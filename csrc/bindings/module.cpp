// The private extension module mime_fast._core. Each operator's bindings live in their own file.
#include <pybind11/pybind11.h>

#include "../cuda_backend.hpp"
#include "../parallel.hpp"

namespace py = pybind11;

namespace mf::bind {
void bind_gaussian_blur(py::module_& m);
void bind_hull_mask(py::module_& m);
void bind_blur_in_mask(py::module_& m);
void bind_rgb_to_yuv420(py::module_& m);
void bind_yuv420_to_rgb(py::module_& m);
void bind_area_resize(py::module_& m);
void bind_blur_hull_yuv420(py::module_& m);
void bind_nv12_split(py::module_& m);
void bind_warp_affine(py::module_& m);
}  // namespace mf::bind

PYBIND11_MODULE(_core, m) {
    m.doc() = "mime_fast compiled core (C++ CPU operators, CUDA kernels in CUDA builds)";
    mf::bind::bind_gaussian_blur(m);
    mf::bind::bind_hull_mask(m);
    mf::bind::bind_blur_in_mask(m);
    mf::bind::bind_rgb_to_yuv420(m);
    mf::bind::bind_yuv420_to_rgb(m);
    mf::bind::bind_area_resize(m);
    mf::bind::bind_blur_hull_yuv420(m);
    mf::bind::bind_nv12_split(m);
    mf::bind::bind_warp_affine(m);
    m.def("num_threads", &mf::num_threads);
    m.def("set_num_threads", &mf::set_num_threads, py::arg("n"));
    m.def("cuda_built", &mf::cuda::built);
    m.def("cuda_available", &mf::cuda::available);
    m.def("cuda_status", &mf::cuda::status);
    m.def("cuda_memory", &mf::cuda::memory, "(free, total) bytes of the device's memory (CUDA builds).");
    m.def("cuda_pageable_memory_access", &mf::cuda::pageable_memory_access,
          "Whether the device's kernels read pageable host memory (HMM, a coherent link; CUDA builds).");
}
