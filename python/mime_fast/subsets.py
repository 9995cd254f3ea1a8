"""The MIME subsets of one clip: FM, FDM, FSM, VMM, FDAM, FSAM, AMM.

=====  =================================================  ======================
code   video                                              audio
=====  =================================================  ======================
FM     standardised clip (``fps`` CFR, default 30);        AAC ``audio_rate`` Hz
       the source's own H.264 packets when it already
       is one (:func:`fm_copy_reason`)
FDM    Gaussian ``fdm_kernel`` (15) inside the face hull   AAC
FSM    Gaussian ``fsm_kernel`` (35 or 55) inside the hull  AAC
VMM    black frames, same count and duration               AAC
FDAM   FDM's encoded video packets, remuxed               none
FSAM   FSM's encoded video packets, remuxed               none
AMM    FM's encoded video packets, remuxed                none
=====  =================================================  ======================

With ``landmarks=`` given, :func:`build_subsets` decodes the source once.  Without them it decodes
it twice: the first pass detects and tracks the subject
(:class:`mime_fast.landmarks.SubjectDetection`) on the same frames it encodes into FM and VMM, which
need no mask; the second encodes FDM and FSM once the masks of the whole clip are known (why they
must be: :func:`mime_fast.landmarks.detect_subject`).  For every decoded frame of the pass that
blurs, it asks the landmark provider for the subject's points, builds one mask
(:func:`mime_fast.ops.hull_mask`) and makes both blur levels with one
:func:`mime_fast.ops.blur_in_mask` call; frames are mapped to the constant-rate grid by
timestamp (:class:`mime_fast.media.FrameStandardiser`) and fed to one libx264 encoder per output.
The audio is decoded and resampled once to a 16 kHz mono WAV (``out_dir/audio/<clip_id>.wav``),
encoded once to AAC (:class:`mime_fast.media.AacTrack`) and muxed into FM/FDM/FSM/VMM.
FDAM/FSAM/AMM are remuxed from the finished FDM/FSM/FM files without re-encoding.  A source that
already is FM's standard (:func:`fm_copy_reason`) gives FM as a stream copy of its video packets
(:func:`mime_fast.media.grid_packets`), written before the decode passes, which then verify every
frame against the rule (a source that breaks it after its first frame gets FM encoded after all, on
a pass of its own).  Only the
pixels a blur reads are converted to RGB (the mask's box grown by the kernel's reach), and only
those it changes are converted back (:func:`mime_fast.frames.patched_frame`).

The pipeline streams: a decode thread, the calling thread (standardisation, mask, blur) and one
encoder thread per output, linked by bounded queues (``EncodeOptions.queue_size`` frames each), so memory
does not grow with the clip length; libx264 additionally runs its own ``threads``.

Output files appear only when the whole clip succeeded: everything is written under temporary names
``.<clip_id>.tmp-<pid>.<ext>`` in the destination directories and renamed at the end; on any error
the temporaries are removed and the exception propagates (input problems as :class:`ClipError`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

from . import ops
from .landmarks import MaskProvider, SubjectDetection, as_provider, detect_subject, faces_list
from .options import FSM_AUTO_MIN_FACE_HEIGHT, X264_PRESETS, Settings
from . import spec as _spec
from .spec import CODES, Plan, parse_codes, plan, spec
from .frames import BLACK, copy_frame, frame_rgb, patched_frame, yuv420_frame, yuv420_planes
from .media import (
    ClipError,
    AacTrack,
    Mp4Writer,
    PTS_TOLERANCE,
    SourceInfo,
    atomic_outputs,
    extract_audio_wav,
    FrameStandardiser,
    frame_parts,
    grid_packets,
    iter_display_frames,
    iter_nvdec_frames,
    nvdec_reason,
    output_frame_count,
    prefetch,
    probe,
    remux_video,
)

log = logging.getLogger(__name__)

__all__ = [
    "ALL_SUBSETS",
    "REMUXED_FROM",
    "FSM_AUTO_MIN_FACE_HEIGHT",
    "Settings",
    "SubsetStatus",
    "X264_PRESETS",
    "ClipResult",
    "ClipError",
    "build_subsets",
    "degrade",
    "choose_fsm_kernel",
    "fm_copy_reason",
    "locate_subject",
]

#: The seven codes in the MIME order (:data:`mime_fast.spec.CODES`).
ALL_SUBSETS = CODES
#: Video-only subsets and the subset whose encoded video they reuse (:data:`mime_fast.spec.REMUXED_FROM`).
REMUXED_FROM = {c.value: b.value for c, b in _spec.REMUXED_FROM.items()}
#: The subsets whose video is blurred inside the subject's face mask (:data:`mime_fast.spec.FACE_SUBSETS`).
FACE_SUBSETS = tuple(c.value for c in _spec.FACE_SUBSETS)
@dataclass
class SubsetStatus:
    """Per-subset outcome.  ``status`` is "ok", "skipped" or "failed"; ``reason`` explains
    anything other than a plain success (e.g. "source has no audio")."""

    code: str
    status: str
    reason: str = ""
    path: Path | None = None
    frames: int = 0
    duration: float = 0.0
    has_audio: bool = False
    kernel: int | None = None


@dataclass
class ClipResult:
    clip_id: str
    source: SourceInfo
    outputs: dict = field(default_factory=dict)  # code -> Path (written files only)
    status: dict = field(default_factory=dict)  # code -> SubsetStatus
    audio: Path | None = None
    audio_reason: str = ""
    frames: int = 0  # output frames per subset
    source_frames: int = 0  # decoded source frames
    duration: float = 0.0  # output duration, seconds (frames / fps)
    fsm_kernel: int | None = None  # None: no face subset requested and no landmarks given
    fdm_kernel: int | None = None
    settings: Settings | None = None
    elapsed_s: float = 0.0
    #: :class:`mime_fast.detect.TrackingStats` when the subject was found automatically (no
    #: ``landmarks=``, or a :func:`locate_subject` result given as landmarks): frames detected /
    #: interpolated / held / without the subject, status ``"ok"`` or ``"no subject"``; ``None``
    #: with other landmarks, or when no face subset was requested (no detection runs then).
    tracking: object | None = None
    #: How FM's video was made: ``"copy"`` (the source's packets, :func:`fm_copy_reason`) or
    #: ``"encode"``, with the reason in ``fm_video_reason``; ``None`` when neither FM nor AMM was made.
    fm_video: str | None = None
    fm_video_reason: str = ""
    #: What decoded the clip for the outputs: ``"nvdec"`` or ``"pyav"`` (with ``device="cuda"``,
    #: why not NVDEC in ``decoder_reason``); ``None`` when nothing was decoded.
    decoder: str | None = None
    decoder_reason: str = ""
    #: Whose faces were blurred (``DetectOptions.faces``), and with ``"all"`` how many face tracks the
    #: masks come from (detected face tracks, or the faces of the landmarks given that appear in
    #: some frame); ``None`` otherwise or when no face subset was made.
    faces: str = "subject"
    face_tracks: int | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.status.values())


_codes = parse_codes


def choose_fsm_kernel(policy, provider: MaskProvider) -> int:
    """Resolve the FSM kernel policy (:class:`mime_fast.options.MaskOptions`) for one clip."""
    if str(policy) in ("55", "35"):
        return int(policy)
    heights = None
    if hasattr(provider, "face_heights"):
        heights = np.asarray(provider.face_heights(), dtype=np.float64)
    elif getattr(provider, "num_frames", None) is not None:
        hs = []
        for i in range(provider.num_frames):
            p = provider.points(i)
            hs.append(np.nan if p is None else float(p[:, 1].max() - p[:, 1].min()))
        heights = np.asarray(hs)
    else:
        raise ValueError('fsm_kernel="auto" needs a provider that knows all frames; pass fsm_kernel=55 or 35')
    heights = heights[np.isfinite(heights)]
    if heights.size == 0:
        return 55
    return 55 if float(np.median(heights)) >= FSM_AUTO_MIN_FACE_HEIGHT else 35


#: Colour primaries / transfer tags (FFmpeg's numbers) a copied FM may carry: unspecified, or the SDR
#: BT.709 / BT.601 ones (bt709, bt470bg, smpte170m), which FM's encode leaves out and players assume.
_SDR_PRIMARIES = frozenset({1, 2, 5, 6})
_SDR_TRANSFER = frozenset({1, 2, 6})
_MATRIX_TAG = {"bt709": 1, "bt601": 6}  # the colorspace tag FM's encode writes (frames.COLORSPACE)
#: Names of the usual colour tag values (FFmpeg's), for the reasons.
_TAG_NAMES = {0: "rgb", 1: "bt709", 2: "unspecified", 4: "fcc/bt470m", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m",
              8: "linear", 9: "bt2020", 10: "bt2020c", 13: "iec61966-2-1", 14: "bt2020-10", 16: "smpte2084",
              18: "arib-std-b67"}


def _tag(v: int) -> str:
    return _TAG_NAMES.get(v, str(v))


def fm_copy_reason(info: SourceInfo, st: Settings) -> tuple[bool, str]:
    """Whether FM's video is the source's own video packets: ``(True, "")``, or ``(False, why)`` in
    plain words (every unmet condition, ``"; "``-separated).

    The rule: FM's encode would give back the source's frames, one for one, meaning the same, so a
    copy loses nothing and its timestamps can be re-based onto the output grid.  With
    ``st.encode.fm_copy`` on, the source must be

    * H.264 stored length-prefixed (``avcC``: MP4, MOV, Matroska; not MPEG-TS / raw Annex B), whose
      first packet in decoding order is an IDR picture shown first (no open-GOP or cut start), every
      packet with a presentation time and none that the demuxer drops (an edit list cutting a GOP);
    * 8-bit yuv420p, progressive, even-sized, shown unrotated and unmirrored, with square or unset
      sample aspect ratio (the encode writes square pixels): :attr:`SourceInfo.yuv_passthrough`, the
      frames FM's encode takes as they are;
    * tagged with the colour matrix FM's encode writes (``bt709``, or ``smpte170m`` for BT.601: an
      untagged matrix is BT.601 here but BT.709 to many players for HD), limited or unspecified
      range (H.264 infers limited), SDR BT.709 / BT.601 primaries and transfer or none;
    * on the output grid: as many frames as FM has (``round(duration * fps)``) and frame ``i``
      presented within :data:`~mime_fast.media.PTS_TOLERANCE` (1 ms) of ``start + i / fps``, so the
      standardisation (:class:`~mime_fast.media.FrameStandardiser`) maps source frame ``i`` to
      output frame ``i`` (nothing dropped or duplicated).

    Only the first frame is decoded to tell; the decode pass checks every frame again
    (:func:`build_subsets`)."""
    if not st.encode.fm_copy:
        return False, "fm_copy is off"
    f, fps = info.facts, Fraction(int(st.encode.fps))
    cs, rng, prim, trc = f.color
    n_out = output_frame_count(info.duration, fps)
    grid = [info.start + Fraction(i) / fps for i in range(len(info.frame_times))]
    late = next((i for i, (t, g) in enumerate(zip(info.frame_times, grid)) if abs(t - g) > PTS_TOLERANCE), None)
    checks = (
        (info.codec == "h264", f"codec {info.codec}, not H.264"),
        (info.codec != "h264" or f.avcc, "H.264 in Annex B form (MPEG-TS or raw stream)"),
        (info.codec != "h264" or f.first_idr, "the first packet is not an IDR picture shown first"),
        (f.missing_pts == 0, f"{f.missing_pts} video packets without a presentation time"),
        (f.discarded == 0, f"{f.discarded} video packets discarded by an edit list"),
        (f.pixel_format == "yuv420p", f"pixel format {f.pixel_format}, not 8-bit yuv420p"),
        (not f.interlaced, "interlaced"),
        (info.width % 2 == 0 and info.height % 2 == 0, f"odd size {info.width}x{info.height}"),
        (tuple(info.display_transform) == (1, 0, 0, 1), f"displayed rotated ({info.rotation} degrees) or mirrored"),
        (f.sample_aspect_ratio in (None, 1), f"sample aspect ratio {f.sample_aspect_ratio}, not square"),
        (rng in (0, 1), "full-range video"),
        (cs == _MATRIX_TAG[info.matrix],
         f"colour matrix tagged {_tag(cs)}, FM's encode tags {_tag(_MATRIX_TAG[info.matrix])}"),
        (prim in _SDR_PRIMARIES and trc in _SDR_TRANSFER, f"colour primaries {_tag(prim)} / transfer {_tag(trc)}"),
        (n_out == info.video_frames, f"{info.video_frames} source frames make {n_out} at {fps} fps"),
        (late is None, f"frame {late} off the 1/{fps} s grid" if late is not None else ""),
    )
    why = "; ".join(reason for ok, reason in checks if not ok)
    return not why, why


@dataclass
class _Blurred:
    """The blur levels of one frame, over the region the blur reads: ``levels[i]`` is the RGB
    region at ``origin`` (even ``(x0, y0)``) blurred with kernel ``kernels[i]`` inside ``mask``
    (region-sized); ``roi`` is the mask's box in region coordinates."""

    levels: list
    origin: tuple[int, int]
    roi: tuple[int, int, int, int]
    mask: np.ndarray


def _blur_region(ops, rgb, decoded, shape, pts, kernels: list[int], st: Settings, matrix: str) -> _Blurred | None:
    """One mask, one fused blur call over the mask's box grown by the largest kernel's radius (the
    only pixels the blur reads), so RGB is needed only there: sliced from ``rgb`` or converted from
    the ``decoded`` frame's planes (:func:`mime_fast.frames.frame_rgb`).  Inside the box the levels
    equal the blur of the whole frame (the region holds every neighbour the kernels read, and its
    edges are the frame's wherever it is clipped).  ``None``: no face, nothing to blur."""
    if pts is None or not kernels:
        return None
    mask, bbox = ops.hull_mask(pts, shape, feather=st.mask.feather_px, margin=st.mask.margin_px,
                               device=st.compute.device)
    return _blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels, st)


def _union_mask(ops, shape, hulls: list, st: Settings) -> tuple[np.ndarray | None, tuple[int, int, int, int]]:
    """The union of the feathered masks of ``hulls`` (each :func:`mime_fast.ops.hull_mask` with the
    settings' feather and margin): per pixel the largest of them, and the box of its non-zero
    pixels (``(None, (0, 0, 0, 0))`` when no hull reaches into the frame)."""
    union, box = None, None
    for pts in hulls:
        m, (x, y, w, h) = ops.hull_mask(pts, shape, feather=st.mask.feather_px, margin=st.mask.margin_px,
                                        device=st.compute.device)
        if w == 0 or h == 0:
            continue
        if union is None:
            union, box = m, [x, y, x + w, y + h]
            continue
        np.maximum(union[y:y + h, x:x + w], m[y:y + h, x:x + w], out=union[y:y + h, x:x + w])
        box = [min(box[0], x), min(box[1], y), max(box[2], x + w), max(box[3], y + h)]
    if union is None:
        return None, (0, 0, 0, 0)
    return union, (box[0], box[1], box[2] - box[0], box[3] - box[1])


def _blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels: list[int], st: Settings) -> _Blurred | None:
    """:func:`_blur_region` for a frame-sized ``mask`` whose non-zero pixels lie in ``bbox``."""
    H, W = shape
    if bbox[2] == 0 or bbox[3] == 0:
        return None
    x, y, w, h = (int(v) for v in bbox)
    uniq = sorted(set(kernels))
    r = max(uniq) // 2 + 1  # + 1: the 2x2 blocks covering the box lie inside the region
    x0, y0 = max(0, x - r) // 2 * 2, max(0, y - r) // 2 * 2
    x1, y1 = min(W, x + w + r), min(H, y + h + r)
    x1, y1 = min(W, x1 + x1 % 2), min(H, y1 + y1 % 2)
    if rgb is not None:
        src = np.ascontiguousarray(rgb[y0:y1, x0:x1])
    else:
        src = frame_rgb(decoded, (x0, y0, x1 - x0, y1 - y0), device=st.compute.device)
    m = np.ascontiguousarray(mask[y0:y1, x0:x1])
    roi = (x - x0, y - y0, w, h)
    outs = ops.blur_in_mask(src, m, uniq, bbox=roi, device=st.compute.device)
    by_k = dict(zip(uniq, outs))
    return _Blurred([by_k[k] for k in kernels], (x0, y0), roi, m)


def _face_frames(ops, rgb, decoded, base, shape, pts, kernels: list[int], codes: list[str], st: Settings,
                 matrix: str, nv12=None) -> dict:
    """The frames of the face subsets ``codes`` (blurred with ``kernels``) for one source frame:
    copies of ``base`` (its yuv420p frame), blurred inside the subject's mask (``pts``; ``None``:
    no subject in this frame, the copies are the output).  With the ``decoded`` planes the fused
    step (:func:`mime_fast.ops.blur_hull_yuv420`) writes the masked samples into the copies,
    reading the frame on the device where NVDEC left it when ``nv12`` is given
    (:func:`mime_fast.ops.blur_hull_nv12`); otherwise (a rotated or converted source) the region
    is blurred in RGB (:func:`_blur_region`) and patched in (:func:`mime_fast.frames.patched_frame`):
    the same samples every way."""
    if pts is None or not codes:
        return {c: copy_frame(base) for c in codes}
    if decoded is None:
        blurred = _blur_region(ops, rgb, decoded, shape, pts, kernels, st, matrix)
        return {c: copy_frame(base) if blurred is None else patched_frame(
            base, blurred.levels[i], blurred.origin, blurred.roi, blurred.mask, matrix=matrix)
            for i, c in enumerate(codes)}
    frames = {c: copy_frame(base) for c in codes}
    first = {}  # one output per distinct kernel; a code that repeats a kernel copies it
    for c, k in zip(codes, kernels):
        first.setdefault(k, c)
    outs = [yuv420_planes(frames[c]) for c in first.values()]
    if nv12 is not None:
        ops.blur_hull_nv12(nv12, pts, outs, list(first), feather=st.mask.feather_px, margin=st.mask.margin_px,
                           matrix=matrix)
    else:
        ops.blur_hull_yuv420(yuv420_planes(decoded), pts, outs, list(first), feather=st.mask.feather_px,
                             margin=st.mask.margin_px, matrix=matrix, device=st.compute.device)
    for c, k in zip(codes, kernels):
        if first[k] != c:
            for dst, src in zip(yuv420_planes(frames[c]), yuv420_planes(frames[first[k]])):
                np.copyto(dst, src)
    return frames


def _face_frames_union(ops, rgb, decoded, base, shape, hulls: list, kernels: list[int], codes: list[str],
                       st: Settings, matrix: str) -> dict:
    """:func:`_face_frames` for several faces (``faces="all"``): copies of ``base`` blurred inside the
    union of the hulls' masks (:func:`_union_mask`), made with the operators the single-hull path
    is checked against: the union's box grown by the blur's reach blurred in RGB
    (:func:`mime_fast.ops.blur_in_mask`, the ``decoded`` frame's RGB converted only there) and
    converted back where the union mask is non-zero (:func:`mime_fast.frames.patched_frame`).  With
    one hull, the same samples as :func:`_face_frames`."""
    if not hulls or not codes:
        return {c: copy_frame(base) for c in codes}
    mask, bbox = _union_mask(ops, shape, hulls, st)
    blurred = None if mask is None else _blur_masked(ops, rgb, decoded, shape, mask, bbox, kernels, st)
    return {c: copy_frame(base) if blurred is None else patched_frame(
        base, blurred.levels[i], blurred.origin, blurred.roi, blurred.mask, matrix=matrix)
        for i, c in enumerate(codes)}


def _plan_faces(provider: MaskProvider, fsm_policy, result: ClipResult, faces: str = "subject"
                ) -> tuple[int, str | None]:
    """What the masks of the whole clip decide: the FSM kernel (``fsm_policy`` ``"auto"``:
    :func:`choose_fsm_kernel`, on the subject's faces whatever ``faces``; else that kernel), the
    tracking report, the face tracks (``faces="all"``), and, for a clip without a subject (with
    ``"all"`` and landmarks given: without any face), the reason its face subsets are skipped
    (``None``: it has one)."""
    fsm_k = choose_fsm_kernel("auto", provider) if str(fsm_policy) == "auto" else int(fsm_policy)
    result.fsm_kernel = fsm_k
    result.tracking = getattr(provider, "stats", None)
    result.faces = faces
    if faces == "all":
        n = getattr(provider, "face_tracks", None)
        if n is None and getattr(provider, "num_frames", None) is not None:  # a provider of one face
            n = 0 if _never_present(provider, faces) else 1
        result.face_tracks = n
    reason = None
    if result.tracking is not None and result.tracking.status == "no subject":
        reason = "no subject: no face found in any frame"
    elif result.tracking is None and _never_present(provider, faces):
        reason = "no subject: the landmarks given have no face in any frame"
    return fsm_k, reason


def _skip(plan_: Plan, result: ClipResult) -> None:
    """Record the plan's skipped codes in ``result`` (those not recorded yet, in the plan's order)."""
    for c, reason in plan_.skipped:
        if c not in result.status:
            result.status[c] = SubsetStatus(c, "skipped", reason)


def _never_present(provider: MaskProvider, faces: str = "subject") -> bool:
    """Whether a provider that knows every frame marks the subject (``faces="all"``: every face)
    absent in all of them (all-NaN or empty landmarks): the clip then has no subject, as when
    detection finds none.  ``False`` for a provider that cannot tell (no ``num_frames``)."""
    n = getattr(provider, "num_frames", None)
    if n is None:
        return False
    if faces == "all":
        return all(not faces_list(provider, i) for i in range(int(n)))
    return all(provider.points(i) is None for i in range(int(n)))


def _check_frame_count(src: Path, provider: MaskProvider, info: SourceInfo) -> None:
    nf = getattr(provider, "num_frames", None)
    if nf is not None and nf != info.video_frames:
        raise ValueError(f"{src}: landmarks describe {nf} frames but the clip has {info.video_frames} "
                         "decoded source frames")


def _run(src: Path, info: SourceInfo, provider: MaskProvider | None, st: Settings, codes: list[str],
         finals: dict[str, Path], wav_final: Path | None, fdm_k: int, fsm_policy,
         result: ClipResult, progress: Callable[[int], None] | None = None) -> None:
    """Write ``codes`` (temporaries renamed into place at the end).  ``provider`` ``None``: the
    subject is detected and tracked (:class:`mime_fast.landmarks.SubjectDetection`) on the decode
    pass that encodes FM and VMM, which need no mask; the face subsets follow in a second pass,
    once the masks of the whole clip are known."""
    fps = Fraction(int(st.encode.fps))
    n_out = output_frame_count(info.duration, fps)
    result.frames = n_out
    result.duration = float(Fraction(n_out) / fps)
    have_audio = info.has_audio
    enc_w, enc_h = info.width - info.width % 2, info.height - info.height % 2
    if enc_w < 2 or enc_h < 2:
        raise ClipError(src, f"frame too small to encode ({info.width}x{info.height})")

    detection = fsm_k = no_subject = None
    result.faces = st.detect.faces
    if provider is not None:
        fsm_k, no_subject = _plan_faces(provider, fsm_policy, result, st.detect.faces)
    todo = plan(codes, has_audio=have_audio, detect=provider is None, no_subject=no_subject)
    _skip(todo, result)
    if todo.detect:
        detection = SubjectDetection(info, **_detection(st))
    bases = todo.encoded

    scratch: list[Path] = []
    with atomic_outputs() as outs:
        try:
            tmp: dict[str, Path] = {}

            def temp(c: str) -> Path:
                r = todo.scratch_for(c)
                if r is None:
                    return outs.temp_for(finals[c])
                # only needed as the source of a remux: scratch file beside it
                p = finals[r].with_name(f".{finals[r].stem}.{c}.scratch-{os.getpid()}.mp4")
                p.parent.mkdir(parents=True, exist_ok=True)
                scratch.append(p)
                return p

            wav_tmp = None
            if have_audio and (bases or wav_final is not None):  # every processed clip's audio is kept
                if wav_final is not None:
                    wav_tmp = outs.temp_for(wav_final)
                else:
                    anchor = next(iter(finals.values()))
                    wav_tmp = anchor.with_name(f".{anchor.stem}.scratch-{os.getpid()}.wav")
                    wav_tmp.parent.mkdir(parents=True, exist_ok=True)
                    scratch.append(wav_tmp)
                n_samples = int(Fraction(n_out) / fps * st.audio.rate)
                extract_audio_wav(src, info, wav_tmp, n_samples=n_samples, rate=st.audio.rate,
                                  channels=st.audio.channels)

            # the AAC track is encoded once and muxed into every subset with audio
            track = AacTrack(wav_tmp) if wav_tmp is not None and bases else None

            # FM as a stream copy of the source: written now, its frames verified on the first pass
            copy_faults: list[str] | None = None
            if "FM" in bases:
                copied, why = fm_copy_reason(info, st)
                if copied:
                    tmp["FM"] = temp("FM")
                    why = _copy_fm(src, info, tmp["FM"], fps, n_out, track)
                    copy_faults = [] if not why else None
                result.fm_video, result.fm_video_reason = ("encode", why) if why else ("copy", "")
            encoded = [c for c in bases if not (c == "FM" and copy_faults is not None)]

            def encode(cs: list[str], prov, fsm_k, observe=None, faults=None) -> None:
                writers: dict[str, Mp4Writer] = {}
                enc = st.encode
                try:
                    for c in cs:
                        if c not in tmp:
                            tmp[c] = temp(c)
                        # VMM is one constant black picture: every preset encodes it to the same
                        # picture, so the cheapest one is used (a tenth of the CPU of "veryfast")
                        writers[c] = Mp4Writer(tmp[c], enc_w, enc_h, fps=fps, crf=enc.crf,
                                               preset="ultrafast" if spec(c).video == "black" else enc.preset,
                                               threads=enc.threads, audio_track=track, queue_size=enc.queue_size,
                                               matrix=info.matrix)
                    if writers or observe is not None or faults is not None:
                        _encode_loop(src, info, prov, st, ops, writers, fps, n_out, fdm_k, fsm_k, result, observe,
                                     progress, faults)
                    for c in list(writers):
                        writers.pop(c).close()
                finally:
                    for w in writers.values():
                        w.abort()

            if detection is None:
                encode(encoded, provider, fsm_k, faults=copy_faults)
            else:  # FM and VMM while the subject is detected, then the face subsets with its masks
                encode([c for c in encoded if c in todo.first_pass], None, None, detection.feed, copy_faults)
                provider = detection.result()
                _check_frame_count(src, provider, info)
                fsm_k, no_subject = _plan_faces(provider, fsm_policy, result, st.detect.faces)
                if no_subject is not None:
                    todo = todo.without_subject(no_subject)
                    _skip(todo, result)
                if todo.face_pass:
                    encode(list(todo.face_pass), provider, fsm_k)
            if copy_faults:  # a frame broke the rule after the first: FM encoded after all (the copy replaced)
                encode(["FM"], None, None)
                result.fm_video, result.fm_video_reason = "encode", copy_faults[0]

            for r, b in todo.remuxes:
                remux_video(tmp[b], outs.temp_for(finals[r]))
        finally:
            for p in scratch:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        # leaving the with-block renames every temp into place

    kernels = {"fdm": fdm_k, "fsm": fsm_k}
    for c in todo.codes:
        kernel = kernels.get(spec(c).kernel)
        with_audio, reason = todo.output_audio(c)
        result.status[c] = SubsetStatus(c, "ok", reason, finals[c], n_out, result.duration, with_audio, kernel)
        result.outputs[c] = finals[c]
    if have_audio and wav_final is not None:
        result.audio = wav_final
    elif not have_audio:
        result.audio_reason = "source has no audio"


def _copy_fm(src: Path, info: SourceInfo, path: Path, fps: Fraction, n_out: int, track: AacTrack | None) -> str:
    """Write FM at ``path`` as the source's video packets on the output grid
    (:func:`mime_fast.media.grid_packets`) with the clip's AAC track, as an encoding
    :class:`Mp4Writer` would mux it; ``""``, or why the copy cannot stand in for the encode: probed
    back, it must show what the source shows (pixel format, size, colour tags, sample aspect ratio:
    tags that only the source's container held, e.g. an MP4 ``colr`` box, are not carried), with FM's
    frame count and duration."""
    with grid_packets(src, info, fps) as (template, packets):
        w = Mp4Writer(path, info.width, info.height, fps=fps, audio_track=track, video_template=template)
        try:
            for j, packet in enumerate(packets):
                w.write_packet(*packet)
                w.write_audio_until(Fraction(j + 1) / fps)  # interleaved as an encoding writer does
            w.close()
        finally:
            w.abort()
    got = probe(path)

    def shown(i: SourceInfo) -> tuple:
        f = i.facts
        return f.pixel_format, f.color, f.interlaced, f.sample_aspect_ratio or 1, i.width, i.height, i.display_transform

    if shown(got) != shown(info):
        return f"the copy would not show what the source shows ({shown(got)} != {shown(info)})"
    if (got.video_frames, got.duration) != (n_out, n_out / fps):
        return f"the copy holds {got.video_frames} frames over {float(got.duration):.3f} s, FM {n_out}"
    return ""


def _copy_fault(out_i: int, src_i: int, decoded, info: SourceInfo) -> str:
    """Why output frame ``out_i`` (source frame ``src_i``, ``decoded``: its yuv420p frame when it
    is one FM's encode takes as it is) breaks the copy rule (:func:`fm_copy_reason`), or ``""``."""
    if out_i != src_i:
        return f"output frame {out_i} would show source frame {src_i} (frames dropped or duplicated)"
    if decoded is None or decoded.interlaced_frame or (
            int(decoded.colorspace), int(decoded.color_range), int(decoded.color_primaries),
            int(decoded.color_trc)) != info.facts.color:
        return f"source frame {src_i} decodes unlike the first (format, size, colour tags or interlacing)"
    return ""


def _encode_loop(src, info, provider, st, ops, writers, fps, n_out, fdm_k, fsm_k, result, observe=None,
                 progress=None, copy_faults: list[str] | None = None):
    """One decode pass feeding ``writers``; ``observe(rgb)``, when given, sees every decoded source
    frame in RGB first (the subject detection riding along the FM/VMM pass); ``progress(1)``, when
    given, is called after each decoded source frame is processed.  ``copy_faults``, when given (FM
    is a stream copy), gets the first frame that breaks the copy rule (:func:`_copy_fault`)."""
    std = FrameStandardiser(info.start, fps, n_out)
    kcodes = [c for c in FACE_SUBSETS if c in writers]
    kernels = [{"fdm": fdm_k, "fsm": fsm_k}[spec(c).kernel] for c in kcodes]
    black = [writers[c] for c in writers if spec(c).video == "black"]
    audio_writers = [w for w in writers.values() if w.audio is not None]
    cache = {"idx": None, "frames": None}
    every_face = st.detect.faces == "all"

    def emit(out_i, item):
        src_i, rgb, decoded = item
        decoded, nv12 = frame_parts(decoded)
        if copy_faults == []:
            fault = _copy_fault(out_i, src_i, decoded, info)
            if fault:
                copy_faults.append(fault)
        if cache["idx"] != src_i:
            if not kcodes:
                pts = None
            elif every_face:  # faces="all": every face's hull; one alone takes the single-hull step
                pts = faces_list(provider, src_i)
                pts = None if not pts else pts[0] if len(pts) == 1 else pts
            else:
                pts = provider.points(src_i)
            # FM gets the decoded yuv420p frame itself when it can (media.SourceInfo.yuv_passthrough),
            # else the source converted once; each blur level copies that and converts only the
            # pixels its mask touches, with the matrix the frame was decoded with.
            base = decoded
            if base is None and ("FM" in writers or kcodes):
                base = yuv420_frame(rgb, matrix=info.matrix)
            frames = {"FM": base} if "FM" in writers else {}
            try:
                if isinstance(pts, list):
                    frames.update(_face_frames_union(ops, rgb, decoded, base, (info.height, info.width), pts,
                                                     kernels, kcodes, st, info.matrix))
                else:
                    frames.update(_face_frames(ops, rgb, decoded, base, (info.height, info.width), pts, kernels,
                                               kcodes, st, info.matrix, nv12))
            except ValueError as exc:  # degenerate points: never write the face clear, fail loudly
                raise ValueError(f"{src}: source frame {src_i}: cannot build the face mask ({exc})") from exc
            cache["idx"], cache["frames"] = src_i, frames
        for c, vf in cache["frames"].items():
            writers[c].write_frame(vf, out_i)
        for w in black:  # black frames (VMM): the packets every VMM of this size shares
            w.write_still(out_i, BLACK)
        for w in audio_writers:  # the audio up to the end of this frame, beside it in the file
            w.write_audio_until(Fraction(out_i + 1) / fps)

    n_src = 0
    why_not = nvdec_reason(info) if st.compute.nvdec else "nvdec is off"
    if st.compute.device == "cuda" and why_not is None:
        result.decoder, result.decoder_reason = "nvdec", ""
        frames = iter_nvdec_frames(src, info, rgb=observe is not None)
    else:
        result.decoder, result.decoder_reason = "pyav", why_not if st.compute.device == "cuda" else ""
        if result.decoder_reason:
            log.info("%s: decoded by PyAV, not NVDEC: %s", src, result.decoder_reason)
        frames = iter_display_frames(src, info, rgb=observe is not None, keep_yuv=True)
    for src_i, t, rgb, decoded in prefetch(frames, st.encode.queue_size):
        n_src += 1
        if observe is not None:
            observe(rgb)
        for out_i, item in std.push(t, (src_i, rgb, decoded)):
            emit(out_i, item)
        if progress is not None:
            progress(1)
    for out_i, item in std.finish():
        emit(out_i, item)
    if copy_faults == [] and n_src != n_out:
        copy_faults.append(f"{n_src} source frames decoded for {n_out} output frames")
    result.source_frames = n_src  # the writers mux the rest of the audio when they close


def _prepare(src, landmarks, st: Settings) -> tuple[Path, SourceInfo, MaskProvider | None]:
    """Probe and quality gate (``st.gate``); the provider of ``landmarks`` (``None``: detect)."""
    src, gate = Path(src), st.gate
    provider = None if landmarks is None else as_provider(landmarks, st.detect.faces)
    info = probe(src)
    if min(info.width, info.height) < gate.min_height:
        raise ClipError(src, f"below the quality gate: displayed size {info.width}x{info.height}, "
                             f"shorter side < min_height={gate.min_height}")
    if info.duration < Fraction(gate.min_duration).limit_denominator(10**6):
        raise ClipError(src, f"below the quality gate: too short, {float(info.duration):.3f} s of video "
                             f"< min_duration={gate.min_duration:g} s")
    if info.video_frames < gate.min_frames:
        raise ClipError(src, f"below the quality gate: too few frames, {info.video_frames} "
                             f"< min_frames={gate.min_frames}")
    if provider is not None:
        _check_frame_count(src, provider, info)
    return src, info, provider


def _detection(st: Settings) -> dict:
    """The keywords of :class:`mime_fast.landmarks.SubjectDetection` / ``detect_subject`` for ``st``."""
    d = st.detect
    return dict(hold_s=d.hold_s, detect_size=d.detect_size, detect_every=d.detect_every, margin=d.hull_margin_frac,
                device=st.compute.device, faces=d.faces)


def locate_subject(src, *, settings: Settings | None = None, **options) -> MaskProvider:
    """The subject detection :func:`build_subsets` runs when no ``landmarks=`` are given, as a pass
    of its own: probe ``src``, apply the quality gate and detect + track the subject
    (:func:`mime_fast.landmarks.detect_subject`).  The result can be passed as ``landmarks=`` to
    :func:`build_subsets` with the same settings, e.g. computed for the next clip on another thread
    while this one encodes (:func:`mime_fast.corpus.run_corpus` does so).  Settings as in
    :func:`build_subsets`.  Raises :class:`ClipError` like :func:`build_subsets`."""
    st = Settings.resolve(settings, **options)
    src, info, _ = _prepare(src, None, st)
    provider = detect_subject(src, info, **_detection(st))
    _check_frame_count(src, provider, info)
    return provider


def build_subsets(src, out_dir, *, landmarks=None, subsets=None, clip_id: str | None = None,
                  progress: Callable[[int], None] | None = None, settings: Settings | None = None,
                  **options) -> ClipResult:
    """Write the requested MIME subsets of ``src`` under ``out_dir``.

    Layout: ``out_dir/<SUBSET>/<clip_id>.mp4`` and ``out_dir/audio/<clip_id>.wav`` with
    ``clip_id`` given or ``Path(src).stem``.

    ``landmarks``: ``(decoded source frames, N, 2)`` array of ``(x, y)`` points in displayed-frame
    pixels (NaN rows where the subject is absent), a ``.npz``/``.json`` path, or a provider
    (:mod:`mime_fast.landmarks`); with ``faces="all"`` also several faces: a list of per-face
    ``(frames, N, 2)`` arrays or a ``(frames, faces, N, 2)`` array (face 0 the subject; a provider
    with ``points_list(i)``), :func:`mime_fast.landmarks.as_provider`.  ``faces="all"``: every face
    is blurred, not only the subject's (:class:`mime_fast.options.DetectOptions`).  ``None``
    (default): the subject is detected and tracked with the offline model stack
    (:class:`mime_fast.landmarks.SubjectDetection`, on the decode pass that encodes FM and VMM; only
    when a face subset is requested) and :attr:`ClipResult.tracking` reports the frames detected /
    interpolated / held / without the subject; a clip without any face gets status ``"no
    subject"``: FM, VMM and AMM are written, FDM, FSM, FDAM and FSAM are skipped with that reason.
    ``subsets``: codes among FM, FDM, FSM, VMM, FDAM, FSAM, AMM (default all).  ``settings``: a
    :class:`Settings` (default: the defaults; or a mapping of options); ``options``: option groups or single options by
    keyword (``crf=20``, ``mask=MaskOptions(...)``, :mod:`mime_fast.options`), applied over it and
    checked before anything is read.  ``progress``: called with the number of source frames just
    processed, on every decode pass (one pass with ``landmarks`` or without a face subset; else two,
    the second only when the subject was found); an exception it raises (e.g. ``KeyboardInterrupt``
    to stop) aborts the clip, its temporaries removed.

    Raises :class:`ClipError` for unusable input (corrupt, truncated, empty, audio-only, below the
    quality gate), before writing anything where it can be detected up front.  Returns a
    :class:`ClipResult`.
    """
    t_start = time.perf_counter()
    codes = _codes(subsets)
    st = Settings.resolve(settings, **options)
    src, info, provider = _prepare(src, landmarks, st)
    out_dir = Path(out_dir)
    clip_id = src.stem if clip_id is None else str(clip_id)
    if not clip_id or clip_id in (".", "..") or "/" in clip_id or "\\" in clip_id:
        raise ValueError(f"clip_id {clip_id!r} cannot name a file")
    finals = {c: out_dir / c / f"{clip_id}.mp4" for c in codes}
    for p in finals.values():
        if p.resolve() == src.resolve():
            raise ValueError(f"output {p} would overwrite the input")
    fdm_k = int(st.mask.fdm_kernel)
    result = ClipResult(clip_id=clip_id, source=info, settings=st, fdm_kernel=fdm_k)
    _run(src, info, provider, st, codes, finals, out_dir / "audio" / f"{clip_id}.wav", fdm_k, st.mask.fsm_kernel,
         result, progress)
    result.elapsed_s = time.perf_counter() - t_start
    return result


def degrade(src, dst, subset: str = "FSM", kernel: int | None = None, *, landmarks=None,
            settings: Settings | None = None, **options) -> Path:
    """Write one subset of ``src`` to ``dst`` (an .mp4 path) and return ``dst``.

    ``kernel`` is the blur kernel for FDM/FDAM (default ``fdm_kernel``, 15) and FSM/FSAM (default
    55); ignored for FM/VMM/AMM.  Other arguments as in :func:`build_subsets`.  Raises
    :class:`ClipError` for VMM when the source has no audio.
    """
    code = _codes([subset])[0]
    st = Settings.resolve(settings, **options)
    src, info, provider = _prepare(src, landmarks, st)
    dst = Path(dst)
    if dst.resolve() == src.resolve():
        raise ValueError("dst would overwrite the input")
    key = spec(code).kernel  # the kernel setting ``kernel`` stands for: "fdm", "fsm" or None
    fdm_k = int(kernel) if (kernel is not None and key == "fdm") else int(st.mask.fdm_kernel)
    fsm_k = int(kernel) if (kernel is not None and key == "fsm") else 55
    for k in (fdm_k, fsm_k):
        if k < 1 or k % 2 == 0:
            raise ValueError(f"kernel must be a positive odd integer, got {k}")
    if spec(code).needs_audio and not info.has_audio:
        raise ClipError(src, f"{code} needs audio and the source has no audio")
    result = ClipResult(clip_id=src.stem, source=info, settings=st, fdm_kernel=fdm_k)
    _run(src, info, provider, st, [code], {code: dst}, None, fdm_k, fsm_k, result)
    if result.status.get(code) is not None and result.status[code].status == "skipped":
        raise ClipError(src, f"{code} needs a subject and no face was found in any frame")
    return dst
