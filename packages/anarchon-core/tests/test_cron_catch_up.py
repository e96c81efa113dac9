"""Catch-up counts missed slots with the same slot math as the schedule, end to end through a Scheduler."""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import datetime, timezone

import pytest

from anarchon import Claim, MemoryBackend, MemoryStore, Run, RunContext, RunStatus, Scheduler, SkewedClock

DAY_MS = 86_400_000


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp()) * 1000


async def test_catch_up_of_an_equal_range_counts_one_missed_slot_a_day() -> None:
    """``59-59 1 * * *`` runs once a day, at 01:59, so two days down miss two slots (croniter's reading: 120)."""
    cron, last_ran = "59-59 1 * * *", ms(2026, 6, 1, 1, 59)
    # Every instance believes it is 2026-06-03 02:30 UTC: the job last ran on the 1st, nobody was up since.
    clock = SkewedClock(ms(2026, 6, 3, 2, 30) - time.time_ns() // 1_000_000)
    store = MemoryStore()
    seed = Scheduler(MemoryBackend(store), clock=clock)
    job = seed.add("nightly", cron, lambda: None)
    claim = Claim(job=job, slot_ms=last_ran, instance="seed", token=secrets.token_hex(16), now_ms=last_ran)
    (won,) = await seed.backend.claim([claim])
    assert won.grant is not None
    await seed.backend.finish(won.grant, Run("nightly", last_ran, RunStatus.SUCCEEDED, "gone"))

    ran: list[RunContext] = []
    done = asyncio.Event()

    async def nightly(ctx: RunContext) -> None:
        ran.append(ctx)
        done.set()

    scheduler = Scheduler(MemoryBackend(store), clock=clock)
    scheduler.add("nightly", cron, nightly, catch_up_ms=3 * DAY_MS, jitter_ms=0)
    async with scheduler:
        await asyncio.wait_for(done.wait(), timeout=10)
    (run,) = ran
    assert (run.catch_up, run.missed, run.slot_ms) == (True, 2, ms(2026, 6, 3, 1, 59))


async def catch_up_after_outage(cron: str, last_ran: int, now: int, **options: object) -> RunContext:
    """The one catch-up run of a job that last ran at ``last_ran`` when every instance believes it is ``now``."""
    clock = SkewedClock(now - time.time_ns() // 1_000_000)
    store = MemoryStore()
    seed = Scheduler(MemoryBackend(store), clock=clock)
    job = seed.add("nightly", cron, lambda: None, **options)
    claim = Claim(job=job, slot_ms=last_ran, instance="seed", token=secrets.token_hex(16), now_ms=last_ran)
    (won,) = await seed.backend.claim([claim])
    assert won.grant is not None
    await seed.backend.finish(won.grant, Run("nightly", last_ran, RunStatus.SUCCEEDED, "gone"))
    ran: list[RunContext] = []
    done = asyncio.Event()

    async def nightly(ctx: RunContext) -> None:
        ran.append(ctx)
        done.set()

    scheduler = Scheduler(MemoryBackend(store), clock=clock)
    scheduler.add("nightly", cron, nightly, catch_up_ms=3 * DAY_MS, jitter_ms=0, **options)
    async with scheduler:
        await asyncio.wait_for(done.wait(), timeout=10)
    (run,) = ran
    return run


@pytest.mark.parametrize(
    ("dst", "missed", "slot"),
    [
        # 2026-10-25 in Berlin: 02:30 comes at 00:30 UTC (CEST) and again at 01:30 UTC (CET).
        ("cron", 1, ms(2026, 10, 25, 0, 30)),
        ("skip", 1, ms(2026, 10, 25, 0, 30)),
        ("twice", 2, ms(2026, 10, 25, 1, 30)),
        ("real", 2, ms(2026, 10, 25, 1, 30)),
    ],
)
async def test_catch_up_over_a_fall_back_counts_the_policys_slots(dst: str, missed: int, slot: int) -> None:
    """Down from 02:30 on the 24th to 04:00 CET on the 25th: the repeated 02:30 is missed once or twice."""
    run = await catch_up_after_outage(
        "30 2 * * *", ms(2026, 10, 24, 0, 30), ms(2026, 10, 25, 3), timezone="Europe/Berlin", dst=dst
    )
    assert (run.catch_up, run.missed, run.slot_ms) == (True, missed, slot)


@pytest.mark.parametrize(("dst", "missed"), [("cron", 1), ("twice", 1), ("wall", 1)])
async def test_catch_up_over_a_spring_forward_runs_the_moved_slot(dst: str, missed: int) -> None:
    """Down from 02:30 CET on the 28th to 04:00 CEST on the 29th: the 02:30 that never came ran at 03:00."""
    run = await catch_up_after_outage(
        "30 2 * * *", ms(2026, 3, 28, 1, 30), ms(2026, 3, 29, 2), timezone="Europe/Berlin", dst=dst
    )
    assert (run.catch_up, run.missed, run.slot_ms) == (True, missed, ms(2026, 3, 29, 1))
