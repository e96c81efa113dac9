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

# ruff: noqa: S608 - the only identifier in this SQL is the schema name, checked and quoted first
from dataclasses import dataclass

import asyncpg  # type: ignore[import-untyped]

from anarchon._records import decode_run
from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.run import RunStatus, datetime_to_ms, ms_to_datetime

__all__ = ["BackfillStatements", "backfill_one"]

_COLUMNS = (
    "job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed, "
    "started_at, finished_at, duration_ms, error, token, lease_ms"
)


@dataclass(frozen=True)
class BackfillStatements:
    job_row: str
    lock: str
    existing: str
    count: str
    insert: str
    trim: str

    @classmethod
    def for_schema(cls, s: str) -> BackfillStatements:
        return cls(
            job_row=f"INSERT INTO {s}.jobs (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
            lock=f"SELECT 1 FROM {s}.jobs WHERE name = $1 FOR UPDATE",
            existing=f"SELECT {_COLUMNS} FROM {s}.runs WHERE job = $1 AND slot_ms = $2 AND NOT manual",
            count=(
                f"UPDATE {s}.jobs SET fencing = fencing + 1, run_count = run_count + 1, mark = GREATEST(mark, $2) "
                "WHERE name = $1 RETURNING fencing, run_count"
            ),
            insert=(
                f"INSERT INTO {s}.runs ({_COLUMNS}, expires_ms, handed_over) "
                f"VALUES ($1, $2, false, 'running', $3, 1, $4, $5, $6, $7, NULL, NULL, NULL, $8, $9, "
                f"{s}.now_ms() + $9, false)"
            ),
            trim=f"SELECT {s}.trim_history($1, $2, $3, $4, {s}.now_ms())",
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
