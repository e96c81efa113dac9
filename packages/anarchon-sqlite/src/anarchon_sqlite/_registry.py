"""The fleet registry in the SQLite file: one row per instance, beside the heartbeat table.

``anarchon_registry`` holds each instance's head and job definitions
(:mod:`anarchon.fleet`) with ``expires_ms``, refreshed every registry poll
(every 3 s while the instance's heartbeat holds). An entry counts as
live while its instance's heartbeat row has not expired, or, without a
row, while the entry has not (a killed instance leaves with its heartbeat,
in about 1.5 s). Added like the pause tables, when a file is
opened, so older releases ignore it. Writes are one ``BEGIN IMMEDIATE``
transaction each; the reads take no write lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from anarchon.fleet import REGISTRY_TTL_MS
from anarchon.liveness import LIVENESS_TTL_MS, RETAIN_DEAD_MS

from ._sql import statement
from ._store import Body

T = TypeVar("T")

__all__ = ["RegistryMixin"]


def _register(instance: str, head: str, jobs: str) -> Body[None]:
    def body(conn: sqlite3.Connection, now: int) -> None:
        conn.execute(statement("registry_forget"), (now - RETAIN_DEAD_MS,))
        conn.execute(statement("registry_upsert"), (instance, head, jobs, now + REGISTRY_TTL_MS))

    return body


def _keep(instance: str) -> Body[None]:
    def body(conn: sqlite3.Connection, now: int) -> None:
        conn.execute(statement("registry_keep"), (instance, now + REGISTRY_TTL_MS))

    return body


def _unregister(instance: str) -> Body[None]:
    def body(conn: sqlite3.Connection, now: int) -> None:
        conn.execute(statement("registry_delete"), (instance,))

    return body


def _live(conn: sqlite3.Connection, now: int) -> list[tuple[str, str, int | None]]:
    out: list[tuple[str, str, int | None]] = []
    for instance, head, expires, alive in conn.execute(statement("registry_live"), (now,)):
        seen = expires - REGISTRY_TTL_MS
        out.append((instance, head, seen if alive is None else max(seen, alive - LIVENESS_TTL_MS)))
    return out


class RegistryMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`."""

    _clock: Callable[[], int]

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def register(self, instance: str, head: str, jobs: str) -> None:
        await self._write(_register(instance, head, jobs))

    async def keep_registered(self, instance: str) -> None:
        await self._write(_keep(instance))

    async def unregister(self, instance: str) -> None:
        await self._write(_unregister(instance))

    async def registered(self) -> list[tuple[str, str, int | None]]:
        now = self._clock()
        return await self._call(lambda conn: _live(conn, now))

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        wanted = json.dumps(list(instances))
        return await self._call(lambda conn: dict(conn.execute(statement("registry_jobs"), (wanted,)).fetchall()))
