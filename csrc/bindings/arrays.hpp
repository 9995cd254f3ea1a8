// Conversions between numpy arrays and the core's image views, with the checks every operator
// shares (dtype, layout, shape), raising TypeError / ValueError with a message naming the argument.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "../image.hpp"

namespace mf::bind {
namespace py = pybind11;

inline ImageU8 image_view(const py::array& a, const char* name, bool single_channel = false) {
    if (!py::isinstance<py::array_t<uint8_t>>(a) || a.dtype().kind() != 'u' || a.itemsize() != 1)
        throw py::type_error(std::string(name) + " must be a uint8 array, got dtype " +
                             std::string(py::str(a.dtype())));
    const int nd = static_cast<int>(a.ndim());
    if (single_channel ? nd != 2 : (nd != 2 && nd != 3))
        throw py::value_error(std::string(name) + (single_channel ? " must be a 2-D (H, W) array" : " must be an (H, W) or (H, W, C) array") +
                              ", got " + std::to_string(nd) + " dimensions");
    const int h = static_cast<int>(a.shape(0)), w = static_cast<int>(a.shape(1));
    const int c = nd == 3 ? static_cast<int>(a.shape(2)) : 1;
    if (h <= 0 || w <= 0) throw py::value_error(std::string(name) + " is empty (" + std::to_string(h) + "x" + std::to_string(w) + ")");
    if (c < 1 || c > 4) throw py::value_error(std::string(name) + " must have 1 to 4 channels, got " + std::to_string(c));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous (use numpy.ascontiguousarray)");
    ImageU8 v;
    v.data = static_cast<uint8_t*>(const_cast<void*>(a.data()));
    v.height = h;
    v.width = w;
    v.channels = c;
    v.row_stride = static_cast<std::ptrdiff_t>(w) * c;
    return v;
}

// A 2-D uint8 plane read in place, e.g. a plane of a decoded video frame: rows may be padded (row
// stride >= width), pixels within a row adjacent; it need not be writeable.
inline ConstImageU8 const_plane_view(const py::array& a, const char* name) {
    if (!py::isinstance<py::array_t<uint8_t>>(a) || a.dtype().kind() != 'u' || a.itemsize() != 1)
        throw py::type_error(std::string(name) + " must be a uint8 array, got dtype " +
                             std::string(py::str(a.dtype())));
    if (a.ndim() != 2) throw py::value_error(std::string(name) + " must be a 2-D (H, W) array");
    if (a.size() > 0 && (a.strides(1) != 1 || a.strides(0) < a.shape(1)))  // (numpy gives empty arrays 0 strides)
        throw py::value_error(std::string(name) + " must have adjacent pixels and non-overlapping rows");
    ConstImageU8 v;
    v.data = static_cast<const uint8_t*>(a.data());
    v.height = static_cast<int>(a.shape(0));
    v.width = static_cast<int>(a.shape(1));
    v.channels = 1;
    v.row_stride = a.strides(0);
    return v;
}

// A writeable 2-D uint8 plane whose rows may be padded (row stride >= width, e.g. the planes of
// a video frame); pixels within a row must be adjacent.
inline ImageU8 plane_view(const py::array& a, const char* name) {
    const ConstImageU8 c = const_plane_view(a, name);
    if (!a.writeable()) throw py::value_error(std::string(name) + " must be writeable");
    return ImageU8{const_cast<uint8_t*>(c.data), c.height, c.width, c.channels, c.row_stride};
}

inline py::array_t<uint8_t> new_image(int h, int w, int c, bool with_channel_axis) {
    if (with_channel_axis) return py::array_t<uint8_t>({h, w, c});
    return py::array_t<uint8_t>({h, w});
}

inline ImageU8 mutable_view(py::array_t<uint8_t>& a, int c) {
    ImageU8 v;
    v.data = a.mutable_data();
    v.height = static_cast<int>(a.shape(0));
    v.width = static_cast<int>(a.shape(1));
    v.channels = c;
    v.row_stride = static_cast<std::ptrdiff_t>(v.width) * c;
    return v;
}

inline Rect rect_from_tuple(const py::object& o, const char* name) {
    py::tuple t;
    try {
        t = py::tuple(o);
    } catch (const py::error_already_set&) {
        throw py::type_error(std::string(name) + " must be a tuple (x, y, w, h)");
    }
    if (t.size() != 4) throw py::value_error(std::string(name) + " must be a tuple (x, y, w, h)");
    Rect r;
    int* f[4] = {&r.x, &r.y, &r.w, &r.h};
    for (int i = 0; i < 4; ++i) {
        if (!py::isinstance<py::int_>(t[i]) || py::isinstance<py::bool_>(t[i]))
            throw py::type_error(std::string(name) + " entries must be integers");
        *f[i] = t[i].cast<int>();
    }
    return r;
}

inline py::tuple rect_tuple(const Rect& r) { return py::make_tuple(r.x, r.y, r.w, r.h); }

inline bool overlaps(const py::array& a, const py::array& b) {
    const auto* a0 = static_cast<const uint8_t*>(a.data());
    const auto* b0 = static_cast<const uint8_t*>(b.data());
    return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The bytes [first, last) an array's elements span, row padding of strided views included.
inline std::pair<const uint8_t*, const uint8_t*> extent(const py::array& a) {
    const auto* lo = static_cast<const uint8_t*>(a.data());
    if (a.size() == 0) return {lo, lo};
    const uint8_t* hi = lo + a.itemsize();
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
        const py::ssize_t s = a.strides(d) * (a.shape(d) - 1);
        if (s < 0) lo += s;
        else hi += s;
    }
    return {lo, hi};
}

inline bool spans_overlap(const py::array& a, const py::array& b) {
    const auto ea = extent(a), eb = extent(b);
    return ea.first < eb.second && eb.first < ea.second;
}

enum class Device { cpu, cuda };

inline Device parse_device(const std::string& d) {
    if (d == "cpu") return Device::cpu;
    if (d == "cuda" || d == "gpu") return Device::cuda;
    throw py::value_error("device must be 'cpu' or 'cuda', got '" + d + "'");
}

}  // namespace mf::bind
