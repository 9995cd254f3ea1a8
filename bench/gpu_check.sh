#!/usr/bin/env bash
# On a GPU machine, from the repository root: build the compiled core with the CUDA kernels, then
# run one of the checks below. Results and logs go to $OUT (default /tmp/gpu-out); a device call
# brings back at most 8 files from there, so each target leaves few. Wheels that the machine lacks
# (PyAV, PyNvVideoCodec) may come unpacked in .gpu/site.tar.xz, the real clips in .gpu/media/ and
# model files in .gpu/models/: all made here by bench/make_gpu_bundle.sh (carry ".gpu").
#
#   bash bench/gpu_check.sh [all|tests|suite|sanitize|bench|models|pipeline|pipeline-diag] [pytest args...]
#
# The core's CUDA streams do not block on the legacy default stream (since 2026-11-24; never run on a
# GPU before that session's note): where the CUDA tests fail on bytes, run them again with
# MIME_FAST_BLOCKING_STREAM=1 (the blocking stream of before) to tell a stream-ordering fault.
#
# Each target is sized for one device call (10 minutes at most, the build included):
#   tests          the test files that run CUDA, torch on CUDA or NVDEC (GPU_TESTS below), with
#                  MIME_FAST_REQUIRE_CUDA=1 (pytest args replace the file list);
#   all            tests, then compute-sanitizer memcheck over the CUDA operator tests, then the
#                  operator benchmarks (their JSON in $OUT/bench-results.tar);
#   suite          the whole suite with MIME_FAST_REQUIRE_CUDA=1; it takes about as long as a call
#                  may, so give it half the files at a time: `suite tests/test_[a-m]*.py`, then
#                  `suite tests/test_[n-z]*.py`;
#   models         the face models on torch with and without CUDA graphs (bench_models.py) and one
#                  clip profiled (profile_gpu_clip.py on the crowd: stages, CUDA runtime calls per
#                  frame, graph counts);
#   pipeline       the corpus benchmark's four contenders that its targets compare (CPU path, GPU
#                  path, libx264 alone, no-encode): $OUT/pipeline-cuda.json, written after each;
#   pipeline-diag  its other contenders (one process; host RGB frames; no CUDA graphs; 8 clips per
#                  process): $OUT/pipeline_diagnostics-cuda.json.
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
if [ -d .gpu/media ]; then
    export MIME_FAST_SHARED_MEDIA=$PWD/.gpu/media MIME_FAST_MEDIA_DIR=$PWD/.gpu/media  # (the tests read either)
fi
export PYTHONUNBUFFERED=1
touch "$OUT/.start"  # results newer than this are this call's

log "build (sm_90)"
t0=$(date +%s)
cmake -S . -B /tmp/mf-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIME_FAST_CUDA=ON -DMIME_FAST_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" >"$OUT/build.log" 2>&1 &&
    cmake --build /tmp/mf-build -j"$(nproc)" >>"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; rm -f "$OUT/.start"; exit 1; }
cp /tmp/mf-build/_core*.so python/mime_fast/
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
log "built in $(( $(date +%s) - t0 )) s; $(python3 -c 'import mime_fast; print(mime_fast.cuda_status())')"

GPU_TESTS="tests/test_cuda.py tests/test_blur_hull_yuv420.py tests/test_warp_affine.py tests/test_area_resize.py
    tests/test_nvdec.py tests/test_cuda_graphs.py tests/test_batching.py tests/test_torch_models.py
    tests/test_torch_hog.py tests/test_subsets.py tests/test_options.py tests/test_devices.py"
new_results() { find bench/results -name '*-cuda.json' -newer "$OUT/.start" -printf '%f\n'; }

failed=0  # the exit status: 1 when the tests failed
if [ "$what" = tests ] || [ "$what" = all ]; then
    log "tests (MIME_FAST_REQUIRE_CUDA=1): ${*:-the GPU test files}"
    # shellcheck disable=SC2086
    [ $# -eq 0 ] && set -- $GPU_TESTS  # (pytest args as given, quoted: -k "a and not b" stays one)
    MIME_FAST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider -rs "$@" 2>&1 |
        tee "$OUT/pytest.log" | tail -25 || failed=1
fi
if [ "$what" = suite ]; then
    log "the whole suite (MIME_FAST_REQUIRE_CUDA=1): ${*:-every file}"
    MIME_FAST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider -rs "$@" 2>&1 | tee "$OUT/pytest.log" |
        tail -25 || failed=1
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
    new=$(new_results)
    # shellcheck disable=SC2086
    [ -n "$new" ] && tar -cf "$OUT/bench-results.tar" -C bench/results $new
fi
if [ "$what" = models ]; then
    log "models: torch with and without CUDA graphs; the crowd profiled"
    (cd bench && python3 bench_models.py --device cuda 2>&1 | tail -12) | tee -a "$OUT/gpu_check.log"
    cp bench/results/models-cuda.json "$OUT/" 2>/dev/null
    crowd=${MIME_FAST_SHARED_MEDIA:-$PWD/../shared/media}/crowd_1080p.mp4
    [ -f "$crowd" ] && (cd bench && python3 profile_gpu_clip.py "$crowd" --device cuda >"$OUT/profile_crowd.txt" 2>&1;
        head -40 "$OUT/profile_crowd.txt") | tee -a "$OUT/gpu_check.log"
fi
if [ "$what" = pipeline ]; then
    log "pipeline: the corpus benchmark's targets (CPU path, GPU path, libx264 alone, no-encode)"
    (cd bench && python3 bench_pipeline_cuda.py --device cuda --contenders cpu,gpu,encoders,no_encode \
        --result "$OUT/pipeline" 2>&1) | tee "$OUT/pipeline.log" | tail -30
fi
if [ "$what" = pipeline-diag ]; then
    log "pipeline: the diagnostic contenders"
    (cd bench && python3 bench_pipeline_cuda.py --device cuda --clips-per-process 8 \
        --contenders no_encode_1,no_encode_host_frames,no_encode_eager,gpu_shared,no_encode_shared \
        --result "$OUT/pipeline_diagnostics" 2>&1) | tee "$OUT/pipeline_diagnostics.log" | tail -30
fi
rm -f "$OUT/.start"
exit "$failed"
