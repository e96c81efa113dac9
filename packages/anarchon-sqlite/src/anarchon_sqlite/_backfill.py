"""The backfill claim (:meth:`anarchon.LeaseBackend.backfill`) as SQL, one transaction per batch.

A slot's run is granted only when the slot has no record of its scheduled
run: the record is the row the fleet's claim of that slot would write (same
primary key), so under the write lock of ``BEGIN IMMEDIATE`` the fleet and
every backfill meet at one row and one of them writes it. ``mark`` moves up
to the slot when it is above it, ``won`` stays; ``fencing`` and ``kept``
move as for any won claim.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from anarchon.backend import Claim, ClaimResult, Outcome, next_fencing
from anarchon.run import RunStatus

from ._sql import statement
from ._store import _INSERT_RUN, _SELECT_RUN, Body, Row, _grant, _run, _trim

__all__ = ["BackfillMixin", "backfill"]

T = TypeVar("T")


def _backfill_one(conn: sqlite3.Connection, c: Claim, now: int) -> ClaimResult:
    existing: Row | None = conn.execute(_SELECT_RUN, (c.job, c.slot_ms, 0)).fetchone()
    if existing is not None:
        if existing[13] == c.token and existing[3] == RunStatus.RUNNING.value:
            return ClaimResult(Outcome.WON, _grant(existing))
        return ClaimResult(Outcome.LOST, record=_run(existing))
    conn.execute(statement("jobs_ensure"), (c.job,))
    mark, fencing, kept = conn.execute(statement("backfill_job_read"), (c.job,)).fetchone()
    if mark is None or mark < c.slot_ms:
        mark = c.slot_ms
    fencing = next_fencing(fencing, now)
    lease_ms = c.options.lease_ms
    row: Row = (
        c.job, c.slot_ms, 0, RunStatus.RUNNING.value, c.instance, 1, fencing, int(c.catch_up), c.missed,
        c.now_ms * 1000, None, None, None, c.token, lease_ms, now + lease_ms, 0,
    )  # fmt: skip
    conn.execute(_INSERT_RUN, row)
    kept = _trim(conn, c.spec, kept + 1, now)
    conn.execute(statement("backfill_job_update"), (mark, fencing, kept, c.job))
    return ClaimResult(Outcome.WON, _grant(row))


def backfill(claims: Sequence[Claim]) -> Body[list[ClaimResult]]:
    """Decide a batch of backfill claims, in order, in one transaction."""
    return lambda conn, now: [_backfill_one(conn, c, now) for c in claims]


class BackfillMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`: :meth:`anarchon.LeaseBackend.backfill`."""

    _clock: Callable[[], int]

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def backfill(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if not claims:
            return []
        return await self._write(backfill(claims))
