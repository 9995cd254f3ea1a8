#!/usr/bin/env bash
# On a GPU machine, from the repository root: build the compiled core with the CUDA kernels, run
# the test suite with CUDA required, and the GPU benchmarks. Results and logs go to $OUT (default
# /tmp/gpu-out). Wheels that the machine lacks (PyAV, PyNvVideoCodec) may come unpacked in
# .gpu/site.tar.xz, the real clips in .gpu/media/ and model files in .gpu/models/: all made here by
# bench/make_gpu_bundle.sh (carry ".gpu").
#
#   bash bench/gpu_check.sh [tests|sanitize|bench|all|models|pipeline] [pytest args...]
#
# Not part of "all" (each a device call of its own, each a few minutes): "models" runs the face
# models on torch with and without CUDA graphs (bench_models.py) and profiles one clip
# (profile_gpu_clip.py on the crowd: stages, CUDA runtime calls per frame, graph counts);
# "pipeline" runs the corpus benchmark with 8 clips per process beside one per process
# (bench_pipeline_cuda.py: GPU path, CPU path, libx264 alone, no-encode with and without graphs,
# workers_ready_s). Their JSON results and the profile land in $OUT.
set -uo pipefail
what=${1:-all}
shift || true
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/gpu_check.log"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/gpu_check.log"
if [ -f .gpu/site.tar.xz ]; then
    mkdir -p /tmp/site && tar -xJf .gpu/site.tar.xz -C /tmp/site
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ -d .gpu/models ]; then
    # weights that travel: SFace with float16 initialisers (half the bytes) goes back to float32 here
    mkdir -p /tmp/models && cp .gpu/models/* /tmp/models/
    if [ -f /tmp/models/sface_fp16.onnx ]; then
        python3 - <<'PYEOF'
import numpy as np, onnx
from onnx import numpy_helper
m = onnx.load("/tmp/models/sface_fp16.onnx")
for init in m.graph.initializer:
    a = numpy_helper.to_array(init)
    if a.dtype == np.float16:
        init.CopyFrom(numpy_helper.from_array(a.astype(np.float32), init.name))
onnx.save(m, "/tmp/models/face_recognition_sface_2021dec.onnx")
PYEOF
    fi
    export MIME_FAST_MODEL_DIR=/tmp/models
fi
[ -d .gpu/media ] && export MIME_FAST_SHARED_MEDIA=$PWD/.gpu/media

log "build (sm_90)"
t0=$(date +%s)
cmake -S . -B /tmp/mf-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIME_FAST_CUDA=ON -DMIME_FAST_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" >"$OUT/build.log" 2>&1 &&
    cmake --build /tmp/mf-build -j"$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
cp /tmp/mf-build/_core*.so python/mime_fast/
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
log "built in $(( $(date +%s) - t0 )) s; $(python3 -c 'import mime_fast; print(mime_fast.cuda_status())')"

if [ "$what" = tests ] || [ "$what" = all ]; then
    log "tests (MIME_FAST_REQUIRE_CUDA=1)"
    MIME_FAST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider -rs "$@" 2>&1 | tee "$OUT/pytest.log" | tail -25
fi
if [ "$what" = sanitize ] || [ "$what" = all ]; then
    log "compute-sanitizer memcheck over the CUDA operator tests"
    compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 \
        python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda.py tests/test_blur_hull_yuv420.py \
        tests/test_warp_affine.py tests/test_area_resize.py tests/test_nvdec.py 2>&1 |
        tail -6 | tee -a "$OUT/gpu_check.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    log "benchmarks"
    (cd bench && for b in bench_blur_hull_yuv420.py bench_blur_in_mask.py bench_gaussian_blur.py \
        bench_warp_affine.py bench_area_resize.py; do
        python3 "$b" --device cuda --repeats 40 2>&1 | tail -4
    done) | tee -a "$OUT/gpu_check.log"
    cp bench/results/*-cuda.json "$OUT/" 2>/dev/null
fi
if [ "$what" = models ]; then
    log "models: torch with and without CUDA graphs; the crowd profiled"
    (cd bench && python3 bench_models.py --device cuda 2>&1 | tail -12) | tee -a "$OUT/gpu_check.log"
    crowd=${MIME_FAST_SHARED_MEDIA:-$PWD/../shared/media}/crowd_1080p.mp4
    [ -f "$crowd" ] && (cd bench && python3 profile_gpu_clip.py "$crowd" --device cuda >"$OUT/profile_crowd.txt" 2>&1;
        head -40 "$OUT/profile_crowd.txt") | tee -a "$OUT/gpu_check.log"
    cp bench/results/models-cuda.json "$OUT/" 2>/dev/null
fi
if [ "$what" = pipeline ]; then
    log "pipeline: the corpus benchmark"
    (cd bench && python3 bench_pipeline_cuda.py --device cuda --clips-per-process 8 2>&1 | tail -30) |
        tee -a "$OUT/gpu_check.log"
    cp bench/results/pipeline-cuda.json "$OUT/" 2>/dev/null
fi
