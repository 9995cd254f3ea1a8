"""One clip of a corpus run: built (:func:`~mime_fast.subsets.build_subsets`), never raising for a
bad clip, and the manifest rows it gets (one per output, or one failed row with the reason)."""

from __future__ import annotations

import errno
import json
import os
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..manifest import BLUR_LEVEL, CLEAR_VERSION, DUPLICATE
from ..media import ClipError
from ..options import Settings
from ..spec import SUBSETS, face_codes
from ..subsets import build_subsets
from .inputs import ClipSpec
from .resume import sha256_file

__all__ = ["Progress", "RunStopped"]


def _rows_for(spec: ClipSpec, result, out_dir: Path, run: str) -> list[dict[str, Any]]:
    tracking = getattr(result, "tracking", None)
    common = {
        "clip_id": spec.clip_id, "label": spec.label, "dataset": spec.dataset, "source": str(spec.path), "run": run,
        "tracking_status": getattr(tracking, "status", None),
        "tracking_frames_detected": getattr(tracking, "detected", None),
        "tracking_frames_interpolated": getattr(tracking, "interpolated", None),
        "tracking_frames_held": getattr(tracking, "held", None),
        "tracking_frames_head": getattr(tracking, "head", None),
        "tracking_frames_without_subject": getattr(tracking, "without_subject", None),
        "tracking_frames_undecided": getattr(tracking, "undecided", None),
        "tracking_frames_undecided_pass1": getattr(tracking, "undecided_pass1", None),
        "tracking_shots": getattr(tracking, "shots", None),
        "tracking_shot_frames": json.dumps(tracking.shot_frames) if getattr(tracking, "shot_frames", None) else None,
        "tracking_tracks": json.dumps(tracking.tracks) if getattr(tracking, "tracks", None) else None,
        "faces": getattr(result, "faces", None),
        "face_tracks": getattr(result, "face_tracks", None),
    }
    width = result.source.width - result.source.width % 2
    height = result.source.height - result.source.height % 2
    fps = float(result.settings.encode.fps) if result.settings is not None else None
    rows = []
    for code, st in result.status.items():
        row = dict(common, subset=code, status=st.status, reason=st.reason or None, blur_level=BLUR_LEVEL[code],
                   kernel=st.kernel, fps=fps)
        if st.status == "ok" and st.path is not None:
            p = Path(st.path)
            stat = p.stat()
            clear = CLEAR_VERSION.get(code)
            row.update(
                path=str(p.relative_to(out_dir)), duration_s=st.duration, frames=st.frames, width=width,
                height=height, has_audio=st.has_audio, bytes=stat.st_size, mtime_ns=stat.st_mtime_ns, sha256=sha256_file(p),
                clear_path=str(result.outputs[clear].relative_to(out_dir)) if clear in result.outputs else None,
            )
            row.update(decoder=result.decoder, decoder_reason=result.decoder_reason or None)
            if SUBSETS[code].base == "FM":  # the rows whose video is FM's (copied or encoded)
                row.update(fm_video=result.fm_video, fm_video_reason=result.fm_video_reason or None)
        rows.append(row)
    if result.audio is not None:
        p = Path(result.audio)
        stat = p.stat()
        rows.append(dict(common, subset="audio", status="ok", path=str(p.relative_to(out_dir)), blur_level="none",
                         duration_s=result.duration, has_audio=True, bytes=stat.st_size, mtime_ns=stat.st_mtime_ns,
                         sha256=sha256_file(p)))
    return rows


def _failed_row(spec: ClipSpec, reason: str, run: str, detail: str | None = None) -> dict[str, Any]:
    return {"clip_id": spec.clip_id, "subset": None, "path": str(spec.path), "status": "failed", "reason": reason,
            "detail": detail, "label": spec.label, "dataset": spec.dataset, "source": str(spec.path), "run": run}


#: The ``detail`` of the failed row of a clip whose worker process died building it (a crash, the
#: out-of-memory killer), and of one stopped for making no progress (``clip_timeout``).
WORKER_DIED = "worker died"
STALLED = "stalled"


def _failed(spec: ClipSpec, reason: str, run: str, detail: str | None = None) -> tuple[list[dict[str, Any]], str, int]:
    """A clip's result when it failed: its one failed row, the reason, no frames."""
    return [_failed_row(spec, reason, run, detail)], reason, 0


class RunStopped(RuntimeError):
    """An error of the run's surroundings met while building a clip -- the output disk full, a
    quota reached, the output made read-only -- that every clip after it would meet too: the run
    stops with the reason instead of failing every clip that is left; a rerun resumes."""


#: errno values that name the output's surroundings, not the clip (:class:`RunStopped`).
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def _raise_if_environment(exc: BaseException, out_dir: Path) -> None:
    """``RunStopped`` where ``exc`` (or an error in its chain of causes) is one of
    :data:`ENVIRONMENT_ERRNOS`."""
    for e in _causes(exc):
        if isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:
            raise RunStopped(f"{e.filename or out_dir}: {os.strerror(e.errno)}: the run stops here "
                             f"(make room or fix the output folder, then rerun: it resumes)") from exc


Progress = Callable[[int], None]


def _process_clip(spec: ClipSpec, out_dir: Path, codes: list[str], settings: Settings, run: str,
                  located=None, progress: Progress | None = None) -> tuple[list[dict[str, Any]], str | None, int]:
    """Build one clip: (manifest rows, failure reason or None, source frames). Never raises for a
    bad clip (``KeyboardInterrupt`` propagates, and :class:`RunStopped` for a full output disk). Runs in the driver (local runs) or in a worker.
    ``located``: a future of the clip's :func:`~mime_fast.subsets.locate_subject` (detection
    started ahead), or None; when it failed on the clip, the clip is built as without it, so its
    failure reason is the same whichever way it was built; ``progress``:
    :func:`~mime_fast.subsets.build_subsets`'s."""
    if spec.error:  # a duplicate id's row is told apart, so that it never supersedes the clip's (manifest.compact)
        return _failed(spec, spec.error, run, DUPLICATE if spec.duplicate_of is not None else None)
    try:
        landmarks = spec.landmarks
        if located is not None:
            try:
                landmarks = _wait(located, progress)
            except ClipError:  # the build below meets it again, in its own order: the reason (audio
                landmarks = None  # or video first) is the one a worker process, detecting inside, gives
        result = build_subsets(spec.path, out_dir, landmarks=landmarks, subsets=codes, clip_id=spec.clip_id,
                               progress=progress, settings=settings)
    except ClipError as exc:  # the clip itself: the reason in plain words, FFmpeg's message apart
        _raise_if_interrupted(exc)
        _raise_if_environment(exc, out_dir)
        return _failed(spec, exc.reason, run, exc.detail)
    except Exception as exc:  # one bad clip never stops the batch (a full disk does: RunStopped)
        _raise_if_interrupted(exc)
        _raise_if_environment(exc, out_dir)
        reason = str(exc) or type(exc).__name__
        return _failed(spec, reason, run, type(exc).__name__)
    return _rows_for(spec, result, out_dir, run), None, result.source_frames


def _wait(future, progress: Progress | None):
    """``future.result()``, asking ``progress(0)`` every 0.1 s meanwhile: a Ctrl-C flagged while
    the clip's detection finishes on the other thread stops the wait (``progress`` raises)."""
    while True:
        try:
            return future.result(timeout=0.1)
        except FuturesTimeout:
            if progress is not None:
                progress(0)


def _raise_if_interrupted(exc: BaseException) -> None:
    """An error that a Ctrl-C caused (FFmpeg stopped by PyAV's interrupt callback, anywhere in the
    chain of causes) is the interrupt, not a failure of the clip: it must not get a failed row."""
    import av

    for e in _causes(exc):
        if isinstance(e, (KeyboardInterrupt, av.error.ExitError)):
            raise KeyboardInterrupt from exc


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the errors behind it (``__cause__``, else ``__context__``), each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _face_codes(codes: Iterable[str]) -> bool:
    return bool(face_codes(codes))


def _detects(spec: ClipSpec, codes: list[str]) -> bool:
    """Whether building ``spec`` runs the subject detection (no landmarks given, a face subset asked)."""
    return not spec.error and spec.landmarks is None and _face_codes(codes)
