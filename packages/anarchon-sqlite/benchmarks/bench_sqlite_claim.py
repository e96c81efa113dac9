"""What a claim costs next to SQLite's own cheapest atomic operation.

    .venv/bin/python packages/anarchon-sqlite/benchmarks/bench_sqlite_claim.py [--n 3000]

On a throw-away file (in a temporary folder, removed at the end), for
``synchronous`` NORMAL and FULL, with the backend's connection settings (WAL,
5 s busy timeout, autocommit, one aiosqlite connection):

* sequential p50/p90 of ``SQLiteBackend.claim()`` of one slot of one job:
  a scheduled slot after the previous one finished, the common case (the
  finish is not timed);
* sequential p50/p90 of a raw ``INSERT OR IGNORE`` on a connection with the
  same settings, reading ``rowcount``: the floor (BROKER-NOTES);
* one ``claim()`` of 100 jobs (one transaction) against 100 single claims;
* 8 instances (8 connections, one process) claiming the same slots at once.

Compare ratios within one run; absolute times vary 2-5x on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiosqlite

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon.run import RunStatus
from anarchon_sqlite import SQLiteBackend

SLOT = 1_800_000_000_000


def _job(backend: SQLiteBackend, name: str, **options: object) -> Job:
    return Job(name, "* * * * * *", lambda: None, options=backend.job_options(name, dict(options)))


def _claim(job: Job, slot: int, instance: str = "bench") -> Claim:
    return Claim(job, slot, instance, uuid.uuid4().hex, SLOT)


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
    return f"p50 {statistics.median(samples):.3f} ms  p90 {qs[8]:.3f} ms  ({1000 / statistics.median(samples):,.0f}/s)"


async def _raw(path: Path, synchronous: str, n: int) -> list[float]:
    conn = await aiosqlite.connect(path, timeout=5.0, isolation_level=None, cached_statements=256)
    try:
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute(f"PRAGMA synchronous = {synchronous}")
        await conn.execute("CREATE TABLE gate (job TEXT, slot INTEGER, PRIMARY KEY (job, slot)) WITHOUT ROWID")

        async def once(i: int) -> object:
            cursor = await conn.execute("INSERT OR IGNORE INTO gate VALUES ('job', ?)", (SLOT + i * 1000,))
            return cursor.rowcount == 1

        return await _timed(n, once)
    finally:
        await conn.close()


async def _ours(path: Path, synchronous: str, n: int) -> list[float]:
    backend = SQLiteBackend(path, synchronous=synchronous)
    await backend.start()
    try:
        job = _job(backend, "seq")
        samples: list[float] = []
        for i in range(-50, n):
            claim = _claim(job, SLOT + (i + 50) * 1000)
            t = time.perf_counter()
            (result,) = await backend.claim([claim])
            took = (time.perf_counter() - t) * 1000
            assert result.won and result.grant is not None
            run = (await backend.history("seq", 1))[0].replace(status=RunStatus.SUCCEEDED, duration_ms=0)
            assert await backend.finish(result.grant, run)
            if i >= 0:
                samples.append(took)
        return samples
    finally:
        await backend.close()


async def _batch(path: Path, synchronous: str, rounds: int = 20) -> tuple[float, float]:
    backend = SQLiteBackend(path, synchronous=synchronous)
    await backend.start()
    try:
        jobs = [_job(backend, f"b{k}", overlap="allow") for k in range(100)]
        batch_ms, single_ms = [], []
        for r in range(rounds):
            t = time.perf_counter()
            await backend.claim([_claim(job, SLOT + r * 2000) for job in jobs])
            batch_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            for job in jobs:
                await backend.claim([_claim(job, SLOT + r * 2000 + 1000)])
            single_ms.append((time.perf_counter() - t) * 1000)
        return statistics.median(batch_ms), statistics.median(single_ms)
    finally:
        await backend.close()


async def _contended(path: Path, synchronous: str, slots: int = 300) -> tuple[float, int]:
    racers = [SQLiteBackend(path, synchronous=synchronous) for _ in range(8)]
    for backend in racers:
        await backend.start()
    try:
        job = _job(racers[0], "race", overlap="allow")
        t = time.perf_counter()
        winners = 0
        for s in range(slots):
            answers = await asyncio.gather(
                *(b.claim([_claim(job, SLOT + s * 1000, f"i{i}")]) for i, b in enumerate(racers))
            )
            winners += sum(a[0].won for a in answers)
        took = time.perf_counter() - t
        return slots * len(racers) / took, winners
    finally:
        for backend in racers:
            await backend.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="sequential claims per measurement")
    args = parser.parse_args()
    import sqlite3

    print(f"SQLite {sqlite3.sqlite_version}, aiosqlite {aiosqlite.__version__}, n={args.n}")
    folder = Path(tempfile.mkdtemp(prefix="anarchon-bench-"))
    try:
        for synchronous in ("normal", "full"):
            print(f"\nsynchronous={synchronous.upper()}")
            raw = await _raw(folder / f"raw-{synchronous}.sqlite3", synchronous, args.n)
            ours = await _ours(folder / f"ours-{synchronous}.sqlite3", synchronous, args.n)
            print(f"  raw INSERT OR IGNORE      {_pct(raw)}")
            print(f"  SQLiteBackend.claim()     {_pct(ours)}")
            print(f"  claim / raw (p50)         {statistics.median(ours) / statistics.median(raw):.2f}x")
            batch, single = await _batch(folder / f"batch-{synchronous}.sqlite3", synchronous)
            print(f"  100 jobs: one claim() {batch:.2f} ms, 100 claim() calls {single:.2f} ms ({single / batch:.1f}x)")
            rate, winners = await _contended(folder / f"race-{synchronous}.sqlite3", synchronous)
            print(f"  8 instances racing: {rate:,.0f} claims/s answered, {winners} winners for 300 slots")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    asyncio.run(main())
