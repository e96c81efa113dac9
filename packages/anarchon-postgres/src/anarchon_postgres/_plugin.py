"""Registers :class:`PostgresBackend` with anarchon (entry point ``postgres``)."""

from __future__ import annotations

from anarchon.backend import Backend
from anarchon.hookspecs import hookimpl

from .backend import PostgresBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [PostgresBackend]
