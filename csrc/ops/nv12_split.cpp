#include "nv12_split.hpp"

#include <string>

namespace mf {

void check_nv12_split_args(const ConstImageU8& uv, const ImageU8& u, const ImageU8& v) {
    if (uv.channels != 1 || uv.width % 2) invalid("uv must be an NV12 chroma plane: (h, 2 * w) samples, one channel");
    check_plane(as_const(u), uv.height, uv.width / 2, "u");
    check_plane(as_const(v), uv.height, uv.width / 2, "v");
}

void nv12_split_cpu(const ConstImageU8& uv, const ImageU8& u, const ImageU8& v) {
    check_nv12_split_args(uv, u, v);
    for (int y = 0; y < uv.height; ++y)
        for (int x = 0; x < uv.width / 2; ++x) nv12_split_sample(uv.row(y), x, u.row(y), v.row(y), x);
}

}  // namespace mf
