"""Concurrency groups in PostgreSQL: tables ``group_limits`` and ``group_places`` of the schema (migration 15).

:meth:`GroupsMixin.places` is one statement calling the ``places`` function
(``sql/places_function.sql``), so the leaves, the asks and each group's turn
are one transaction and one round trip, decided on the server's clock and
against the heartbeat records (``instances``) by the claims' own silence rule.
Concurrent calls meet on a transaction-scoped advisory lock per group, taken
in one order by every caller. A call retried on a fresh connection is safe: a
leave with its token, and an ask with its token, find their own earlier effect.

A place left and a limit set are notified on the schema's groups channel
(:func:`._schema.groups_channel`, capability ``group_notify``), heard by
:meth:`GroupsMixin.watch_groups` on the stored-schedule listener's
connection (:mod:`._listen`), as pauses are; a backend on a caller's pool
does not listen, and its instances ask again every
:data:`~anarchon.groups.GROUP_POLL_MS`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anarchon.groups import GroupState, Place

from ._schema import groups_channel, quote_schema, render_sql

__all__ = ["GROUPS_SINCE", "GroupsMixin"]

#: The migration that made the group tables: a look at a schema from before it finds no group.
GROUPS_SINCE = 15


@dataclass(frozen=True)
class _Statements:
    """Each field is the resource file ``sql/statement_groups_<field>.sql``, rendered for the schema."""

    set: str
    states: str
    places: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        **{f.name: render_sql(f"statement_groups_{f.name}.sql", s).strip() for f in dataclasses.fields(_Statements)}
    )


def _columns(places: Sequence[Place], *, instance: bool) -> tuple[list[Any], ...]:
    """The places as one list per field, as the ``places`` function takes them; an ask adds its instance."""
    columns: tuple[list[Any], ...] = (
        [p.group for p in places],
        [p.job for p in places],
        [p.slot_ms for p in places],
        [p.manual for p in places],
        [p.token for p in places],
    )
    return (*columns, [p.instance for p in places]) if instance else columns


class GroupsMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    schema: str
    _own_pool: bool
    _read_only: bool
    schema_version: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _one(self, what: str, sql: str, *args: Any) -> list[Any]: ...

        async def _hear(self, channel: str, handed: Callable[[str], None]) -> None: ...

    async def set_group(self, group: str, max_running: int | None) -> None:
        await self._one("set_group", _statements(self.schema).set, group, max_running)

    async def groups(self) -> list[GroupState]:
        if self._read_only and (self.schema_version or 0) < GROUPS_SINCE:
            # A look (``anarchon groups``) never migrates: a schema from before groups holds none.
            self._missing_schema()
            return []
        rows = await self._one("groups", _statements(self.schema).states)
        return [GroupState(row[0], row[1], int(row[2]), int(row[3]), row[4]) for row in rows]

    async def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        if not leave and not take:
            return []
        args = (*_columns(leave, instance=False), *_columns(take, instance=True))
        rows = await self._one("places", _statements(self.schema).places, *args)
        answers = {int(row[0]): bool(row[1]) for row in rows}
        return [answers.get(n, False) for n in range(1, len(take) + 1)]

    async def watch_groups(self, freed: Callable[[], None]) -> None:
        """Places left and limits set, on the stored-schedule listener's connection, until cancelled."""
        if not self._own_pool or self._read_only:
            return  # no connection of its own: the instance asks again every GROUP_POLL_MS
        await self._hear(groups_channel(self.schema), lambda _: freed())
