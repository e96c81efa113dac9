"""Subcommands of ``anarchon`` that other distributions add, as pytest and tox let plugins add theirs.

A distribution above the core (the dashboard, ``anarchon-web``) implements the
hook :func:`anarchon.hookspecs.anarchon_register_commands` and returns a
:class:`CliCommand` for each command it brings. The core lists them in
``anarchon --help`` and hands them their arguments, so it never imports the
distribution itself: the arrow runs from the plugin down to the core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CliCommand"]


@dataclass(frozen=True)
class CliCommand:
    """One ``anarchon NAME …`` command provided by a plugin.

    ``main(argv, prog)`` receives the arguments after ``NAME`` and the program
    name to print in its usage (``"anarchon NAME"``), parses them itself and
    returns the exit status. Import heavy modules inside ``main``, not at the
    plugin module's top: every scheduler loads the plugin modules of the
    ``anarchon`` entry-point group.
    """

    name: str
    help: str
    main: Callable[[Sequence[str], str], int]
