#!/usr/bin/env bash
# On a GPU machine, from the repository root: build the compiled core with the CUDA kernels, then
# run one of the checks below. Results and logs go to $OUT (default /tmp/gpu-out); a device call
# brings back at most 8 files from there, so each target leaves few. Wheels that the machine lacks
# (PyAV, PyNvVideoCodec) may come unpacked in .gpu/site.tar.xz, the real clips in .gpu/media/ and
# model files in .gpu/models/: all made here by bench/make_gpu_bundle.sh (carry ".gpu").
#
#   bash bench/gpu_check.sh [lease|all|tests|suite|sanitize|bench|models|pipeline|pipeline-diag] [pytest args...]
#
# The core's CUDA streams do not block on the legacy default stream (since 2026-11-24; never run on a
# GPU before that session's note): where the CUDA tests fail on bytes, run them again with
# MIME_FAST_BLOCKING_STREAM=1 (the blocking stream of before) to tell a stream-ordering fault.
#
# A task lent a GPU has 15 minutes of device time in all (the machine's start, about 1-3 minutes,
# included) and one call runs 10 minutes at most: `lease` is the one call such a task should make.
#   lease          issue 12's checks in order of worth, each under the time left of LEASE_S seconds
#                  (default 480, the build included; the rest of the lease is the machine's start
#                  and a warm rerun): the CUDA tests (-m cuda: operators, NVDEC against PyAV, the
#                  GPU path's bytes against the CPU's, device memory over many clips; 200 s at
#                  most, so a hung test cannot take the benchmark's time), the pipeline benchmark's
#                  target contenders in the order gpu, encoders, no_encode, cpu
#                  ($OUT/pipeline-cuda.json, written after each), then the torch stack's CUDA cases
#                  (-k cuda: the models within their tolerances, CUDA graphs, the broker); with
#                  LEASE_STEPS naming it, `real` too: issue 37's ratio on the GPU (bench_real.py
#                  --device cuda on the 720p real clips, 1 repeat, about 2-4 minutes: $OUT/real-cuda.json;
#                  LEASE_STEPS="cuda real" is that issue's lease). A step
#                  that does not fit in the time left is skipped; $OUT/lease.txt says what ran, its
#                  exit status and time, and what was skipped. Rerun on the warm machine with the
#                  steps left (LEASE_STEPS="torch" LEASE_S=200, say): the build is then incremental.
#                  The session's plan: here `bash bench/make_gpu_bundle.sh` (about 1.5 minutes, 54 MB);
#                  then one device run of `bash bench/gpu_check.sh lease` with carry [".gpu"] and
#                  timeout_s 560; copy pipeline-cuda.json from its files to bench/results/.
# The other targets each fit one device call (10 minutes at most, the build included); they were
# planned for a longer lease, and together take about 25 minutes:
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
started=$(date +%s)

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
if [ "$what" = lease ]; then
    deadline=$(( started + ${LEASE_S:-480} ))
    steps=${LEASE_STEPS:-cuda pipeline torch}
    : >"$OUT/lease.txt"
    # step NAME NEEDS CAP CMD...: CMD under `timeout` of the time left, at most CAP seconds (SIGINT
    # first: pytest then prints its summary, the benchmark keeps the JSON of the contenders done; a
    # hung test cannot take the benchmark's time), its output in $OUT/NAME.log (the last lines shown),
    # skipped when less than NEEDS seconds are left; one line per step in lease.txt
    step() {
        local name=$1 need=$2 cap=$3 left t rc
        shift 3
        left=$(( deadline - $(date +%s) ))
        if [ "$left" -lt "$need" ]; then
            echo "$name: skipped, ${left} s left of LEASE_S (needs about ${need} s)" | tee -a "$OUT/lease.txt"
            return 0
        fi
        [ "$left" -gt "$cap" ] && left=$cap
        log "lease step $name (at most ${left} s)"
        t=$(date +%s)
        timeout --signal=INT --kill-after=20 "$left" "$@" >"$OUT/$name.log" 2>&1
        rc=$?
        tail -15 "$OUT/$name.log"
        echo "$name: exit $rc after $(( $(date +%s) - t )) s$([ $rc -eq 124 ] && echo ", stopped after ${left} s")" |
            tee -a "$OUT/lease.txt"
        return $rc
    }
    for s in $steps; do
        case $s in
        cuda)  # every test marked cuda: operators on the device, NVDEC, the GPU path's outputs
            # shellcheck disable=SC2086
            step cuda 60 200 env MIME_FAST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider -rs -m cuda \
                $GPU_TESTS || failed=1 ;;
        pipeline)  # the issue's JSON; cpu last: it needs no GPU and the ratio needs the other two
            step pipeline 150 600 bash -c 'cd bench && exec python3 bench_pipeline_cuda.py --device cuda \
                --contenders gpu,encoders,no_encode,cpu --result "$0/pipeline"' "$OUT" || failed=1 ;;
        real)  # issue 37 on the GPU: the real 720p clips end to end against the encoders alone
            step real 120 300 bash -c 'cd bench && python3 bench_real.py --device cuda --only \
                crowd@720p,two_people_hug@720p,arm_wrestling@720p,cut_sequence@720p && cp results/real-cuda.json "$0/"' \
                "$OUT" || failed=1 ;;
        torch)  # the torch stack's cases on cuda (parametrised, not marked): models within tolerance
            step torch 60 600 env MIME_FAST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider -rs -k cuda \
                tests/test_torch_models.py tests/test_torch_hog.py tests/test_cuda_graphs.py tests/test_batching.py \
                || failed=1 ;;
        *) echo "lease: unknown step $s (cuda, pipeline, real, torch)" | tee -a "$OUT/lease.txt"; failed=1 ;;
        esac
    done
    log "lease: $(( $(date +%s) - started )) s of LEASE_S=${LEASE_S:-480}"
fi
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
