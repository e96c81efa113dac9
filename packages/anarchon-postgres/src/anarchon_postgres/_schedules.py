"""Stored schedules in PostgreSQL: tables ``schedules``, ``schedule_log`` and ``schedule_counter`` (migration 8).

Every change is one call of the ``put_schedule`` function: one statement, one
transaction, serialised on the counter row, so the revision check, the write,
the counter and the log entry happen together or not at all, and a refused
change moves nothing (why the counter is a row, not a sequence). The
counter's read, every instance's poll each second, is one row by primary key;
what changed after a revision is one query on the revision index.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon.errors import ScheduleConflictError
from anarchon.options import check_job_name
from anarchon.schedules import LOG_KEEP, REUSE_AFTER_MS, TOMBSTONE_MS

from ._listen import NotifyMixin
from ._schema import quote_schema, render_sql

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["SchedulesMixin"]

T = TypeVar("T")

#: The migration that made the schedule tables: a schema from before it stores no schedule.
SCHEDULES_SINCE = 8


@dataclass(frozen=True)
class _Statements:
    """Each field is the resource file ``sql/statement_schedules_<field>.sql``, rendered for the schema."""

    put: str
    revision: str
    since: str
    every: str
    one: str
    log: str
    forget: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        **{f.name: render_sql(f"statement_schedules_{f.name}.sql", s).strip() for f in dataclasses.fields(_Statements)}
    )


class SchedulesMixin(NotifyMixin):
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`; ``wait_schedules`` is :class:`._listen.NotifyMixin`'s."""

    schema: str
    _timeout: float
    _read_only: bool
    schema_version: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _one(self, what: str, sql: str, *args: Any) -> list[Any]: ...

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    def _no_schedules(self) -> bool:
        """A look (``anarchon schedules``) at a schema from before migration 8: nothing stored, nothing made."""
        if self._read_only and (self.schema_version or 0) < SCHEDULES_SINCE:
            self._missing_schema()
            return True
        return False

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        check_job_name(name)
        sql, timeout = _statements(self.schema).put, self._timeout

        async def op(conn: asyncpg.Connection, retry: bool) -> tuple[int | None, int]:
            # retry: the first call's connection died, perhaps after its commit; the function then
            # answers a change it finds stored already as made, rather than as a conflict with itself.
            row = await conn.fetchrow(sql, name, record, expect, change, TOMBSTONE_MS, LOG_KEEP, retry, timeout=timeout)
            return row[0], row[1]

        revision, current = await self._call("put_schedule", op)
        if revision is None:
            raise ScheduleConflictError(name, expect, current)
        return int(revision)

    async def schedules_revision(self) -> int:
        if self._no_schedules():
            return 0
        rows = await self._one("schedules_revision", _statements(self.schema).revision)
        return int(rows[0][0]) if rows else 0

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        if self._no_schedules():
            return []
        sql = _statements(self.schema).every if revision == 0 else _statements(self.schema).since
        args = () if revision == 0 else (revision,)
        return [(row[0], row[1], row[2]) for row in await self._one("schedules_since", sql, *args)]

    async def schedule(self, name: str) -> tuple[str, int] | None:
        if self._no_schedules():
            return None
        rows = await self._one("schedule", _statements(self.schema).one, name)
        return None if not rows or rows[0][0] is None else (rows[0][0], rows[0][1])

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        if self._no_schedules():
            return []
        return [(row[0], row[1]) for row in await self._one("schedule_log", _statements(self.schema).log, name)]

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        if self._no_schedules():
            return []
        rows = await self._one("forget_removed", _statements(self.schema).forget, older_than_ms, REUSE_AFTER_MS)
        return [row[0] for row in rows]
