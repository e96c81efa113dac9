"""The revive claim (:meth:`anarchon.LeaseBackend.revive`) as one statement per slot (``sql/statement_revive.sql``).

A slot whose scheduled record is ``skipped`` (for overlap) is granted again
when no run of the job holds an unexpired lease, judged as the claim
function's overlap test judges it (the owner's heartbeat included): the
skipped row becomes a running one, with the next fencing token of the job;
``mark``, ``won`` and ``run_count`` stay. The job row's update is the
statement's gate, so racing revives of one slot, and a revive racing any
other grant of the job, meet on that row: every grant moves ``fencing``
under its lock, and an update that finds ``fencing`` moved since the
statement's snapshot changes nothing and answers ``again`` (the snapshot
may miss the run that grant made), which is sent again with a fresh one.
A retry after a lost answer finds its own running row (same token) and is
answered ``WON`` again, so the backend's one retry on a fresh connection is
safe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.records import decode_run
from anarchon.run import datetime_to_ms, ms_to_datetime

from ._standbys import StandbysMixin
from ._statements import Statements

__all__ = ["ReviveMixin", "revive_one"]

T = TypeVar("T")

#: How many times one slot's statement is sent while other grants of its job keep moving
#: ``fencing`` under it (each ``again`` means one committed within a few milliseconds);
#: past that the answer is ``UNKNOWN``, which runs nothing.
_TRIES = 5

_RECORD = (
    "status", "instance", "attempt", "fencing", "catch_up", "missed",
    "started_at", "finished_at", "duration_ms", "error",
)  # fmt: skip


async def revive_one(conn: asyncpg.Connection, sql: str, c: Claim, timeout: float) -> ClaimResult:
    """Decide one revive claim: one statement, sent again only while it answers ``again``."""
    args = (c.job, c.slot_ms, c.token, c.instance, ms_to_datetime(c.now_ms), c.catch_up, c.missed, c.options.lease_ms)
    for _ in range(_TRIES):
        row = await conn.fetchrow(sql, *args, timeout=timeout)
        if row is None:
            return ClaimResult(Outcome.LOST)
        outcome = row["outcome"]
        if outcome == "again":
            continue
        if outcome == "won":
            if row["revived_fencing"] is not None:
                return ClaimResult(Outcome.WON, c.granted(fencing=row["revived_fencing"], lease_ms=c.options.lease_ms))
            started = row["started_at"]
            grant = c.granted(
                attempt=row["attempt"],
                fencing=row["fencing"],
                lease_ms=row["lease_ms"],
                started_at_ms=datetime_to_ms(started) if started else None,
            )
            return ClaimResult(Outcome.WON, grant)
        record = decode_run({"slot_ms": c.slot_ms, **{k: row[k] for k in _RECORD}}, job=c.job)
        return ClaimResult(Outcome.SKIPPED if outcome == "skipped" else Outcome.LOST, record=record)
    return ClaimResult(Outcome.UNKNOWN)


class ReviveMixin(StandbysMixin):
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`: :meth:`anarchon.LeaseBackend.revive`."""

    _timeout: float
    _sql: Statements

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    async def revive(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """One statement (one round trip, one transaction) per claim; the scheduler sends one at a time."""
        self._missing_schema()
        results: list[ClaimResult] = []
        standbys = self._standbys_to_wait()
        for c in claims:

            async def op(conn: asyncpg.Connection, retry: bool, c: Claim = c) -> ClaimResult:
                answer = await revive_one(conn, self._sql.revive, c, self._timeout)
                return (await self._confirm(conn, standbys, [answer]))[0]

            results.append(await self._call("revive", op))
        return results
