"""Mask providers: where the subject's face is, per decoded source frame.

Every provider, given (arrays, files) or detected, answers the one :class:`MaskProvider` interface
the pipeline reads, documented once, here; the detected ones hold what the tracking of
:mod:`mime_fast.subject` found with the models of :mod:`mime_fast.detect` (neither imported here).

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
* :class:`FacesLandmarks` (``faces="all"``): several faces per frame, from a list of per-face
  ``(frames, N, 2)`` arrays (``N`` may differ between faces) or one ``(frames, faces, N, 2)`` array
  (a ``.npz`` / ``.npy`` file may hold the latter); face 0 is the subject (``points(i)``, and the
  face heights ``fsm_kernel="auto"`` reads), NaN rows are absent as above.

Several faces per frame (``faces="all"``, :class:`mime_fast.subsets.Settings`): a provider that
also answers ``points_list(index)`` -> a list of ``(N, 2)`` arrays, one per face present (empty:
no face).  The mask of a frame is the union of their hulls.  A provider without ``points_list``
is one face (``[points(i)]``).
* :class:`DetectedLandmarks` / :class:`DetectedFaces`: what :func:`mime_fast.subject.detect_subject`
  (the default of :func:`mime_fast.build_subsets` when no landmarks are given) returns from its
  detection + tracking pass over the clip (:mod:`mime_fast.subject`, with the models of
  :mod:`mime_fast.detect`; :func:`mime_fast.detect.stacks.default_stack` loads them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .options import FACES, check_policies

__all__ = ["MaskProvider", "ArrayLandmarks", "DetectedLandmarks", "DetectedFaces", "FacesLandmarks", "FACES",
           "load_landmarks", "as_provider", "faces_list"]


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


class FacesLandmarks:
    """Provider of several faces per frame (``faces="all"``): ``faces`` is a list of per-face
    ``(frames, N, 2)`` arrays (``N`` may differ between faces) or one ``(frames, faces, N, 2)``
    array; each face as in :class:`ArrayLandmarks` (NaN rows: absent).  Face 0 is the subject:
    ``points(i)`` and ``face_heights()`` are its; ``points_list(i)`` gives every face present."""

    def __init__(self, faces):
        if isinstance(faces, np.ndarray) or not isinstance(faces, (list, tuple)):
            a = np.asarray(faces, dtype=np.float32)
            if a.ndim != 4 or a.shape[3] != 2:
                raise ValueError(f"landmarks of several faces must have shape (frames, faces, N, 2), got {a.shape}")
            faces = [a[:, k] for k in range(a.shape[1])]
        if not len(faces):
            raise ValueError("landmarks of several faces: no face given")
        self._faces = [ArrayLandmarks(f) for f in faces]
        counts = {f.num_frames for f in self._faces}
        if len(counts) != 1:
            raise ValueError(f"landmarks of several faces: every face needs the same frame count, got {sorted(counts)}")
        self.num_frames = counts.pop()
        #: faces present in at least one frame
        self.face_tracks = sum(any(f.points(i) is not None for i in range(self.num_frames)) for f in self._faces)

    def __len__(self) -> int:
        return self.num_frames

    def points(self, index: int) -> np.ndarray | None:
        return self._faces[0].points(index)

    def points_list(self, index: int) -> list[np.ndarray]:
        return [p for p in (f.points(index) for f in self._faces) if p is not None]

    def face_heights(self) -> np.ndarray:
        return self._faces[0].face_heights()


def _several_faces(landmarks) -> bool:
    """Whether in-memory ``landmarks`` hold several faces: a list of 3-D arrays, or a 4-D array."""
    if isinstance(landmarks, (list, tuple)):
        return len(landmarks) > 0 and all(isinstance(f, np.ndarray) and f.ndim == 3 for f in landmarks)
    return isinstance(landmarks, np.ndarray) and landmarks.ndim == 4


def faces_list(provider, index: int) -> list[np.ndarray]:
    """Every face's points in frame ``index``: ``provider.points_list(index)``, or for a provider of
    one face ``[points(index)]`` (``[]`` where absent)."""
    if hasattr(provider, "points_list"):
        return list(provider.points_list(index))
    p = provider.points(index)
    return [] if p is None else [p]


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


def _faces_from_json(obj) -> list[np.ndarray]:
    """One ``(frames, N, 2)`` array per face of a JSON landmarks document: one face (a list of
    frames, each a list of ``[x, y]`` points or empty/null; or ``{"landmarks": that}``), or several:
    ``{"faces": [face 0's frames, face 1's frames, ...]}`` (the same frame count each), or frames
    that each list their faces (``[[[x, y], ...], [[x, y], ...]]`` per frame: face k of every
    frame is face k; a frame with fewer faces lacks the last ones).  Face 0 is the subject."""
    if isinstance(obj, dict) and "faces" in obj:
        faces = obj["faces"]
        if not isinstance(faces, list) or not faces:
            raise ValueError('JSON "faces" must be a non-empty list of per-face frame lists')
        return [_from_json(f) for f in faces]
    frames = obj["landmarks"] if isinstance(obj, dict) and "landmarks" in obj else obj
    nested = isinstance(frames, list) and any(
        f and isinstance(f[0], list) and f[0] and isinstance(f[0][0], list) for f in frames if isinstance(f, list))
    if not nested:
        return [_from_json(obj)]
    count = max(len(f) for f in frames if f)
    return [_from_json([f[k] if f and k < len(f) else None for f in frames]) for k in range(count)]


def load_landmarks(path) -> ArrayLandmarks | FacesLandmarks:
    """Load an ``.npz`` (key ``landmarks``), ``.npy`` or ``.json`` landmarks file (an ``.npz`` /
    ``.npy`` array of shape ``(frames, faces, N, 2)``, or JSON with several faces
    (:func:`_faces_from_json`): :class:`FacesLandmarks`).  A file that cannot be used raises
    ``ValueError`` naming it (``OSError`` where it cannot be read)."""
    path = Path(path)
    try:
        return _load_landmarks(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - JSON, NPZ/NPY and shape errors alike: which file, then why
        said = str(exc) or type(exc).__name__
        if str(path) in said:
            raise
        raise ValueError(f"landmarks file {path}: {said}") from exc


def _load_landmarks(path: Path) -> ArrayLandmarks | FacesLandmarks:
    suffix = path.suffix.lower()
    if suffix in (".npz", ".npy"):  # (numpy takes anything else for a pickle, and says so)
        with open(path, "rb") as f:
            head = f.read(6)
        if not head.startswith(b"PK" if suffix == ".npz" else b"\x93NUMPY"):  # a zip archive, an .npy header
            raise ValueError(f"not an {suffix[1:].upper()} file ({'numpy.savez' if suffix == '.npz' else 'numpy.save'})")
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            if "landmarks" not in z:
                raise ValueError(f"{path}: NPZ has no 'landmarks' array (keys: {sorted(z.keys())})")
            a = z["landmarks"]
    elif suffix == ".json":
        faces = _faces_from_json(json.loads(path.read_text()))
        return ArrayLandmarks(faces[0]) if len(faces) == 1 else FacesLandmarks(faces)
    elif suffix == ".npy":
        a = np.load(path, allow_pickle=False)
    else:
        raise ValueError(f"{path}: landmarks file must be .npz, .json or .npy")
    return FacesLandmarks(a) if a.ndim == 4 else ArrayLandmarks(a)


def as_provider(landmarks, faces: str = "subject", undecided: str = "mask") -> MaskProvider:
    """Provider from a provider, an array, or a path (str/Path).

    ``faces="all"`` also takes several faces (:class:`FacesLandmarks`: a list of per-face
    ``(frames, N, 2)`` arrays, or a ``(frames, faces, N, 2)`` array or file); with ``"subject"``
    those are refused (``ValueError``: pass the subject's own array), and so is, with ``"all"``,
    the subject-only result of a detection run with ``faces="subject"``.  ``undecided="leave"``:
    a detection's undecided faces are not masked (:meth:`DetectedLandmarks.without_undecided`)."""
    if landmarks is None:
        raise ValueError("no landmarks given: use detect_subject(src) for automatic detection")
    check_policies(faces, undecided)
    if isinstance(landmarks, (str, Path)):
        prov = load_landmarks(landmarks)
    elif isinstance(landmarks, np.ndarray) or isinstance(landmarks, (list, tuple)):
        prov = FacesLandmarks(landmarks) if _several_faces(landmarks) else ArrayLandmarks(landmarks)
    elif hasattr(landmarks, "points") and callable(landmarks.points):
        prov = landmarks
    else:
        raise TypeError(
            f"landmarks must be an array, a path or a provider with .points(i), got {type(landmarks).__name__}")
    if faces == "subject" and isinstance(prov, FacesLandmarks):
        raise ValueError('landmarks of several faces need faces="all" (with faces="subject", give the '
                         "subject's (frames, N, 2) array)")
    if faces == "all" and isinstance(prov, DetectedLandmarks) and not isinstance(prov, DetectedFaces):
        raise ValueError('these landmarks are the subject\'s alone (detected with faces="subject"); '
                         'detect with faces="all"')
    if undecided == "leave" and isinstance(prov, DetectedLandmarks):
        prov = prov.without_undecided()
    return prov


# --------------------------------------------------------------------------------------------------
# Detection + tracking provider


class DetectedLandmarks:
    """Provider from :func:`detect_subject`: per-frame hull polygons of the tracked subject.

    ``tracks``: one :class:`mime_fast.subject.FrameTrack` per decoded source frame; ``stats``: the
    :class:`mime_fast.subject.TrackingStats` (what :attr:`ClipResult.tracking` reports).
    ``face_heights()`` gives the subject's landmark height (before margins) on detected frames and
    NaN elsewhere, so ``fsm_kernel="auto"`` sees the face itself, not the grown mask.
    """

    def __init__(self, tracks, stats, undecided: list[list[np.ndarray]] | None = None):
        self.tracks = list(tracks)
        self.stats = stats
        self.num_frames = len(self.tracks)
        self._cache: dict[int, np.ndarray | None] = {}
        if undecided is not None and len(undecided) != self.num_frames:
            raise ValueError(f"{len(undecided)} frames of undecided faces for {self.num_frames} frames of the subject")
        #: per frame, the masks of the faces that could be the subject where identity could not
        #: tell which is (:meth:`mime_fast.subject.SubjectTracker.undecided_hulls`); ``None``: none
        self.undecided = undecided if undecided is not None and any(undecided) else None

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

    def without_undecided(self) -> DetectedLandmarks:
        """The subject alone, his undecided neighbours not masked (``undecided="leave"``): the same
        tracks and statistics (``stats.undecided`` still counts the frames where he may show)."""
        if self.undecided is None or type(self) is not DetectedLandmarks:
            return self
        return DetectedLandmarks(self.tracks, self.stats)

    def points_list(self, index: int) -> list[np.ndarray]:
        """The masks of frame ``index``: the subject's hull (where he is masked) and those of the
        faces that could be his where identity could not tell which is."""
        subject = self.points(index)
        extra = self.undecided[index] if self.undecided is not None and 0 <= index < self.num_frames else []
        return ([] if subject is None else [subject]) + list(extra)


class DetectedFaces(DetectedLandmarks):
    """:func:`detect_subject` with ``faces="all"``: the subject (``points``, ``face_heights``,
    ``stats`` as :class:`DetectedLandmarks`) and every other face: ``points_list(i)`` is the
    subject's hull (where he is masked) and the hull of every face track there
    (:class:`mime_fast.subject.AllFaceTracker`).  ``face_tracks``: the face tracks found (the
    subject's own face is one of them).  Memory: one hull (its vertices, grown) per face and frame."""

    def __init__(self, tracks, stats, others: list[list[np.ndarray]], face_tracks: int):
        super().__init__(tracks, stats)  # (every face is masked here: no undecided ones)
        if len(others) != self.num_frames:
            raise ValueError(f"{len(others)} frames of faces for {self.num_frames} frames of the subject")
        self.others = others
        self.face_tracks = int(face_tracks)

    def points_list(self, index: int) -> list[np.ndarray]:
        if index < 0 or index >= self.num_frames:
            return []
        subject = self.points(index)
        return ([] if subject is None else [subject]) + list(self.others[index])
