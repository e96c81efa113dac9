"""Retries: a run that raised is run again by its runner, under the same grant, and the record says how often."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from anarchon import MemoryBackend, MemoryStore, RunContext, RunStatus, Scheduler
from anarchon._retry import retry_delay_ms
from anarchon.options import JobOptions
from anarchon.run import Run, retried_error

#: A schedule that never comes due while a test runs: these jobs run by run_now().
NEVER = "0 0 1 1 *"


def _flaky(fails: int, seen: list[tuple[int, int, int]]) -> object:
    """Raises on the first ``fails`` tries; records (context id, attempt, retry) of each try."""

    def job(ctx: RunContext) -> None:
        seen.append((id(ctx), ctx.attempt, ctx.retry))
        if ctx.retry < fails:
            raise ValueError(f"try {ctx.retry} failed")

    return job


async def test_a_job_that_fails_twice_then_succeeds_is_recorded_succeeded_with_two_retries() -> None:
    seen: list[tuple[int, int, int]] = []
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("flaky", NEVER, _flaky(2, seen), retries=3, retry_delay_ms=0)
    async with scheduler:
        run = await scheduler.run_now("flaky")
        last = await scheduler.last_run("flaky")
    assert [(attempt, retry) for _, attempt, retry in seen] == [(1, 0), (1, 1), (1, 2)]
    assert len({ctx for ctx, _, _ in seen}) == 1, "the tries share one context: one run"
    assert (run.status, run.attempt, run.retries, run.error) == (
        RunStatus.SUCCEEDED,
        1,
        2,
        "[2 retries] ValueError: try 1 failed",
    )
    assert last == run


async def test_a_job_that_always_fails_retries_as_configured_and_stops() -> None:
    seen: list[tuple[int, int, int]] = []
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("broken", NEVER, _flaky(99, seen), retries=2, retry_delay_ms=1, retry_jitter=False)
    async with scheduler:
        run = await scheduler.run_now("broken")
    assert [retry for _, _, retry in seen] == [0, 1, 2]
    assert (run.status, run.retries, run.error) == (RunStatus.FAILED, 2, "[2 retries] ValueError: try 2 failed")
    assert run.to_dict()["retries"] == 2


async def test_without_retries_a_failure_is_final() -> None:
    seen: list[tuple[int, int, int]] = []
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("once", NEVER, _flaky(1, seen))
    async with scheduler:
        run = await scheduler.run_now("once")
    assert len(seen) == 1
    assert (run.status, run.retries, run.error) == (RunStatus.FAILED, 0, "ValueError: try 0 failed")


async def test_a_timed_out_async_try_is_retried_a_sync_one_is_not() -> None:
    tries: list[str] = []
    release = asyncio.Event()

    async def slow_then_fast(ctx: RunContext) -> None:
        tries.append(f"async{ctx.retry}")
        if ctx.retry == 0:
            await release.wait()  # never set: the timeout cancels it

    blocker = asyncio.Event()

    def stuck(ctx: RunContext) -> None:
        tries.append(f"sync{ctx.retry}")
        time.sleep(0.3)  # its thread cannot be stopped, so a retry would run beside it

    scheduler = Scheduler(MemoryBackend())
    scheduler.add("async", NEVER, slow_then_fast, timeout_ms=100, retries=2, retry_delay_ms=0)
    scheduler.add("sync", NEVER, stuck, timeout_ms=100, retries=2, retry_delay_ms=0)
    async with scheduler:
        retried = await scheduler.run_now("async")
        kept = await scheduler.run_now("sync")
    blocker.set()
    assert (retried.status, retried.retries) == (RunStatus.SUCCEEDED, 1)
    assert retried.error == "[1 retry] TimeoutError: no result within timeout_ms=100"
    assert (kept.status, kept.retries) == (RunStatus.TIMED_OUT, 0)
    assert tries == ["async0", "async1", "sync0"]


async def test_stop_during_a_retry_delay_does_not_wait_it_out() -> None:
    """An hour's retry delay: stop() hands the run over at once instead (a backup has every retry left)."""
    failed = asyncio.Event()

    def job() -> None:
        failed.set()
        raise RuntimeError("down")

    store = MemoryStore()
    scheduler = Scheduler(MemoryBackend(store))
    scheduler.add("slow-retry", NEVER, job, retries=1, retry_delay_ms=3_600_000, retry_delay_max_ms=3_600_000)
    await scheduler.start()
    running = asyncio.ensure_future(scheduler.run_now("slow-retry"))
    await asyncio.wait_for(failed.wait(), 10)
    await asyncio.wait_for(scheduler.stop(grace_ms=0), 10)
    running.cancel()
    (record,) = store.history("slow-retry", 10)
    assert record.status is RunStatus.RUNNING, "handed over: the record waits for a backup"


async def test_stop_during_a_retry_delay_without_hand_over_records_it_cancelled() -> None:
    failed = asyncio.Event()

    def job() -> None:
        failed.set()
        raise RuntimeError("down")

    store = MemoryStore()
    scheduler = Scheduler(MemoryBackend(store))
    scheduler.add("no-hand-over", NEVER, job, retries=1, retry_delay_ms=3_600_000, retry_delay_max_ms=3_600_000,
                  hand_over=False)  # fmt: skip
    await scheduler.start()
    running = asyncio.ensure_future(scheduler.run_now("no-hand-over"))
    await asyncio.wait_for(failed.wait(), 10)
    await asyncio.wait_for(scheduler.stop(grace_ms=0), 10)
    run = await asyncio.wait_for(running, 10)
    assert (run.status, run.retries, run.error) == (RunStatus.CANCELLED, 0, "RuntimeError: down")


def test_the_delay_doubles_up_to_its_cap_and_jitter_keeps_the_upper_half() -> None:
    options = JobOptions(retry_delay_ms=100, retry_delay_max_ms=500, retry_jitter=False)
    assert [retry_delay_ms(options, n) for n in range(1, 6)] == [100, 200, 400, 500, 500]
    assert retry_delay_ms(options, 10_000) == 500, "no overflow far out"
    jittered = JobOptions(retry_delay_ms=100, retry_delay_max_ms=500)
    rng = random.Random(7)
    draws = [retry_delay_ms(jittered, 3, rng) for _ in range(200)]
    assert min(draws) >= 200 and max(draws) <= 400
    assert len(set(draws)) > 50, "jitter spreads the delays"
    assert retry_delay_ms(JobOptions(retry_delay_ms=0), 4) == 0


@pytest.mark.parametrize(
    ("error", "retries", "text"),
    [
        ("ValueError: x", 0, "ValueError: x"),
        ("ValueError: x", 1, "[1 retry] ValueError: x"),
        ("ValueError: [3 retries] x", 12, "[12 retries] ValueError: [3 retries] x"),
        (None, 3, None),
    ],
)
def test_the_retry_count_rides_at_the_head_of_the_error(error: str | None, retries: int, text: str | None) -> None:
    recorded = retried_error(error, retries)
    assert recorded == text
    run = Run("job", 0, RunStatus.FAILED, "i", error=recorded)
    assert run.retries == (retries if error is not None else 0)
    assert Run.from_dict(run.to_dict()).retries == run.retries
    assert Run("job", 0, RunStatus.FAILED, "i", error="[x retries] ValueError: y").retries == 0
