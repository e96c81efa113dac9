"""Adds ``anarchon web`` to the core's command line, through the hook the core offers plugins.

Kept free of the dashboard's imports: every scheduler loads the modules of
the ``anarchon`` entry-point group, and a scheduler has no use for Starlette.
"""

from __future__ import annotations

from collections.abc import Sequence

from anarchon.commands import CliCommand
from anarchon.hookspecs import hookimpl


def _main(argv: Sequence[str], prog: str) -> int:
    from .cli import main

    return main(argv, prog=prog)


@hookimpl
def anarchon_register_commands() -> list[CliCommand]:
    return [CliCommand("web", "serve the dashboard of a fleet's schedule (anarchon-web)", _main)]
