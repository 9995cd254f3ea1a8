// Plain views over interleaved 8-bit images and their checks, on top of the rectangle type of every
// operator (kernels/rect.cuh).
// No Python concepts here: the bindings convert arrays to these views.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../kernels/rect.cuh"

namespace mf {


template <typename T>
struct ImageViewT {
    T* data = nullptr;
    int height = 0, width = 0, channels = 1;
    std::ptrdiff_t row_stride = 0;  // in elements
    T* row(int y) const { return data + static_cast<std::ptrdiff_t>(y) * row_stride; }
    Rect bounds() const { return Rect{0, 0, width, height}; }
};
using ImageU8 = ImageViewT<uint8_t>;
using ConstImageU8 = ImageViewT<const uint8_t>;

inline ConstImageU8 as_const(const ImageU8& v) {
    return ConstImageU8{v.data, v.height, v.width, v.channels, v.row_stride};
}

// Bad arguments raise std::invalid_argument (ValueError in Python).
[[noreturn]] inline void invalid(const std::string& msg) { throw std::invalid_argument(msg); }

inline bool rect_inside(const Rect& r, int width, int height) {
    return r.x >= 0 && r.y >= 0 && r.w > 0 && r.h > 0 && r.x <= width - r.w && r.y <= height - r.h;
}

inline std::string rect_str(const Rect& r) {
    return "(x=" + std::to_string(r.x) + ", y=" + std::to_string(r.y) + ", w=" + std::to_string(r.w) +
           ", h=" + std::to_string(r.h) + ")";
}

// A video plane (one channel, rows possibly padded) must be h x w with non-overlapping rows.
inline void check_plane(const ConstImageU8& v, int h, int w, const char* name) {
    if (v.channels != 1 || v.height != h || v.width != w)
        invalid(std::string(name) + " plane must be " + std::to_string(h) + "x" + std::to_string(w) + ", got " +
                std::to_string(v.height) + "x" + std::to_string(v.width));
    if (v.row_stride < w) invalid(std::string(name) + " plane rows overlap (row stride below its width)");
}

}  // namespace mf
