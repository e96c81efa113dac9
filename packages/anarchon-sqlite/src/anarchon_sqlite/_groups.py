"""Concurrency groups (capability ``groups``) in the SQLite file: two tables, one write per ask.

``anarchon_group_limits`` holds one row per group with a limit;
``anarchon_places`` one row per run that asked for a place (``running`` 0
while it waits), keyed by group and run (job, slot, manual: what
:attr:`~anarchon.groups.Place.key` spells), with the token and instance that
asked. Both are added when a file is opened, as the registry is, so older
releases ignore them.

:func:`places` is one ``BEGIN IMMEDIATE`` transaction on the host clock, as
every claim is, so it is the one atomic step the contract asks for, and does
what :class:`anarchon._memory_groups.MemoryGroups` does under its lock. Its
work follows the asks and the limit, not the group's size:

* a dead holder's places are found from the group's distinct holders, one
  seek each on ``anarchon_places_by_holder`` (a loose index scan), then
  deleted by holder; "dead" is the claims' rule (a record expired while some
  record is alive, :mod:`anarchon.liveness`), plus no record at all;
* the places held are counted and the oldest waiting ones admitted on
  ``anarchon_places_turn (group_name, running, slot_ms, job, manual)``: a
  range of ``running = 1`` (about the limit) and the first ``free`` rows of
  ``running = 0``, in :attr:`~anarchon.groups.Place.order`.

SQLite tells no other process of a freed place, so ``group_notify`` stays
off and the instances ask again every :data:`~anarchon.groups.GROUP_POLL_MS`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from anarchon.groups import GroupState, Place

from ._sql import statement
from ._store import Body

__all__ = ["GroupsMixin", "places"]

T = TypeVar("T")

_LEAVE = statement("places_leave")
# An ask stores its run's entry, waiting, unless the stored one has its token: a take-over's
# new token replaces the entry, which then waits again, in its slot's turn.
_ASK = statement("places_ask")
_DROP_DEAD = statement("places_drop_dead")
# The first (limit - held) waiting entries get places; no limit row: every waiting entry does.
_ADMIT = statement("places_admit")
_ANSWER = statement("places_answer")


def _run(place: Place) -> tuple[str, str, int, int]:
    return (place.group, place.job, place.slot_ms, int(place.manual))


def places(leave: Sequence[Place], take: Sequence[Place]) -> Body[list[bool]]:
    """Leaves first, then the asks, then each group asked in: drop dead holders, admit in order."""

    def body(conn: sqlite3.Connection, now: int) -> list[bool]:
        conn.executemany(_LEAVE, [(*_run(p), p.token) for p in leave])
        conn.executemany(_ASK, [(*_run(p), p.token, p.instance) for p in take])
        for group in dict.fromkeys(p.group for p in take):
            conn.execute(_DROP_DEAD, (group, now))
            conn.execute(_ADMIT, (group,))
        # An asker judged dead lost its own entry too: no place (the reference would have none either).
        answers = [conn.execute(_ANSWER, _run(p)).fetchone() for p in take]
        return [row is not None and bool(row[0]) for row in answers]

    return body


def _set_group(group: str, max_running: int | None) -> Body[None]:
    def body(conn: sqlite3.Connection, now: int) -> None:
        if max_running is None:
            conn.execute(statement("group_limit_delete"), (group,))
        else:
            conn.execute(statement("group_limit_set"), (group, max_running))

    return body


class GroupsMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`: the methods of capability ``groups``."""

    if TYPE_CHECKING:  # the backend's own, used here
        _clock: Callable[[], int]

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def set_group(self, group: str, max_running: int | None) -> None:
        await self._write(_set_group(group, max_running))

    async def groups(self) -> list[GroupState]:
        """One read (one snapshot, no write lock): every group with a limit or an entry, live entries counted."""
        clock = self._clock
        rows = await self._call(lambda conn: conn.execute(statement("groups_all"), (clock(),)).fetchall())
        return [
            GroupState(name, limit, int(running), int(waiting), oldest)
            for name, limit, running, waiting, oldest in rows
        ]

    async def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        if not leave and not take:
            return []
        return await self._write(places(leave, take))
