"""Pass 1 of a clip: the subject detected and tracked frame by frame, then decided over the whole
clip, into the mask provider pass 2 blurs with (:class:`mime_fast.landmarks.DetectedLandmarks`).

:class:`SubjectDetection` is fed the decoded frames by a caller that decodes the clip itself
(:func:`mime_fast.build_subsets`, on the pass that encodes FM and VMM); :func:`detect_subject`
decodes the clip on its own.  Per frame: the camera shots (:mod:`.shots`), the subject tracker
(:mod:`.tracking`) and, for ``faces="all"``, every face (:mod:`.all_faces`); at the end the gaps
filled and the faces nobody could tell from him decided (:mod:`.gaps`, :mod:`.decision`).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ..detect.stacks import default_stack
from ..landmarks import DetectedFaces, DetectedLandmarks
from ..media import iter_display_frames, prefetch, probe
from ..options import DETECT_DEFAULTS as _D, check_policies, hold_frames
from .all_faces import AllFaceTracker
from .shots import ShotDetector
from .tracking import SubjectTracker

__all__ = ["SubjectDetection", "detect_subject"]


class SubjectDetection:
    """:func:`detect_subject` fed one frame at a time, for a caller that decodes the clip itself
    (:func:`mime_fast.build_subsets` feeds it the frames of the pass that encodes FM and VMM, the
    subsets that need no mask): ``feed(rgb)`` once per decoded source frame in presentation order,
    then ``result()`` once.  Arguments as in :func:`detect_subject`; ``info``: the clip's
    :class:`mime_fast.media.SourceInfo` (its frame rate turns ``hold_s`` into frames); ``device``:
    where the default stack's models run (:func:`default_stack`; ignored with ``stack=``);
    ``faces="all"``: every face is tracked too (:class:`mime_fast.subject.AllFaceTracker`) and the
    result is a :class:`DetectedFaces`."""

    def __init__(self, info, *, stack=None, hold_s: float = _D.hold_s, detect_size: int | None = _D.detect_size,
                 detect_every: int = _D.detect_every, margin: float = _D.hull_margin_frac, timers: dict | None = None,
                 device: str = "cpu", faces: str = _D.faces, undecided: str = _D.undecided,
                 schedule: str = _D.schedule):
        rate = info.average_rate or (info.video_frames / float(info.duration) if info.duration else 30.0)
        self.hold_frames = hold_frames(hold_s, rate)
        stack = default_stack(device) if stack is None else stack
        #: the model stack's name ("paper", "offline" or, with device="cuda", "offline-torch")
        self.stack_name = getattr(stack, "name", type(stack).__name__)
        #: whether the stack reads frames on the GPU (the torch stack on CUDA): a caller that
        #: decodes on NVDEC feeds it the frames there (``torch_ops.DeviceFrame``), not host RGB
        self.device_frames = bool(getattr(stack, "device_frames", False))
        self._tracker = SubjectTracker(stack, hold_frames=self.hold_frames,
                                       detect_size=detect_size, detect_every=detect_every, margin=margin,
                                       timers=timers, schedule=schedule)
        self._shots = ShotDetector(float(rate))
        self._timers = self._tracker.timers
        self._tracks: list = []
        check_policies(faces, undecided)
        self._mask_undecided = undecided == "mask"
        self._all = None
        if faces == "all":
            self._all = AllFaceTracker(stack, hold_frames=self.hold_frames, detect_every=detect_every,
                                       margin=margin, timers=self._timers)

    @staticmethod
    def prepare(rgb: np.ndarray) -> tuple:
        """What :meth:`feed` computes from the frame alone (its shot features,
        :meth:`~mime_fast.subject.shots.ShotDetector.features`): a caller that runs :meth:`feed` on
        a thread of its own computes this ahead on its own thread and hands it over with the frame."""
        return ShotDetector.features(rgb)

    def feed(self, rgb: np.ndarray, prepared: tuple | None = None) -> None:
        """Track the subject in the next decoded frame (``H x W x 3`` RGB, display orientation: a
        numpy array, or, where :attr:`device_frames`, a ``torch_ops.DeviceFrame`` on the GPU),
        camera shots detected on the way (:mod:`mime_fast.subject.shots`); ``prepared``: the
        frame's :meth:`prepare`, when computed ahead."""
        t = time.perf_counter()
        cut = self._shots.feed(rgb, prepared)
        if cut:
            self._tracker.new_shot(self._shots.returns_to, self._shots.return_map, self._shots.return_support)
            if self._all is not None:
                self._all.new_shot()
        elif self._shots.returned_late:
            self._tracker.returns(self._shots.returns_to, self._shots.return_map, self._shots.return_support)
        self._timers["shots"] = self._timers.get("shots", 0.0) + time.perf_counter() - t
        self._tracks.append(self._tracker.update(rgb))
        if self._all is not None:
            self._all.update(rgb, self._tracker, self._tracks[-1])

    def result(self) -> DetectedLandmarks:
        """The provider for every frame fed (gaps filled inside each shot; see
        :func:`mime_fast.subject.fill_gaps`)."""
        shots = self._shots.finish()
        tracks, stats = self._tracker.finish(self._tracks, shots=shots)
        if self._all is None:
            hulls = self._tracker.undecided_hulls(len(tracks), shots) if self._mask_undecided else None
            return DetectedLandmarks(tracks, stats, hulls)
        return DetectedFaces(tracks, stats, self._all.finish(len(tracks), shots), self._all.count)


def detect_subject(src, info=None, *, stack=None, hold_s: float = _D.hold_s, detect_size: int | None = _D.detect_size,
                   detect_every: int = _D.detect_every, margin: float = _D.hull_margin_frac, timers: dict | None = None,
                   device: str = "cpu", faces: str = _D.faces, undecided: str = _D.undecided,
                   schedule: str = _D.schedule, progress: Callable[[int], None] | None = None) -> DetectedLandmarks:
    """Detect and track the primary subject of clip ``src`` (one decode pass, no output written).
    ``progress(1)``, when given, is called after each source frame.

    ``stack``: model stack (default :func:`default_stack` for ``device``); ``hold_s``: how long (seconds of source
    video, rounded up to frames) a subject that is present but not detected stays masked on each
    side of a detection (:func:`mime_fast.subject.fill_gaps`, default 0.5 s: 15 frames at 30 fps);
    ``detect_size``, ``detect_every``, ``margin`` (a fraction of the face size): see
    :class:`mime_fast.subject.SubjectTracker`; the defaults are :class:`mime_fast.options.DetectOptions`'s.

    Why the masks come from a pass of their own, before any blurred frame is encoded: the masks of
    the whole clip are then known before the first face frame is written, so (a)
    ``fsm_kernel="auto"`` keeps its rule (the median face height over every frame with the
    subject, not a guess from the first frame), (b) a clip without a subject is known before its
    face subsets are written, and (c) a gap in the detections can be *interpolated* between the
    hulls on both sides and a subject that is present before its first detection is masked too (a
    streaming pass could only hold the past).  :func:`mime_fast.build_subsets` hides the cost: it
    runs this pass (:class:`SubjectDetection`) on the same decode that encodes FM and VMM, which
    need no mask, and encodes the face subsets in a second pass.  Memory is one hull (468 points)
    per frame.

    ``faces="all"``: every face the detector finds is tracked and masked too
    (:class:`mime_fast.subject.AllFaceTracker`); returns a :class:`DetectedFaces`.
    ``undecided``: ``"mask"`` (default) or ``"leave"`` the faces that could be the subject where
    identity cannot tell which is (:class:`mime_fast.options.DetectOptions`).
    """
    if info is None:
        info = probe(src)
    det = SubjectDetection(info, stack=stack, hold_s=hold_s, detect_size=detect_size, detect_every=detect_every,
                           margin=margin, timers=timers, device=device, faces=faces, undecided=undecided,
                           schedule=schedule)
    # decoding and RGB conversion run on their own thread, beside the models
    for _, _, rgb in prefetch(iter_display_frames(src, info), 4):
        det.feed(rgb)
        if progress is not None:
            progress(1)
    return det.result()
