// NV12 -> planar 4:2:0: the interleaved chroma plane of NV12 (the layout NVDEC decodes to: a luma
// plane, then one plane of Cb, Cr pairs) split into the separate Cb and Cr planes of yuv420p. The
// samples are copied, not converted: NV12 and yuv420p of a frame hold the same values.
#pragma once
#include "common.cuh"

namespace mf {

// Chroma sample cx of an NV12 chroma row into the Cb and Cr rows at position ox.
MF_HD void nv12_split_sample(const uint8_t* uv_row, int cx, uint8_t* u_row, uint8_t* v_row, int ox) {
    u_row[ox] = uv_row[2 * cx];
    v_row[ox] = uv_row[2 * cx + 1];
}

}  // namespace mf
