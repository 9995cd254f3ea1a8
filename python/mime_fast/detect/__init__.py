"""Who to blur: face / person models (:mod:`mime_fast.detect.models`) and primary-subject selection
(:mod:`mime_fast.detect.selection`).

Quick use::

    from mime_fast.detect import load_offline_stack, detect_candidates, select_primary_subject
    stack = load_offline_stack()
    faces, lmk, persons = detect_candidates(stack, frame_rgb)
    choice = select_primary_subject(frame_rgb, faces, lmk, persons)
    choice.index, choice.terms  # winner and the per-term breakdown of every candidate
"""

from __future__ import annotations

from . import models, selection, tracking
from .models import *  # noqa: F403 - the interface, result types and the offline stack
from .selection import *  # noqa: F403 - the score terms and select_primary_subject
from .tracking import *  # noqa: F403 - SubjectTracker, fill_gaps, TrackingStats

__all__ = [*models.__all__, *selection.__all__, *tracking.__all__]
