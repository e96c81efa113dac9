"""Registers :class:`MemoryBackend` through the same hook third parties use."""

from __future__ import annotations

from .backend import Backend
from .hookspecs import hookimpl
from .memory import MemoryBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [MemoryBackend]
