"""What every command shares: the two errors a command raises (a usage error, exit status 2; a run
that cannot go on, exit status 1), the parser that turns argparse's own errors into usage errors,
the one line an error becomes on stderr, and a few of many clips named in one line."""

from __future__ import annotations

import argparse
from typing import NoReturn

from ..corpus import RunStopped

__all__ = ["Parser", "RunError", "UsageError", "describe", "first_few", "one_line"]


class UsageError(Exception):
    """A bad command line: one line on stderr, exit status 2."""


class RunError(Exception):
    """The run cannot go on (its environment): one line on stderr, exit status 1."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def first_few(items, shown: int = 5) -> str:
    """``items`` named, the first ``shown`` of them and a count of the rest: "a, b, c and 4 more"."""
    items = [str(i) for i in items]
    if len(items) <= shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown:,} more"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if isinstance(exc, (UsageError, RunError, RunStopped, OSError, ImportError)):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
