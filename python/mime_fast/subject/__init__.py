"""Whose face: the primary subject found, followed and decided over the whole clip (pass 1).

The data flow, module by module (the models they call are :mod:`mime_fast.detect`'s):

==================  ================================================================================
module              step
==================  ================================================================================
``detection``       pass 1: each decoded frame fed to the shots, the tracker (and, for
                    ``faces="all"``, every face); at the end the mask provider pass 2 blurs with
                    (:class:`~mime_fast.landmarks.DetectedLandmarks`): :class:`SubjectDetection`,
                    :func:`detect_subject`
``shots``           camera cuts, dissolves and returns to an earlier shot (:class:`ShotDetector`)
``selection``       who the subject is in a frame: MIME's four score terms (centrality 0.4, landmark
                    quality 0.3, body area 0.2, face scale 0.1), :func:`select_primary_subject`
``tracking``        :class:`SubjectTracker`: the frame's steps in order (advance, follow or observe,
                    associate, jump?, match, head); ``docs/subject-tracking.md`` says what each decides
``lifecycle``       the subject's phase at each frame (:class:`Phase`: unselected, followed, missed,
                    glimpsed, searching), decided in one place
``mesh_follow``     his face followed by its mesh between detector runs
``matching``        the gates, identity's thresholds and the rules where identity cannot decide, as
                    plain functions
``appearance``      body colours, the views of his face kept, how an embedding reads against his
``record``          the undecided faces and the whole-clip decision applied to them
``state``           what the tracker knows between frames, in four parts: where he is (``follow``), who
                    he is (``identity``), the shot (``shot``) and what pass 1 keeps (``record``)
``face_tracks``     the faces followed as tracks between detector runs (one embedding per track)
``geometry``        boxes and hulls: :class:`FrameTrack` (one frame's mask of him), :func:`grow_hull`
``head``            his head followed by optical flow where his face is not detected
``gaps``            :func:`fill_gaps`: holds and interpolations inside each shot; :class:`TrackingStats`
``decision``        :func:`decide_tracks`: the faces the tracker could not tell from him decided track
                    by track with the whole clip's evidence (subject, not subject, undecided)
``all_faces``       :class:`AllFaceTracker`: every face, for ``faces="all"``
==================  ================================================================================
"""

from __future__ import annotations

from .all_faces import ALL_FACES_DETECT_SIZE, ALL_FACES_MAX_MESHES, ALL_FACES_MESH_MIN_SIZE, AllFaceTracker
from .decision import SubjectObservation, TrackDecision, decide_tracks
from .detection import SubjectDetection, detect_subject
from .face_tracks import MIN_EMBED_SIZE, REEMBED_GROWTH, REEMBED_S, TRACK_GATE, TRACK_IOU, FaceTracks
from .gaps import HOLD_GROWTH, TrackingStats, fill_gaps
from .geometry import FrameTrack, grow_hull
from .head import HeadFlow
from .selection import (
    WEIGHTS, Selection, assign_bodies, body_area_term, centrality_term, detect_candidates, facial_scale_term,
    select_primary_subject, structural_quality_term
)
from .shots import Shot, ShotDetector
from .appearance import body_histogram
from .lifecycle import Phase
from .matching import (
    COMPETITOR_SCORE, CONTINUITY_IOU, GATE, MIN_COS, MIN_SCORE, NEAR, PARTIAL, STRONG_COS, W_EMBED, W_HIST
)
from .mesh_follow import MIN_MESH_QUALITY, TRACK_MAX_SCALE_CHANGE, TRACK_MAX_SHAPE_CHANGE, TRACK_MAX_SPEED, TRACK_RECENTRE
from .tracking import SubjectTracker, track_clip

__all__ = [
    # pass 1 (detection.py)
    "SubjectDetection", "detect_subject",
    # shots (shots.py) and selection (selection.py)
    "Shot", "ShotDetector", "WEIGHTS", "Selection", "assign_bodies", "body_area_term", "centrality_term",
    "detect_candidates", "facial_scale_term", "select_primary_subject", "structural_quality_term",
    # the tracker (tracking.py, lifecycle.py, matching.py, mesh_follow.py, appearance.py, face_tracks.py,
    # geometry.py, head.py)
    "Phase",
    "COMPETITOR_SCORE", "CONTINUITY_IOU", "GATE", "MIN_COS", "MIN_MESH_QUALITY", "MIN_SCORE", "NEAR", "PARTIAL",
    "STRONG_COS", "TRACK_MAX_SCALE_CHANGE", "TRACK_MAX_SHAPE_CHANGE", "TRACK_MAX_SPEED", "TRACK_RECENTRE",
    "W_EMBED", "W_HIST", "SubjectTracker", "body_histogram", "track_clip", "MIN_EMBED_SIZE", "REEMBED_GROWTH",
    "REEMBED_S", "TRACK_GATE", "TRACK_IOU", "FaceTracks", "FrameTrack", "grow_hull", "HeadFlow",
    # gaps and the whole-clip decision (gaps.py, decision.py)
    "HOLD_GROWTH", "TrackingStats", "fill_gaps", "SubjectObservation", "TrackDecision", "decide_tracks",
    # every face (all_faces.py)
    "ALL_FACES_DETECT_SIZE", "ALL_FACES_MAX_MESHES", "ALL_FACES_MESH_MIN_SIZE", "AllFaceTracker",
]
