// NV12 -> planar 4:2:0 chroma (kernels/nv12_split.cuh): NVDEC decodes to NV12, the encoders and the
// rest of the pipeline take yuv420p planes.
#pragma once
#include "../../kernels/nv12_split.cuh"
#include "../image.hpp"

namespace mf {

// uv: an NV12 chroma plane, ch rows of 2 * cw samples (Cb, Cr pairs); u and v: ch x cw planes.
void nv12_split_cpu(const ConstImageU8& uv, const ImageU8& u, const ImageU8& v);

// Shared argument checks.
void check_nv12_split_args(const ConstImageU8& uv, const ImageU8& u, const ImageU8& v);

}  // namespace mf
