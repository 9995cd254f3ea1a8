"""The seven MIME subsets in one place: what each one is, and what building a set of them takes.

Every property of a subset lives in its :class:`SubsetSpec` record (:data:`SUBSETS`); the rest of
the package asks this module instead of spelling codes out:

=====  ============  ===========  =========  ==========  ===========================================
code   video         made as      audio      blur level  clear version (manifest ``clear_path``)
=====  ============  ===========  =========  ==========  ===========================================
FM     clear         encoded      with       none        itself (no ``clear_path``)
FDM    blur ``fdm``  encoded      with       light       FM
FSM    blur ``fsm``  encoded      with       heavy       FM
VMM    black         encoded      with (1)   none        itself (no ``clear_path``)
FDAM   blur ``fdm``  remux of FDM without    light       AMM
FSAM   blur ``fsm``  remux of FSM without    heavy       AMM
AMM    clear         remux of FM  without    none        itself (no ``clear_path``)
=====  ============  ===========  =========  ==========  ===========================================

(1) VMM is nothing but its audio: a clip without audio gets no VMM (skipped, "no audio").

A remuxed subset carries its base's encoded video packets without re-encoding, so its video,
kernel and blur level are its base's.  The clear version of a face-blurred subset is the same
video without the blur and with the same audio, or none: FDAM and FSAM read AMM, not FM
(:data:`CLEAR_VERSION`, Algorithm 1's Get_Clear_Version; the Chain-of-Emotion runner reads the
clear subsets as their own clear version).

:class:`Plan` is what one clip's build does for a set of requested codes: the encoded videos each
decode pass writes, FM's video as a stream copy of the source or encoded, the remuxes that follow,
and the codes skipped and why (:func:`mime_fast.subsets.build_subsets` executes it).

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Iterable

__all__ = [
    "ALL_SUBSETS",
    "BLUR_LEVEL",
    "CLEAR_VERSION",
    "CODES",
    "ENCODED_SUBSETS",
    "FACE_SUBSETS",
    "REMUXED_FROM",
    "SUBSETS",
    "Plan",
    "Subset",
    "SubsetSpec",
    "encoded_bases",
    "face_codes",
    "parse_codes",
    "plan",
    "remux_base",
    "spec",
]


class Subset(str, Enum):
    """A MIME subset code.  A ``str``: ``Subset.FM == "FM"``, and it is written as its code
    (``str()``, f-strings, JSON), so manifests keep their strings."""

    FM = "FM"
    FDM = "FDM"
    FSM = "FSM"
    VMM = "VMM"
    FDAM = "FDAM"
    FSAM = "FSAM"
    AMM = "AMM"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class SubsetSpec:
    """One subset.

    code
        The :class:`Subset`.
    name
        Its name in the MIME paper (e.g. "Face Details Missing").
    video
        What the picture shows: ``"clear"`` (the standardised clip), ``"blur"`` (the face blurred
        inside the subject's mask with the kernel ``kernel`` names) or ``"black"``.
    kernel
        For ``"blur"``: which kernel setting, ``"fdm"`` (``Settings.fdm_kernel``) or ``"fsm"``
        (``Settings.fsm_kernel``); else ``None``.
    remux_of
        ``None``: the video is encoded from the decoded source; else the subset whose encoded
        video packets this one carries, remuxed without its audio.
    has_audio
        Whether the output carries the clip's audio (when the source has any).
    needs_audio
        Whether the subset means nothing without audio: skipped ("no audio") for a silent source.
    blur_level
        ``"none"``, ``"light"`` or ``"heavy"`` (the manifest's ``blur_level``; the CoE prompts'
        level).
    clear
        The clear version: the subset itself for the clear ones (FM, VMM, AMM), else the clear
        subset with the same audio (FDM, FSM: FM; FDAM, FSAM: AMM).
    description
        One line for people.
    """

    code: Subset
    name: str
    video: str
    kernel: str | None
    remux_of: Subset | None
    has_audio: bool
    needs_audio: bool
    blur_level: str
    clear: Subset
    description: str

    @property
    def base(self) -> Subset:
        """The subset whose encoded video this one is: ``remux_of``, or itself."""
        return self.remux_of if self.remux_of is not None else self.code

    @property
    def face(self) -> bool:
        """Whether the video is blurred inside the subject's mask (needs the subject found)."""
        return self.video == "blur"

    @property
    def encoded(self) -> bool:
        """Whether the video is encoded from the decoded source (not a remux)."""
        return self.remux_of is None


S = Subset
#: Every subset, in the MIME order (FM, FDM, FSM, VMM, FDAM, FSAM, AMM).
SUBSETS: dict[Subset, SubsetSpec] = {s.code: s for s in (
    SubsetSpec(S.FM, "Full Modality", "clear", None, None, True, False, "none", S.FM,
               "the standardised clip, clear video and audio"),
    SubsetSpec(S.FDM, "Face Details Missing", "blur", "fdm", None, True, False, "light", S.FM,
               "the face lightly blurred (fdm_kernel, 15), with audio"),
    SubsetSpec(S.FSM, "Face Structures Missing", "blur", "fsm", None, True, False, "heavy", S.FM,
               "the face heavily blurred (fsm_kernel, 35 or 55), with audio"),
    SubsetSpec(S.VMM, "Visual Modality Missing", "black", None, None, True, True, "none", S.VMM,
               "black frames, the same count and duration, with audio"),
    SubsetSpec(S.FDAM, "Face Details & Audio Missing", "blur", "fdm", S.FDM, False, False, "light", S.AMM,
               "FDM's video without audio"),
    SubsetSpec(S.FSAM, "Face Structures & Audio Missing", "blur", "fsm", S.FSM, False, False, "heavy", S.AMM,
               "FSM's video without audio"),
    SubsetSpec(S.AMM, "Audio Modality Missing", "clear", None, S.FM, False, False, "none", S.AMM,
               "FM's video without audio"),
)}
del S

#: The subsets in the MIME order.
ALL_SUBSETS: tuple[Subset, ...] = tuple(SUBSETS)
#: The same, as plain strings.
CODES: tuple[str, ...] = tuple(c.value for c in ALL_SUBSETS)
#: The subsets whose video is encoded from the decoded source (the others are remuxes of them).
ENCODED_SUBSETS: tuple[Subset, ...] = tuple(c for c, s in SUBSETS.items() if s.encoded)
#: Remuxed subsets and the subset whose encoded video they carry.
REMUXED_FROM: dict[Subset, Subset] = {c: s.remux_of for c, s in SUBSETS.items() if s.remux_of is not None}
#: The encoded subsets whose video is blurred inside the subject's face mask.
FACE_SUBSETS: tuple[Subset, ...] = tuple(c for c in ENCODED_SUBSETS if SUBSETS[c].face)
#: Blur level of each subset, as the CoE pipeline's Get_Blur_Level reads it.
BLUR_LEVEL: dict[Subset, str] = {c: s.blur_level for c, s in SUBSETS.items()}
#: The clear version of each face-blurred subset (the manifest's ``clear_path``); the clear
#: subsets, their own clear version, are not in it.
CLEAR_VERSION: dict[Subset, Subset] = {c: s.clear for c, s in SUBSETS.items() if s.clear != c}

#: The revision of what the engine makes of a clip with given settings.  It is raised by every
#: change that alters an output for the same input and settings (the proof that a change alters
#: none: ``bench/output_hashes.py --compare``), and a corpus run records it with the settings, so
#: that a folder is not resumed by an engine that would make its remaining clips otherwise
#: (:func:`mime_fast.corpus.resume.check_same_settings`).  1: non-square sources keep their aspect
#: ratio and are stream-copied as FM when they conform.  2: blank frames (black, a white flash)
#: start no shot, so the subject is followed across them (before, the tracker looked for him by
#: identity alone after them and could lose him for the rest of the clip); AVI drop frames are
#: timestamp gaps (such clips had failed as truncated).  3: where the tracker cannot tell which
#: face is the subject's (after a cut, once lost), every face that could be his is masked, he is
#: searched for at a larger detector size and re-acquired among several faces by a strong match
#: only (before, he could be left clear for the rest of a shot, and a bystander taken for him).
#: 4: a new shot's first undecided faces, found within the hold, are masked back to its first frame
#: (before, the frames the detector missed after a cut showed them).  5: while he is searched for,
#: the subject's identity is read against views of him kept while he was followed too, and a cut
#: back to a shot he was followed in finds him where he stood there when identity cannot decide
#: (before, every face that could be his stayed masked: fewer bystanders masked).  6: a cut to a
#: closer or wider framing of the same scene is a cut (it was withdrawn as a flash) and finds the
#: subject where the re-framing carries him (before, every face that could be his stayed masked).
#: 7: a face re-acquired by a weak identity match is followed unconfirmed: every other face of its
#: shot is masked beside it until one reads strongly as him (before, a stranger taken weakly left
#: the subject clear when he came into the picture); a cross-fade back to a shot he was followed
#: in returns to it once its frames are no longer blends (before, every face that could be his
#: stayed masked).  8: the faces the forward pass could not tell from the subject are decided once
#: over the whole clip, face track by face track (:mod:`mime_fast.subject.decision`): a track seen
#: beside him where he was found for sure, or whose face reads as another person's against his views
#: of the whole clip, is no longer masked (before, every such face was masked wherever identity
#: could not decide: whole shots of strangers).  9: a face at the subject's place that reads as
#: another person is no longer masked where he is masked on a face of his own beside it, and a face
#: track embedded in the dark (a fade, a cross-fade) is embedded again once its face can be told
#: apart (before, both stayed masked as undecided).  10: the offline stack looks for bodies with
#: BlazePose before HOG (:mod:`mime_fast.detect.pose`): the selection's body term sees close-ups,
#: upper bodies and seated people, and gives a face its body by the nose (before, HOG alone found
#: upright whole bodies only, and most faces got the body guessed from the face); and where every
#: face of a detector run begins a new face track, none where he stood (a cut the shot detector
#: cannot see), he is looked for by identity instead of followed by position.  11: while he is searched
#: for, a face whose identity read unsure of him is read again every 2 frames, up to 4 reads
#: (:data:`mime_fast.subject.face_tracks.SEARCH_READS`; before, once a second: the real arm
#: wrestler, back in profile after a corrupt stretch, was decided another's and left clear).
#: 12: the offline stack's face mesh runs on onnxruntime (the same TFLite file converted at load,
#: :class:`mime_fast.detect.MediaPipeFaceMesh`), 2x faster: its landmarks agree with OpenCV's
#: importer's to about 1e-4 px on a crop, but followed from frame to frame the hulls of automatic
#: detection move by up to a few tenths of a pixel (on the real clips at 720p and their cut
#: sequences the decisions are the same, each frame's hull overlaps the old one by 0.995 or more).
OUTPUT_REVISION = 12


def spec(code: str) -> SubsetSpec:
    """The record of ``code`` (a :class:`Subset` or its exact string; ``ValueError`` otherwise)."""
    return SUBSETS[Subset(code)]


def remux_base(code: str) -> Subset:
    """The encoded subset whose video ``code`` is (``code`` itself for an encoded one)."""
    return spec(code).base


def face_codes(codes: Iterable[str]) -> list[str]:
    """The codes among ``codes`` whose video is face-blurred (they need the subject), in order."""
    return [c for c in codes if spec(c).face]


def encoded_bases(codes: Iterable[str]) -> list[Subset]:
    """The encoded videos ``codes`` need, in the MIME order: each requested encoded subset, and the
    base of each remuxed one."""
    need = {remux_base(c) for c in codes}
    return [c for c in ENCODED_SUBSETS if c in need]


def parse_codes(subsets) -> list[str]:
    """The requested codes, upper-cased, first occurrence kept, in the order given (``None``:
    all seven); ``ValueError`` for an unknown code or none."""
    if subsets is None:
        return list(CODES)
    if isinstance(subsets, str):
        subsets = [subsets]
    out = []
    for s in subsets:
        c = str(s).upper()
        if c not in CODES:
            raise ValueError(f"unknown subset {s!r}; expected some of {CODES}")
        if c not in out:
            out.append(c)
    if not out:
        raise ValueError("no subsets requested")
    return out


@dataclass(frozen=True)
class Plan:
    """What building ``codes`` of one clip does (:func:`plan`).

    codes
        The codes written, in the order requested (the requested ones less the skipped ones).
    skipped
        ``(code, reason)`` of the requested codes not written, in the order they were decided.
    first_pass
        The encoded videos written on the first (or only) decode pass, in the MIME order.
    face_pass
        With ``detect``: the face-blurred videos written on a second pass, once the subject's
        masks of the whole clip are known; else empty.
    remuxes
        ``(code, base)``: the remuxed outputs, made from their base's encoded file after the passes.
    scratch
        ``(base, code)``: encoded videos not requested themselves, written only as the source of
        the remux ``code`` (to a scratch file beside it, removed at the end).
    detect
        Whether the subject is detected on the first pass (no landmarks given, a face-blurred
        subset requested).
    has_audio
        Whether the source has audio.
    fm_video
        How FM's video is made when the plan makes it (FM, or AMM's remux source): ``"copy"``, the
        source's own packets written before the passes (so FM is on no pass; the first pass checks
        every frame against the rule), or ``"encode"``; ``None`` when neither FM nor AMM is made.
    fm_video_reason
        With ``"encode"``: why FM is not a copy (the rule's reason, ``"fm_copy is off"``, or why a
        copy was refused: :meth:`copy_refused`); else ``""``.
    """

    codes: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    first_pass: tuple[str, ...]
    face_pass: tuple[str, ...]
    remuxes: tuple[tuple[str, str], ...]
    scratch: tuple[tuple[str, str], ...]
    detect: bool
    has_audio: bool
    fm_video: str | None = None
    fm_video_reason: str = ""

    @property
    def encoded(self) -> tuple[str, ...]:
        """Every encoded video the plan writes, in the MIME order."""
        return tuple(sorted(self.first_pass + self.face_pass, key=CODES.index))

    @property
    def copied(self) -> tuple[str, ...]:
        """The videos written as a stream copy of the source before the passes: FM, or nothing."""
        return (Subset.FM.value,) if self.fm_video == "copy" else ()

    @property
    def videos(self) -> tuple[str, ...]:
        """Every video the plan writes, copied or encoded, in the MIME order (the remuxes' bases)."""
        return tuple(sorted(self.encoded + self.copied, key=CODES.index))

    def copy_refused(self, reason: str) -> "Plan":
        """The plan once FM's copy is refused (its probe back, or a frame of the first pass, breaks
        the rule): FM encoded instead, with ``reason``, on the first pass (refused before it; refused
        after it, the pipeline encodes FM on the face pass, or on a pass of its own where there is
        none)."""
        if self.fm_video != "copy":
            return self
        fm = Subset.FM.value
        return replace(self, fm_video="encode", fm_video_reason=reason,
                       first_pass=tuple(sorted(self.first_pass + (fm,), key=CODES.index)))

    def scratch_for(self, base: str) -> str | None:
        """The remux whose scratch source ``base`` is, or ``None`` (``base`` is an output itself)."""
        return next((r for b, r in self.scratch if b == base), None)

    def output_audio(self, code: str) -> tuple[bool, str]:
        """Whether output ``code`` carries audio, and the reason it does not where it would have."""
        s = spec(code)
        if not s.has_audio:
            return False, ""
        return self.has_audio, "" if self.has_audio else "source has no audio"

    def without_subject(self, reason: str) -> "Plan":
        """The plan once the clip is known to have no subject: every face-blurred code skipped with
        ``reason`` (after the codes already skipped), and nothing written for them."""
        faces = set(face_codes(self.codes))
        return replace(
            self,
            codes=tuple(c for c in self.codes if c not in faces),
            skipped=self.skipped + tuple((c, reason) for c in self.codes if c in faces),
            first_pass=tuple(c for c in self.first_pass if not spec(c).face),
            face_pass=(),
            remuxes=tuple((r, b) for r, b in self.remuxes if r not in faces),
            scratch=tuple((b, r) for b, r in self.scratch if r not in faces),
        )


def plan(codes: Iterable[str], *, has_audio: bool, detect: bool = False, no_subject: str | None = None,
         fm_copy: tuple[bool, str] = (False, "")) -> Plan:
    """The :class:`Plan` of one clip for the requested ``codes`` (strings, as :func:`parse_codes`
    gives them).

    ``has_audio``: whether the source has audio (without it, a subset that needs audio is skipped,
    reason "no audio").  ``detect``: the subject is found by detection riding along the first pass
    (meaningful only when a face-blurred code is requested); the face-blurred videos are then
    encoded on a second pass, and whether the clip has a subject is known only after the first:
    :meth:`Plan.without_subject`.  ``no_subject``: the clip is already known to have no subject (its
    landmarks have no face), the reason the face-blurred codes are skipped with.  ``fm_copy``: the
    verdict of FM's stream-copy rule on this source and settings, ``(True, "")`` or ``(False, why)``
    (:func:`mime_fast.fm_copy.fm_copy_reason`): FM, when made, is then copied before the passes
    (:attr:`Plan.fm_video`) instead of encoded on the first."""
    codes = list(codes)
    detect = bool(detect) and bool(face_codes(codes))
    skipped: list[tuple[str, str]] = []
    if no_subject is not None and not detect:
        skipped += [(c, no_subject) for c in codes if spec(c).face]
    gone = {c for c, _ in skipped}
    bases = [str(b) for b in encoded_bases(c for c in codes if c not in gone)]
    if not has_audio:
        for b in [b for b in bases if spec(b).needs_audio]:
            bases.remove(b)
            skipped.append((b, "no audio"))  # needs_audio: an encoded subset, requested itself
    gone = {c for c, _ in skipped}
    written = [c for c in codes if c not in gone]
    fm_video, fm_reason = None, ""
    if Subset.FM in bases:
        copy, why = fm_copy
        fm_video, fm_reason = ("copy", "") if copy else ("encode", why)
    first = [b for b in bases if not (detect and spec(b).face) and not (b == Subset.FM and fm_video == "copy")]
    face = [b for b in bases if detect and spec(b).face]
    remuxes = [(str(r), str(b)) for r, b in REMUXED_FROM.items() if r in written]
    scratch = [(b, next(r for r, rb in remuxes if rb == b)) for b in bases if b not in written]
    return Plan(tuple(written), tuple(skipped), tuple(first), tuple(face), tuple(remuxes), tuple(scratch),
                detect, bool(has_audio), fm_video, fm_reason)
