"""The audit's verdicts on its figures: a subset re-identified (:func:`reidentified`, per recogniser
:func:`recogniser_reidentifies`) and the problems ``--strict`` fails on (:func:`find_problems`), each
naming its first frames."""

from __future__ import annotations

from typing import Any

from ..spec import spec
from .protocol import FRAMES_NAMED, RECOGNISERS, REID_MARGIN

__all__ = ["find_problems", "recogniser_reidentifies", "reidentified"]


def recogniser_reidentifies(got: dict[str, Any], name: str, chance: float, fmr: float) -> tuple[bool, bool] | None:
    """What recogniser ``name`` found in a subset's figures ``got``: whether it ranks him first for a
    share of the probes at least :data:`REID_MARGIN` above chance, and whether it verifies him for a
    share at least :data:`REID_MARGIN` above the false-match rate; ``None`` without probes."""
    if got.get(f"rank1_{name}") is None:
        return None
    return got[f"rank1_{name}"] >= chance + REID_MARGIN, got[f"tar_{name}"] >= fmr + REID_MARGIN


def reidentified(got: dict[str, Any], names: list[str], chance: float, fmr: float) -> bool | None:
    """The verdict on a subset's figures ``got``: every recogniser re-identifies him, both of its
    figures past their bars (:func:`recogniser_reidentifies`); ``None`` without probes."""
    found = [recogniser_reidentifies(got, n, chance, fmr) for n in names]
    if any(f is None for f in found):
        return None
    return all(all(f) for f in found)


def _frames_named(frames: list[int] | None) -> str:
    """`` at frames 3, 5, 7`` (at most :data:`FRAMES_NAMED`, then ``...``); empty for no frames or no
    list."""
    if not frames:
        return ""
    head = ", ".join(str(f) for f in frames[:FRAMES_NAMED])
    return f" at frame{'s' if len(frames) > 1 else ''} {head}{', ...' if len(frames) > FRAMES_NAMED else ''}"


def find_problems(rows: list[dict[str, Any]]) -> list[str]:
    """What ``--strict`` fails on, one line per clip and subset and kind, naming its first frames."""
    out = []
    for r in rows:
        if r["status"] != "ok":
            continue
        if spec(r["subset"]).blur_level == "heavy" and r.get("reidentified"):
            figs = ", ".join(f"{x} {r[f'rank1_{x}']:.2f}/{r[f'tar_{x}']:.2f}" for x in RECOGNISERS)
            out.append(f"{r['clip_id']} {r['subset']}: the subject is re-identified (rank-1/TAR {figs} against "
                       f"{r['gallery_identities']} identities, chance {r['chance_rank1']:.3f}/{r['fmr']:g}; "
                       f"{r['reidentified_frames']} of {r['probes']} probes ranked first and verified by both)"
                       f"{_frames_named(r.get('reidentified_at'))}")
        if r["unmasked_frames"]:
            out.append(f"{r['clip_id']} {r['subset']}: the subject is visible but unmasked in "
                       f"{r['unmasked_frames']} of {r['subject_frames']} frames{_frames_named(r.get('unmasked_at'))}")
        if r.get("identity_frames"):
            out.append(f"{r['clip_id']} {r['subset']}: a clear face re-identified as the subject (identity) in "
                       f"{r['identity_frames']} of {r['frames_audited']} audited frames"
                       f"{_frames_named(r.get('identity_at'))}")
    return out


