"""What a claim costs on Redis, next to the cheapest atomic operation on the same client.

    .venv/bin/python packages/anarchon-redis/benchmarks/bench_redis_claim.py [URL]

Prints p50/p99 of one sequential ``claim()`` of one job against a raw
``SET key tok NX PX``, 16-way concurrent throughput of both, a 100-job batch
in one call, and ``take_over()`` over 10,000 jobs when nothing is due.
Compare ratios within one run; absolute times vary with the machine's load.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable

from anarchon.backend import Claim, ClaimResult
from anarchon.job import Job
from anarchon.options import resolve_options
from anarchon.run import Run, RunStatus
from anarchon_redis import RedisBackend

URL = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"


def job(name: str, **options: object) -> Job:
    return Job(
        name, "* * * * * *", lambda: None, options=resolve_options(name, options, RedisBackend.capabilities, "redis")
    )


async def timed(n: int, *ops: Callable[[int], Awaitable[object]]) -> list[list[float]]:
    """p50 of each op, interleaved call by call so that the machine's load hits them alike."""
    for i in range(200):  # warm up: connections, script cache
        for op in ops:
            after = await op(i - 200)
            if callable(after):
                await after()
    out: list[list[float]] = [[] for _ in ops]
    for i in range(n):
        for op, times in zip(ops, out, strict=True):
            t = time.perf_counter()
            after = await op(i)
            times.append((time.perf_counter() - t) * 1000)
            if callable(after):  # untimed follow-up, such as finishing the run
                await after()
    return out


def finisher(backend: RedisBackend, result: ClaimResult) -> Callable[[], Awaitable[bool]]:
    """Finish the run as a scheduler would, so the job is measured in its steady state."""
    grant = result.grant
    assert grant is not None
    run = Run(grant.job, grant.slot_ms, RunStatus.SUCCEEDED, grant.instance, fencing=grant.fencing)
    return lambda: backend.finish(grant, run)


async def throughput(seconds: float, op: Callable[[int, int], Awaitable[object]], workers: int = 16) -> float:
    """Each worker claims its own job's slots in order (a job's slots never go backwards)."""
    done = 0
    end = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = 0
        while time.perf_counter() < end:
            after = await op(w, i)
            if callable(after):
                await after()
            i += 1
            done += 1

    await asyncio.gather(*(worker(w) for w in range(workers)))
    return done / seconds


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if q < 100 else max(values)


async def main() -> None:
    prefix = f"bench:{uuid.uuid4().hex[:8]}:"
    backend = RedisBackend(url=URL, prefix=prefix)
    await backend.start()
    client = backend._redis()
    one = job("bench", overlap="allow", history_size=100)
    workers = [job(f"bench-{w}", overlap="allow", history_size=100) for w in range(16)]
    # claim() alone: runs are left running, so each worker spreads its claims over 50 jobs
    spread = [[job(f"spread-{w}-{k}", overlap="allow", history_size=100) for k in range(50)] for w in range(16)]
    base = 1_800_000_000_000
    try:
        for round_ in range(3):
            offset = (round_ + 1) * 10_000_000

            async def do_claim(i: int, offset: int = offset, j: Job = one) -> Callable[[], Awaitable[bool]]:
                slot = base + offset + i * 1000
                (r,) = await backend.claim([Claim(j, slot, "bench", uuid.uuid4().hex, slot)])
                assert r.won
                return finisher(backend, r)

            async def do_set(i: int, offset: int = offset) -> None:
                assert await client.set(f"{prefix}raw:{offset}:{i}", "tok", nx=True, px=30_000)

            claims, sets = await timed(2000, do_claim, do_set)
            c50, s50 = statistics.median(claims), statistics.median(sets)
            print(
                f"round {round_ + 1}: sequential p50 claim() {c50:.3f} ms (p99 {pct(claims, 99):.3f}), "
                f"SET NX PX {s50:.3f} ms (p99 {pct(sets, 99):.3f}); ratio {c50 / s50:.2f}"
            )

            async def claim_only(w: int, i: int, offset: int = offset) -> None:
                slot = base + offset + (i // 50) * 1000
                (r,) = await backend.claim([Claim(spread[w][i % 50], slot, "bench", uuid.uuid4().hex, slot)])
                assert r.won

            co = await throughput(3, claim_only)
            ct = await throughput(3, lambda w, i, o=offset: do_claim(i, o, workers[w]))
            st = await throughput(3, lambda w, i, o=offset: do_set(10**7 * (w + 1) + i, o))
            print(
                f"         16 concurrent: claim() {co:,.0f}/s, SET NX PX {st:,.0f}/s (ratio {co / st:.2f}); "
                f"claim()+finish() {ct:,.0f} slots/s"
            )

        batch_jobs = [job(f"batch-{i}", overlap="allow", history_size=10) for i in range(100)]
        times = []
        for i in range(50):
            slot = base + i * 1000
            claims_ = [Claim(j, slot, "bench", uuid.uuid4().hex, slot) for j in batch_jobs]
            t = time.perf_counter()
            results = await backend.claim(claims_)
            times.append((time.perf_counter() - t) * 1000)
            await asyncio.gather(*(finisher(backend, r)() for r in results))
        print(f"claim() of 100 jobs in one call: p50 {statistics.median(times):.2f} ms")

        many = [job(f"idle-{i}") for i in range(10_000)]
        await backend.take_over(many, "bench")  # the first call sweeps every job
        t = time.perf_counter()
        sweep_backend = RedisBackend(url=URL, prefix=prefix)
        await sweep_backend.take_over(many, "bench")
        sweep_ms = (time.perf_counter() - t) * 1000
        await sweep_backend.close()
        times = []
        for _ in range(50):
            t = time.perf_counter()
            await backend.take_over(many, "bench")
            times.append((time.perf_counter() - t) * 1000)
        print(
            f"take_over() over 10,000 jobs, nothing due: p50 {statistics.median(times):.2f} ms "
            f"(the periodic full sweep: {sweep_ms:.0f} ms)"
        )
    finally:
        async for key in client.scan_iter(match=f"{prefix}*", count=1000):
            await client.delete(key)
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
