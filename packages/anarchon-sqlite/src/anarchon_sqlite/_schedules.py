"""Stored schedules in the SQLite file: ``anarchon_schedules``, ``anarchon_schedule_log`` and a counter row.

One row per schedule name (``record`` NULL: a tombstone, kept
:data:`~anarchon.schedules.TOMBSTONE_MS` so every instance sees the removal),
each name's change log, and ``anarchon_schedule_counter``, the one row every
change takes its revision from. The counter is a row rather than
``MAX(revision)`` because purging a tombstone that held the highest revision
would move the maximum back and hand that revision out again. Added like the
registry, when a file is opened, so older releases ignore them.

A change is one ``BEGIN IMMEDIATE`` transaction (the write lock serialises
every process's changes, so the revision check and the write cannot be
split by another writer). A refused change still commits the purge of old
tombstones, as the reference :mod:`anarchon._memory_schedules` does, and is
raised only after that commit; nothing else is written. The counter's read,
every instance's poll each second, is one row by primary key and takes no
write lock; what changed after a revision is one query on the revision index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from anarchon.errors import ScheduleConflictError
from anarchon.options import check_job_name
from anarchon.schedules import LOG_KEEP, REUSE_AFTER_MS, TOMBSTONE_MS

from ._sql import statement
from ._store import Body

T = TypeVar("T")

__all__ = ["SchedulesMixin"]


def _put(name: str, record: str | None, expect: int | None, change: str) -> Body[tuple[int | None, int]]:
    """The change as a transaction body: ``(new revision, current)``, the revision ``None`` when refused.

    Refusal is an answer, not an exception, so the transaction commits the purge before the
    caller raises (an exception would roll it back).
    """

    def body(conn: sqlite3.Connection, now: int) -> tuple[int | None, int]:
        cutoff = now - TOMBSTONE_MS
        conn.execute(statement("schedules_purge_logs"), (cutoff,))
        conn.execute(statement("schedules_purge"), (cutoff,))
        row = conn.execute(statement("schedules_one"), (name,)).fetchone()
        current = int(row[1]) if row is not None and row[0] is not None else 0
        if (expect is not None and expect != current) or (record is None and current == 0):
            return None, current
        counter = conn.execute(statement("schedules_revision")).fetchone()
        revision = (int(counter[0]) if counter is not None else 0) + 1
        conn.execute(statement("schedules_counter_set"), (revision,))
        conn.execute(statement("schedules_upsert"), (name, record, revision, now))
        conn.execute(statement("schedules_log_insert"), (name, revision, change))
        conn.execute(statement("schedules_log_trim"), (name, LOG_KEEP))
        return revision, current

    return body


def _forget(older_than_ms: int) -> Body[list[str]]:
    """Tombstones older than asked go with their logs, and each name's job state and runs unless it is in use."""

    def body(conn: sqlite3.Connection, now: int) -> list[str]:
        forgotten = []
        for name, removed_ms in conn.execute(statement("schedules_tombstones_old"), (now - older_than_ms,)).fetchall():
            conn.execute(statement("schedules_drop_tombstone"), (name,))
            conn.execute(statement("schedules_drop_log"), (name,))
            in_use = (
                conn.execute(statement("revive_held"), (name, now)).fetchone()
                or conn.execute(statement("forget_mark_after"), (name, removed_ms + REUSE_AFTER_MS)).fetchone()
            )
            if in_use:
                continue
            for forget in ("forget_runs", "forget_job", "forget_pause", "forget_requests"):
                conn.execute(statement(forget), (name,))
            forgotten.append(str(name))
        return forgotten

    return body


def _revision(conn: sqlite3.Connection) -> int:
    row = conn.execute(statement("schedules_revision")).fetchone()
    return int(row[0]) if row is not None else 0


def _since(conn: sqlite3.Connection, revision: int) -> list[tuple[str, str | None, int]]:
    """Every row changed after ``revision`` in one query (``since(0)``: every live schedule, no tombstones)."""
    if revision == 0:
        cursor = conn.execute(statement("schedules_every"))
    else:
        cursor = conn.execute(statement("schedules_since"), (revision,))
    return [(str(name), record, int(rev)) for name, record, rev in cursor]


def _one(conn: sqlite3.Connection, name: str) -> tuple[str, int] | None:
    row = conn.execute(statement("schedules_one"), (name,)).fetchone()
    return None if row is None or row[0] is None else (str(row[0]), int(row[1]))


def _log(conn: sqlite3.Connection, name: str) -> list[tuple[int, str]]:
    return [(int(rev), str(change)) for rev, change in conn.execute(statement("schedules_log"), (name,))]


class SchedulesMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`."""

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        check_job_name(name)
        revision, current = await self._write(_put(name, record, expect, change))
        if revision is None:
            raise ScheduleConflictError(name, expect, current)
        return revision

    async def schedules_revision(self) -> int:
        return await self._call(_revision)

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        return await self._call(lambda conn: _since(conn, revision))

    async def schedule(self, name: str) -> tuple[str, int] | None:
        return await self._call(lambda conn: _one(conn, name))

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        return await self._call(lambda conn: _log(conn, name))

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        return await self._write(_forget(older_than_ms))
