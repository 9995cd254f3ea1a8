// CUDA backend of a build without CUDA: every call explains how to get one.
#include <stdexcept>

#include "cuda_backend.hpp"

namespace mf::cuda {

namespace {
const char* kReason =
    "mime_fast was built without CUDA: reinstall with a CUDA toolkit (nvcc) on PATH, or force it with "
    "MIME_FAST_CUDA=ON pip install .";
}

bool built() { return false; }
bool available() { return false; }
std::string status() { return kReason; }
void require() { throw std::runtime_error(kReason); }
std::pair<size_t, size_t> memory() {
    require();
    return {0, 0};
}
bool pageable_memory_access() {
    require();
    return false;
}
void gaussian_blur(const ConstImageU8&, Rect, int, const ImageU8&) { require(); }
Rect hull_mask(const Hull&, const HullMaskParams&, const ImageU8&) {
    require();
    return Rect{};
}
void blur_in_mask(const ConstImageU8&, const ConstImageU8&, Rect, const std::vector<int>&, const std::vector<ImageU8>&) {
    require();
}
void rgb_to_yuv420(const ConstImageU8&, Rect, const Yuv420Views&, const YuvMatrix&, const ConstImageU8&) { require(); }
void yuv420_to_rgb(const Yuv420ConstViews&, Rect, const ImageU8&, const YuvToRgbMatrix&) { require(); }
Rect blur_hull_yuv420(const Yuv420ConstViews&, const Hull&, const HullMaskParams&, const std::vector<int>&,
                      const std::vector<Yuv420Views>&, const ColourMatrices&) {
    require();
    return Rect{};
}

Rect blur_hull_nv12(const Nv12Device&, const Hull&, const HullMaskParams&, const std::vector<int>&,
                    const std::vector<Yuv420Views>&, const ColourMatrices&) {
    require();
    return Rect{};
}
void download_nv12(const Nv12Device&, const Yuv420Views&) { require(); }
void warp_affine(const ConstImageU8&, const std::vector<Affine>&, int, uint8_t*) { require(); }
void warp_affine_device(const DeviceImage&, const std::vector<Affine>&, int, uint8_t*, void*) { require(); }
void area_resize(const ConstImageU8&, const ImageU8&) { require(); }
void nv12_to_rgb_device(const Nv12Device&, uint8_t*, long, const YuvToRgbMatrix&, void*) { require(); }
void area_resize_device(const DeviceImage&, uint8_t*, int, int, long, void*, int, long, long) { require(); }

}  // namespace mf::cuda
