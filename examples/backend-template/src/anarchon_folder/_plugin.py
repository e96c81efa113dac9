"""Registers :class:`FolderBackend` with anarchon through the ``anarchon`` entry point."""

from __future__ import annotations

from anarchon.backend import Backend
from anarchon.hookspecs import hookimpl

from .backend import FolderBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [FolderBackend]
