"""'Did you mean …?' for a mistyped command or option, so a typo costs one glance instead of a list to read."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence

__all__ = ["first_word", "suggestion", "unknown_options"]


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when one choice is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def first_word(argv: Sequence[str]) -> int | None:
    """Index of the command word: the first argument that is not an option of ``anarchon`` itself."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return i + 1 if i + 1 < len(argv) else None
        if not arg.startswith("-"):
            return i
    return None


def unknown_options(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The error for arguments ``parser`` did not recognise, each option with its nearest known one."""
    known = [s for action in parser._actions for s in action.option_strings]  # argparse has no public list
    parts = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        hint = suggestion(name, known) if name.startswith("-") else ""
        parts.append(f"{extra!r}{hint}")
    return "unrecognized argument(s): " + ", ".join(parts)
