// The rectangle type of every operator, shared by the CUDA kernels and the host code (csrc/image.hpp
// builds its image views and checks on it). Plain data: no host-only code here, so kernels/ needs
// nothing from csrc/.
#pragma once

namespace mf {

struct Rect {
    int x = 0, y = 0, w = 0, h = 0;
    bool empty() const { return w <= 0 || h <= 0; }
    bool operator==(const Rect& o) const { return x == o.x && y == o.y && w == o.w && h == o.h; }
};

}  // namespace mf
