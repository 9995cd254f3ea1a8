"""FM as a stream copy of the source's video (issue 12, "Encode less"): the rule and the copy.

A source that already meets FM's standard gives FM as its own H.264 packets, retimed onto the
output grid and muxed with the clip's AAC track: no generation loss, one encode fewer, and AMM
(FM's video without audio) follows.  :func:`fm_copy_reason` is the rule, decided from the probed
source facts and the settings before anything is decoded; the clip's plan holds its verdict
(:attr:`mime_fast.spec.Plan.fm_video`).  :func:`write_fm_copy` writes the copy and probes it back,
and :func:`copy_fault` checks every decoded frame against the rule on the first decode pass: a
copy refused either way is replaced by the encode (:meth:`mime_fast.spec.Plan.copy_refused`).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from .media import PTS_TOLERANCE, AacTrack, Mp4Writer, SourceInfo, grid_packets, output_frame_count, probe
from .options import Settings

__all__ = ["copy_fault", "fm_copy_reason", "write_fm_copy"]

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
    * 8-bit yuv420p, progressive, even-sized, shown unrotated and unmirrored:
      :attr:`SourceInfo.yuv_passthrough`, the frames FM's encode takes as they are.  Any sample
      aspect ratio: the encode writes the source's (:attr:`SourceInfo.output_sar`) and the copy
      carries it in the stream and the container, which the probe back checks;
    * tagged with the colour matrix FM's encode writes (``bt709``, or ``smpte170m`` for BT.601: an
      untagged matrix is BT.601 here but BT.709 to many players for HD), limited or unspecified
      range (H.264 infers limited), SDR BT.709 / BT.601 primaries and transfer or none;
    * on the output grid: as many frames as FM has (``round(duration * fps)``) and frame ``i``
      presented within :data:`~mime_fast.media.PTS_TOLERANCE` (1 ms) of ``start + i / fps``, so the
      standardisation (:class:`~mime_fast.media.FrameStandardiser`) maps source frame ``i`` to
      output frame ``i`` (nothing dropped or duplicated).

    Only the first frame is decoded to tell; the decode pass checks every frame again
    (:func:`mime_fast.subsets.build_subsets`)."""
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
        (rng in (0, 1), "full-range video"),
        (cs == _MATRIX_TAG[info.matrix],
         f"colour matrix tagged {_tag(cs)}, FM's encode tags {_tag(_MATRIX_TAG[info.matrix])}"),
        (prim in _SDR_PRIMARIES and trc in _SDR_TRANSFER, f"colour primaries {_tag(prim)} / transfer {_tag(trc)}"),
        (n_out == info.video_frames, f"{info.video_frames} source frames make {n_out} at {fps} fps"),
        (late is None, f"frame {late} off the 1/{fps} s grid" if late is not None else ""),
    )
    why = "; ".join(reason for ok, reason in checks if not ok)
    return not why, why


def write_fm_copy(src: Path, info: SourceInfo, path: Path, fps: Fraction, n_out: int, track: AacTrack | None) -> str:
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


def copy_fault(out_i: int, src_i: int, decoded, info: SourceInfo) -> str:
    """Why output frame ``out_i`` (source frame ``src_i``, ``decoded``: its yuv420p frame when it
    is one FM's encode takes as it is) breaks the copy rule (:func:`fm_copy_reason`), or ``""``."""
    if out_i != src_i:
        return f"output frame {out_i} would show source frame {src_i} (frames dropped or duplicated)"
    if decoded is None or decoded.interlaced_frame or (
            int(decoded.colorspace), int(decoded.color_range), int(decoded.color_primaries),
            int(decoded.color_trc)) != info.facts.color:
        return f"source frame {src_i} decodes unlike the first (format, size, colour tags or interlacing)"
    return ""
