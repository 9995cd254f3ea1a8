// Host-callable launch wrappers of the CUDA kernels (kernels/*.cu). Plain types only, so host C++
// (csrc/cuda_backend.cpp) includes this without CUDA headers. All pointers are device pointers;
// images are interleaved uint8 with row strides in elements.
#pragma once
#include <cstdint>

#include "rect.cuh"
#include "area_resize.cuh"
#include "hull_mask.cuh"
#include "rgb_to_yuv420.cuh"
#include "warp_affine.cuh"
#include "yuv420_to_rgb.cuh"

namespace mf::cuda {

constexpr int kMaxLevels = 8;  // kernel sizes per blur_in_mask call
constexpr int kBlockX = 32;    // threads per block of the blur kernels: kBlockX x kBlockY
constexpr int kBlockY = 8;

// dst (roi.h x roi.w x C, row stride dst_stride) = OpenCV-exact blur of roi of src.
void launch_gaussian_blur(const uint8_t* src, int height, int width, int channels, long stride, Rect roi,
                          const uint16_t* weights, int radius, uint8_t* dst, long dst_stride, void* stream);

struct BlurLevels {
    const uint16_t* weights[kMaxLevels];
    int radius[kMaxLevels];
    uint8_t* out[kMaxLevels];  // full frames, already holding a copy of src
    int count;
};

// For each level, composite the blur of src into out inside bbox, weighted by mask (H x W).
void launch_blur_in_mask(const uint8_t* src, const uint8_t* mask, int height, int width, int channels, Rect bbox,
                         const BlurLevels& levels, void* stream);

// mask (cleared by the caller) over `reach`; bbox4 = {min x, max x, min y, max y} of the non-zero
// pixels, initialised by the caller to {INT_MAX, -1, INT_MAX, -1}. g's arrays are device arrays.
// mask's pixel (0, 0) is the frame's (ox, oy) (a region holding the reach), its rows `width` long.
void launch_hull_mask(const HullGeometry& g, Rect reach, uint8_t* mask, int width, int* bbox4, void* stream,
                      int ox = 0, int oy = 0);

// The 2x2 blocks covering roi of src (interleaved RGB/RGBX) into the planes (device pointers).
void launch_rgb_to_yuv420(const uint8_t* src, int height, int width, int channels, long stride, Rect roi,
                          const Yuv420Planes& planes, const YuvMatrix& m, YuvSelect sel, void* stream);

// dst (roi.h x roi.w x 3 RGB, row stride dst_stride) = roi of the 4:2:0 frame whose planes (device
// pointers) start at luma row roi.y and chroma row roi.y / 2, full width.
void launch_yuv420_to_rgb(const Yuv420ConstPlanes& planes, Rect roi, uint8_t* dst, long dst_stride,
                          const YuvToRgbMatrix& m, void* stream);

// The chroma samples of rectangle `chroma` (chroma coordinates) of an NV12 chroma plane (uv, row
// pitch uv_pitch) into Cb and Cr planes u and v (row pitch `pitch`), whose (0, 0) is the
// rectangle's corner.
void launch_nv12_split(const uint8_t* uv, long uv_pitch, Rect chroma, uint8_t* u, uint8_t* v, long pitch,
                       void* stream);

// n crops (size x size x channels each, contiguous in dst) of the interleaved image src (row stride
// in bytes), crop k through inv[k], the inverse (crop -> frame) matrices in device memory
// (kernels/warp_affine.cuh). n is at most 65535 (grid z).
void launch_warp_affine(const uint8_t* src, int height, int width, int channels, long stride, const Affine* inv,
                        int n, int size, uint8_t* dst, void* stream);

// dst (dh x dw x channels, row stride dst_stride bytes) = the area downscale of src (row stride
// in bytes) through the axis tables xs (dw entries) and ys (dh entries), in device memory; `count`
// images in one launch, image k at src + k src_step and dst + k dst_step (grid z, at most 65535).
void launch_area_resize(const uint8_t* src, int channels, long stride, const AreaAxis& xs, const AreaAxis& ys, int dw,
                        int dh, uint8_t* dst, long dst_stride, void* stream, int count = 1, long src_step = 0,
                        long dst_step = 0);
// dst (dh x dw) = the exact 2:1 shrink of src (2 dh x 2 dw), OpenCV's (a + b + c + d + 2) >> 2;
// `count` images as launch_area_resize.
void launch_area_halve(const uint8_t* src, int channels, long stride, int dw, int dh, uint8_t* dst, long dst_stride,
                       void* stream, int count = 1, long src_step = 0, long dst_step = 0);

}  // namespace mf::cuda
