"""The subject's lifecycle: the phase he is in at each frame, decided in one place.

The tracker (:class:`~mime_fast.subject.tracking.SubjectTracker`) looks for him differently in each
phase; which phase he is in follows from two clocks of :class:`~mime_fast.subject.state.Follow`
(``last_seen``: his last whole match, detected or tracked; ``present_at``: his last detection,
whole or partial), the current shot's first frame and the hold (``hold_frames``):

================  ===================================================  ==============================
phase             when                                                 how he is looked for
================  ===================================================  ==============================
``UNSELECTED``    no subject chosen yet                                every face, to select from
``FOLLOWED``      matched whole on the frame before, in this shot      his mesh followed, or the
                                                                       detector around him
``MISSED``        matched whole within the hold in this shot, not on   the faces near where he is
                  the frame before                                     expected (gates widen)
``GLIMPSED``      only partly detected within the hold (his whole      every face, by identity
                  face longer ago, or before this shot)
``SEARCHING``     nothing of him within the hold in this shot (a new   every face, by identity, the
                  shot, a loss, a jump)                                whole frame at a larger size
================  ===================================================  ==============================

Transitions: a whole match enters ``FOLLOWED``; a frame without one leaves it for ``MISSED``; the
hold running out leaves ``MISSED`` for ``GLIMPSED`` or ``SEARCHING``; a new shot or a jump
(:meth:`Follow.jumped`) enters ``SEARCHING``.  Beside the phase, a shot's ``unconfirmed`` flag
(:class:`~mime_fast.subject.state.ShotState`) says he was re-acquired there by a weak identity match.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Phase", "phase_of", "recent"]


class Phase(Enum):
    """The subject's phase at a frame (module docstring)."""

    UNSELECTED = "unselected"
    FOLLOWED = "followed"
    MISSED = "missed"
    GLIMPSED = "glimpsed"
    SEARCHING = "searching"

    @property
    def lost(self) -> bool:
        """His whole face not matched within the hold in this shot: looked for among every face, by
        identity (not by where he stood)."""
        return self in (Phase.GLIMPSED, Phase.SEARCHING)


def recent(at: int | None, index: int, shot_start: int, hold: int) -> bool:
    """Whether frame ``at`` lies in the current shot (from ``shot_start``) and within ``hold`` frames
    before frame ``index``."""
    return at is not None and at >= shot_start and index - at <= hold


def phase_of(follow, index: int, shot_start: int, hold: int) -> Phase:
    """The subject's phase at frame ``index`` (before it is matched), from ``follow``'s clocks
    (:class:`~mime_fast.subject.state.Follow`): the one place the phases are told apart."""
    if follow.box is None:
        return Phase.UNSELECTED
    if recent(follow.last_seen, index - 1, shot_start, hold - 1):
        return Phase.FOLLOWED if follow.last_seen == index - 1 else Phase.MISSED
    return Phase.GLIMPSED if recent(follow.present_at, index - 1, shot_start, hold - 1) else Phase.SEARCHING
