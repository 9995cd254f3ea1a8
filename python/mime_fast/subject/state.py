"""What the subject tracker (:class:`mime_fast.subject.tracking.SubjectTracker`) knows between two
frames, in four parts, each read and written by the rules ``docs/subject-tracking.md`` numbers:

==============  ==================================================================================
``follow``      where he is: his last box and motion, the face track and mesh of his last match, his
                followed head, whether he was found for sure (docs/subject-tracking.md, 2. - 5.)
``identity``    who he is: the selection's embedding, the views of him kept while followed, his
                strong matches over the whole clip, the embedder's thresholds (3., 4., 7., 8.)
``shot``        the camera shot he is followed in: its first frame, where he stood in the shots a
                new one may return to, whether he was re-acquired weakly in it (6. - 8.)
``record``      what pass 1 keeps for the decision over the whole clip
                (:mod:`mime_fast.subject.decision`): the face taken for him in each frame, the
                faces masked as undecided, and the decisions
==============  ==================================================================================

The tracker keeps only its settings, the models, the frame index, the subject's phase
(:mod:`mime_fast.subject.lifecycle`), the face tracks and its statistics beside these.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .decision import SubjectObservation, TrackDecision

__all__ = ["Follow", "Identity", "PassRecord", "ShotState"]

_NEVER = -(10**9)  # a frame index before any frame


@dataclass
class Follow:
    """Where the subject is, as of the last frame."""

    box: np.ndarray | None = None  # his last matched face box
    vel: np.ndarray = field(default_factory=lambda: np.zeros(2))  # its centre's motion per frame
    vel_known: bool = False  # the velocity has been measured (two matches)
    last_seen: int | None = None  # the frame of that box
    size_ref: float | None = None  # his face size (the larger side of wh_ref)
    wh_ref: np.ndarray | None = None  # his face box's width and height, smoothed
    height: float | None = None  # his hull's height at the last match
    partial_run: int = 0  # consecutive frames matched on a partial face
    anchor: tuple | None = None  # (box, keypoints, landmarks) of his last full detection
    last_points: np.ndarray | None = None  # his landmarks in the previous frame (confident mesh)
    mesh_ok: bool = True  # whether the last mesh was confident
    present_at: int = _NEVER  # his last detection, full or partial
    present_box: np.ndarray | None = None
    subject_track: int | None = None  # stable id of the face track of his last detection
    frame_ids: np.ndarray | None = None  # stable face-track ids of this frame's detections
    taken: tuple[int, int] = (-1, -1)  # (frame, face index) of the last face accepted as his
    #: whether the face followed now was found for sure (selected, read strongly as him, or
    #: followed geometrically since): rule 2 of :mod:`mime_fast.subject.decision`
    sure: bool = False
    head: object | None = None  # HeadFlow following his head since his last match (rule 5)
    seed: tuple | None = None  # (index, frame, box) of his last match: where a head estimate starts
    last_detect: int = _NEVER  # the last frame the detector ran on
    detected_ids: list = field(default_factory=list)  # the face tracks of the faces found there
    crowded_at: int = _NEVER  # the last frame another face came near him

    def forget_motion(self) -> None:
        """Where he was going is forgotten (a new shot, a jump, another face confirmed as his): his
        velocity, the mesh anchor and landmarks followed from, the run of partial matches, and his
        followed head."""
        self.vel, self.vel_known = np.zeros(2), False
        self.anchor = self.last_points = None
        self.partial_run = 0
        self.head = self.seed = None

    def crowded(self, index: int, hold: int) -> bool:
        """Whether another face came near him within ``hold`` frames before frame ``index``."""
        return index - self.crowded_at <= hold


@dataclass
class Identity:
    """Who the subject is: what his faces read as, and the embedder's thresholds."""

    min_cos: float
    strong_cos: float
    min_score: float
    ref_emb: np.ndarray | None = None  # the selection's embedding
    last_emb: np.ndarray | None = None  # the last embedding accepted as his
    gallery: list = field(default_factory=list)  # views of him kept while followed, read (GALLERY_SIZE)
    #: views taken since the last were read: ``[crop, face, embedding or None]`` (read only where a
    #: search needs them)
    unread: deque = field(default_factory=deque)
    clip_views: list = field(default_factory=list)  # the same views over the whole clip (CLIP_VIEWS)
    his_embs: list = field(default_factory=list)  # (embedding, contrast) of his strong matches
    gallery_at: int = _NEVER  # the frame of the last view taken
    ref_hist: np.ndarray | None = None  # his body's colour histogram at the selection
    ref_contrast: float = 0.0  # the contrast of the selected face (face_contrast)


@dataclass
class ShotState:
    """The camera shot he is followed in, and the shots a new one may return to."""

    shot_start: int = 0  # the first frame of the current shot
    shot_starts: list[int] = field(default_factory=lambda: [0])  # the first frame of each shot
    #: first frame of a shot he was followed in up to its end -> his box at his last detection there
    shot_boxes: dict[int, np.ndarray] = field(default_factory=dict)
    returning: np.ndarray | None = None  # his box in the shot the current one returns to (rule 6)
    reframed: bool = False  # ... carried by the features of a re-framing
    return_from: int = 0  # the first frame the return is known at (a cut's, or after a dissolve)
    returning_at: dict[int, np.ndarray] = field(default_factory=dict)  # shot -> where a return puts him
    weak_shots: set[int] = field(default_factory=set)  # shots where he was re-acquired by a weak match
    #: he was re-acquired in this shot by a weak identity match, not yet confirmed by a strong one
    #: (rule 8): every other face of the frame is masked beside him
    unconfirmed: bool = False
    others_at: int = _NEVER  # the last frame where, unconfirmed, other faces were seen


@dataclass
class PassRecord:
    """What pass 1 keeps for the decision over the whole clip."""

    #: frame -> the face taken for him there
    his: dict[int, SubjectObservation] = field(default_factory=dict)
    #: frame -> the grown hulls of the faces that could be his where none could be told to be (rule 7)
    undecided: dict[int, list[np.ndarray]] = field(default_factory=dict)
    #: frame -> (first frame of its shot, boxes): the first undecided frame of a shot where he was
    #: not found before it, within ``hold_frames`` of the shot's start (held back to that start)
    undecided_back: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)
    undecided_shot: int = -1  # the shot (its first frame) of the last undecided frame
    undecided_ids: dict[int, list[int | None]] = field(default_factory=dict)  # frame -> their face tracks
    decisions: dict[int, TrackDecision] = field(default_factory=dict)  # face track -> its decision
    identified: set[tuple[int, int]] = field(default_factory=set)  # (frame, face track) made his by the decision
    detector_frames: list[int] = field(default_factory=list)  # the frames the detector ran on, in order
    run_every: int = 1  # the schedule's period between those runs (1: every frame)
