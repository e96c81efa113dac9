"""What a claim costs next to PostgreSQL's own cheapest atomic operation.

    .venv/bin/python packages/anarchon-postgres/benchmarks/bench_postgres_claim.py [--dsn DSN]

Measures, on a throw-away schema (dropped at the end):

* sequential p50/p90 of ``PostgresBackend.claim()`` for one job, end to end
  (pool acquire, one function call, release), and of the same function call
  sent directly on one held connection;
* sequential p50/p90 of a raw ``INSERT … ON CONFLICT DO NOTHING RETURNING`` on
  that same connection, the floor (BROKER-NOTES);
* 16-way concurrent throughput of both (16 backend objects = 16 instances,
  and 16 held connections for the raw insert);
* one ``claim()`` of 100 jobs (one round trip) against 100 single claims.

Compare ratios within one run; absolute times vary 2-5x on a busy machine.
"""

from __future__ import annotations

# ruff: noqa: S608 - the schema name is generated here, not user input
import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_postgres import PostgresBackend

SLOT = 1_800_000_000_000


def _job(backend: PostgresBackend, name: str) -> Job:
    return Job(name, "* * * * * *", lambda: None, options=backend.job_options(name, {"overlap": "allow"}))


def _claim(job: Job, slot: int) -> Claim:
    return Claim(job, slot, "bench", uuid.uuid4().hex, SLOT)


async def _timed(n: int, once: Callable[[int], Awaitable[object]]) -> list[float]:
    for i in range(50):  # warm the statement caches
        await once(-1 - i)
    out = []
    for i in range(n):
        t = time.perf_counter()
        await once(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _pct(samples: list[float]) -> str:
    qs = statistics.quantiles(samples, n=10)
    return f"p50 {statistics.median(samples):.3f} ms  p90 {qs[8]:.3f} ms"


async def _throughput(workers: int, seconds: float, once: Callable[[int, int], Awaitable[object]]) -> float:
    stop = time.perf_counter() + seconds
    counts = [0] * workers

    async def work(w: int) -> None:
        while time.perf_counter() < stop:
            await once(w, counts[w])
            counts[w] += 1

    await asyncio.gather(*(work(w) for w in range(workers)))
    return sum(counts) / seconds


async def main(dsn: str, n: int, seconds: float) -> None:
    schema = f"anarchon_bench_{uuid.uuid4().hex[:8]}"
    backend = PostgresBackend(dsn, schema=schema)
    await backend.start()
    raw = await asyncpg.connect(dsn)
    others: list[PostgresBackend] = []
    raws: list[asyncpg.Connection] = []
    try:
        await raw.execute(f'CREATE TABLE "{schema}".raw_claims (job text, slot bigint, PRIMARY KEY (job, slot))')
        insert = f'INSERT INTO "{schema}".raw_claims VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING slot'
        job = _job(backend, "seq")
        fn_job = _job(backend, "seq-fn")
        sql = backend._sql.claim

        async def via_backend(i: int) -> object:
            return await backend.claim([_claim(job, SLOT + i * 1000)])

        async def via_function(i: int) -> object:
            c = _claim(fn_job, SLOT + i * 1000)
            return await raw.fetch(
                sql, [c.job.name], [c.slot_ms], [False], [c.token], [c.instance], [None], [False], [0],
                [30_000], [False], [1000], [None],
            )  # fmt: skip

        async def via_insert(i: int) -> object:
            return await raw.fetchval(insert, "seq", SLOT + i * 1000)

        results = {
            "raw INSERT … ON CONFLICT DO NOTHING RETURNING": await _timed(n, via_insert),
            "claim function, one held connection": await _timed(n, via_function),
            "PostgresBackend.claim(), one job": await _timed(n, via_backend),
        }
        print(f"sequential, {n} claims each")
        for name, samples in results.items():
            print(f"  {name:48s} {_pct(samples)}")
        base = statistics.median(results["raw INSERT … ON CONFLICT DO NOTHING RETURNING"])
        print(
            f"  claim() / raw insert p50: {statistics.median(results['PostgresBackend.claim(), one job']) / base:.2f}x"
        )

        others = [PostgresBackend(dsn, schema=schema) for _ in range(16)]
        await asyncio.gather(*(b.start() for b in others))
        raws = [await asyncpg.connect(dsn) for _ in range(16)]
        jobs = [_job(backend, f"conc-{w}") for w in range(16)]

        async def conc_claim(w: int, i: int) -> object:
            return await others[w].claim([_claim(jobs[w], SLOT + i * 1000)])

        async def conc_insert(w: int, i: int) -> object:
            return await raws[w].fetchval(insert, f"conc-{w}", SLOT + i * 1000)

        one_pool = [_job(backend, f"pool-{w}") for w in range(16)]

        async def conc_one_backend(w: int, i: int) -> object:
            return await backend.claim([_claim(one_pool[w], SLOT + i * 1000)])

        print(f"16-way concurrent, {seconds:g} s each")
        print(f"  raw insert, 16 connections                      {await _throughput(16, seconds, conc_insert):8.0f}/s")
        print(f"  claim(), 16 backend objects (instances)         {await _throughput(16, seconds, conc_claim):8.0f}/s")
        print(f"  claim(), 16 callers on one backend (pool of 4)  "
              f"{await _throughput(16, seconds, conc_one_backend):8.0f}/s")  # fmt: skip

        batch_jobs = [_job(backend, f"batch-{k:03d}") for k in range(100)]
        t = time.perf_counter()
        for r in range(20):
            await backend.claim([_claim(j, SLOT + r * 1000) for j in batch_jobs])
        batched = (time.perf_counter() - t) / 20 * 1000
        t = time.perf_counter()
        for r in range(20, 25):
            for j in batch_jobs:
                await backend.claim([_claim(j, SLOT + r * 1000)])
        single = (time.perf_counter() - t) / 5 * 1000
        print("100 jobs due at one instant")
        print(f"  one claim() of 100 (one round trip)  {batched:8.2f} ms  ({batched * 10:.0f} µs per claim)")
        print(f"  100 claim() calls                     {single:8.2f} ms")
    finally:
        await asyncio.gather(*(b.close() for b in others))
        for c in raws:
            await c.close()
        await backend.close()
        await raw.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await raw.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn", default=os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")
    )
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    asyncio.run(main(args.dsn, args.n, args.seconds))
