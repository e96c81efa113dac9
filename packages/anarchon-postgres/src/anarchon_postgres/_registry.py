"""The fleet registry in PostgreSQL: table ``registry`` of the schema (migration 7).

One row per instance: its head and job definitions (:mod:`anarchon.fleet`)
and ``expires_ms`` on the server's clock, pushed forward every registry
poll (every 3 s while the instance's heartbeat holds). The live read
joins the heartbeat table: an instance with a heartbeat row is live while
the row is, so a killed instance leaves the views with its heartbeat (about
1.5 s); one without, while its entry has not expired. Each call is one
statement.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon.fleet import REGISTRY_TTL_MS
from anarchon.liveness import LIVENESS_TTL_MS, RETAIN_DEAD_MS

from ._schema import quote_schema, render_sql

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["RegistryMixin"]

T = TypeVar("T")

#: The migration that made the ``registry`` table: a schema from before it holds no entry.
REGISTRY_SINCE = 7


@dataclass(frozen=True)
class _Statements:
    """Each field is the resource file ``sql/statement_registry_<field>.sql``, rendered for the schema."""

    register: str
    keep: str
    unregister: str
    live: str
    jobs: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        **{f.name: render_sql(f"statement_registry_{f.name}.sql", s).strip() for f in dataclasses.fields(_Statements)}
    )


class RegistryMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    schema: str
    _read_only: bool
    schema_version: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _one(self, what: str, sql: str, *args: Any) -> list[Any]: ...

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    def _no_registry(self) -> bool:
        """A look (``anarchon fleet``) at a schema from before the registry: nothing registered, nothing made."""
        if self._read_only and (self.schema_version or 0) < REGISTRY_SINCE:
            self._missing_schema()
            return True
        return False

    async def register(self, instance: str, head: str, jobs: str) -> None:
        sql = _statements(self.schema).register
        await self._one("register", sql, instance, head, jobs, REGISTRY_TTL_MS, RETAIN_DEAD_MS)

    async def keep_registered(self, instance: str) -> None:
        await self._one("keep_registered", _statements(self.schema).keep, instance, REGISTRY_TTL_MS)

    async def unregister(self, instance: str) -> None:
        await self._one("unregister", _statements(self.schema).unregister, instance)

    async def registered(self) -> list[tuple[str, str, int | None]]:
        if self._no_registry():
            return []
        out: list[tuple[str, str, int | None]] = []
        for instance, head, expires, alive in await self._one("registered", _statements(self.schema).live):
            seen = expires - REGISTRY_TTL_MS
            out.append((instance, head, seen if alive is None else max(seen, alive - LIVENESS_TTL_MS)))
        return out

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        if not instances or self._no_registry():
            return {}
        rows = await self._one("registered_jobs", _statements(self.schema).jobs, list(instances))
        return {row[0]: row[1] for row in rows}
