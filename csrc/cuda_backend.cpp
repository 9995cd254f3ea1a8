// CUDA backend (CUDA builds only): uploads host images, runs kernels/*.cu, downloads results.
#include "cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "../kernels/gaussian_blur.cuh"
#include "../kernels/launch.hpp"
#include "ops/blur_hull_yuv420.hpp"
#include "ops/area_resize.hpp"
#include "ops/blur_in_mask.hpp"
#include "ops/gaussian_blur.hpp"
#include "ops/rgb_to_yuv420.hpp"
#include "ops/warp_affine.hpp"
#include "ops/yuv420_to_rgb.hpp"

namespace mf::cuda {
namespace {

void check(cudaError_t err, const char* what) {
    if (err != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
}

// RAII device allocation.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) { reserve(bytes); }
    ~DeviceBuffer() {
        if (ptr_) cudaFree(ptr_);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    // Grow-only: the contents are lost when it grows.
    void reserve(size_t bytes) {
        if (bytes <= bytes_) return;
        if (ptr_) cudaFree(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
        check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
        bytes_ = bytes;
    }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Page-locked host memory (grow-only), so that downloads run at full speed and asynchronously.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    ~PinnedBuffer() {
        if (ptr_) cudaFreeHost(ptr_);
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    uint8_t* reserve(size_t bytes) {
        if (bytes > bytes_) {
            if (ptr_) cudaFreeHost(ptr_);
            ptr_ = nullptr;
            bytes_ = 0;
            check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost");
            bytes_ = bytes;
        }
        return static_cast<uint8_t*>(ptr_);
    }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// What one host thread uses on the device, made once and reused by every call of that thread (and
// by later threads once it ends: current()): a
// stream of its own, grow-only buffers (sized by the largest frame seen, so the hot path allocates
// nothing after the first frame) and the blur weights of each kernel size. One synchronisation per
// call, at its end, when the results are needed on the host.
class Workspace {
public:
    enum Slot { kSrc, kDst, kMask, kAux, kPlanes, kLevels, kLevelPlanes, kEdges, kSlots };

    // A non-blocking stream: it neither waits for nor holds up the work of other threads and
    // libraries on the legacy default stream (PyTorch's, NVDEC's). A call that reads device memory
    // others wrote first waits for exactly the work queued before it (follow()); every call ends
    // with its stream synchronised, so its results are complete for whoever reads them next.
    // MIME_FAST_BLOCKING_STREAM=1 makes it a blocking one again (it then also waits for, and holds
    // up, all legacy-stream work): a switch to tell a stream-ordering fault from another.
    Workspace() {
        check(cudaGetDevice(&device_), "cudaGetDevice");
        const char* blocking = std::getenv("MIME_FAST_BLOCKING_STREAM");
        const unsigned flags = (blocking && blocking[0] == '1') ? cudaStreamDefault : cudaStreamNonBlocking;
        check(cudaStreamCreateWithFlags(&stream_, flags), "cudaStreamCreate");
        check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    }
    ~Workspace() {
        if (ready_) cudaEventDestroy(ready_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    // The calling thread's workspace, for the device the thread uses now. A thread takes one from
    // a process-wide pool on its first call and gives it back when it ends, so the threads that
    // come and go (each decode pass's prefetch thread, each run's clip slots) reuse the stream,
    // buffers and weights of those before them: after warm-up nothing is allocated, and nothing is
    // freed either (a cudaFree waits for the whole device, every thread's work included).
    static Workspace& current() {
        thread_local Lease lease;
        int device = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        if (!lease.ws || lease.ws->device_ != device) {
            lease.give_back();
            lease.ws = take(device);
        }
        return *lease.ws;
    }

    cudaStream_t stream() const { return stream_; }
    // An event of this workspace's, for follow().
    cudaEvent_t ready_event() const { return ready_; }
    template <typename T = uint8_t>
    T* buffer(Slot s, size_t bytes) {
        slots_[s].reserve(bytes);
        return slots_[s].as<T>();
    }
    // Page-locked staging: one buffer for uploads, one for downloads.
    enum Direction { kUp, kDown };
    uint8_t* pinned(Direction d, size_t bytes) { return pinned_[d].reserve(bytes); }

    // Device copy of the Q8 weights of kernel size k, uploaded on first use, on this stream (the
    // kernels that read them follow it in order; a plain cudaMemcpy would run on the legacy stream,
    // which this one does not wait for). The host copy lives as long as the device copy.
    const uint16_t* weights(int ksize) {
        auto it = weights_.find(ksize);
        if (it == weights_.end()) {
            Weights w{BlurLevel(ksize).weights, nullptr};
            const size_t bytes = w.host.size() * sizeof(uint16_t);
            w.device = std::make_unique<DeviceBuffer>(bytes);
            check(cudaMemcpyAsync(w.device->as<void>(), w.host.data(), bytes, cudaMemcpyHostToDevice, stream_),
                  "upload weights");
            it = weights_.emplace(ksize, std::move(w)).first;
        }
        return it->second.device->as<uint16_t>();
    }

    void upload(void* dev, const void* host, size_t bytes, const char* what) {
        check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream_), what);
    }
    void download(void* host, const void* dev, size_t bytes, const char* what) {
        check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream_), what);
    }
    void copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                cudaMemcpyKind kind, const char* what) {
        if (width && height) check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream_), what);
    }
    // Waits for the stream first, then reports a failed launch: after an error, no copy queued by
    // this call can still be running into or out of the staging buffers the next call reuses.
    void sync(const char* what) {
        const cudaError_t done = cudaStreamSynchronize(stream_);
        check(cudaGetLastError(), what);
        check(done, what);
    }

private:
    // Idle workspaces, per device. Never destroyed: nothing is freed at process exit, when the
    // driver may already be gone.
    struct Pool {
        std::mutex mutex;
        std::vector<std::unique_ptr<Workspace>> idle;
    };
    static Pool& pool() {
        static Pool* p = new Pool;
        return *p;
    }
    static std::unique_ptr<Workspace> take(int device) {
        Pool& p = pool();
        {
            std::lock_guard<std::mutex> lock(p.mutex);
            for (auto it = p.idle.begin(); it != p.idle.end(); ++it) {
                if ((*it)->device_ == device) {
                    std::unique_ptr<Workspace> ws = std::move(*it);
                    p.idle.erase(it);
                    return ws;
                }
            }
        }
        return std::make_unique<Workspace>();  // (on the current device)
    }
    // A thread's hold on one workspace, given back to the pool when the thread ends.
    struct Lease {
        std::unique_ptr<Workspace> ws;
        Lease() = default;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease() { give_back(); }
        void give_back() {
            if (!ws) return;
            cudaStreamSynchronize(ws->stream_);  // (every call ends synchronised: a no-op, kept as a guard)
            cudaGetLastError();
            Pool& p = pool();
            std::lock_guard<std::mutex> lock(p.mutex);
            p.idle.push_back(std::move(ws));
        }
    };

    int device_ = 0;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t ready_ = nullptr;
    DeviceBuffer slots_[kSlots];
    PinnedBuffer pinned_[2];
    struct Weights {
        std::vector<uint16_t> host;
        std::unique_ptr<DeviceBuffer> device;
    };
    std::map<int, Weights> weights_;
};

// The workspace stream waits for the work queued so far on the caller's `stream` (say torch's
// current one, which may still be writing the input or reading the output); nullptr: on the legacy
// default stream (where PyTorch's default stream and NVDEC's decoder queue theirs). Called first by
// every call that reads or writes device memory it did not allocate.
void follow(Workspace& ws, void* stream) {
    const cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    check(cudaEventRecord(ws.ready_event(), s), "cudaEventRecord");
    check(cudaStreamWaitEvent(ws.stream(), ws.ready_event(), 0), "cudaStreamWaitEvent");
}

size_t image_bytes(const ImageViewT<const uint8_t>& v) { return static_cast<size_t>(v.height) * v.width * v.channels; }

// Host images given to the backend are C-contiguous (checked by the bindings).
void upload_image(Workspace& ws, uint8_t* dev, const ConstImageU8& v) {
    ws.upload(dev, v.data, image_bytes(v), "upload image");
}

// The hull's edge arrays on the device, for HullGeometry.
HullGeometry device_geometry(Workspace& ws, const Hull& hull, double feather, double margin, int** bbox4) {
    const int n = hull.size();
    // five float arrays, then the four ints of the box
    char* d = ws.buffer<char>(Workspace::kEdges, 5 * n * sizeof(float) + 4 * sizeof(int));
    uint8_t* h = ws.pinned(Workspace::kUp, 5 * n * sizeof(float) + 4 * sizeof(int));
    const std::vector<float>* arrays[5] = {&hull.ax, &hull.ay, &hull.ux, &hull.uy, &hull.len};
    for (int a = 0; a < 5; ++a) std::memcpy(h + a * n * sizeof(float), arrays[a]->data(), n * sizeof(float));
    const int init[4] = {INT_MAX, -1, INT_MAX, -1};
    std::memcpy(h + 5 * n * sizeof(float), init, sizeof(init));
    ws.upload(d, h, 5 * n * sizeof(float) + 4 * sizeof(int), "upload hull");
    HullGeometry g = hull.geometry(static_cast<float>(feather), static_cast<float>(margin));
    const float* e = reinterpret_cast<const float*>(d);
    g.ax = e;
    g.ay = e + n;
    g.ux = e + 2 * n;
    g.uy = e + 3 * n;
    g.len = e + 4 * n;
    *bbox4 = reinterpret_cast<int*>(d + 5 * n * sizeof(float));
    return g;
}

Rect bbox_from(const int b[4]) {
    if (b[1] < 0) return Rect{};
    return Rect{b[0], b[2], b[1] - b[0] + 1, b[3] - b[2] + 1};
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

std::pair<size_t, size_t> memory() {
    require();
    size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return {free, total};
}

namespace {
// Whether `device` reads pageable host memory (HMM, or a coherent CPU-GPU link).
bool reads_pageable(int device) {
    int pageable = 0;
    check(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device), "cudaDeviceGetAttribute");
    return pageable != 0;
}
}  // namespace

bool pageable_memory_access() {
    require();
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    return reads_pageable(device);
}

void gaussian_blur(const ConstImageU8& src, Rect roi, int ksize, const ImageU8& dst) {
    require();
    Workspace& ws = Workspace::current();
    const BlurLevel level(ksize);
    const size_t out_bytes = static_cast<size_t>(roi.w) * roi.h * src.channels;
    uint8_t* d_src = ws.buffer(Workspace::kSrc, image_bytes(src));
    uint8_t* d_dst = ws.buffer(Workspace::kDst, out_bytes);
    upload_image(ws, d_src, src);
    launch_gaussian_blur(d_src, src.height, src.width, src.channels, src.row_stride, roi, ws.weights(ksize),
                         level.radius, d_dst, static_cast<long>(roi.w) * src.channels, ws.stream());
    ws.download(dst.data, d_dst, out_bytes, "download");
    ws.sync("gaussian_blur kernel");
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
    Workspace& ws = Workspace::current();
    uint8_t* d_mask = ws.buffer(Workspace::kMask, mask_bytes);
    int* d_bbox = nullptr;
    const HullGeometry g = device_geometry(ws, hull, feather, params.margin, &d_bbox);
    check(cudaMemsetAsync(d_mask, 0, mask_bytes, ws.stream()), "cudaMemset");
    launch_hull_mask(g, reach, d_mask, mask.width, d_bbox, ws.stream());
    int* b = reinterpret_cast<int*>(ws.pinned(Workspace::kDown, 4 * sizeof(int)));
    ws.download(mask.data, d_mask, mask_bytes, "download mask");
    ws.download(b, d_bbox, 4 * sizeof(int), "download box");
    ws.sync("hull_mask kernel");
    return bbox_from(b);
}

void blur_in_mask(const ConstImageU8& src, const ConstImageU8& mask, Rect bbox, const std::vector<int>& ksizes,
                  const std::vector<ImageU8>& outs) {
    require();
    check_blur_in_mask_args(src, mask, bbox, ksizes, outs);
    if (ksizes.size() > static_cast<size_t>(kMaxLevels))
        invalid("at most " + std::to_string(kMaxLevels) + " kernel sizes per call on CUDA");
    Workspace& ws = Workspace::current();
    const size_t frame = image_bytes(src);
    uint8_t* d_src = ws.buffer(Workspace::kSrc, frame);
    uint8_t* d_mask = ws.buffer(Workspace::kMask, static_cast<size_t>(mask.height) * mask.width);
    uint8_t* d_out = ws.buffer(Workspace::kLevels, frame * ksizes.size());
    upload_image(ws, d_src, src);
    upload_image(ws, d_mask, mask);
    BlurLevels levels{};
    levels.count = static_cast<int>(ksizes.size());
    for (size_t l = 0; l < ksizes.size(); ++l) {
        levels.weights[l] = ws.weights(ksizes[l]);
        levels.radius[l] = ksizes[l] / 2;
        levels.out[l] = d_out + l * frame;
        check(cudaMemcpyAsync(levels.out[l], d_src, frame, cudaMemcpyDeviceToDevice, ws.stream()), "copy");
    }
    if (!bbox.empty())
        launch_blur_in_mask(d_src, d_mask, src.height, src.width, src.channels, bbox, levels, ws.stream());
    for (size_t l = 0; l < ksizes.size(); ++l) ws.download(outs[l].data, d_out + l * frame, frame, "download");
    ws.sync("blur_in_mask kernel");
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
    Workspace& ws = Workspace::current();
    uint8_t* d_src = ws.buffer(Workspace::kSrc, image_bytes(src));
    uint8_t* base = ws.buffer(Workspace::kPlanes, luma + 2 * chroma);
    uint8_t* d_mask = masked ? ws.buffer(Workspace::kMask, luma) : nullptr;
    upload_image(ws, d_src, src);
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
            if (up) ws.copy2d(d, q.dev_stride, h, q.host_stride, q.w, q.h, kind, what);
            else ws.copy2d(h, q.host_stride, d, q.dev_stride, q.w, q.h, kind, what);
        }
    };
    YuvSelect sel{nullptr, 0};
    if (masked) {  // unselected samples keep the caller's values: start from them
        upload_image(ws, d_mask, mask);
        sel = YuvSelect{d_mask, static_cast<long>(src.width)};
        copy_region(cudaMemcpyHostToDevice, "upload planes");
    }
    launch_rgb_to_yuv420(d_src, src.height, src.width, src.channels, src.row_stride, r, p, m, sel, ws.stream());
    // Only the converted blocks go back: the rest of the caller's planes stays as it was.
    copy_region(cudaMemcpyDeviceToHost, "download planes");
    ws.sync("rgb_to_yuv420 kernel");
}

void yuv420_to_rgb(const Yuv420ConstViews& in, Rect roi, const ImageU8& dst, const YuvToRgbMatrix& m) {
    require();
    const Rect r = check_yuv420_to_rgb_args(in, roi, dst);
    if (r.empty()) return;
    // Only the plane rows the region reads go up, whole rows, packed.
    const int width = in.y.width, cw = in.u.width, cy0 = r.y / 2, cy1 = (r.y + r.h + 1) / 2;
    const size_t luma = static_cast<size_t>(r.h) * width, chroma = static_cast<size_t>(cy1 - cy0) * cw;
    const size_t rgb = static_cast<size_t>(r.h) * r.w * 3;
    Workspace& ws = Workspace::current();
    uint8_t* base = ws.buffer(Workspace::kPlanes, luma + 2 * chroma);
    uint8_t* d_dst = ws.buffer(Workspace::kDst, rgb);
    ws.copy2d(base, width, in.y.row(r.y), in.y.row_stride, width, r.h, cudaMemcpyHostToDevice, "upload y");
    ws.copy2d(base + luma, cw, in.u.row(cy0), in.u.row_stride, cw, cy1 - cy0, cudaMemcpyHostToDevice, "upload u");
    ws.copy2d(base + luma + chroma, cw, in.v.row(cy0), in.v.row_stride, cw, cy1 - cy0, cudaMemcpyHostToDevice,
              "upload v");
    const Yuv420ConstPlanes p{base, base + luma, base + luma + chroma, width, cw, cw};
    launch_yuv420_to_rgb(p, r, d_dst, 3L * r.w, m, ws.stream());
    ws.copy2d(dst.data, dst.row_stride, d_dst, 3 * static_cast<size_t>(r.w), 3 * static_cast<size_t>(r.w), r.h,
              cudaMemcpyDeviceToHost, "download");
    ws.sync("yuv420_to_rgb kernel");
}

namespace {

// The fused face step over a frame whose region planes `stage` puts into the device buffer d_in
// (packed: luma g.w x g.h, then Cb and Cr, cw x ch each), from the host or from device memory.
template <typename Stage>
Rect blur_hull_region(int W, int H, const Hull& hull, const HullMaskParams& params, const std::vector<int>& ksizes,
                      const std::vector<Yuv420Views>& outs, const ColourMatrices& m, Stage&& stage) {
    if (ksizes.size() > static_cast<size_t>(kMaxLevels))
        invalid("at most " + std::to_string(kMaxLevels) + " kernel sizes per call on CUDA");
    const double feather = resolve_feather(hull, params);
    const HullRegion plan = plan_hull_region(hull, feather, params.margin,
                                             *std::max_element(ksizes.begin(), ksizes.end()), W, H);
    if (plan.reach.empty()) return Rect{};
    // Everything below works on the region (g): its planes are staged once, the mask, the levels
    // and their planes are made on the device, and each level's region planes come back. No sync
    // until the end.
    const Rect g = plan.region;
    const int cw = (g.w + 1) / 2, ch = (g.h + 1) / 2, cx = g.x / 2, cy = g.y / 2;
    const size_t luma = static_cast<size_t>(g.w) * g.h, chroma = static_cast<size_t>(cw) * ch;
    const size_t planes_bytes = luma + 2 * chroma, rgb_bytes = luma * 3;
    const size_t L = ksizes.size();
    Workspace& ws = Workspace::current();
    cudaStream_t st = ws.stream();
    uint8_t* d_in = ws.buffer(Workspace::kPlanes, planes_bytes);
    uint8_t* d_mask = ws.buffer(Workspace::kMask, luma);
    uint8_t* d_rgb = ws.buffer(Workspace::kSrc, rgb_bytes);
    uint8_t* d_levels = ws.buffer(Workspace::kLevels, rgb_bytes * L);
    uint8_t* d_out = ws.buffer(Workspace::kLevelPlanes, planes_bytes * L);
    stage(ws, g, d_in, d_in + luma, d_in + luma + chroma);
    int* d_bbox = nullptr;
    const HullGeometry geo = device_geometry(ws, hull, feather, params.margin, &d_bbox);
    check(cudaMemsetAsync(d_mask, 0, luma, st), "cudaMemset");
    launch_hull_mask(geo, plan.reach, d_mask, g.w, d_bbox, st, g.x, g.y);
    // The region's planes start at an even row and column, so the conversion sees them as a frame.
    const Yuv420ConstPlanes pin{d_in, d_in + luma, d_in + luma + chroma, g.w, cw, cw};
    launch_yuv420_to_rgb(pin, Rect{0, 0, g.w, g.h}, d_rgb, 3L * g.w, m.to_rgb, st);
    const Rect roi{plan.reach.x - g.x, plan.reach.y - g.y, plan.reach.w, plan.reach.h};
    BlurLevels levels{};
    levels.count = static_cast<int>(L);
    for (size_t l = 0; l < L; ++l) {
        levels.weights[l] = ws.weights(ksizes[l]);
        levels.radius[l] = ksizes[l] / 2;
        levels.out[l] = d_levels + l * rgb_bytes;
        check(cudaMemcpyAsync(levels.out[l], d_rgb, rgb_bytes, cudaMemcpyDeviceToDevice, st), "copy");
        // each level's planes start as the input's: unselected samples keep their values
        check(cudaMemcpyAsync(d_out + l * planes_bytes, d_in, planes_bytes, cudaMemcpyDeviceToDevice, st), "copy");
    }
    launch_blur_in_mask(d_rgb, d_mask, g.h, g.w, 3, roi, levels, st);
    const YuvSelect sel{d_mask, static_cast<long>(g.w)};
    for (size_t l = 0; l < L; ++l) {
        uint8_t* o = d_out + l * planes_bytes;
        const Yuv420Planes pout{o, o + luma, o + luma + chroma, g.w, cw, cw};
        launch_rgb_to_yuv420(levels.out[l], g.h, g.w, 3, 3L * g.w, roi, pout, m.to_yuv, sel, st);
    }
    uint8_t* host = ws.pinned(Workspace::kDown, planes_bytes * L + 4 * sizeof(int));
    ws.download(host, d_out, planes_bytes * L, "download planes");
    int* b = reinterpret_cast<int*>(host + planes_bytes * L);
    ws.download(b, d_bbox, 4 * sizeof(int), "download box");
    ws.sync("blur_hull kernels");
    // The region of each output's planes: the level's samples (equal to the input's wherever the
    // mask selects nothing, and the outputs hold a copy of the input).
    for (size_t l = 0; l < L; ++l) {
        const uint8_t* src = host + l * planes_bytes;
        const Yuv420Views& o = outs[l];
        for (int y = 0; y < g.h; ++y) std::memcpy(o.y.row(g.y + y) + g.x, src + static_cast<size_t>(y) * g.w, g.w);
        for (int y = 0; y < ch; ++y) {
            std::memcpy(o.u.row(cy + y) + cx, src + luma + static_cast<size_t>(y) * cw, cw);
            std::memcpy(o.v.row(cy + y) + cx, src + luma + chroma + static_cast<size_t>(y) * cw, cw);
        }
    }
    return bbox_from(b);
}

// A pointer a caller says the kernels can read: an address of plain host memory (a CPU tensor's
// data_ptr, say) on a GPU that cannot read pageable memory would fault inside a kernel, and an
// illegal address spoils the CUDA context for good; device memory of another GPU than this
// thread's would be read through the wrong stream. Only what is known to be wrong is refused:
// an address the runtime cannot describe (allocators differ in what they report) passes.
void require_device_pointer(const void* p, const char* what) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();  // (not sticky: cleared, so that the next launch is not blamed for it)
        return;
    }
    int current = 0;
    check(cudaGetDevice(&current), "cudaGetDevice");
    if (a.type == cudaMemoryTypeUnregistered) {
        if (!reads_pageable(current)) invalid(std::string(what) + " must point to device memory, not host memory");
    } else if (a.type == cudaMemoryTypeDevice && a.device >= 0 && a.device != current) {
        invalid(std::string(what) + " is on CUDA device " + std::to_string(a.device) + ", this thread uses device " +
                std::to_string(current));
    }
}

void check_nv12(const Nv12Device& f) {
    if (!f.y || !f.uv) invalid("the NV12 frame's plane pointers must not be null");
    if (f.width <= 0 || f.height <= 0) invalid("the NV12 frame's size must be positive");
    if (f.y_pitch < f.width || f.uv_pitch < 2 * ((f.width + 1) / 2)) invalid("the NV12 frame's pitches are below its width");
    require_device_pointer(f.y, "the NV12 frame's luma plane");
    require_device_pointer(f.uv, "the NV12 frame's chroma plane");
}

}  // namespace

Rect blur_hull_yuv420(const Yuv420ConstViews& in, const Hull& hull, const HullMaskParams& params,
                      const std::vector<int>& ksizes, const std::vector<Yuv420Views>& outs, const ColourMatrices& m) {
    require();
    check_blur_hull_yuv420_args(in, ksizes, outs);
    return blur_hull_region(in.y.width, in.y.height, hull, params, ksizes, outs, m,
                            [&](Workspace& ws, Rect g, uint8_t* y, uint8_t* u, uint8_t* v) {
                                const int cw = (g.w + 1) / 2, ch = (g.h + 1) / 2, cx = g.x / 2, cy = g.y / 2;
                                const auto up = cudaMemcpyHostToDevice;
                                ws.copy2d(y, g.w, in.y.row(g.y) + g.x, in.y.row_stride, g.w, g.h, up, "upload y");
                                ws.copy2d(u, cw, in.u.row(cy) + cx, in.u.row_stride, cw, ch, up, "upload u");
                                ws.copy2d(v, cw, in.v.row(cy) + cx, in.v.row_stride, cw, ch, up, "upload v");
                            });
}

Rect blur_hull_nv12(const Nv12Device& f, const Hull& hull, const HullMaskParams& params, const std::vector<int>& ksizes,
                    const std::vector<Yuv420Views>& outs, const ColourMatrices& m) {
    require();
    check_nv12(f);
    check_blur_hull_outputs(f.height, f.width, ksizes, outs);
    return blur_hull_region(f.width, f.height, hull, params, ksizes, outs, m,
                            [&](Workspace& ws, Rect g, uint8_t* y, uint8_t* u, uint8_t* v) {
                                const int cw = (g.w + 1) / 2, ch = (g.h + 1) / 2;
                                follow(ws, nullptr);  // the frame: decoded and copied on the legacy stream
                                ws.copy2d(y, g.w, f.y + g.y * f.y_pitch + g.x, f.y_pitch, g.w, g.h,
                                          cudaMemcpyDeviceToDevice, "copy y");
                                launch_nv12_split(f.uv, f.uv_pitch, Rect{g.x / 2, g.y / 2, cw, ch}, u, v, cw,
                                                  ws.stream());
                            });
}

void download_nv12(const Nv12Device& f, const Yuv420Views& out) {
    require();
    check_nv12(f);
    const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
    check_plane(as_const(out.y), f.height, f.width, "y");
    check_plane(as_const(out.u), ch, cw, "u");
    check_plane(as_const(out.v), ch, cw, "v");
    Workspace& ws = Workspace::current();
    follow(ws, nullptr);  // the frame: decoded and copied on the legacy stream
    const size_t luma = static_cast<size_t>(f.width) * f.height, chroma = static_cast<size_t>(cw) * ch;
    uint8_t* d = ws.buffer(Workspace::kPlanes, 2 * chroma);
    launch_nv12_split(f.uv, f.uv_pitch, Rect{0, 0, cw, ch}, d, d + chroma, cw, ws.stream());
    // through page-locked staging: full-speed copies, then one host copy into the caller's planes
    uint8_t* host = ws.pinned(Workspace::kDown, luma + 2 * chroma);
    ws.copy2d(host, f.width, f.y, f.y_pitch, f.width, f.height, cudaMemcpyDeviceToHost, "download y");
    ws.download(host + luma, d, 2 * chroma, "download chroma");
    ws.sync("nv12_split kernel");
    for (int y = 0; y < f.height; ++y) std::memcpy(out.y.row(y), host + static_cast<size_t>(y) * f.width, f.width);
    for (int y = 0; y < ch; ++y) {
        std::memcpy(out.u.row(y), host + luma + static_cast<size_t>(y) * cw, cw);
        std::memcpy(out.v.row(y), host + luma + chroma + static_cast<size_t>(y) * cw, cw);
    }
}

void nv12_to_rgb_device(const Nv12Device& f, uint8_t* dst, long dst_stride, const YuvToRgbMatrix& m, void* stream) {
    require();
    check_nv12(f);
    if (!dst) invalid("the output pointer must not be null");
    if (dst_stride < 3L * f.width) invalid("nv12_to_rgb: output rows overlap (row stride below width x 3)");
    require_device_pointer(dst, "nv12_to_rgb's output");
    Workspace& ws = Workspace::current();
    follow(ws, stream);
    const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
    const size_t chroma = static_cast<size_t>(cw) * ch;
    uint8_t* d = ws.buffer(Workspace::kPlanes, 2 * chroma);
    launch_nv12_split(f.uv, f.uv_pitch, Rect{0, 0, cw, ch}, d, d + chroma, cw, ws.stream());
    const Yuv420ConstPlanes planes{f.y, d, d + chroma, f.y_pitch, cw, cw};
    launch_yuv420_to_rgb(planes, Rect{0, 0, f.width, f.height}, dst, dst_stride, m, ws.stream());
    ws.sync("nv12_to_rgb kernels");
}

namespace {

// The inverse (crop -> frame) matrices on the device, through page-locked staging.
const Affine* upload_inverses(Workspace& ws, const std::vector<Affine>& Ms) {
    const size_t bytes = Ms.size() * sizeof(Affine);
    auto* h = reinterpret_cast<Affine*>(ws.pinned(Workspace::kUp, bytes));
    for (size_t k = 0; k < Ms.size(); ++k) h[k] = warp_invert(Ms[k]);
    Affine* d = ws.buffer<Affine>(Workspace::kAux, bytes);
    ws.upload(d, h, bytes, "upload matrices");
    return d;
}

void check_crop_count(size_t n) {
    if (n > 65535) invalid("at most 65535 crops per call on the GPU, got " + std::to_string(n));
}

}  // namespace

void warp_affine(const ConstImageU8& src, const std::vector<Affine>& Ms, int size, uint8_t* dst) {
    require();
    check_warp_affine_args(src.height, src.width, src.channels, static_cast<long>(src.row_stride), Ms, size);
    check_crop_count(Ms.size());
    if (Ms.empty()) return;
    Workspace& ws = Workspace::current();
    const size_t out = Ms.size() * size * size * src.channels;
    uint8_t* d_src = ws.buffer(Workspace::kSrc, image_bytes(src));
    uint8_t* d_dst = ws.buffer(Workspace::kDst, out);
    upload_image(ws, d_src, src);
    const Affine* d_inv = upload_inverses(ws, Ms);
    launch_warp_affine(d_src, src.height, src.width, src.channels, static_cast<long>(src.width) * src.channels, d_inv,
                       static_cast<int>(Ms.size()), size, d_dst, ws.stream());
    uint8_t* host = ws.pinned(Workspace::kDown, out);
    ws.download(host, d_dst, out, "download crops");
    ws.sync("warp_affine kernel");
    std::memcpy(dst, host, out);
}

void warp_affine_device(const DeviceImage& src, const std::vector<Affine>& Ms, int size, uint8_t* dst, void* stream) {
    require();
    if (!src.data || !dst) invalid("the frame and output pointers must not be null");
    check_warp_affine_args(src.height, src.width, src.channels, src.stride, Ms, size);
    check_crop_count(Ms.size());
    if (Ms.empty()) return;
    Workspace& ws = Workspace::current();
    follow(ws, stream);
    const Affine* d_inv = upload_inverses(ws, Ms);
    launch_warp_affine(src.data, src.height, src.width, src.channels, src.stride, d_inv, static_cast<int>(Ms.size()),
                       size, dst, ws.stream());
    ws.sync("warp_affine kernel");  // complete before the caller's stream reads dst
}

namespace {

// Both axes' tables of an area downscale in one upload (spans, then source indices, then weights).
struct DeviceAreaAxes {
    AreaAxis x, y;
};

DeviceAreaAxes upload_area_tables(Workspace& ws, const AreaTable& tx, const AreaTable& ty) {
    const size_t spans = (tx.span.size() + ty.span.size()) * sizeof(AreaSpan);
    const size_t entries = tx.src.size() + ty.src.size();
    const size_t bytes = spans + entries * (sizeof(int) + sizeof(float));
    uint8_t* h = ws.pinned(Workspace::kUp, bytes);
    char* d = ws.buffer<char>(Workspace::kAux, bytes);
    size_t at = 0;
    const auto put = [&](const void* data, size_t n) {
        std::memcpy(h + at, data, n);
        const size_t here = at;
        at += n;
        return d + here;
    };
    DeviceAreaAxes a;
    a.x.span = reinterpret_cast<const AreaSpan*>(put(tx.span.data(), tx.span.size() * sizeof(AreaSpan)));
    a.y.span = reinterpret_cast<const AreaSpan*>(put(ty.span.data(), ty.span.size() * sizeof(AreaSpan)));
    a.x.src = reinterpret_cast<const int*>(put(tx.src.data(), tx.src.size() * sizeof(int)));
    a.y.src = reinterpret_cast<const int*>(put(ty.src.data(), ty.src.size() * sizeof(int)));
    a.x.weight = reinterpret_cast<const float*>(put(tx.weight.data(), tx.weight.size() * sizeof(float)));
    a.y.weight = reinterpret_cast<const float*>(put(ty.weight.data(), ty.weight.size() * sizeof(float)));
    ws.upload(d, h, bytes, "upload area tables");
    return a;
}

}  // namespace

void area_resize(const ConstImageU8& src, const ImageU8& dst) {
    require();
    const bool half = check_area_resize_args(src.height, src.width, src.channels, dst.width, dst.height);
    Workspace& ws = Workspace::current();
    const size_t out = static_cast<size_t>(dst.height) * dst.width * src.channels;
    uint8_t* d_src = ws.buffer(Workspace::kSrc, image_bytes(src));
    uint8_t* d_dst = ws.buffer(Workspace::kDst, out);
    upload_image(ws, d_src, src);
    const long stride = static_cast<long>(src.width) * src.channels, dst_stride = static_cast<long>(dst.width) * src.channels;
    if (half) {
        launch_area_halve(d_src, src.channels, stride, dst.width, dst.height, d_dst, dst_stride, ws.stream());
    } else {
        const AreaTable tx = area_table(src.width, dst.width), ty = area_table(src.height, dst.height);
        const DeviceAreaAxes a = upload_area_tables(ws, tx, ty);
        launch_area_resize(d_src, src.channels, stride, a.x, a.y, dst.width, dst.height, d_dst, dst_stride, ws.stream());
    }
    ws.download(dst.data, d_dst, out, "download area resize");
    ws.sync("area_resize kernel");
}

void area_resize_device(const DeviceImage& src, uint8_t* dst, int dst_width, int dst_height, long dst_stride,
                        void* stream, int count, long src_step, long dst_step) {
    require();
    if (!src.data || !dst) invalid("the image and output pointers must not be null");
    const bool half = check_area_resize_args(src.height, src.width, src.channels, dst_width, dst_height);
    if (src.stride < static_cast<long>(src.width) * src.channels || dst_stride < static_cast<long>(dst_width) * src.channels)
        invalid("area_resize: rows overlap (a row stride below width x channels)");
    if (count < 1 || count > 65535) invalid("area_resize: 1 to 65535 images per call, got " + std::to_string(count));
    if (count > 1 && (src_step < src.stride * src.height || dst_step < dst_stride * dst_height))
        invalid("area_resize: images overlap (an image step below rows x row stride)");
    require_device_pointer(src.data, "area_resize's image");
    require_device_pointer(dst, "area_resize's output");
    Workspace& ws = Workspace::current();
    follow(ws, stream);
    if (half) {
        launch_area_halve(src.data, src.channels, src.stride, dst_width, dst_height, dst, dst_stride, ws.stream(), count,
                          src_step, dst_step);
    } else {
        const AreaTable tx = area_table(src.width, dst_width), ty = area_table(src.height, dst_height);
        const DeviceAreaAxes a = upload_area_tables(ws, tx, ty);
        launch_area_resize(src.data, src.channels, src.stride, a.x, a.y, dst_width, dst_height, dst, dst_stride,
                           ws.stream(), count, src_step, dst_step);
    }
    ws.sync("area_resize kernel");  // complete before the caller's stream reads dst
}

}  // namespace mf::cuda
