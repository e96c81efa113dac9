"""The catch_up policies end to end: coalesce (one run), each (one run per missed slot, bounded), none.

Every instance believes it is 05:30 of a day whose 00:00 slot of an hourly
job was the last one run (a skewed clock), so five slots, 01:00 to 05:00,
were missed, and no new slot comes due while a test runs.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import datetime, timezone

import pytest

from anarchon import (
    Claim,
    InvalidJobError,
    MemoryBackend,
    MemoryStore,
    Run,
    RunContext,
    RunStatus,
    Scheduler,
    SkewedClock,
)
from anarchon._catchup import plan_catch_up

HOUR_MS = 3_600_000


def ms(*args: int) -> int:
    return int(datetime(2026, 6, 3, *args, tzinfo=timezone.utc).timestamp()) * 1000


NOW, LAST_RAN = ms(5, 30), ms(0, 0)
MISSED = [ms(h, 0) for h in range(1, 6)]


async def _caught_up(expected: int, **options: object) -> tuple[list[RunContext], list[Run]]:
    """Seed the 00:00 run, start two instances with ``options``, and return the catch-up runs once ``expected`` ran."""
    clock = SkewedClock(NOW - time.time_ns() // 1_000_000)
    store = MemoryStore()
    seed = Scheduler(MemoryBackend(store), clock=clock)
    job = seed.add("hourly", "0 * * * *", lambda: None)
    (won,) = await seed.backend.claim([Claim(job, LAST_RAN, "seed", secrets.token_hex(16), LAST_RAN)])
    assert won.grant is not None
    await seed.backend.finish(won.grant, Run("hourly", LAST_RAN, RunStatus.SUCCEEDED, "gone"))

    ran: list[RunContext] = []
    enough = asyncio.Event()

    async def hourly(ctx: RunContext) -> None:
        ran.append(ctx)
        if len(ran) >= expected:
            enough.set()

    instances = [Scheduler(MemoryBackend(store), clock=clock, instance_id=f"i{i}") for i in range(2)]
    for scheduler in instances:
        scheduler.add("hourly", "0 * * * *", hourly, jitter_ms=0, catch_up_ms=6 * HOUR_MS, **options)
    await asyncio.gather(*(s.start() for s in instances))
    try:
        await asyncio.wait_for(enough.wait(), timeout=10)
    finally:
        await asyncio.gather(*(s.stop() for s in instances))
    records = [r for r in store.history("hourly", 100) if r.catch_up]
    return ran, sorted(records, key=lambda r: r.slot_ms)


async def test_coalesce_runs_the_newest_missed_slot_once_counting_all() -> None:
    ran, records = await _caught_up(1)
    assert [(c.slot_ms, c.missed) for c in ran] == [(MISSED[-1], 5)]
    assert [(r.slot_ms, r.missed, r.status) for r in records] == [(MISSED[-1], 5, RunStatus.SUCCEEDED)]


async def test_each_runs_every_missed_slot_once_oldest_first() -> None:
    ran, records = await _caught_up(5, catch_up="each", overlap="allow")
    assert [c.slot_ms for c in ran] == MISSED, "each missed slot once, started oldest first"
    assert all(c.catch_up and c.missed == 1 for c in ran)
    assert [(r.slot_ms, r.missed, r.status) for r in records] == [(s, 1, RunStatus.SUCCEEDED) for s in MISSED]


async def test_each_with_a_bound_runs_the_newest_and_counts_the_older_in_the_first() -> None:
    ran, records = await _caught_up(3, catch_up="each", overlap="allow", catch_up_max=3)
    assert [c.slot_ms for c in ran] == MISSED[-3:]
    # The first run covers the two slots left out, as a coalesced run would have.
    assert [r.missed for r in records] == [3, 1, 1]


@pytest.mark.parametrize(
    ("options", "slots", "missed"),
    [
        ({}, [MISSED[-1]], [5]),
        ({"catch_up": "each", "overlap": "allow"}, MISSED, [1] * 5),
        ({"catch_up": "each", "overlap": "allow", "catch_up_max": 2}, MISSED[-2:], [1, 1]),
        ({"catch_up": "each", "overlap": "allow", "catch_up_max": 9}, MISSED, [1] * 5),
        # The window (2.5 h back from 05:30) holds 03:00, 04:00 and 05:00 only.
        ({"catch_up": "each", "overlap": "allow", "catch_up_ms": int(2.5 * HOUR_MS)}, MISSED[-3:], [1] * 3),
        ({"catch_up": "none"}, [], []),
        ({"catch_up_ms": 0}, [], []),
    ],
)
def test_plan_per_policy(options: dict[str, object], slots: list[int], missed: list[int]) -> None:
    job = Scheduler(MemoryBackend()).add("hourly", "0 * * * *", lambda: None, **{"catch_up_ms": 6 * HOUR_MS, **options})
    plan = plan_catch_up(job, LAST_RAN, NOW)
    assert (plan.slots, plan.missed) == (slots, missed)


def test_plan_of_each_over_a_long_window_of_a_frequent_job_takes_the_newest() -> None:
    """Ten years of every-second slots: the newest 24, found without walking the window."""
    ten_years = 10 * 365 * 86_400_000
    job = Scheduler(MemoryBackend()).add(
        "often", "* * * * * *", lambda: None, catch_up="each", overlap="allow", catch_up_ms=ten_years
    )
    plan = plan_catch_up(job, NOW - ten_years + 5000, NOW)
    assert plan.slots == [NOW - 23_000 + 1000 * i for i in range(24)]


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"catch_up": "all"}, "catch_up='all'"),
        ({"catch_up": "each"}, "overlap='skip'"),
        ({"catch_up_max": 5}, "catch_up_max=5"),
        ({"catch_up": "each", "overlap": "allow", "catch_up_max": 0}, "catch_up_max=0"),
        ({"catch_up": "each", "overlap": "allow", "catch_up_max": True}, "catch_up_max=True"),
    ],
)
def test_bad_catch_up_options_name_the_option_and_the_fix(options: dict[str, object], shown: str) -> None:
    with pytest.raises(InvalidJobError) as info:
        Scheduler(MemoryBackend()).add("job", "* * * * *", lambda: None, **options)
    assert shown in str(info.value)
    assert info.value.option in options


def test_each_defaults_to_a_bound() -> None:
    job = Scheduler(MemoryBackend()).add("job", "* * * * *", lambda: None, catch_up="each", overlap="allow")
    assert (job.options.catch_up, job.options.catch_up_max) == ("each", 24)


def _utc(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp()) * 1000


# An hourly job (real time: its hour field starts with *) whose instances were all down over a change night,
# from 00:00 to 06:00 local time. Berlin moves whole hours: 5 slots on the spring-forward night (02:00 does
# not exist), 7 on the fall-back night (02:00 comes twice). Lord Howe moves half an hour. Classic cron's DST
# rules (the default) decide which slots exist; these check that catch-up takes exactly those.
DST_NIGHTS: list[tuple[str, int, int, int]] = [
    ("Europe/Berlin", _utc(2026, 3, 28, 23), _utc(2026, 3, 29, 4, 0, 30), 5),
    ("Europe/Berlin", _utc(2026, 10, 24, 22), _utc(2026, 10, 25, 5, 0, 30), 7),
    # 01:00 (+11), then 01:30 becomes 01:30 (+10:30): no whole hour repeats, 01:00 to 06:00 are 6 slots.
    ("Australia/Lord_Howe", _utc(2026, 4, 4, 13), _utc(2026, 4, 4, 19, 30, 30), 6),
    # 02:00 becomes 02:30: no 02:00 that day, so 01:00 and 03:00 to 06:00 are 5 slots.
    ("Australia/Lord_Howe", _utc(2026, 10, 3, 13, 30), _utc(2026, 10, 3, 19, 0, 30), 5),
]


@pytest.mark.parametrize(("zone", "mark", "now", "count"), DST_NIGHTS)
@pytest.mark.parametrize("bound", [None, 3])
def test_each_over_a_change_night_follows_the_schedule(zone: str, mark: int, now: int, count: int,
                                                        bound: int | None) -> None:  # fmt: skip
    """The slots "each" runs are the schedule's own, every one once, oldest first; a bound keeps the newest."""
    options: dict[str, object] = {"catch_up": "each", "overlap": "allow", "catch_up_ms": 12 * HOUR_MS}
    job = Scheduler(MemoryBackend()).add("hourly", "0 * * * *", lambda: None, timezone=zone, catch_up_max=24, **options)
    due = [s for s in job.schedule.slots(mark, 30) if s <= now]
    assert len(due) == count
    if bound is not None:
        job = Scheduler(MemoryBackend()).add(
            "h", "0 * * * *", lambda: None, timezone=zone, catch_up_max=bound, **options
        )
    plan = plan_catch_up(job, mark, now)
    assert plan.slots == due[-(bound or len(due)) :]
    coalesce = Scheduler(MemoryBackend()).add("c", "0 * * * *", lambda: None, timezone=zone, catch_up_ms=12 * HOUR_MS)
    assert plan_catch_up(coalesce, mark, now) == ([due[-1]], [len(due)])
