"""The ``mime-fast`` command-line reference, generated from the parser (:func:`mime_fast.cli.parser`).

``python -m mime_fast.cli.reference > docs/cli.md`` writes the docs site's CLI page; run it after
changing a command, an option or its help, and commit the page (``tests/test_cli_reference.py``
fails while the committed page differs from what the parser gives).

The page is made from the parser's actions, not from argparse's help text, so it is the same on
every Python version (argparse lays its help out differently from one version to the next).
"""

from __future__ import annotations

import argparse
import sys

from . import parser

__all__ = ["REGENERATE", "markdown"]

#: The one command that regenerates the committed page.
REGENERATE = "python -m mime_fast.cli.reference > docs/cli.md"


def _subcommands(ap: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Each command's name, its one-line help and its parser, in the order ``mime-fast --help`` lists them."""
    # argparse keeps the sub-parsers on its (private) _SubParsersAction: the public API has no other way.
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}
    return {}


def _cell(text: str) -> str:
    """One line of Markdown that shows ``text`` as written (no HTML, no emphasis, no table cell break)."""
    text = " ".join(str(text).split())
    for char, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("*", "\\*"), ("_", "\\_")):
        text = text.replace(char, escaped)
    return text


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`" + (" ..." if action.nargs in ("+", "*") else "")
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    metavar = action.metavar or (action.dest.upper() if not action.choices else "{" + ",".join(map(str, action.choices)) + "}")
    return ", ".join(f"`{s} {metavar}`" for s in action.option_strings)


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog, "default": action.default}
    return _cell(text)


def _synopsis(name: str, sub: argparse.ArgumentParser) -> str:
    words = [f"mime-fast {name}"]
    for action in sub._actions:
        if not action.option_strings and action.help != argparse.SUPPRESS:
            word = action.metavar or action.dest
            words.append({"+": f"{word} [{word} ...]", "*": f"[{word} ...]", "?": f"[{word}]"}.get(action.nargs, word))
    if any(a.option_strings for a in sub._actions):
        words.append("[options]")
    return " ".join(words)


def _command(name: str, summary: str, sub: argparse.ArgumentParser) -> list[str]:
    out = [f"## `mime-fast {name}`", "", _cell(summary) + ".", ""]
    if sub.description:
        out += [_cell(sub.description), ""]
    out += ["```text", _synopsis(name, sub), "```", ""]
    for group in sub._action_groups:
        actions = [a for a in group._group_actions
                   if a.help != argparse.SUPPRESS and a.dest != "help"]  # (every command has --help)
        if not actions:
            continue
        title = "arguments" if group.title == "positional arguments" else (
            "options" if group.title in ("options", "optional arguments") else group.title)
        out += [f"**{title}**", "", "| argument | description |", "|---|---|"]
        out += [f"| {_names(a)} | {_help(a, sub.prog)} |" for a in actions]
        out.append("")
    if sub.epilog:
        out += [_cell(sub.epilog), ""]
    return out


def markdown() -> str:
    """The reference page, Markdown."""
    ap = parser()
    commands = _subcommands(ap)
    out = ["# Command-line reference", "",
           f"<!-- Generated from mime_fast.cli.parser(): do not edit; regenerate with `{REGENERATE}`. -->", "",
           _cell(ap.description or ""), "", "```text", "mime-fast [-v] COMMAND [options]", "```", "",
           "| command | what it does |", "|---|---|"]
    out += [f"| [`{name}`](#mime-fast-{name}) | {_cell(summary)} |" for name, (summary, _) in commands.items()]
    out += ["", "`-v`, `--verbose` (before or after the command) shows the traceback of an error.", ""]
    if ap.epilog:
        out += [_cell(ap.epilog), ""]
    for name, (summary, sub) in commands.items():
        out += _command(name, summary, sub)
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
