"""The MIME subsets of one clip: FM, FDM, FSM, VMM, FDAM, FSAM, AMM (the pipeline executing the plan).

Over 400 lines because the pipeline of one clip is one piece of state: :func:`_run` and
:func:`_encode_loop` share the writers, the temporaries, the copy check and the detection pass, and
the public entry points (:func:`build_subsets`, :func:`degrade`, :func:`locate_subject`) carry the
API's documentation.  What they decide and call lives elsewhere: the plan (:func:`mime_fast.spec.plan`),
FM's stream copy (:mod:`mime_fast.fm_copy`), the face step (:mod:`mime_fast.face_step`).

=====  =================================================  ======================
code   video                                              audio
=====  =================================================  ======================
FM     standardised clip (``fps`` CFR, default 30);        AAC ``audio_rate`` Hz
       the source's own H.264 packets when it already
       is one (:func:`mime_fast.fm_copy.fm_copy_reason`)
FDM    Gaussian ``fdm_kernel`` (15) inside the face hull   AAC
FSM    Gaussian ``fsm_kernel`` (35 or 55) inside the hull  AAC
VMM    black frames, same count and duration               AAC
FDAM   FDM's encoded video packets, remuxed               none
FSAM   FSM's encoded video packets, remuxed               none
AMM    FM's encoded video packets, remuxed                none
=====  =================================================  ======================

With ``landmarks=`` given, :func:`build_subsets` makes one pass over the source's frames.  Without
them it makes two: the first detects and tracks the subject
(:class:`mime_fast.subject.SubjectDetection`) on the same frames it encodes into FM and VMM, which
need no mask; the second encodes FDM and FSM once the masks of the whole clip are known (why they
must be: :func:`mime_fast.subject.detect_subject`).  The second pass replays the frames the
first one decoded when they fit in ``keep_frames_mb`` (:class:`mime_fast.media.KeptFrames`), and
decodes the source again otherwise: the same frames either way.  For every decoded frame of the pass that
blurs, it asks the landmark provider for the subject's points and the face step
(:func:`mime_fast.face_step.face_frames`) makes both blur levels inside one mask; frames are mapped
to the constant-rate grid by timestamp (:class:`mime_fast.media.FrameStandardiser`) and fed to one
libx264 encoder per output.  The audio is decoded and resampled once to a 16 kHz mono WAV
(``out_dir/audio/<clip_id>.wav``), encoded once to AAC (:class:`mime_fast.media.AacTrack`) and muxed
into FM/FDM/FSM/VMM.  FDAM/FSAM/AMM are remuxed from the finished FDM/FSM/FM files without
re-encoding.  When the plan copies FM (:attr:`mime_fast.spec.Plan.fm_video`: the source already is
FM's standard), FM is the source's video packets (:func:`mime_fast.fm_copy.write_fm_copy`), written
before the decode passes, which then verify every frame against the rule (a source that breaks it
after its first frame gets FM encoded after all, on a pass of its own).  Only the pixels a blur reads
are converted to RGB (the mask's box grown by the kernel's reach), and only those it changes are
converted back (:func:`mime_fast.frames.patched_frame`).

The pipeline streams: a decode thread, the calling thread (standardisation, mask, blur) and one
encoder thread per output, linked by bounded queues (``EncodeOptions.queue_size`` frames each), so memory
does not grow with the clip length beyond the frames kept between passes (at most
``EncodeOptions.keep_frames_mb``); libx264 additionally runs its own ``threads``.  On the first pass
the subject detection on the CPU runs on a thread of its own too (:class:`mime_fast.media.Behind`),
up to :data:`BEHIND_FRAMES` frames behind the decode, so the FM and VMM encoders are fed while it
selects the subject on the first frame (a few tenths of a second) and wherever a frame costs it more
than them; what it computes does not depend on it (one thread, the frames in order).  What it
computes from a frame alone, the shot detector's features, is computed ahead on the calling thread
(:meth:`mime_fast.subject.SubjectDetection.prepare`).

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
from .landmarks import MaskProvider, as_provider, faces_list
from .subject import SubjectDetection, detect_subject
from .options import FSM_AUTO_MIN_FACE_HEIGHT, X264_PRESETS, Settings, check_kernel
from . import spec as _spec
from .spec import CODES, Plan, parse_codes, plan, spec
from .face_step import face_frames, face_frames_union
from .fm_copy import copy_fault, fm_copy_reason, write_fm_copy
from .frames import BLACK, frame_matrix, yuv420_frame
from .media import (
    ClipError,
    AacTrack,
    Mp4Writer,
    SourceInfo,
    atomic_outputs,
    check_writable,
    clip_id_problem,
    extract_audio_wav,
    FrameStandardiser,
    Behind,
    KeptFrames,
    frame_parts,
    iter_display_frames,
    iter_nvdec_frames,
    nvdec_reason,
    open_nvdec_demuxer,
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
#: Source frames the subject detection may lag behind the first pass's decode, and at most
#: BEHIND_MB of their RGB (16 frames at 720p, 10 at 1080p, 2 at 4K); with
#: ``EncodeOptions.queue_size=0``, or on the GPU, it runs in line.
BEHIND_FRAMES = 16
BEHIND_MB = 64


def _behind_frames(info: SourceInfo) -> int:
    return min(BEHIND_FRAMES, max(1, (BEHIND_MB << 20) // max(1, 3 * info.width * info.height)))


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
    #: :class:`mime_fast.subject.TrackingStats` when the subject was found automatically (no
    #: ``landmarks=``, or a :func:`locate_subject` result given as landmarks): frames detected /
    #: interpolated / held / without the subject, status ``"ok"`` or ``"no subject"``; ``None``
    #: with other landmarks, or when no face subset was requested (no detection runs then).
    tracking: object | None = None
    #: The plan the clip was built by, as it ended (:class:`mime_fast.spec.Plan`: the passes, the
    #: remuxes, the codes skipped, FM's video copied or encoded); ``None`` before the build planned.
    plan: Plan | None = None
    #: What decoded the clip for the outputs: ``"nvdec"`` or ``"pyav"`` (with ``device="cuda"``,
    #: why not NVDEC in ``decoder_reason``); ``None`` when nothing was decoded.
    decoder: str | None = None
    decoder_reason: str = ""
    #: How many times the source's video was decoded: 1 with landmarks given, or when the detection
    #: pass's frames were kept for the face pass (``keep_frames_mb``); 2 when they did not fit; one
    #: more when FM's stream copy is refused after the first pass.
    decodes: int = 0
    #: Whose faces were blurred (``DetectOptions.faces``), and with ``"all"`` how many face tracks the
    #: masks come from (detected face tracks, or the faces of the landmarks given that appear in
    #: some frame); ``None`` otherwise or when no face subset was made.
    faces: str = "subject"
    face_tracks: int | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.status.values())

    @property
    def fm_video(self) -> str | None:
        """How FM's video was made: ``"copy"`` (the source's packets, :func:`fm_copy_reason`) or
        ``"encode"``, with the reason in :attr:`fm_video_reason`; ``None`` when neither FM nor AMM
        was made (the plan's :attr:`~mime_fast.spec.Plan.fm_video`)."""
        return None if self.plan is None else self.plan.fm_video

    @property
    def fm_video_reason(self) -> str:
        """With :attr:`fm_video` ``"encode"``: why FM is not a copy of the source; else ``""``."""
        return "" if self.plan is None else self.plan.fm_video_reason


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
    subject is detected and tracked (:class:`mime_fast.subject.SubjectDetection`) on the decode
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
    todo = result.plan = plan(codes, has_audio=have_audio, detect=provider is None, no_subject=no_subject,
                              fm_copy=fm_copy_reason(info, st))
    _skip(todo, result)
    if todo.detect:
        detection = SubjectDetection(info, **_detection(st))
    videos = todo.videos

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
            if have_audio and (videos or wav_final is not None):  # every processed clip's audio is kept
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
            track = AacTrack(wav_tmp) if wav_tmp is not None and videos else None

            # FM as a stream copy of the source: written now, its frames checked on the first pass
            for c in todo.copied:
                tmp[c] = temp(c)
                why = write_fm_copy(src, info, tmp[c], fps, n_out, track)
                if why:  # refused on its probe back: FM encoded on the first pass
                    todo = result.plan = todo.copy_refused(why)
            copy_faults: list[str] | None = [] if todo.copied else None

            # writers of the detection pass whose encoders still flush while the face pass runs
            # (closed after it; aborted when the clip fails)
            finishing: list[Mp4Writer] = []

            def encode(cs: list[str], prov, fsm_k, detection=None, faults=None, observe_device=False,
                       keep: KeptFrames | None = None, replay: KeptFrames | None = None,
                       overlap: bool = False) -> None:
                """One decode pass writing ``cs`` (``detection``: the subject detection fed its
                frames); ``overlap``: its encoders' last frames are flushed while the caller goes
                on (:data:`finishing`), else waited for here."""
                writers: dict[str, Mp4Writer] = {}
                enc = st.encode
                observe = None if detection is None else detection.feed
                behind = None
                if detection is not None and not observe_device and st.compute.device != "cuda":
                    # the subject detection on a thread of its own, up to BEHIND_FRAMES frames behind
                    # the decode (host frames, models on the CPU): the encoders are fed while it
                    # selects him and while a frame costs it more than them; what it can compute
                    # from a frame alone is computed here, ahead (module docstring)
                    behind = Behind(lambda item: detection.feed(*item), enc.queue_size and _behind_frames(info),
                                    "detection")
                    ahead = getattr(detection, "prepare", None)  # (a detection without it is fed the frame alone)
                    observe = lambda rgb: behind.put((rgb,) if ahead is None else (rgb, ahead(rgb)))  # noqa: E731
                try:
                    for c in cs:
                        if c not in tmp:
                            tmp[c] = temp(c)
                        # VMM is one constant black picture: every preset encodes it to the same
                        # picture, so the cheapest one is used (a tenth of the CPU of "veryfast")
                        writers[c] = Mp4Writer(tmp[c], enc_w, enc_h, fps=fps, crf=enc.crf,
                                               preset="ultrafast" if spec(c).video == "black" else enc.preset,
                                               threads=enc.threads, audio_track=track, queue_size=enc.queue_size,
                                               matrix=info.matrix, sar=info.output_sar)
                    if writers or observe is not None or faults is not None:
                        _encode_loop(src, info, prov, st, ops, writers, fps, n_out, fdm_k, fsm_k, result, observe,
                                     progress, faults, observe_device, keep, replay)
                    for w in writers.values():  # every encoder's tail at once
                        w.finish()
                    if behind is not None:  # (while they flush) the detection's last frames
                        behind.close()
                        behind = None
                    if overlap:
                        finishing.extend(writers.values())
                        writers.clear()
                    for c in list(writers):
                        writers.pop(c).close()
                finally:
                    if behind is not None:
                        behind.abort()
                    for w in writers.values():
                        w.abort()

            if detection is None:
                encode(list(todo.first_pass), provider, fsm_k, faults=copy_faults)
            else:  # FM and VMM while the subject is detected, then the face subsets with its masks
                kept = _kept_frames(info, st) if todo.face_pass else None  # the first pass's frames, for the second
                try:
                    # FM's and VMM's encoders finish while the decision is made and the face pass runs
                    encode(list(todo.first_pass), None, None, detection, copy_faults,
                           detection.device_frames and st.compute.device_frames, keep=kept, overlap=True)
                    provider = detection.result()
                    _check_frame_count(src, provider, info)
                    fsm_k, no_subject = _plan_faces(provider, fsm_policy, result, st.detect.faces)
                    if no_subject is not None:
                        todo = result.plan = todo.without_subject(no_subject)
                        _skip(todo, result)
                    if todo.face_pass:
                        also = []
                        if copy_faults:  # FM's copy refused by a frame of the first pass: encoded on this one
                            todo = result.plan = todo.copy_refused(copy_faults[0])
                            also, copy_faults = ["FM"], None
                        encode(list(todo.face_pass) + also, provider, fsm_k, replay=kept)
                    while finishing:  # (before the kept frames go: FM's encoder may hold some)
                        finishing.pop(0).close()
                finally:  # (not held by a traceback: up to keep_frames_mb, on the GPU with NVDEC)
                    for w in finishing:  # (the clip failed: its files are deleted)
                        w.abort()
                    if kept is not None:
                        kept.drop()
            if copy_faults:  # a frame broke the rule after the first, no face pass to join: FM on a pass of its own
                todo = result.plan = todo.copy_refused(copy_faults[0])
                encode(["FM"], None, None)

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


def _kept_frames(info: SourceInfo, st: Settings) -> KeptFrames:
    """A store for the detection pass's frames (``keep_frames_mb``), already empty when the clip's
    frames will not fit: its decoded yuv420p frames (NVDEC's: in device memory), or its RGB frames
    where they need converting."""
    kept = KeptFrames(int(st.encode.keep_frames_mb) << 20)
    if info.yuv_passthrough:  # rows as decoders lay them out (FFmpeg pads them to 64 bytes)
        w, h = info.coded_width, info.coded_height
        per_frame = -(-w // 64) * 64 * h + 2 * -(-(w // 2) // 64) * 64 * (h // 2)
    else:
        per_frame = info.width * info.height * 3
    kept.expect(per_frame * int(info.video_frames))
    return kept


def _encode_loop(src, info, provider, st, ops, writers, fps, n_out, fdm_k, fsm_k, result, observe=None,
                 progress=None, copy_faults: list[str] | None = None, observe_device: bool = False,
                 keep: KeptFrames | None = None, replay: KeptFrames | None = None):
    """One pass over the source's frames feeding ``writers``; ``observe(rgb)``, when given, sees every
    decoded source frame in RGB first (the subject detection riding along the FM/VMM pass;
    ``observe_device``: on NVDEC, the frame's RGB made and kept on the GPU, ``torch_ops.DeviceFrame``,
    for models that read it there; else host RGB); ``progress(1)``, when given, is called after each
    decoded source frame is processed.  ``copy_faults``, when given (FM is a stream copy), gets the
    first frame that breaks the copy rule (:func:`mime_fast.fm_copy.copy_fault`).  ``keep``: the
    decoded frames go there too (for the next pass); ``replay``: when it kept every frame of the
    pass before, its frames stand in for a decode."""
    std = FrameStandardiser(info.start, fps, n_out)
    kcodes = [c for c in FACE_SUBSETS if c in writers]
    kernels = [{"fdm": fdm_k, "fsm": fsm_k}[spec(c).kernel] for c in kcodes]
    black = [writers[c] for c in writers if spec(c).video == "black"]
    audio_writers = [w for w in writers.values() if w.audio is not None]
    cache = {"idx": None, "frames": None}

    def emit(out_i, item):
        src_i, rgb, decoded = item
        decoded, nv12 = frame_parts(decoded)
        if copy_faults == []:
            fault = copy_fault(out_i, src_i, decoded, info)
            if fault:
                copy_faults.append(fault)
        if cache["idx"] != src_i:
            if not kcodes:
                pts = None
            else:  # every face's hull (faces="all"; the faces that could be the subject where identity could
                # not tell which is); one alone takes the single-hull step
                pts = faces_list(provider, src_i)
                pts = None if not pts else pts[0] if len(pts) == 1 else pts
            # FM gets the decoded yuv420p frame itself when it can (media.SourceInfo.yuv_passthrough),
            # else the source converted once; each blur level copies that and converts only the
            # pixels its mask touches, with the matrix the frame was decoded with.
            base = decoded
            if base is None and ("FM" in writers or kcodes):
                base = yuv420_frame(rgb, matrix=info.matrix)
            frames = {"FM": base} if "FM" in writers else {}
            try:
                if isinstance(pts, list):
                    frames.update(face_frames_union(ops, rgb, decoded, base, (info.height, info.width), pts,
                                                    kernels, kcodes, st, info.matrix))
                else:
                    frames.update(face_frames(ops, rgb, decoded, base, (info.height, info.width), pts, kernels,
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
    on_device: Callable | None = None  # NVDEC frame -> its RGB kept on the GPU, for a stack that reads it there
    if replay is not None and replay.complete:  # the pass before kept every frame it decoded
        frames = replay.replay()  # (on the thread ahead too: NVDEC's host copies are downloaded there)
    else:
        frames, on_device = _decode(src, info, st, result, observe is not None, observe_device)
        result.decodes += 1
    for src_i, t, rgb, decoded in prefetch(frames, st.encode.queue_size):
        n_src += 1
        if keep is not None:
            keep.add(src_i, t, rgb, decoded)
        if observe is not None:
            observe(rgb if on_device is None else on_device(decoded))
        for out_i, item in std.push(t, (src_i, rgb, decoded)):
            emit(out_i, item)
        if progress is not None:
            progress(1)
    for out_i, item in std.finish():
        emit(out_i, item)
    if copy_faults == [] and n_src != n_out:
        copy_faults.append(f"{n_src} source frames decoded for {n_out} output frames")
    result.source_frames = n_src  # the writers mux the rest of the audio when they close


def _decode(src: Path, info: SourceInfo, st: Settings, result: ClipResult, rgb: bool, observe_device: bool
            ) -> tuple:
    """The decode of one pass: ``(frames, on_device)``, the frames as :func:`iter_display_frames`
    with ``keep_yuv`` yields them (``rgb``: with the RGB the subject detection reads), from NVDEC
    where ``device="cuda"`` and it takes the clip, else PyAV; the decoder and why not NVDEC go in
    ``result``.  ``on_device``: with NVDEC and ``observe_device``, what turns a decoded frame into
    its RGB made and kept on the GPU (``torch_ops.DeviceFrame``; the frames then come without host
    RGB), else ``None``."""
    # why PyAV decodes ("": the CPU path, which never asks nvdec_reason: it may import PyNvVideoCodec)
    if st.compute.device != "cuda":
        why_not: str | None = ""
    else:
        why_not = nvdec_reason(info) if st.compute.nvdec else "nvdec is off"
    demuxer = None
    if why_not is None:
        demuxer, why_not = open_nvdec_demuxer(src, info)
    if why_not is None:
        result.decoder, result.decoder_reason = "nvdec", ""
        on_device = None
        if rgb and observe_device:
            from .detect.torch_ops import DeviceFrame  # torch: only with a stack that runs on it

            on_device = lambda decoded: DeviceFrame.of_nv12(decoded.nv12, frame_matrix(decoded.frame))  # noqa: E731
        return iter_nvdec_frames(src, info, rgb=rgb and on_device is None, demuxer=demuxer), on_device
    result.decoder, result.decoder_reason = "pyav", why_not
    if result.decoder_reason:
        log.info("%s: decoded by PyAV, not NVDEC: %s", src, result.decoder_reason)
    return iter_display_frames(src, info, rgb=rgb, keep_yuv=True), None


def _prepare(src, landmarks, st: Settings) -> tuple[Path, SourceInfo, MaskProvider | None]:
    """Probe and quality gate (``st.gate``); the provider of ``landmarks`` (``None``: detect)."""
    src, gate = Path(src), st.gate
    provider = None if landmarks is None else as_provider(landmarks, st.detect.faces, st.detect.undecided)
    info = probe(src)
    if min(info.width, info.height) < gate.min_height:
        raise ClipError(src, f"below the quality gate: displayed size {info.width}x{info.height}, "
                             f"shorter side < min_height={gate.min_height} (to build it anyway: --min-height "
                             f"{min(info.width, info.height)}, or min_height= in Python)")
    if info.duration < Fraction(gate.min_duration).limit_denominator(10**6):
        raise ClipError(src, f"below the quality gate: too short, {float(info.duration):.3f} s of video "
                             f"< min_duration={gate.min_duration:g} s (to build it anyway: --min-duration 0, or "
                             f"min_duration= in Python)")
    if info.video_frames < gate.min_frames:
        raise ClipError(src, f"below the quality gate: too few frames, {info.video_frames} "
                             f"< min_frames={gate.min_frames} (to build it anyway: --min-frames "
                             f"{info.video_frames}, or min_frames= in Python)")
    if provider is not None:
        _check_frame_count(src, provider, info)
    return src, info, provider


def _detection(st: Settings) -> dict:
    """The keywords of :class:`mime_fast.subject.SubjectDetection` / ``detect_subject`` for ``st``."""
    d = st.detect
    return dict(hold_s=d.hold_s, detect_size=d.detect_size, detect_every=d.detect_every, margin=d.hull_margin_frac,
                device=st.compute.device, faces=d.faces, undecided=d.undecided, schedule=d.schedule)


def locate_subject(src, *, settings: Settings | None = None, progress: Callable[[int], None] | None = None,
                   **options) -> MaskProvider:
    """The subject detection :func:`build_subsets` runs when no ``landmarks=`` are given, as a pass
    of its own: probe ``src``, apply the quality gate and detect + track the subject
    (:func:`mime_fast.subject.detect_subject`).  The result can be passed as ``landmarks=`` to
    :func:`build_subsets` with the same settings, e.g. computed for the next clip on another thread
    while this one encodes (:func:`mime_fast.corpus.run_corpus` does so).  Settings as in
    :func:`build_subsets`; ``progress(1)``, when given, is called after each source frame.  Raises
    :class:`ClipError` like :func:`build_subsets`."""
    st = Settings.resolve(settings, **options)
    src, info, _ = _prepare(src, None, st)
    provider = detect_subject(src, info, progress=progress, **_detection(st))
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
    (:class:`mime_fast.subject.SubjectDetection`, on the decode pass that encodes FM and VMM; only
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
    problem = clip_id_problem(clip_id)  # (empty, hidden, a path, too long for its temporaries' names)
    if problem:
        raise ValueError(problem)
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

    ``kernel`` is the blur kernel for FDM/FDAM (default: the ``fdm_kernel`` setting, 15) and
    FSM/FSAM (default: the ``fsm_kernel`` setting, ``"auto"``: 55, or 35 for small faces, as
    :func:`build_subsets` chooses); ignored for FM/VMM/AMM.  Other arguments as in :func:`build_subsets`.  Raises
    :class:`ClipError` for VMM when the source has no audio, and ``ValueError`` before reading
    anything when ``dst`` names another container than MP4 (``.mp4``, ``.m4v``, ``.mov``).
    """
    code = _codes([subset])[0]
    if Path(dst).suffix.lower() not in (".mp4", ".m4v", ".mov"):
        raise ValueError(f"dst {dst} must name an MP4 file (.mp4, .m4v or .mov): degrade writes H.264 in MP4")
    st = Settings.resolve(settings, **options)
    key = spec(code).kernel  # the kernel setting ``kernel`` stands for: "fdm", "fsm" or None
    if kernel is not None and key is not None:
        kernel = check_kernel(kernel, "kernel")
    fdm_k = kernel if (kernel is not None and key == "fdm") else int(st.mask.fdm_kernel)
    fsm_k = kernel if (kernel is not None and key == "fsm") else st.mask.fsm_kernel
    src, info, provider = _prepare(src, landmarks, st)
    dst = Path(dst)
    if dst.resolve() == src.resolve():
        raise ValueError("dst would overwrite the input")
    dst.parent.mkdir(parents=True, exist_ok=True)
    check_writable(dst.parent, (dst.name,))  # (an error naming dst's folder, not a temporary in it)
    if spec(code).needs_audio and not info.has_audio:
        raise ClipError(src, f"{code} needs audio and the source has no audio")
    result = ClipResult(clip_id=src.stem, source=info, settings=st, fdm_kernel=fdm_k)
    _run(src, info, provider, st, [code], {code: dst}, None, fdm_k, fsm_k, result)
    if result.status.get(code) is not None and result.status[code].status == "skipped":
        raise ClipError(src, f"{code} needs a subject and no face was found in any frame")
    return dst
