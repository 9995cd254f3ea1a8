"""Mask providers: where the subject's face is, per decoded source frame.

A provider answers, for each decoded source frame index (0-based, presentation order, counting every
frame the decoder outputs before frame-rate standardisation), either an ``(N, 2)`` float32 array of
``(x, y)`` points in pixels of the *displayed* frame at source resolution (rotation applied, before
any odd-size crop) or ``None`` when the subject is absent.  The hull of the points is what gets
blurred.

Providers implement :class:`MaskProvider` (``points(index)``) and may expose ``num_frames`` (total
frames they describe, ``None`` if unknown) and ``face_heights()`` (per-frame hull heights, used by
the ``fsm_kernel="auto"`` rule).

Built-in providers:

* :class:`ArrayLandmarks` from an in-memory ``(frames, N, 2)`` array; a frame whose points are all
  NaN is absent, NaN points inside a present frame are ignored (a frame with fewer than 3 finite
  points is absent; an empty ``(frames, 0, 2)`` array, or one all NaN, says the subject is in no
  frame: :func:`mime_fast.build_subsets` then skips the face subsets with reason "no subject", as
  when detection finds nobody).
* :func:`load_landmarks` from ``.npz`` (key ``"landmarks"``) or ``.json`` (either a list of frames
  -- each ``null`` or a list of ``[x, y]`` -- or an object with key ``"landmarks"`` holding it).
* :func:`as_provider` turns any of: provider, array, path into a provider.
* :func:`detect_subject` (the default of :func:`mime_fast.build_subsets` when no landmarks are
  given): a :class:`DetectedLandmarks` provider from a detection + tracking pass over the clip with
  the offline model stack (:mod:`mime_fast.detect`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["MaskProvider", "ArrayLandmarks", "DetectedLandmarks", "load_landmarks", "as_provider", "detect_subject",
           "SubjectDetection", "default_stack"]


@runtime_checkable
class MaskProvider(Protocol):
    """Per-frame subject points.  ``points(i)`` -> ``(N, 2)`` float32 or ``None``."""

    num_frames: int | None

    def points(self, index: int) -> np.ndarray | None: ...


class ArrayLandmarks:
    """Provider over a ``(frames, N, 2)`` array (NaN rows = subject absent)."""

    def __init__(self, landmarks):
        a = np.asarray(landmarks, dtype=np.float32)
        if a.ndim != 3 or a.shape[2] != 2:
            raise ValueError(f"landmarks must have shape (frames, N, 2), got {a.shape}")
        if a.shape[1] < 3 and np.isfinite(a).any():
            raise ValueError(f"landmarks need at least 3 points per frame, got {a.shape[1]}")
        self._a = a
        self.num_frames = a.shape[0]

    def __len__(self) -> int:
        return self._a.shape[0]

    def points(self, index: int) -> np.ndarray | None:
        if index < 0 or index >= self._a.shape[0]:
            return None
        p = self._a[index]
        ok = np.isfinite(p).all(axis=1)
        if ok.sum() < 3:
            return None
        return np.ascontiguousarray(p if ok.all() else p[ok])

    def face_heights(self) -> np.ndarray:
        """Per-frame ``max(y) - min(y)`` of the finite points (NaN where absent)."""
        if self._a.shape[1] == 0:
            return np.full(self._a.shape[0], np.nan)
        with np.errstate(invalid="ignore"), _nan_ok():
            return np.nanmax(self._a[:, :, 1], axis=1) - np.nanmin(self._a[:, :, 1], axis=1)


class _nan_ok:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


def _from_json(obj) -> np.ndarray:
    if isinstance(obj, dict):
        if "landmarks" not in obj:
            raise ValueError('JSON landmarks object needs a "landmarks" key')
        obj = obj["landmarks"]
    if not isinstance(obj, list):
        raise ValueError("JSON landmarks must be a list of frames")
    n = max((len(f) for f in obj if f), default=0)
    if 0 < n < 3:
        raise ValueError("JSON landmarks need at least 3 points per frame with a face")
    a = np.full((len(obj), max(n, 3), 2), np.nan, np.float32)  # no face in any frame: all absent
    for i, f in enumerate(obj):
        if f:
            p = np.asarray(f, dtype=np.float32).reshape(-1, 2)
            a[i, : len(p)] = p
    return a


def load_landmarks(path) -> ArrayLandmarks:
    """Load an ``.npz`` (key ``landmarks``) or ``.json`` landmarks file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with np.load(path) as z:
            if "landmarks" not in z:
                raise ValueError(f"{path}: NPZ has no 'landmarks' array (keys: {sorted(z.keys())})")
            return ArrayLandmarks(z["landmarks"])
    if suffix == ".json":
        return ArrayLandmarks(_from_json(json.loads(path.read_text())))
    if suffix == ".npy":
        return ArrayLandmarks(np.load(path))
    raise ValueError(f"{path}: landmarks file must be .npz, .json or .npy")


def as_provider(landmarks) -> MaskProvider:
    """Provider from a provider, an array, or a path (str/Path)."""
    if landmarks is None:
        raise ValueError("no landmarks given: use detect_subject(src) for automatic detection")
    if isinstance(landmarks, (str, Path)):
        return load_landmarks(landmarks)
    if isinstance(landmarks, np.ndarray) or isinstance(landmarks, (list, tuple)):
        return ArrayLandmarks(landmarks)
    if hasattr(landmarks, "points") and callable(landmarks.points):
        return landmarks
    raise TypeError(f"landmarks must be an array, a path or a provider with .points(i), got {type(landmarks).__name__}")


# --------------------------------------------------------------------------------------------------
# Detection + tracking provider


class DetectedLandmarks:
    """Provider from :func:`detect_subject`: per-frame hull polygons of the tracked subject.

    ``tracks``: one :class:`mime_fast.detect.FrameTrack` per decoded source frame; ``stats``: the
    :class:`mime_fast.detect.TrackingStats` (what :attr:`ClipResult.tracking` reports).
    ``face_heights()`` gives the subject's landmark height (before margins) on detected frames and
    NaN elsewhere, so ``fsm_kernel="auto"`` sees the face itself, not the grown mask.
    """

    def __init__(self, tracks, stats):
        self.tracks = list(tracks)
        self.stats = stats
        self.num_frames = len(self.tracks)
        self._cache: dict[int, np.ndarray | None] = {}

    def __len__(self) -> int:
        return self.num_frames

    def points(self, index: int) -> np.ndarray | None:
        if index < 0 or index >= self.num_frames:
            return None
        if index not in self._cache:
            if len(self._cache) > 8:
                self._cache.clear()
            self._cache[index] = self.tracks[index].hull()
        return self._cache[index]

    def face_heights(self) -> np.ndarray:
        return np.array([np.nan if t.height is None else t.height for t in self.tracks], np.float64)


_STACKS = None
_log = logging.getLogger(__name__)


def _load_stack(device: str):
    from .detect import load_stack, stack_choice

    if device == "cuda" and stack_choice() == "offline":
        try:
            from .detect.torch_models import load_torch_stack, torch_cuda_available
        except Exception as e:  # noqa: BLE001 - torch absent or broken: the CPU models
            _log.info("device='cuda': torch not importable (%s); the models run on the CPU", e)
        else:
            if torch_cuda_available():
                return load_torch_stack("cuda")
            _log.info("device='cuda': torch sees no CUDA device; the models run on the CPU")
    return load_stack()


def default_stack(device: str = "cpu"):
    """The model stack :func:`mime_fast.detect.load_stack` picks (``"auto"``: MIME's paper stack when
    its face models are found, else the offline stack; ``MIME_FAST_STACK`` overrides), loaded once
    per thread (the OpenCV DNN and dlib models are not safe to share between threads).

    ``device="cuda"``: where that choice is the offline stack and torch sees a CUDA device, the
    same models on the GPU (:func:`mime_fast.detect.torch_models.load_torch_stack`, name
    ``"offline-torch"``: the same selection and tracking within the tolerances its tests measure);
    otherwise the CPU stack.  ``"cpu"`` is always exactly the CPU stack.  The stack loaded is
    logged (``mime_fast.landmarks``, INFO) and is the ``name`` of the result."""
    global _STACKS
    import threading

    if _STACKS is None:
        _STACKS = threading.local()
    attr = "stack" if device == "cpu" else f"stack_{device}"
    st = getattr(_STACKS, attr, None)
    if st is None:
        st = _load_stack(device)
        setattr(_STACKS, attr, st)
        _log.info("detection models: %s stack (device=%s)", getattr(st, "name", "?"), device)
    return st


class SubjectDetection:
    """:func:`detect_subject` fed one frame at a time, for a caller that decodes the clip itself
    (:func:`mime_fast.build_subsets` feeds it the frames of the pass that encodes FM and VMM, the
    subsets that need no mask): ``feed(rgb)`` once per decoded source frame in presentation order,
    then ``result()`` once.  Arguments as in :func:`detect_subject`; ``info``: the clip's
    :class:`mime_fast.video.SourceInfo` (its frame rate turns ``hold_s`` into frames); ``device``:
    where the default stack's models run (:func:`default_stack`; ignored with ``stack=``)."""

    def __init__(self, info, *, stack=None, hold_s: float = 0.5, detect_size: int | None = 384,
                 detect_every: int = 3, margin: float = 0.12, timers: dict | None = None, device: str = "cpu"):
        import math

        from .detect import SubjectTracker
        from .detect.shots import ShotDetector

        rate = info.average_rate or (info.video_frames / float(info.duration) if info.duration else 30.0)
        self.hold_frames = max(1, int(math.ceil(hold_s * float(rate) - 1e-9)))
        stack = default_stack(device) if stack is None else stack
        #: the model stack's name ("paper", "offline" or, with device="cuda", "offline-torch")
        self.stack_name = getattr(stack, "name", type(stack).__name__)
        self._tracker = SubjectTracker(stack, hold_frames=self.hold_frames,
                                       detect_size=detect_size, detect_every=detect_every, margin=margin,
                                       timers=timers)
        self._shots = ShotDetector(float(rate))
        self._timers = self._tracker.timers
        self._tracks: list = []

    def feed(self, rgb: np.ndarray) -> None:
        """Track the subject in the next decoded frame (``H x W x 3`` RGB, display orientation),
        camera shots detected on the way (:mod:`mime_fast.detect.shots`)."""
        t = time.perf_counter()
        if self._shots.feed(rgb):
            self._tracker.new_shot()
        self._timers["shots"] = self._timers.get("shots", 0.0) + time.perf_counter() - t
        self._tracks.append(self._tracker.update(rgb))

    def result(self) -> DetectedLandmarks:
        """The provider for every frame fed (gaps filled inside each shot; see
        :func:`mime_fast.detect.fill_gaps`)."""
        tracks, stats = self._tracker.finish(self._tracks, shots=self._shots.finish())
        return DetectedLandmarks(tracks, stats)


def detect_subject(src, info=None, *, stack=None, hold_s: float = 0.5, detect_size: int | None = 384,
                   detect_every: int = 3, margin: float = 0.12, timers: dict | None = None,
                   device: str = "cpu") -> DetectedLandmarks:
    """Detect and track the primary subject of clip ``src`` (one decode pass, no output written).

    ``stack``: model stack (default :func:`default_stack` for ``device``); ``hold_s``: how long (seconds of source
    video, rounded up to frames) a subject that is present but not detected stays masked on each
    side of a detection (:func:`mime_fast.detect.fill_gaps`, default 0.5 s: 15 frames at 30 fps);
    ``detect_size``, ``detect_every``, ``margin``: see :class:`mime_fast.detect.SubjectTracker`.

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
    """
    from .video import iter_display_frames, prefetch, probe

    if info is None:
        info = probe(src)
    det = SubjectDetection(info, stack=stack, hold_s=hold_s, detect_size=detect_size, detect_every=detect_every,
                           margin=margin, timers=timers, device=device)
    # decoding and RGB conversion run on their own thread, beside the models
    for _, _, rgb in prefetch(iter_display_frames(src, info), 4):
        det.feed(rgb)
    return det.result()
