"""The settings of a build, in typed option groups: each option is declared once, here.

Over 400 lines on purpose: the one declaration of every option (its group, type, default, check
and help) is the point of the module: :data:`FIELDS` and the CLI's flags are generated from these
groups and :class:`Settings` composes them, so splitting them would split the one table.

=============================  ====================================================================
group (``Settings.<group>``)   options (keyword / ``mime-fast build`` flag)
=============================  ====================================================================
:class:`EncodeOptions`         ``fps``, ``crf``, ``preset``, ``threads``, ``queue_size``,
(``encode``)                   ``keep_frames_mb``, ``fm_copy``
:class:`AudioOptions`          ``audio_rate`` (field ``rate``), ``audio_channels`` (``channels``)
(``audio``)
:class:`GateOptions`           ``min_height``, ``min_duration``, ``min_frames``
(``gate``)
:class:`MaskOptions`           ``fdm_kernel``, ``fsm_kernel``, ``feather_px``, ``margin_px``
(``mask``)
:class:`DetectOptions`         ``hold_s``, ``detect_size``, ``detect_every``, ``hull_margin_frac``,
(``detect``)                   ``faces``, ``schedule``, ``undecided``
:class:`DeviceOptions`         ``device``, ``nvdec``, ``device_frames``
(``compute``)
=============================  ====================================================================

Every group is a frozen dataclass that checks itself when it is made: a bad value is a
:class:`OptionError` (a ``ValueError``) naming the option, and ``device="cuda"`` where CUDA is
unavailable a ``RuntimeError``.  :class:`Settings` is the six groups together; it is what
:func:`mime_fast.build_subsets`, :func:`mime_fast.degrade`, :func:`mime_fast.corpus.run_corpus`
and the ``mime-fast build`` command take.  The options are also keywords of their own (the
"flat" names of the table; ``feather`` and ``margin`` are the older names of ``feather_px`` and
``margin_px``): ``Settings(crf=20, margin=2)`` builds the groups, an unknown keyword is a
``TypeError`` that suggests the nearest name, and ``settings.crf`` reads an option through its
group.  Units are in the names where two options could be confused: the face mask's
``margin_px`` grows every hull by pixels, the detector's ``hull_margin_frac`` grows a detected
face's hull by a fraction of that face's size.

:data:`FIELDS` lists every option with its group, type, default and one line of help:
``mime-fast build``'s flags are generated from it (``--kebab-case`` of the flat name, the default
stated in the help).

This module imports only the standard library and :mod:`mime_fast.spec` (the CUDA check of
``device="cuda"`` asks the package when it runs).
"""

import contextlib
import contextvars
import dataclasses
import difflib
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, get_args, get_origin

__all__ = [
    "AAC_RATES",
    "AudioOptions",
    "BYTE_NEUTRAL",
    "DetectOptions",
    "DETECT_DEFAULTS",
    "DeviceOptions",
    "EncodeOptions",
    "FIELDS",
    "FACES",
    "FSM_AUTO_MIN_FACE_HEIGHT",
    "UNDECIDED",
    "GateOptions",
    "MAX_KERNEL",
    "MaskOptions",
    "OptionError",
    "OptionField",
    "Settings",
    "X264_PRESETS",
    "check_kernel",
    "check_policies",
    "device_checked_elsewhere",
    "hold_frames",
]

Preset = Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
                 "placebo"]
#: libx264's presets (``EncodeOptions.preset``).
X264_PRESETS: tuple[str, ...] = get_args(Preset)
Faces = Literal["subject", "all"]
#: Whose faces are masked (``DetectOptions.faces``): ``"subject"`` (MIME: the tracked subject only)
#: or ``"all"`` (every detected face).
FACES: tuple[str, ...] = get_args(Faces)
Undecided = Literal["mask", "leave"]
#: What becomes of the faces that could be the subject where identity cannot tell which is
#: (``DetectOptions.undecided``): ``"mask"`` (fail closed) or ``"leave"``.
UNDECIDED: tuple[str, ...] = get_args(Undecided)
Schedule = Literal["mesh", "period"]
#: When the subject tracker's face detector runs (``DetectOptions.schedule``): ``"mesh"`` (every
#: frame but those where his face mesh follows him) or ``"period"`` (the default: every
#: ``detect_every`` frames while he is followed or searched for, his head followed by its motion
#: between, and at once on an event).
SCHEDULES: tuple[str, ...] = get_args(Schedule)


def check_policies(faces: str, undecided: str) -> None:
    """``ValueError`` unless ``faces`` and ``undecided`` are values of those options (:data:`FACES`,
    :data:`UNDECIDED`): what the functions that take them as plain arguments check
    (:func:`mime_fast.landmarks.as_provider`, :class:`mime_fast.subject.SubjectDetection`)."""
    if faces not in FACES:
        raise ValueError(f'faces must be "subject" or "all", got {faces!r}')
    if undecided not in UNDECIDED:
        raise ValueError(f'undecided must be "mask" or "leave", got {undecided!r}')


Device = Literal["cpu", "cuda"]
FsmKernel = Literal[55, 35, "auto"]
#: ``fsm_kernel="auto"``: 55 when the median face height is at least this many pixels, else 35.
FSM_AUTO_MIN_FACE_HEIGHT = 160.0


class OptionError(ValueError):
    """A bad option value: ``"<name> <problem>"``; ``name`` is the option's field name."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"{name} {problem}")
        self.name, self.problem = name, problem

    def renamed(self, name: str) -> "OptionError":
        """The same error under the name the caller used (a flat keyword, a flag)."""
        return OptionError(name, self.problem)


def _check(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise OptionError(name, problem)


#: The largest blur kernel the operators take (:func:`mime_fast.ops.gaussian_blur`: odd, 1..255).
MAX_KERNEL = 255
#: The sample rates FFmpeg's AAC encoder takes (the MPEG-4 audio table), the outputs' audio track's.
AAC_RATES = (7350, 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000)


def check_kernel(k: Any, name: str) -> int:
    """``k`` as a blur kernel size (an odd integer, 1 to :data:`MAX_KERNEL`), else an
    :class:`OptionError` naming ``name``."""
    _check(isinstance(k, numbers.Integral) and not isinstance(k, bool) and 1 <= k <= MAX_KERNEL and k % 2 == 1,
           name, f"must be an odd integer from 1 to {MAX_KERNEL}, got {k!r}")
    return int(k)


def _typed(group: Any) -> None:
    """Check each field of an option group against its declared type, before the group's own
    checks, and store it as that type: an ``int`` field takes an integral number (``30``, ``30.0``,
    numpy's integers; not ``29.97``, ``True`` or ``"30"``: nothing is truncated), a ``float`` field a
    finite real number, a ``bool`` field ``True`` or ``False``; ``None`` only where the type allows
    it.  ``Literal`` fields are left to the group, which names their values."""
    for f in fields(group):
        v, t = getattr(group, f.name), f.type
        args = get_args(t)
        if v is None:
            _check(type(None) in args, f.name, "cannot be None (it has no automatic value)")
            continue
        base = next((a for a in args if a is not type(None)), t) if type(None) in args else t
        if base is bool:
            _check(isinstance(v, bool), f.name, f"must be True or False, got {v!r}")
        elif base is int:
            integral = isinstance(v, numbers.Integral) or (isinstance(v, numbers.Real) and math.isfinite(v)
                                                           and float(v).is_integer())
            _check(integral and not isinstance(v, bool), f.name, f"must be an integer, got {v!r}")
            object.__setattr__(group, f.name, int(v))
        elif get_origin(base) is Literal and all(type(c) is int for c in get_args(base)) and \
                isinstance(v, numbers.Real) and not isinstance(v, bool) and v in get_args(base):
            object.__setattr__(group, f.name, int(v))  # (1.0 for Literal[1, 2]: stored as 1)
        elif base is float:
            _check(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v), f.name,
                   f"must be a finite number, got {v!r}")
            object.__setattr__(group, f.name, float(v))


def _opt(default: Any, help: str, metavar: str | None = None, *, flat: str | None = None,
         aliases: tuple[str, ...] = (), none: str | None = None) -> Any:
    """A field with its default and what the keyword API and the CLI need: one line of ``help``,
    the ``metavar`` of its flag (a ``Literal`` shows its choices), its ``flat`` keyword when not the
    field's name, older keyword ``aliases``, and the word that means ``None`` on the command line
    (``none``)."""
    return field(default=default, metadata={"help": help, "metavar": metavar, "flat": flat, "aliases": aliases,
                                            "none": none})


@dataclass(frozen=True)
class EncodeOptions:
    """How the encoded outputs are written (libx264, H.264 in MP4).

    VMM, a constant black picture, always uses the preset "ultrafast", which gives the same picture;
    its packets are encoded once per process and size (:class:`mime_fast.media.StillRun`).  A
    fixed ``threads`` keeps outputs byte-identical across runs and machines with the same FFmpeg
    build.  ``queue_size``: decoding runs on its own thread and every encoder on its own, each fed
    by a bounded queue of this many frames, so memory stays constant whatever the clip length (0:
    everything on the calling thread); outputs do not depend on it.  ``keep_frames_mb``: a clip
    whose subject is detected is built in two passes over its frames (detection with FM and VMM,
    then the face subsets); when its decoded frames fit in this many MB (host and GPU memory
    together; NVDEC's frames are kept on the GPU) the first pass keeps them for the second, so the
    source is decoded once (:class:`mime_fast.media.KeptFrames`); a longer clip is decoded twice
    (0: always).  The bound is per clip being built (``workers`` x ``clips_per_process`` of them at
    once), whatever the clip length; outputs do not depend on it.  ``fm_copy``: FM is a stream
    copy of the source's video when the source already meets FM's standard
    (:func:`mime_fast.fm_copy.fm_copy_reason`; no generation loss, one encode fewer, AMM follows);
    off, FM is always encoded.  The decision is in ``ClipResult.fm_video`` / ``fm_video_reason``."""

    TITLE: ClassVar[str] = "encoding (libx264)"
    fps: int = _opt(30, "output frame rate (constant)", "FPS")
    crf: int = _opt(18, "libx264 CRF, 0 to 51", "N")
    preset: Preset = _opt("veryfast", "libx264 preset (VMM always uses ultrafast: the same black picture)")
    threads: int = _opt(2, "libx264 threads per output (a fixed count keeps the outputs byte-identical)", "N")
    queue_size: int = _opt(4, "frames queued between the decode, mask and encoder threads (0: one thread; "
                              "outputs do not depend on it)", "N")
    keep_frames_mb: int = _opt(512, "MB of decoded frames a clip keeps from its detection pass for its face pass, so "
                                    "the source is decoded once (a longer clip is decoded twice; 0: always; outputs "
                                    "do not depend on it)", "MB")
    fm_copy: bool = _opt(True, "FM as a stream copy of the source's H.264 video when the source already meets FM's "
                               "standard (no generation loss, one encode fewer); --no-fm-copy: always encode FM")

    def __post_init__(self):
        _typed(self)
        _check(int(self.fps) > 0, "fps", f"must be positive, got {self.fps}")
        _check(0 <= int(self.crf) <= 51, "crf", f"must be between 0 and 51 (libx264), got {self.crf}")
        _check(self.preset in X264_PRESETS, "preset", f"must be one of {', '.join(X264_PRESETS)}; got {self.preset!r}")
        _check(int(self.threads) >= 1, "threads", "must be >= 1 (a fixed count keeps outputs deterministic)")
        _check(int(self.queue_size) >= 0, "queue_size", "must be >= 0")
        _check(int(self.keep_frames_mb) >= 0, "keep_frames_mb", "must be >= 0")
        _check(isinstance(self.fm_copy, bool), "fm_copy", f"must be True or False, got {self.fm_copy!r}")


@dataclass(frozen=True)
class AudioOptions:
    """The outputs' audio: decoded and resampled once to a WAV (``out_dir/audio/<clip_id>.wav``),
    encoded once to AAC and muxed into FM, FDM, FSM and VMM."""

    TITLE: ClassVar[str] = "audio"
    rate: int = _opt(16000, "output audio sample rate (one AAC takes: 8000, 16000, 22050, 44100, 48000, ...)", "HZ",
                     flat="audio_rate")
    channels: Literal[1, 2] = _opt(1, "output audio channels: 1 (mono) or 2", flat="audio_channels")

    def __post_init__(self):
        _typed(self)
        _check(self.rate in AAC_RATES, "rate",
               f"must be a sample rate AAC takes ({', '.join(map(str, AAC_RATES))} Hz), got {self.rate}")
        _check(self.channels in (1, 2), "channels", "must be 1 or 2")


@dataclass(frozen=True)
class GateOptions:
    """The quality gate, checked before anything is written (a :class:`mime_fast.media.ClipError`
    naming the clip and the reason otherwise).  Still images (a JPEG or PNG, whatever its file
    name) are never videos (:func:`mime_fast.media.probe`)."""

    TITLE: ClassVar[str] = "quality gate"
    min_height: int = _opt(480, "quality gate: shorter side of the displayed frame in pixels", "PX")
    min_duration: float = _opt(0.5, "quality gate: seconds of video", "S")
    min_frames: int = _opt(5, "quality gate: source frames", "N")

    def __post_init__(self):
        _typed(self)
        _check(int(self.min_height) >= 0, "min_height", "must be >= 0")
        _check(float(self.min_duration) >= 0, "min_duration", "must be >= 0")
        _check(int(self.min_frames) >= 0, "min_frames", "must be >= 0")


@dataclass(frozen=True)
class MaskOptions:
    """The face subsets' blur and mask (:func:`mime_fast.ops.hull_mask`, :func:`mime_fast.ops.blur_in_mask`).

    ``fsm_kernel="auto"``: 55 when the median over frames of the subject's face height
    (``max(y) - min(y)`` of the landmark points, frames with a face only) is at least
    :data:`FSM_AUTO_MIN_FACE_HEIGHT` (160 px), else 35; 55 when no frame has a face.  The kernel used
    is in ``ClipResult.fsm_kernel``.  ``feather_px=None``: the mask operator's automatic feather,
    proportional to the face size.  ``margin_px`` grows every hull by that many pixels (the
    detector's own margin, a fraction of the face size, is :attr:`DetectOptions.hull_margin_frac`)."""

    TITLE: ClassVar[str] = "face mask and blur"
    fdm_kernel: int = _opt(15, f"FDM blur kernel, an odd number from 1 to {MAX_KERNEL}", "K")
    fsm_kernel: FsmKernel = _opt("auto", f"FSM blur kernel: auto (55, or 35 for faces under "
                                         f"{FSM_AUTO_MIN_FACE_HEIGHT:g} px), 55 or 35")
    feather_px: float | None = _opt(None, "mask feather in pixels (auto: proportional to the face size)", "PX",
                                    aliases=("feather",), none="auto")
    margin_px: float = _opt(0.0, "grow every face hull by this many pixels", "PX", aliases=("margin",))

    def __post_init__(self):
        _typed(self)
        _check(str(self.fsm_kernel) in ("55", "35", "auto"), "fsm_kernel",
               f'must be 55, 35 or "auto", got {self.fsm_kernel!r}')
        check_kernel(self.fdm_kernel, "fdm_kernel")
        _check(self.feather_px is None or float(self.feather_px) >= 0, "feather_px",
               f"must be >= 0 pixels (or None: automatic), got {self.feather_px}")
        _check(float(self.margin_px) >= 0, "margin_px", f"must be >= 0 pixels, got {self.margin_px}")


@dataclass(frozen=True)
class DetectOptions:
    """The automatic subject detection (used only without ``landmarks=``:
    :func:`mime_fast.subject.detect_subject`, :class:`mime_fast.subject.SubjectTracker`), and whose
    faces are blurred.  These defaults are the detector's everywhere (:data:`DETECT_DEFAULTS`).

    ``hold_s``: how long an undetected subject stays masked on each side of a detection (rounded up
    to frames: :func:`hold_frames`).  ``detect_size``: the longer side of the frame given to the face
    detector (``None``: the detector's own setting).  ``detect_every``: how often the detector runs
    while the subject is tracked by its landmarks (1: every frame).  ``hull_margin_frac``: each
    detected face's hull grows by this fraction of the face's size.

    ``faces``: ``"subject"`` (MIME: the tracked subject only) or ``"all"`` (every face: for corpora
    shared where bystanders must be protected too).  With ``"all"`` and automatic detection, every
    face the detector finds (it runs every ``detect_every`` frames on the frame downscaled to
    :data:`mime_fast.subject.ALL_FACES_DETECT_SIZE`, 640 px, larger than the subject's
    ``detect_size``, so that bystanders' small faces are found) is followed into face tracks inside
    each camera shot, masked by the hull of the stack's landmarks on its detections and held /
    interpolated between them like the subject's (:class:`mime_fast.subject.AllFaceTracker`); the
    subject's own mask is kept as well.  A frame's
    mask is the union of its hulls (per pixel the largest of the feathered masks) and the blur is
    the blur inside that union (one hull: the same samples as ``"subject"``'s single-hull step).
    Cost: the landmark model runs once more per face on each detection, on at most
    :data:`mime_fast.subject.ALL_FACES_MAX_MESHES` (16) faces of a frame, the largest, and only on
    faces of at least :data:`mime_fast.subject.ALL_FACES_MESH_MIN_SIZE` (40 px); the others are
    masked by their detector box's ellipse (grown 20 %); the detector runs on every
    ``detect_every``-th frame even while the subject is tracked.  With ``landmarks=`` given:
    several faces per frame (:func:`mime_fast.landmarks.as_provider`).  ``fsm_kernel="auto"`` reads
    the subject's face heights either way (face 0 of given landmarks).  The manifest records the
    policy (``faces``) and, with ``"all"``, the face tracks masked (``face_tracks``).

    ``schedule``: when the subject tracker's face detector runs.  ``"period"`` (the default):
    every ``detect_every`` frames while he is followed -- found at the last run, whole or in part,
    and followed since by his mesh or, where the mesh is unsure, by his head's motion
    (:class:`mime_fast.subject.HeadFlow`) -- or searched for (a face found then is held back over
    the frames between); at once on an event (his head's motion lost, a new shot, another face
    near him, a run that did not find him while he is missed).  ``"mesh"``: on every frame but
    those where his face mesh follows him (a confident mesh, a slow face, no other face near him:
    ``detect_every`` sets how often it runs even then).  On bench_real's 720p clips ``"period"``
    runs the detector on about a third of the frames against 0.52 - 0.98 with ``"mesh"``, and on
    the edited variants of the real clips it masks the subject in every frame with no bystander
    masked, as ``"mesh"`` does (``docs/subject-tracking.md``, 2.; ``bench/bench_schedule.py``,
    ``bench/privacy_variants.py --schedule``).

    ``undecided`` (``faces="subject"``): where the tracker cannot tell which face is the subject's
    (after a cut, or once he was lost for longer than the hold, among faces identity cannot tell
    apart), the faces are decided once the whole clip has been seen, face track by face track
    (:mod:`mime_fast.subject.decision`: beside him where he was found for sure, or reading as another
    person against his views of the whole clip: not his); ``"mask"`` (the default: fail closed)
    blurs every face that could still be his (:meth:`mime_fast.subject.SubjectTracker.undecided_hulls`),
    bystanders included; ``"leave"`` blurs only faces matched as his, so bystanders stay clear, and
    **he may show** in those frames (``bench/privacy_variants.py --undecided leave``: 188 of the 2,281
    frames of the subject in the edited variants of the real clips, in 4 of 27 variants -- cut away
    and back 70, cross-faded 49, zoom cut 45, four alternating cuts 24 -- against none with
    ``"mask"``).  Either way the manifest counts those frames (``tracking_frames_undecided``);
    ``"leave"`` is for corpora whose context faces matter more than the subject's privacy in them
    (audit such a build: ``mime-fast audit``).  It applies to detected subjects, and to a detection
    given back as ``landmarks=`` (:func:`mime_fast.locate_subject`)."""

    TITLE: ClassVar[str] = "subject detection (without landmarks)"
    hold_s: float = _opt(0.5, "seconds an undetected subject stays masked next to a detection", "S")
    detect_size: int | None = _opt(384, "longer side in pixels of the frame given to the subject's face detector "
                                        "(native: the detector's own setting)", "PX", none="native")
    detect_every: int = _opt(3, "run the face detector every N frames while the subject is tracked by its landmarks "
                                "(1: every frame)", "N")
    hull_margin_frac: float = _opt(0.12, "grow each detected face's hull by this fraction of the face's size", "F")
    faces: Faces = _opt("subject", "whose faces FDM/FSM blur: subject (MIME: the tracked subject only) or all (every "
                                   "detected face, bystanders too; slower in crowds)")
    schedule: Schedule = _opt("period", "when the subject's face detector runs: period (every detect_every frames "
                                        "while he is followed by his mesh or his head's motion, or searched for, and "
                                        "at once on an event) or mesh (every frame but those his face mesh follows "
                                        "him on)")
    undecided: Undecided = _opt("mask", "faces that could be the subject where identity cannot tell which is: mask "
                                        "(fail closed: bystanders blurred until it can) or leave (only faces matched "
                                        "as his are blurred: he may show after cuts and losses)")

    def __post_init__(self):
        _typed(self)
        _check(float(self.hold_s) >= 0, "hold_s", f"must be >= 0 seconds, got {self.hold_s}")
        _check(self.detect_size is None or int(self.detect_size) >= 1, "detect_size",
               f"must be a positive number of pixels (or None), got {self.detect_size}")
        _check(int(self.detect_every) >= 1, "detect_every", "must be >= 1")
        _check(float(self.hull_margin_frac) >= 0, "hull_margin_frac", f"must be >= 0, got {self.hull_margin_frac}")
        _check(self.faces in FACES, "faces", f'must be "subject" or "all", got {self.faces!r}')
        _check(self.schedule in SCHEDULES, "schedule", f'must be "mesh" or "period", got {self.schedule!r}')
        _check(self.undecided in UNDECIDED, "undecided", f'must be "mask" or "leave", got {self.undecided!r}')



#: The detection defaults, read by every signature that has them (:mod:`mime_fast.landmarks`,
#: :mod:`mime_fast.subject.tracking`).
DETECT_DEFAULTS = DetectOptions()


def hold_frames(hold_s: float, rate: float) -> int:
    """``hold_s`` seconds in frames at ``rate`` frames per second, rounded up (at least 1)."""
    return max(1, int(math.ceil(float(hold_s) * float(rate) - 1e-9)))


@dataclass(frozen=True)
class DeviceOptions:
    """Where the work runs.  ``device``: the mask and blur operators (:mod:`mime_fast.ops`; the
    outputs are the same bytes on both) and, with automatic detection and torch seeing a CUDA
    device, the face models (:func:`mime_fast.detect.stacks.default_stack`; the same subject within
    measured tolerances).  ``nvdec``: with ``"cuda"``, decode on the GPU's video engine
    (:mod:`mime_fast.media.nvdec`) where it can, PyAV elsewhere (the same frames either way; the decoder
    used and why PyAV was are in ``ClipResult.decoder`` / ``decoder_reason``).  ``device_frames``:
    with NVDEC and the face models on the GPU, the models read each frame there
    (``detect.torch_ops.DeviceFrame``), else from host RGB (the same bytes either way).  libx264
    encodes on the CPU either way."""

    TITLE: ClassVar[str] = "device"
    device: Device = _opt("cpu", "cuda: NVDEC decoding, the face models, masks and blur on the GPU; "
                                 "libx264 encodes on the CPU either way, and the outputs are the same bytes")
    nvdec: bool = _opt(True, "with --device cuda: decode on the GPU's video engine where it can (the same frames "
                             "either way)")
    device_frames: bool = _opt(True, "with --device cuda and NVDEC: the face models read each frame on the GPU, its "
                                     "RGB made there (off: host RGB, as on the CPU path; the same subject either way)")

    def __post_init__(self):
        _typed(self)
        _check(self.device in get_args(Device), "device", f'must be "cpu" or "cuda", got {self.device!r}')
        _check(isinstance(self.nvdec, bool), "nvdec", f"must be True or False, got {self.nvdec!r}")
        _check(isinstance(self.device_frames, bool), "device_frames",
               f"must be True or False, got {self.device_frames!r}")
        if self.device == "cuda" and _DEVICE_CHECKED_HERE.get():
            # lazy: the package root sits above every module (it re-exports the pipeline); its
            # cuda_available is looked up when a setting asks for CUDA
            from . import cuda_available, cuda_status

            if not cuda_available():
                raise RuntimeError(f"device='cuda' requested but {cuda_status()}")


#: Whether :class:`DeviceOptions` checks that its device can be used in this process (see
#: :func:`device_checked_elsewhere`).
_DEVICE_CHECKED_HERE: contextvars.ContextVar[bool] = contextvars.ContextVar("device_checked_here", default=True)


@contextlib.contextmanager
def device_checked_elsewhere():
    """Settings made inside the block are not refused for a device this process cannot use: the
    driver of a Ray run, whose clips are built on the cluster's GPU nodes, may have no GPU itself
    (each task checks its own, :func:`mime_fast.corpus.workers.ray_task_resources`)."""
    token = _DEVICE_CHECKED_HERE.set(False)
    try:
        yield
    finally:
        _DEVICE_CHECKED_HERE.reset(token)


@dataclass(frozen=True)
class OptionField:
    """One option: its flat keyword ``name`` (the CLI flag is ``--`` + its kebab case), the
    :class:`Settings` group and the field there, and what the field declares."""

    name: str
    group: str
    field: str
    type: Any
    default: Any
    help: str
    metavar: str | None
    aliases: tuple[str, ...]
    none: str | None

    @property
    def names(self) -> tuple[str, ...]:
        """The keywords that set it: ``name`` and its older ``aliases``."""
        return (self.name,) + self.aliases

    @property
    def flags(self) -> tuple[str, ...]:
        """Its command-line flags, the first one its own."""
        return tuple("--" + n.replace("_", "-") for n in self.names)

    @property
    def choices(self) -> tuple | None:
        """The values a ``Literal`` type allows, else ``None``."""
        return get_args(self.type) if get_origin(self.type) is Literal else None


@dataclass(frozen=True, init=False)
class Settings:
    """Every setting of a build: the six option groups.

    ``Settings(encode=EncodeOptions(crf=20))``, or with flat keywords (the groups' options by their
    keyword names, :data:`FIELDS`): ``Settings(crf=20, margin_px=2)``; both at once: the keywords
    change the groups given.  An unknown keyword is a ``TypeError`` naming the nearest known one; a
    bad value an :class:`OptionError` (``ValueError``) naming the option as it was given.
    ``settings.crf`` reads an option through its group (``settings.encode.crf``)."""

    encode: EncodeOptions = field(default_factory=EncodeOptions)
    audio: AudioOptions = field(default_factory=AudioOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    mask: MaskOptions = field(default_factory=MaskOptions)
    detect: DetectOptions = field(default_factory=DetectOptions)
    compute: DeviceOptions = field(default_factory=DeviceOptions)

    def __init__(self, encode: EncodeOptions | None = None, audio: AudioOptions | None = None,
                 gate: GateOptions | None = None, mask: MaskOptions | None = None,
                 detect: DetectOptions | None = None, compute: DeviceOptions | None = None, **options: Any):
        given = dict(encode=encode, audio=audio, gate=gate, mask=mask, detect=detect, compute=compute)
        changes: dict[str, dict[str, tuple[str, Any]]] = {g: {} for g in GROUPS}  # group -> field -> (keyword, value)
        for key, value in options.items():
            f = _BY_NAME.get(key)
            if f is None:
                raise TypeError(_unknown(key))
            slot = changes[f.group]
            if f.field in slot:
                raise TypeError(f"{f.name} given twice (as {slot[f.field][0]} and {key})")
            slot[f.field] = (key, value)
        for group, cls in GROUPS.items():
            base = given[group]
            if base is not None and not isinstance(base, cls):
                raise TypeError(f"{group} must be {cls.__name__}, got {type(base).__name__}")
            values = {k: v for k, (_, v) in changes[group].items()}
            try:
                if not values:
                    obj = base if base is not None else cls()
                else:
                    obj = cls(**values) if base is None else dataclasses.replace(base, **values)
            except OptionError as exc:  # named as the caller named it
                key = changes[group].get(exc.name, (_BY_FIELD[group, exc.name].name,))[0]
                raise exc.renamed(key) from None
            object.__setattr__(self, group, obj)

    def __getattr__(self, name: str) -> Any:
        f = _BY_NAME.get(name)
        if f is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(getattr(self, f.group), f.field)

    @classmethod
    def from_kwargs(cls, **options: Any) -> "Settings":
        """``Settings(**options)``: groups and flat keywords."""
        return cls(**options)

    @classmethod
    def resolve(cls, settings: "Settings | Mapping[str, Any] | None" = None, **options: Any) -> "Settings":
        """The settings an entry point runs with: ``settings`` (default: the defaults; a mapping:
        groups and flat keywords) changed by ``options`` (the same), checked."""
        if settings is None or isinstance(settings, Mapping):
            return cls(**{**(settings or {}), **options})
        if not isinstance(settings, Settings):
            raise TypeError(f"settings must be Settings or a mapping of options, got {type(settings).__name__}")
        return settings.replace(**options) if options else settings

    def replace(self, **options: Any) -> "Settings":
        """A copy with ``options`` (groups and flat keywords) changed."""
        groups = {g: getattr(self, g) for g in GROUPS if g not in options}
        return type(self)(**groups, **options)

    def flat(self) -> dict[str, Any]:
        """Every option by its flat keyword (:data:`FIELDS` order)."""
        return {f.name: getattr(getattr(self, f.group), f.field) for f in FIELDS}

    def output_settings(self) -> dict[str, Any]:
        """The options that change the outputs (their bytes, or which clips pass the gate) by flat
        keyword, :data:`FIELDS` order: all but :data:`BYTE_NEUTRAL`.  The manifest records them
        (column ``settings``) so that a rerun into the same folder with other values is refused
        instead of mixing two settings in one corpus."""
        return {k: v for k, v in self.flat().items() if k not in BYTE_NEUTRAL}


#: The options documented not to change the outputs' bytes (how the work is scheduled, and where:
#: the CPU and CUDA paths give the same bytes): a rerun may change them
#: (:meth:`Settings.output_settings`).
BYTE_NEUTRAL = frozenset({"queue_size", "keep_frames_mb", "device", "nvdec", "device_frames"})

#: The option groups of :class:`Settings`: attribute -> class.
GROUPS: dict[str, type] = {f.name: f.type for f in fields(Settings)}
#: Every option (:class:`OptionField`), group by group in :class:`Settings` order.
FIELDS: tuple[OptionField, ...] = tuple(
    OptionField(f.metadata.get("flat") or f.name, group, f.name, f.type, f.default, f.metadata["help"],
                f.metadata["metavar"], f.metadata["aliases"], f.metadata["none"])
    for group, cls in GROUPS.items() for f in fields(cls))
_BY_NAME: dict[str, OptionField] = {n: f for f in FIELDS for n in f.names}
_BY_FIELD: dict[tuple[str, str], OptionField] = {(f.group, f.field): f for f in FIELDS}
assert len(_BY_NAME) == sum(len(f.names) for f in FIELDS), "option keywords must be unique"
assert not set(_BY_NAME) & set(GROUPS), "an option keyword cannot name a group"
assert BYTE_NEUTRAL <= set(_BY_NAME), "BYTE_NEUTRAL names options"


def _unknown(key: str) -> str:
    near = difflib.get_close_matches(key, list(_BY_NAME) + list(GROUPS), n=1)
    if near:
        return f"unknown setting {key!r} (did you mean {near[0]!r}?)"
    return f"unknown setting {key!r}; known: {', '.join(f.name for f in FIELDS)}"
