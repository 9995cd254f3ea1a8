"""How the CoE run drives its requests, shared with :mod:`mime_fast.evaluation`, which drives its
own the same way: samples on daemon threads with one stop event (:func:`drive`), errors in a user's
words (:func:`os_error_text`, :func:`describe_error`) and the API key kept out of them
(:func:`scrub_secret`)."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

__all__ = ["MIN_SECRET", "STOP_GRACE_S", "describe_error", "drive", "os_error_text", "scrub_secret"]


def os_error_text(exc: OSError) -> str:
    """An ``OSError`` in a user's words: the file, then why (``strerror``), without errno noise."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def describe_error(exc: BaseException) -> str:
    """A failed request's reason as a row records it: the HTTP status where the client gives one,
    the exception's type and message."""
    status = getattr(exc, "status_code", None)
    return f"{'HTTP %s: ' % status if status else ''}{type(exc).__name__}: {exc}"


#: The shortest API key searched for in error messages: a shorter one ("none", "EMPTY", "x") is a
#: placeholder that local servers ignore, not a secret, and it is found in ordinary words.
MIN_SECRET = 8


def scrub_secret(text: str | None, secret: str) -> str | None:
    """``text`` -- an error message, where servers quote the key they were given -- with the API key
    ``secret`` replaced by ``***``. Only there: the model's replies and the row's own fields are
    written as they are (a key like ``none`` or ``FM`` is a word of theirs)."""
    if text and len(secret) >= MIN_SECRET and secret in text:
        return text.replace(secret, "***")
    return text


T = TypeVar("T")  # what drive() hands its function: a sample

#: After Ctrl-C, or an error that stops the run, how long the requests in flight are waited for
#: (a reply that comes is cached, a sample it ends is kept) before they are abandoned.
STOP_GRACE_S = 2.0


def drive(samples: list[T], workers: int, one: Callable[[T], None], stop: threading.Event) -> None:
    """``one(sample)`` for each sample, in order, on ``workers`` daemon threads (a thread waiting on
    a slow request cannot hold the process at exit). Once ``stop`` is set -- by Ctrl-C here, an
    error raised by ``one``, or the caller -- no sample is started, the samples under way are given
    :data:`STOP_GRACE_S` to end, and the interrupt or the first error is raised."""
    todo = iter(samples)
    cond = threading.Condition()
    alive = workers
    errors: list[BaseException] = []

    def work() -> None:
        nonlocal alive
        try:
            while not stop.is_set():
                with cond:
                    sample = next(todo, None)
                if sample is None:
                    break
                one(sample)
        except BaseException as exc:  # noqa: BLE001 - raised in the driving thread
            with cond:
                errors.append(exc)
                stop.set()
        finally:
            with cond:
                alive -= 1
                cond.notify_all()

    def settle() -> None:
        with cond:
            cond.wait_for(lambda: alive == 0, timeout=STOP_GRACE_S)

    for i in range(workers):
        threading.Thread(target=work, name=f"coe-{i}", daemon=True).start()
    try:
        with cond:
            cond.wait_for(lambda: alive == 0 or stop.is_set())
    except BaseException:  # Ctrl-C
        stop.set()
        settle()
        raise
    settle()
    if errors:
        raise errors[0]


