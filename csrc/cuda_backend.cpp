// CUDA backend (CUDA builds only): uploads host images, runs kernels/*.cu, downloads results.
#include "cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <climits>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "../kernels/gaussian_blur.cuh"
#include "../kernels/launch.hpp"
#include "ops/blur_in_mask.hpp"
#include "ops/gaussian_blur.hpp"
#include "ops/rgb_to_yuv420.hpp"
#include "ops/yuv420_to_rgb.hpp"

namespace mf::cuda {
namespace {

void check(cudaError_t err, const char* what) {
    if (err != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
}

// RAII device allocation.
class DeviceBuffer {
public:
    explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes_) check(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
    }
    ~DeviceBuffer() {
        if (ptr_) cudaFree(ptr_);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    void upload(const void* host, size_t bytes, size_t offset = 0) {
        check(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice), "upload");
    }
    void download(void* host, size_t bytes, size_t offset = 0) const {
        check(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost), "download");
    }

private:
    void* ptr_ = nullptr;
    size_t bytes_;
};

size_t image_bytes(const ImageViewT<const uint8_t>& v) { return static_cast<size_t>(v.height) * v.width * v.channels; }

// Host images given to the backend are C-contiguous (checked by the bindings).
void upload_image(DeviceBuffer& d, const ConstImageU8& v) { d.upload(v.data, image_bytes(v)); }

void sync(const char* what) {
    check(cudaGetLastError(), what);
    check(cudaDeviceSynchronize(), what);
}

struct Probe {
    bool ok = false;
    std::string status;
};

const Probe& probe() {
    static Probe p;
    static std::once_flag once;
    std::call_once(once, [] {
        int count = 0;
        const cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess) {
            p.status = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
            cudaGetLastError();
        } else if (count == 0) {
            p.status = "no CUDA device found";
        } else {
            cudaDeviceProp prop;
            check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
            p.ok = true;
            p.status = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor) + ")";
        }
    });
    return p;
}

}  // namespace

bool built() { return true; }
bool available() { return probe().ok; }
std::string status() { return probe().status; }
void require() {
    if (!available()) throw std::runtime_error("device='cuda' requested but " + status());
}

void gaussian_blur(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst) {
    require();
    const BlurLevel level(ksize);
    DeviceBuffer d_src(image_bytes(src)), d_dst(static_cast<size_t>(roi.w) * roi.h * src.channels),
        d_w(level.weights.size() * sizeof(uint16_t));
    upload_image(d_src, src);
    d_w.upload(level.weights.data(), level.weights.size() * sizeof(uint16_t));
    launch_gaussian_blur(d_src.as<uint8_t>(), src.height, src.width, src.channels, src.row_stride, roi,
                         d_w.as<uint16_t>(), level.radius, d_dst.as<uint8_t>(), static_cast<long>(roi.w) * src.channels,
                         nullptr);
    sync("gaussian_blur kernel");
    d_dst.download(dst.data, static_cast<size_t>(roi.w) * roi.h * src.channels);
}

Rect hull_mask(const Hull& hull, const HullMaskParams& params, const ImageU8& mask) {
    require();
    const double feather = resolve_feather(hull, params);
    const Rect reach = hull_reach(hull, feather, params.margin, mask.width, mask.height);
    const size_t mask_bytes = static_cast<size_t>(mask.height) * mask.width;
    if (reach.empty()) {
        std::memset(mask.data, 0, mask_bytes);
        return Rect{};
    }
    const int n = hull.size();
    DeviceBuffer d_mask(mask_bytes), d_edges(5 * n * sizeof(float)), d_bbox(4 * sizeof(int));
    const std::vector<float>* arrays[5] = {&hull.ax, &hull.ay, &hull.ux, &hull.uy, &hull.len};
    for (int a = 0; a < 5; ++a) d_edges.upload(arrays[a]->data(), n * sizeof(float), a * n * sizeof(float));
    const int init[4] = {INT_MAX, -1, INT_MAX, -1};
    d_bbox.upload(init, sizeof(init));
    check(cudaMemset(d_mask.as<void>(), 0, mask_bytes), "cudaMemset");
    HullGeometry g = hull.geometry(static_cast<float>(feather), static_cast<float>(params.margin));
    const float* e = d_edges.as<float>();
    g.ax = e;
    g.ay = e + n;
    g.ux = e + 2 * n;
    g.uy = e + 3 * n;
    g.len = e + 4 * n;
    launch_hull_mask(g, reach, d_mask.as<uint8_t>(), mask.width, d_bbox.as<int>(), nullptr);
    sync("hull_mask kernel");
    d_mask.download(mask.data, mask_bytes);
    int b[4];
    d_bbox.download(b, sizeof(b));
    if (b[1] < 0) return Rect{};
    return Rect{b[0], b[2], b[1] - b[0] + 1, b[3] - b[2] + 1};
}

void blur_in_mask(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox, const std::vector<int>& ksizes,
                  const std::vector<ImageU8>& outs) {
    require();
    check_blur_in_mask_args(src, mask, bbox, ksizes, outs);
    if (ksizes.size() > static_cast<size_t>(kMaxLevels))
        invalid("at most " + std::to_string(kMaxLevels) + " kernel sizes per call on CUDA");
    const size_t frame = image_bytes(src);
    DeviceBuffer d_src(frame), d_mask(static_cast<size_t>(mask.height) * mask.width), d_out(frame * ksizes.size()),
        d_w(ksizes.size() * kMaxKsize * sizeof(uint16_t));
    upload_image(d_src, src);
    upload_image(d_mask, mask);
    BlurLevels levels{};
    levels.count = static_cast<int>(ksizes.size());
    for (size_t l = 0; l < ksizes.size(); ++l) {
        const BlurLevel level(ksizes[l]);
        d_w.upload(level.weights.data(), level.weights.size() * sizeof(uint16_t), l * kMaxKsize * sizeof(uint16_t));
        levels.weights[l] = d_w.as<uint16_t>() + l * kMaxKsize;
        levels.radius[l] = level.radius;
        levels.out[l] = d_out.as<uint8_t>() + l * frame;
        check(cudaMemcpy(levels.out[l], d_src.as<uint8_t>(), frame, cudaMemcpyDeviceToDevice), "copy");
    }
    if (!bbox.empty()) {
        launch_blur_in_mask(d_src.as<uint8_t>(), d_mask.as<uint8_t>(), src.height, src.width, src.channels, bbox, levels,
                            nullptr);
        sync("blur_in_mask kernel");
    }
    for (size_t l = 0; l < ksizes.size(); ++l) d_out.download(outs[l].data, frame, l * frame);
}

void rgb_to_yuv420(const ConstImageU8& src, Rect roi, const Yuv420Views& out, const YuvMatrix& m,
                   const ConstImageU8& mask) {
    require();
    const Rect r = check_rgb_to_yuv420_args(src, roi, out, mask);
    int cx0, cx1, cy0, cy1;
    yuv420_block_range(r, cx0, cx1, cy0, cy1);
    const int cw = (src.width + 1) / 2, ch = (src.height + 1) / 2;
    const size_t luma = static_cast<size_t>(src.height) * src.width, chroma = static_cast<size_t>(ch) * cw;
    const bool masked = mask.data != nullptr;
    DeviceBuffer d_src(image_bytes(src)), d_planes(luma + 2 * chroma), d_mask(masked ? luma : 0);
    upload_image(d_src, src);
    uint8_t* base = d_planes.as<uint8_t>();
    const Yuv420Planes p{base, base + luma, base + luma + chroma, src.width, cw, cw};
    // The region's blocks, device copy <-> caller's planes (which may have padded rows).
    const int lx0 = 2 * cx0, ly0 = 2 * cy0, lx1 = imin(2 * cx1, src.width), ly1 = imin(2 * cy1, src.height);
    const auto copy_region = [&](cudaMemcpyKind kind, const char* what) {
        const bool up = kind == cudaMemcpyHostToDevice;
        struct Plane {
            uint8_t* host;
            long host_stride;
            uint8_t* dev;
            long dev_stride;
            int x0, y0, w, h;
        } planes[3] = {{out.y.data, static_cast<long>(out.y.row_stride), p.y, src.width, lx0, ly0, lx1 - lx0, ly1 - ly0},
                       {out.u.data, static_cast<long>(out.u.row_stride), p.u, cw, cx0, cy0, cx1 - cx0, cy1 - cy0},
                       {out.v.data, static_cast<long>(out.v.row_stride), p.v, cw, cx0, cy0, cx1 - cx0, cy1 - cy0}};
        for (const Plane& q : planes) {
            uint8_t* h = q.host + static_cast<size_t>(q.y0) * q.host_stride + q.x0;
            uint8_t* d = q.dev + static_cast<size_t>(q.y0) * q.dev_stride + q.x0;
            check(up ? cudaMemcpy2D(d, q.dev_stride, h, q.host_stride, q.w, q.h, kind)
                     : cudaMemcpy2D(h, q.host_stride, d, q.dev_stride, q.w, q.h, kind),
                  what);
        }
    };
    YuvSelect sel{nullptr, 0};
    if (masked) {  // unselected samples keep the caller's values: start from them
        upload_image(d_mask, mask);
        sel = YuvSelect{d_mask.as<uint8_t>(), static_cast<long>(src.width)};
        copy_region(cudaMemcpyHostToDevice, "upload planes");
    }
    launch_rgb_to_yuv420(d_src.as<uint8_t>(), src.height, src.width, src.channels, src.row_stride, r, p, m, sel, nullptr);
    sync("rgb_to_yuv420 kernel");
    // Only the converted blocks go back: the rest of the caller's planes stays as it was.
    copy_region(cudaMemcpyDeviceToHost, "download planes");
}

void yuv420_to_rgb(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m) {
    require();
    const Rect r = check_yuv420_to_rgb_args(in, roi, dst);
    if (r.empty()) return;
    // Only the plane rows the region reads go up, whole rows, packed.
    const int width = in.y.width, cw = in.u.width, cy0 = r.y / 2, cy1 = (r.y + r.h + 1) / 2;
    const size_t luma = static_cast<size_t>(r.h) * width, chroma = static_cast<size_t>(cy1 - cy0) * cw;
    const size_t rgb = static_cast<size_t>(r.h) * r.w * 3;
    DeviceBuffer d_planes(luma + 2 * chroma), d_dst(rgb);
    uint8_t* base = d_planes.as<uint8_t>();
    check(cudaMemcpy2D(base, width, in.y.row(r.y), in.y.row_stride, width, r.h, cudaMemcpyHostToDevice), "upload y");
    check(cudaMemcpy2D(base + luma, cw, in.u.row(cy0), in.u.row_stride, cw, cy1 - cy0, cudaMemcpyHostToDevice),
          "upload u");
    check(cudaMemcpy2D(base + luma + chroma, cw, in.v.row(cy0), in.v.row_stride, cw, cy1 - cy0,
                       cudaMemcpyHostToDevice), "upload v");
    const Yuv420ConstPlanes p{base, base + luma, base + luma + chroma, width, cw, cw};
    launch_yuv420_to_rgb(p, r, d_dst.as<uint8_t>(), 3L * r.w, m, nullptr);
    sync("yuv420_to_rgb kernel");
    check(cudaMemcpy2D(dst.data, dst.row_stride, d_dst.as<uint8_t>(), 3 * static_cast<size_t>(r.w),
                       3 * static_cast<size_t>(r.w), r.h, cudaMemcpyDeviceToHost), "download");
}

}  // namespace mf::cuda
