"""The revive claim (:meth:`anarchon.LeaseBackend.revive`) as SQL, one transaction per batch.

A slot whose scheduled record is ``skipped`` is granted again when no run of
the job holds an unexpired lease (its owner's heartbeat included): under the
write lock of ``BEGIN IMMEDIATE`` the skipped row is replaced by a running
one with the next fencing token, so of racing instances the first replaces
it and the others find it running under another token. ``mark``, ``won``
and ``kept`` stay (one row replaced by one).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from anarchon.backend import Claim, ClaimResult, Outcome, next_fencing
from anarchon.run import RunStatus

from ._sql import statement
from ._store import _INSERT_RUN, _SELECT_RUN, Body, Row, _grant, _run

__all__ = ["ReviveMixin", "revive"]

T = TypeVar("T")


def _revive_one(conn: sqlite3.Connection, c: Claim, now: int) -> ClaimResult:
    existing: Row | None = conn.execute(_SELECT_RUN, (c.job, c.slot_ms, 0)).fetchone()
    if existing is None:
        return ClaimResult(Outcome.LOST)
    if existing[13] == c.token and existing[3] == RunStatus.RUNNING.value:
        return ClaimResult(Outcome.WON, _grant(existing))
    if existing[3] != RunStatus.SKIPPED.value:
        return ClaimResult(Outcome.LOST, record=_run(existing))
    if conn.execute(statement("revive_held"), (c.job, now)).fetchone() is not None:
        return ClaimResult(Outcome.SKIPPED, record=_run(existing))
    _, fencing, _ = conn.execute(statement("backfill_job_read"), (c.job,)).fetchone()
    fencing = next_fencing(fencing, now)
    lease_ms = c.options.lease_ms
    row: Row = (
        c.job, c.slot_ms, 0, RunStatus.RUNNING.value, c.instance, 1, fencing, int(c.catch_up), c.missed,
        c.now_ms * 1000, None, None, None, c.token, lease_ms, now + lease_ms, 0,
    )  # fmt: skip
    conn.execute(statement("revive_delete"), (c.job, c.slot_ms))
    conn.execute(_INSERT_RUN, row)
    conn.execute(statement("revive_job_fencing"), (fencing, c.job))
    return ClaimResult(Outcome.WON, _grant(row))


def revive(claims: Sequence[Claim]) -> Body[list[ClaimResult]]:
    """Decide a batch of revive claims, in order, in one transaction."""
    return lambda conn, now: [_revive_one(conn, c, now) for c in claims]


class ReviveMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`: :meth:`anarchon.LeaseBackend.revive`."""

    if TYPE_CHECKING:  # the backend's own, used here

        async def _write(self, body: Body[T]) -> T: ...

    async def revive(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if not claims:
            return []
        return await self._write(revive(claims))
