"""What a batch of 1,000 finishes costs PostgreSQL before and after an ANALYZE that saw no running run.

``python -m benchmarks.postgres_finish_plan [ROUNDS]`` builds a real anarchon
schema (the backend's own migrations) in a schema it creates and drops, with
1,000 jobs and 100 finished runs each, then times ROUNDS (default 60) rounds
of "1,000 runs claimed, then finished in one call" twice: with the table
never analyzed, and after ``ANALYZE`` taken while no run was running, the
state autovacuum's ANALYZE finds on a busy every-second fleet (a run lives
for milliseconds). Each phase is timed for two ways to finish:

- ``set-based``: the statement of schema versions 1-5, one
  ``UPDATE runs … FROM unnest(…)`` (kept here as text, to show what it did);
- ``finish_many``: schema 6's function, one primary-key ``UPDATE`` per run.

Both go through asyncpg's prepared statements, as the backend's calls do, so
the plans are the server's cached ones. It prints ms per 1,000 finishes
(median and max of the rounds after the first five, where a generic plan may
take over). Why: this flip is what skipped whole seconds of slots in the
PostgreSQL soak with autovacuum on (benchmarks/results/REPORT.md, Soak).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid

import asyncpg

from anarchon_postgres._schema import ensure_schema, quote_schema, render_sql

DSN = os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")
JOBS = 1000
HISTORY = 100

# Schema 5's finish statement (statement_part_finish_many.sql + statement_finish_many.sql), for comparison.
_SET_BASED = """
UPDATE {s}.runs r SET status = f.status, instance = f.instance, attempt = f.attempt,
    fencing = f.fencing, catch_up = f.catch_up, missed = f.missed, started_at = f.started_at,
    finished_at = f.finished_at, duration_ms = f.duration_ms, error = f.error,
    expires_ms = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::text[],
    $7::integer[], $8::bigint[], $9::boolean[], $10::integer[], $11::timestamptz[], $12::timestamptz[],
    $13::bigint[], $14::text[]) AS f(job, slot_ms, manual, token, status, instance, attempt, fencing,
    catch_up, missed, started_at, finished_at, duration_ms, error)
WHERE r.job = f.job AND r.slot_ms = f.slot_ms AND r.manual = f.manual AND r.token = f.token
    AND r.status = 'running'
RETURNING r.job, r.slot_ms, r.manual, r.token
"""

_INSERT = """
INSERT INTO {s}.runs SELECT j, $2::bigint, false, $3::text, 'bench', 1, 1, false, 0, now(),
    CASE WHEN $3::text = 'running' THEN NULL ELSE now() END, NULL, NULL, 't' || $2::text, 30000,
    $2::bigint + 30000, false
FROM unnest($1::text[]) AS j
"""


async def _rounds(
    conn: asyncpg.Connection, s: str, finish: str, jobs: list[str], first: int, rounds: int
) -> list[float]:
    no_time = [None] * JOBS  # started_at and finished_at: not what is measured
    times = []
    for slot in range(first, first + rounds):
        await conn.execute(_INSERT.format(s=s), jobs, slot, "running")
        args = (
            jobs, [slot] * JOBS, [False] * JOBS, [f"t{slot}"] * JOBS, ["succeeded"] * JOBS, ["bench"] * JOBS,
            [1] * JOBS, [1] * JOBS, [False] * JOBS, [0] * JOBS, no_time, no_time, [0] * JOBS, [None] * JOBS,
        )  # fmt: skip
        start = time.perf_counter()
        done = await conn.fetch(finish, *args)
        times.append((time.perf_counter() - start) * 1000)
        assert len(done) == JOBS, f"{len(done)} of {JOBS} finishes wrote their record"
        await conn.execute(f"DELETE FROM {s}.runs WHERE slot_ms = $1", slot - HISTORY)  # history stays at 100
    return times


def _line(label: str, times: list[float]) -> str:
    steady = times[5:]
    return f"  {label:<40} {statistics.median(steady):7.1f} ms median, {max(steady):7.1f} ms max per 1,000"


async def main(rounds: int) -> None:
    schema = f"bench_plan_{uuid.uuid4().hex[:8]}"
    s = quote_schema(schema)
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        await ensure_schema(conn, schema)
        await conn.execute(f"ALTER TABLE {s}.runs SET (autovacuum_enabled = false)")  # this script's ANALYZE alone
        jobs = [f"job-{i:05d}" for i in range(JOBS)]
        for slot in range(-HISTORY, 0):
            await conn.execute(_INSERT.format(s=s), jobs, slot, "succeeded")
        version = await conn.fetchval("SHOW server_version")
        print(f"PostgreSQL {version}: {JOBS} jobs x {HISTORY} finished runs, {rounds} rounds per line")
        ways = {"set-based (schema 1-5)": _SET_BASED.format(s=s), "finish_many (schema 6)": render_sql(
            "statement_finish_many.sql", s)}  # fmt: skip
        slot = 0
        for phase in ("never analyzed", "after ANALYZE with no run running"):
            if phase != "never analyzed":
                await conn.execute(f"ANALYZE {s}.runs")
            print(phase + ":")
            for label, sql in ways.items():
                # A fresh connection per line: its own prepared statement, planned from the statistics now.
                worker = await asyncpg.connect(DSN)
                try:
                    print(_line(label, await _rounds(worker, s, sql, jobs, slot, rounds)), flush=True)
                finally:
                    await worker.close()
                slot += rounds
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60))
