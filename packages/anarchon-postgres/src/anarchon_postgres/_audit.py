"""The audit trail in PostgreSQL: table ``audit`` of the schema (migration 11).

One row per entry, ``id`` an identity column, so ids only grow. An append is
one statement: the insert, and the delete of what falls beyond
:data:`~anarchon.audit.AUDIT_KEEP` below it (a range on the primary key).
Reads are one indexed query each, by job on ``(job, id)``. An append retried
on a fresh connection after the first one died may record the entry twice:
an audit trail had rather say something twice than lose it. A look
(``anarchon audit``) at a schema from before migration 11 reads nothing and
migrates nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anarchon.audit import AUDIT_KEEP
from anarchon.options import check_job_name

from ._schema import quote_schema, render_sql

__all__ = ["AuditMixin"]

#: The migration that made the ``audit`` table.
AUDIT_SINCE = 11
#: ``before_id`` when none is given: above every id a ``bigint`` identity hands out.
_TOP = 2**63 - 1


@dataclass(frozen=True)
class _Statements:
    """Each field is the resource file ``sql/statement_audit_<field>.sql``, rendered for the schema."""

    append: str
    entries: str
    entries_job: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        **{f.name: render_sql(f"statement_audit_{f.name}.sql", s).strip() for f in dataclasses.fields(_Statements)}
    )


class AuditMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    schema: str
    _read_only: bool
    schema_version: int | None
    #: How many entries the schema keeps (a test may lower it).
    audit_keep: int = AUDIT_KEEP

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _one(self, what: str, sql: str, *args: Any) -> list[Any]: ...

    async def audit_append(self, job: str, entry: str) -> int:
        check_job_name(job)
        (row,) = await self._one("audit_append", _statements(self.schema).append, job, entry, self.audit_keep)
        return int(row[0])

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        if self._read_only and (self.schema_version or 0) < AUDIT_SINCE:
            self._missing_schema()
            return []
        top = _TOP if before_id is None else before_id
        if job is None:
            rows = await self._one("audit_entries", _statements(self.schema).entries, top, limit)
        else:
            rows = await self._one("audit_entries", _statements(self.schema).entries_job, top, limit, job)
        return [(int(row[0]), str(row[1])) for row in rows]
