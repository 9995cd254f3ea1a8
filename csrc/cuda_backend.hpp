// The CUDA device behind the same operator signatures as the CPU path. CMake compiles
// cuda_backend.cpp (and kernels/*.cu) in CUDA builds and cuda_backend_stub.cpp otherwise, so no
// other file needs an #ifdef. Images here are host images: each call uploads, runs the kernels on
// the current device and downloads, on a stream and with buffers of its thread that are made once
// and reused (no allocation on the hot path, one synchronisation per call). The CUDA runtime is linked statically and only the driver is
// needed at run time, so importing mime_fast works on machines without a GPU.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "image.hpp"
#include "ops/area_resize.hpp"
#include "ops/blur_hull_yuv420.hpp"
#include "ops/hull_mask.hpp"
#include "ops/rgb_to_yuv420.hpp"
#include "ops/warp_affine.hpp"
#include "ops/yuv420_to_rgb.hpp"

namespace mf::cuda {

bool built();             // compiled with CUDA support
bool available();         // built, and a CUDA device is usable now
std::string status();     // human-readable reason when not available, device name when it is

// Throws std::runtime_error naming the reason when not available.
void require();

// (free, total) bytes of the current device's memory (cudaMemGetInfo).
std::pair<size_t, size_t> memory();
// Whether the current device reads pageable host memory (HMM, or a coherent CPU-GPU link).
bool pageable_memory_access();

void gaussian_blur(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst);
Rect hull_mask(const Hull& hull, const HullMaskParams& params, const ImageU8& mask);
void blur_in_mask(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox, const std::vector<int>& ksizes,
                  const std::vector<ImageU8>& outs);
void rgb_to_yuv420(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                   const ConstImageU8& mask);
void yuv420_to_rgb(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m);
Rect blur_hull_yuv420(const Yuv420ConstViews& in, const Hull& hull, const HullMaskParams& params,
                      const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs, const ColourMatrices& m);

// A decoded frame in device memory in NV12 (NVDEC's output): luma rows, then rows of Cb, Cr pairs.
// Work queued on the legacy default stream (where PyTorch and PyNvVideoCodec put theirs unless
// told otherwise) is complete before these functions read it.
struct Nv12Device {
    const uint8_t* y = nullptr;
    const uint8_t* uv = nullptr;
    long y_pitch = 0, uv_pitch = 0;  // bytes per row
    int width = 0, height = 0;
};
// blur_hull_yuv420 reading the frame where it was decoded: only the region the blur reaches is
// read, and only each output's region comes back.
Rect blur_hull_nv12(const Nv12Device& f, const Hull& hull, const HullMaskParams& params, const std::vector<int>& ksizes,
                    const std::vector<Yuv420Views>& outs, const ColourMatrices& m);
// The frame into host yuv420p planes (for the encoders).
void download_nv12(const Nv12Device& f, const Yuv420Views& out);
// The frame's RGB (yuv420_to_rgb's samples of its planes) into the device buffer dst (height x
// width x 3, row stride dst_stride bytes), e.g. a torch tensor the face models read where it is:
// the chroma split (nv12_split's kernel) and the conversion (yuv420_to_rgb's) on the workspace
// stream, after the work queued on `stream`; complete on return.
void nv12_to_rgb_device(const Nv12Device& f, uint8_t* dst, long dst_stride, const YuvToRgbMatrix& m, void* stream);

// warp_affine_cpu's crops on the device: the host frame goes up, the crops (n x size x size x C,
// contiguous host dst) come back.
void warp_affine(const ConstImageU8& src, const std::vector<Affine>& Ms, int size, uint8_t* dst);

// An interleaved uint8 image in device memory (row stride in bytes), e.g. a torch tensor's data.
struct DeviceImage {
    const uint8_t* data = nullptr;
    int height = 0, width = 0, channels = 0;
    long stride = 0;
};
// warp_affine on a frame already in device memory into the device buffer dst (n x size x size x C,
// contiguous), e.g. torch tensors' data_ptr(). Runs on the workspace stream after the work queued
// on `stream` (a cudaStream_t; nullptr: the legacy default stream, which the workspace stream
// follows anyway) and waits for the kernel, so the crops are complete, for any stream, on return.
void warp_affine_device(const DeviceImage& src, const std::vector<Affine>& Ms, int size, uint8_t* dst, void* stream);

// area_resize_cpu on the device: the host image goes up, the downscale (contiguous rows) comes back.
void area_resize(const ConstImageU8& src, const ImageU8& dst);
// The area downscale of images already in device memory into the device buffer dst (row stride
// dst_stride bytes), after the work queued on `stream`; complete on return (as warp_affine_device).
// `count` images of src's size in one launch, image k at src.data + k src_step and dst + k dst_step.
void area_resize_device(const DeviceImage& src, uint8_t* dst, int dst_width, int dst_height, long dst_stride,
                        void* stream, int count = 1, long src_step = 0, long dst_step = 0);

}  // namespace mf::cuda
