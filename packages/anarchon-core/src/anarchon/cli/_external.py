"""Commands that installed plugins add to ``anarchon`` (see :mod:`anarchon.commands`).

The core knows them only through the hook ``anarchon_register_commands``;
:data:`~anarchon.distributions.COMMAND_DISTRIBUTIONS` names the first-party
ones that are not installed, so ``anarchon web`` without anarchon-web says
what to install instead of "invalid choice".
"""

from __future__ import annotations

import logging

from ..commands import CliCommand
from ..distributions import COMMAND_DISTRIBUTIONS, install_hint
from ..plugins import PluginManager

__all__ = ["missing_commands", "plugin_commands"]

log = logging.getLogger("anarchon.cli")


def plugin_commands(taken: set[str]) -> dict[str, CliCommand]:
    """The installed plugins' commands by name; one whose name is ``taken`` (or given twice) is refused."""
    found: dict[str, CliCommand] = {}
    for commands in PluginManager().pluggy.hook.anarchon_register_commands():
        for command in commands:
            if command.name in taken:
                log.warning("a plugin's command %r is ignored: anarchon has a command of that name", command.name)
            elif command.name in found and found[command.name] is not command:
                log.warning(
                    "two plugins add a command %r (%s and %s); the first is kept",
                    command.name,
                    getattr(found[command.name].main, "__module__", "?"),
                    getattr(command.main, "__module__", "?"),
                )
            else:
                found[command.name] = command
    return found


def missing_commands(installed: dict[str, CliCommand]) -> dict[str, str]:
    """First-party commands whose distribution is not installed: name -> what to run to get it."""
    return {
        name: install_hint(distribution)
        for name, distribution in COMMAND_DISTRIBUTIONS.items()
        if name not in installed
    }
