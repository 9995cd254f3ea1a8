"""The settings' flags of ``mime-fast build``, generated from the option fields
(:data:`mime_fast.options.FIELDS`): one flag per field with its type, default and help, and the
messages about settings written with the flags the user gave."""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable, get_args

from ..options import FIELDS, GROUPS, OptionField

__all__ = ["RUN_OPTIONS", "Switch", "add_settings", "as_option", "options"]


def option_value(f: OptionField) -> Callable[[str], Any]:
    """What a setting's flag turns its text into: the field's number type (its ``none`` word:
    ``None``), a ``Literal`` with numbers ("55" -> 55, other words lower-cased), else the text; the
    value itself is checked by its option group (one message, :mod:`mime_fast.options`)."""
    if f.choices is not None:
        if all(isinstance(c, str) for c in f.choices):
            return str

        def word(text: str) -> Any:
            v = text.strip().lower()
            return int(v) if v.isdigit() else v

        return word
    number = next(t for t in (get_args(f.type) or (f.type,)) if t is not type(None))
    if f.none is None:
        return number

    def maybe(text: str) -> Any:
        return None if text.strip().lower() == f.none else number(text)

    maybe.__name__ = number.__name__  # argparse's "invalid float value"
    return maybe


def shown(f: OptionField) -> str:
    """A setting's default as ``--help`` states it."""
    if isinstance(f.default, bool):
        return "on" if f.default else "off"
    return f.none if f.default is None else str(f.default)


class Switch(argparse.Action):
    """``--x`` / ``--no-x``: True / False."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, not option_string.startswith("--no-"))

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def add_settings(ap: argparse.ArgumentParser) -> None:
    """One flag per option of :class:`mime_fast.options.Settings`, generated from its field: the
    keyword's ``--kebab-case`` (older names as aliases), its type, default and help; ``--x/--no-x``
    for a switch; one argument group per option group."""
    groups = {g: ap.add_argument_group(cls.TITLE) for g, cls in GROUPS.items()}
    for f in FIELDS:
        help = f"{f.help} (default: {shown(f)})".replace("%", "%%")
        if isinstance(f.default, bool):
            flags = [x for flag in f.flags for x in (flag, "--no-" + flag[2:])]
            groups[f.group].add_argument(*flags, dest=f.name, action=Switch, default=f.default, help=help)
            continue
        metavar = "{" + ",".join(str(c) for c in f.choices) + "}" if f.choices else f.metavar
        if f.none is not None:
            metavar = f"{metavar}|{f.none}"
        groups[f.group].add_argument(*f.flags, dest=f.name, type=option_value(f), default=f.default,
                                     metavar=metavar, help=help)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a command line gives, by keyword (every option: the defaults are the fields')."""
    return {f.name: getattr(args, f.name) for f in FIELDS}


#: Options of a run that are not settings, as their flags appear in messages.
RUN_OPTIONS = ("workers", "clips_per_process", "ray_cpus_per_clip", "clip_timeout")


def as_option(message: str, argv: list[str]) -> str:
    """A message about settings (:mod:`mime_fast.options`) with each option named as its flag: the
    one given on the command line ``argv`` where it has several."""
    flags = {n: f.flags for f in FIELDS for n in f.names}
    flags.update({n: ("--" + n.replace("_", "-"),) for n in RUN_OPTIONS})

    def flag(m: re.Match) -> str:
        given = [x for x in flags[m[1]] if any(a == x or a.startswith(x + "=") for a in argv)]
        return (given or flags[m[1]])[0]

    return re.sub(r"\b(" + "|".join(sorted(flags, key=len, reverse=True)) + r")\b", flag, message)
