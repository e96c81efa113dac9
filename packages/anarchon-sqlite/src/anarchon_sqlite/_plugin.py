"""Registers :class:`SQLiteBackend` with anarchon through the ``anarchon`` entry point."""

from __future__ import annotations

from anarchon.backend import Backend
from anarchon.hookspecs import hookimpl

from .backend import SQLiteBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [SQLiteBackend]
