"""Corpus-scale runs: many clips in, the MIME subsets and one manifest out.

Inputs (:func:`find_inputs`, :func:`discover`), any number of:

- a folder, searched recursively for video files (:data:`VIDEO_EXTENSIONS`, any case); the clip id
  is the file stem (a stem that is not UTF-8 with its undecodable bytes as ``%XX``:
  :func:`mime_fast.manifest.utf8_text`); a ``<stem>.npz`` / ``<stem>.json`` beside a clip is taken as its landmarks
  (:mod:`mime_fast.landmarks`); other files are skipped and listed (:attr:`Inputs.skipped`), and so
  are folders that hold a mime-fast build (:attr:`Inputs.builds`: an earlier output folder) and
  broken links (:attr:`Inputs.links`: a missing target, a loop) and what cannot be read
  (:attr:`Inputs.unreadable`); linked folders are followed, each
  real folder searched once;
- a video file (same rules);
- a ``.csv`` or ``.jsonl`` list with a ``path`` column (relative paths are relative to the list) and
  optional ``clip_id``, ``emotion`` (one of :data:`mime_fast.manifest.EMOTIONS`, any case),
  ``dataset`` and ``landmarks`` columns (read as ``utf-8-sig``: a byte order mark is no part of
  the first column's name; a JSONL line that is not an object is ``ValueError``, a row without a
  text path a failed clip).

Outputs: ``DIR/<SUBSET>/<clip_id>.mp4``, ``DIR/audio/<clip_id>.wav`` and the manifest
(:mod:`mime_fast.manifest`).

Safety: a clip that cannot be used (missing or unreadable file, duplicate clip id, unknown emotion,
corrupt video, no usable landmarks, …) gets manifest rows with status ``"failed"`` and the reason,
and the batch goes on (a duplicate's row is the second file's: the clip that keeps the id keeps its
outputs and rows, :func:`mime_fast.manifest.compact`); so does a clip whose worker process dies
building it (``--workers``: killed by the out-of-memory killer, a crash in a native library); with
one worker such a crash ends the run, and the rerun builds that clip in a worker process of its own
(:class:`~mime_fast.corpus.resume.InProgress`). Outputs are written under temporary names and
renamed when the clip is complete; manifest rows are appended after that, so a run killed at any
moment (even ``kill -9``) and rerun completes with no partial file and no duplicated row: a rerun
skips clips whose manifest rows match the files on disk (size and SHA-256), redoes the others, and
removes temporaries a killed run left behind (its processes ended, zombies included).  A rerun with
other values of a setting that changes the outputs is refused before anything is written
(:func:`~mime_fast.corpus.resume.check_same_settings`, :class:`SettingsChanged`).  An interrupted
run (``KeyboardInterrupt``: Ctrl-C) stops its clips in progress, removes their temporaries, compacts
the manifest (rows of finished clips only) and re-raises.

Progress: :func:`run_corpus` reports to a :class:`mime_fast.corpus.progress.Monitor` (clips skipped,
started, frames processed, finished).

The package, one concept per module, one way: :mod:`~mime_fast.corpus.inputs` (clips found and
validated) -> :mod:`~mime_fast.corpus.resume` (complete clips, stale temporaries) ->
:mod:`~mime_fast.corpus.clip` (one clip built, its manifest rows) ->
:mod:`~mime_fast.corpus.interrupts` (Ctrl-C) -> :mod:`~mime_fast.corpus.workers` (clips in this
thread, detected ahead, or on Ray) and :mod:`~mime_fast.corpus.pool` (in worker processes, a
worker that dies costing its clip, not the run) -> :mod:`~mime_fast.corpus.run` (:func:`run_corpus`);
:mod:`~mime_fast.corpus.progress` (what a run reports, and how it is shown) beside them.
"""

from __future__ import annotations

from ..spec import CODES
from .inputs import VIDEO_EXTENSIONS, ClipSpec, Inputs, discover, find_inputs
from .resume import SettingsChanged, clean_stale_temporaries, sha256_file
from .clip import Progress, RunStopped
from .workers import share_cores, worker_threads
from .run import CorpusSummary, check_settings, run_corpus

__all__ = ["VIDEO_EXTENSIONS", "ClipSpec", "CorpusSummary", "Inputs", "SettingsChanged", "check_settings", "discover",
           "find_inputs",
           "run_corpus", "clean_stale_temporaries", "sha256_file", "worker_threads", "share_cores", "Progress", "RunStopped",
           "ALL_SUBSETS"]

ALL_SUBSETS = CODES
