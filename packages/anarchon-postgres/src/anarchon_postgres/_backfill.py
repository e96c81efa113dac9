"""The backfill claim (:meth:`anarchon.LeaseBackend.backfill`) as one short transaction per slot.

Under the job row's lock (taken first, as the claim function takes it), the
slot's scheduled run is inserted only when the slot has no row: the primary
key is the one the fleet's claim writes, so the fleet and every overlapping
backfill meet at one row. ``mark`` moves up to the slot when it is above
it (the claim function's fast path takes a slot above the mark to have no
row), ``won`` stays; ``fencing`` and ``run_count`` move as for any won
claim, and history is trimmed as a claim trims it. A retry after a lost answer finds its own running row (same token)
and is answered ``WON`` again, so the backend's one retry on a fresh
connection is safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.records import decode_run
from anarchon.run import RunStatus, datetime_to_ms, ms_to_datetime

from ._schema import render_sql
from ._standbys import StandbysMixin

__all__ = ["BackfillMixin", "BackfillStatements", "backfill_one"]

T = TypeVar("T")


@dataclass(frozen=True)
class BackfillStatements:
    """Each field is the resource file ``sql/statement_backfill_<field>.sql``, rendered by :func:`.render_sql`."""

    job_row: str
    lock: str
    existing: str
    count: str
    insert: str
    trim: str

    @classmethod
    def for_schema(cls, quoted_schema: str) -> BackfillStatements:
        """Every backfill statement for one schema, quoted by :func:`._schema.quote_schema`."""
        return cls(
            **{
                f.name: render_sql(f"statement_backfill_{f.name}.sql", quoted_schema).strip()
                for f in dataclasses.fields(cls)
            }
        )


async def backfill_one(conn: asyncpg.Connection, sql: BackfillStatements, c: Claim, timeout: float) -> ClaimResult:
    o = c.options
    async with conn.transaction():
        await conn.execute(sql.job_row, c.job, timeout=timeout)
        await conn.execute(sql.lock, c.job, timeout=timeout)
        row = await conn.fetchrow(sql.existing, c.job, c.slot_ms, timeout=timeout)
        if row is not None:
            if row["token"] == c.token and row["status"] == RunStatus.RUNNING.value:
                started = row["started_at"]
                grant = c.granted(
                    attempt=row["attempt"],
                    fencing=row["fencing"],
                    lease_ms=row["lease_ms"],
                    started_at_ms=datetime_to_ms(started) if started else None,
                )
                return ClaimResult(Outcome.WON, grant)
            fields = {k: v for k, v in row.items() if k not in ("token", "lease_ms")}
            return ClaimResult(Outcome.LOST, record=decode_run(fields, job=c.job))
        fencing, count = await conn.fetchrow(sql.count, c.job, c.slot_ms, timeout=timeout)
        await conn.execute(
            sql.insert,
            c.job, c.slot_ms, c.instance, fencing, c.catch_up, c.missed, ms_to_datetime(c.now_ms), c.token, o.lease_ms,
            timeout=timeout,
        )  # fmt: skip
        if count > o.history_size + o.history_size // 16 or o.history_ttl_ms is not None:
            await conn.execute(sql.trim, c.job, count, o.history_size, o.history_ttl_ms, timeout=timeout)
    return ClaimResult(Outcome.WON, c.granted(fencing=fencing, lease_ms=o.lease_ms))


class BackfillMixin(StandbysMixin):
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`: :meth:`anarchon.LeaseBackend.backfill`."""

    _timeout: float
    _backfill_sql: BackfillStatements

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    async def backfill(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """One transaction per backfill claim; not a hot path."""
        self._missing_schema()
        results: list[ClaimResult] = []
        standbys = self._standbys_to_wait()
        for c in claims:

            async def op(conn: asyncpg.Connection, retry: bool, c: Claim = c) -> ClaimResult:
                answer = await backfill_one(conn, self._backfill_sql, c, self._timeout)
                return (await self._confirm(conn, standbys, [answer]))[0]

            results.append(await self._call("backfill", op))
        return results
