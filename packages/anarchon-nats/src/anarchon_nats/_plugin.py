"""Registers :class:`NatsBackend` with anarchon (entry point ``nats`` in the group ``anarchon``)."""

from __future__ import annotations

from anarchon.backend import Backend
from anarchon.hookspecs import hookimpl

from .backend import NatsBackend


@hookimpl
def anarchon_register_backends() -> list[type[Backend]]:
    return [NatsBackend]
