"""The ``mime-fast`` command: ``mime-fast COMMAND --help`` describes each command.

Exit status: 0 success; 1 a clip failed, or the run could not go on (its environment: an output
folder that cannot be written, CUDA or a model missing, …); 2 a usage error (an unknown option or
subset, a bad setting, an input that does not exist, …), reported before any clip starts; 3 a
``build`` with one worker stopped because a clip made no progress for ``--clip-timeout`` (the
rerun builds that clip in a worker process of its own); 130 interrupted (Ctrl-C; ``build`` resumes
where it stopped when rerun). Errors are one line on stderr;
``--verbose`` adds the traceback.

One module per command family, each with its parser (``add``) and its function (``run``), which
only checks its arguments and calls the package: :mod:`.build` (:func:`mime_fast.corpus.run_corpus`),
:mod:`.curate` (:func:`mime_fast.curate.curate`), :mod:`.coe` (:func:`mime_fast.coe.run`),
:mod:`.evaluate` (:func:`mime_fast.evaluate`), :mod:`.audit` (:func:`mime_fast.audit.audit`),
:mod:`.export` (:func:`mime_fast.export.export`) and
:mod:`.tools` (demo, summary, preview, models, info).  They share the errors of :mod:`.errors` and
the error handling and exit statuses of :func:`main` here.  ``build``'s settings flags are generated
from :data:`mime_fast.options.FIELDS` (:mod:`.flags`); its run options (``--workers``, ``--ray``,
``--no-detect-ahead``, ...) and ``audit``'s flags are written by hand: they are keywords of those
functions, not fields, and differ from them where a command must (``--workers`` defaults to a count
chosen for the device, ``--detect-size 0`` means the native size).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from typing import Callable

from ..corpus import RunStopped
from ..corpus.interrupts import stacks_on_sigusr1
from . import audit, build, coe, curate, evaluate, export, flags, tools  # noqa: F401 - flags: the settings a command line gives
from .errors import Parser, RunError, UsageError, describe, one_line

__all__ = ["COMMANDS", "RunError", "UsageError", "main", "parser"]

DESCRIPTION = """\
Privacy degradation of emotion video clips: the seven MIME subsets FM (clear), FDM (face lightly
blurred), FSM (face heavily blurred), VMM (black video, audio), FDAM, FSAM and AMM (video without
audio) of each clip, and a manifest."""

EPILOG = """\
exit status: 0 success, 1 a clip failed or the run could not go on, 2 usage error, 130 interrupted
(Ctrl-C: rerun the same command to resume). Run 'mime-fast COMMAND --help' for a command's options."""


def parser() -> argparse.ArgumentParser:
    """The ``mime-fast`` argument parser (one sub-parser per command)."""
    # --verbose is accepted before and after the command (SUPPRESS: a command's default does not
    # overwrite a --verbose given before it)
    common = Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    ap = Parser(prog="mime-fast", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true", help="show the traceback of an error")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser,
                            title="commands")
    tools.add_demo(sub, common)
    build.add(sub, common)
    curate.add(sub, common)
    tools.add_summary(sub, common)
    tools.add_preview(sub, common)
    tools.add_models(sub, common)
    coe.add(sub, common)
    evaluate.add(sub, common)
    audit.add(sub, common)
    export.add(sub, common)
    tools.add_info(sub, common)
    return ap


COMMANDS = ("demo", "build", "curate", "summary", "preview", "models", "coe", "eval", "audit", "export", "info")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = next((a for a in argv if not a.startswith("-")), None)  # for errors raised while parsing
    command = f"mime-fast {named}" if named in COMMANDS else "mime-fast"
    verbose = "--verbose" in argv or "-v" in argv
    stacks_on_sigusr1()  # kill -USR1: every thread's stack on stderr (a hung run)
    try:
        args = parser().parse_args(argv)
        args.argv = argv  # the flags as given, for messages (flags.as_option)
        command, verbose = f"mime-fast {args.command}", args.verbose
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except UsageError as exc:
        message = one_line(exc).replace("(see 'mime-fast --help')", f"(see '{command} --help')")
        print(f"{command}: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of our output went away (`mime-fast ... | head`): not an error of ours
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error at exit's flush)
        return 141  # as a program killed by SIGPIPE
    except KeyboardInterrupt:
        if verbose:
            traceback.print_exc()
        resumable = command in ("mime-fast build", "mime-fast demo", "mime-fast coe", "mime-fast eval",
                                 "mime-fast curate", "mime-fast export")  # (curate: the probes done are cached)
        print("interrupted, rerun to resume" if resumable else "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the run's environment, or a bug: one line (--verbose: traceback)
        if verbose:
            traceback.print_exc()
        expected = isinstance(exc, (RunError, RunStopped, OSError, ImportError))
        hint = "" if verbose or expected else " (--verbose shows the traceback)"
        print(f"{command}: error: {one_line(describe(exc))}{hint}", file=sys.stderr)
        return 1
