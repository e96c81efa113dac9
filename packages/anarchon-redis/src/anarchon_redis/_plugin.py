"""Registers :class:`RedisBackend` with anarchon (entry point ``redis`` in group ``anarchon``)."""

from __future__ import annotations

from anarchon.backend import Backend
from anarchon.hookspecs import hookimpl

from .backend import RedisBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [RedisBackend]
