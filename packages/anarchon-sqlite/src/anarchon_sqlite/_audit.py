"""The audit trail in the SQLite file: ``anarchon_audit``, one row per entry, never updated.

``id`` is ``INTEGER PRIMARY KEY AUTOINCREMENT``: SQLite then never hands out
an id again, even once the trim deleted the highest rows, so ids grow for as
long as the file lives and ``before_id`` pages stay stable. An append is one
``BEGIN IMMEDIATE`` transaction (the insert, then the trim of what falls
beyond :data:`~anarchon.audit.AUDIT_KEEP`: one range delete on the primary
key). Reads by job use the ``(job, id)`` index. Added like the registry, when
a file is opened, so older releases ignore the table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from anarchon.audit import AUDIT_KEEP
from anarchon.options import check_job_name

from ._sql import statement
from ._store import Body

T = TypeVar("T")

__all__ = ["AuditMixin"]

#: ``before_id`` when none is given: above every id SQLite hands out.
_TOP = 2**63 - 1


def _append(job: str, entry: str, keep: int) -> Body[int]:
    def body(conn: sqlite3.Connection, now: int) -> int:
        entry_id = conn.execute(statement("audit_insert"), (job, entry)).lastrowid
        assert entry_id is not None
        conn.execute(statement("audit_trim"), (entry_id - keep,))
        return int(entry_id)

    return body


class AuditMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`."""

    #: How many entries the file keeps (a test may lower it).
    audit_keep: int = AUDIT_KEEP

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def audit_append(self, job: str, entry: str) -> int:
        check_job_name(job)
        return await self._write(_append(job, entry, self.audit_keep))

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        top = _TOP if before_id is None else before_id
        query = statement("audit_entries" if job is None else "audit_entries_job")
        args: tuple[object, ...] = (top, limit) if job is None else (top, limit, job)
        rows = await self._call(lambda conn: conn.execute(query, args).fetchall())
        return [(int(i), str(e)) for i, e in rows]
