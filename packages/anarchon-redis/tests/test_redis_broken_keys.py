"""One job's broken keys stop that job alone (issue 23): the other jobs run every slot.

Each case breaks job ``x``'s keys (or the shared take-over hint) the way a
person with ``redis-cli`` or another program could, runs a real scheduler
with jobs ``x`` and ``y`` every second for five seconds, and checks that
``y`` ran every slot and that ``x``'s failure was logged with its name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from anarchon import RunStatus, Scheduler
from anarchon_redis import RedisBackend

from .conftest import Store

Break = Callable[[Any, str], Awaitable[None]]


async def state_junk(r: Any, p: str) -> None:
    await r.set(f"{p}{{x}}:state", "junk")


async def mark_abc(r: Any, p: str) -> None:
    await r.hset(f"{p}{{x}}:state", mapping={"mark": "abc"})


async def live_garbage(r: Any, p: str) -> None:
    # A "running" run whose record is not one of ours, with a lease that never expires.
    await r.zadd(f"{p}{{x}}:live", {"1": float("inf"), "ghost": 1})
    await r.hset(f"{p}{{x}}:runs", mapping={"1": "not json {", "2": '{"slot": "two"}'})
    await r.zadd(f"{p}{{x}}:order", {"1": 2, "2": 4})


async def hint_string(r: Any, p: str) -> None:
    await r.set(f"{p}leases", "junk")


CASES: dict[str, tuple[Break, bool, str]] = {
    # case: (break it, whether x still runs, what the log names)
    "state-is-a-string": (state_junk, False, "job x: claim failed"),
    "mark-abc": (mark_abc, False, "job x: claim failed"),
    "garbage-in-live-set": (live_garbage, True, "job x: skipped a history record"),
    "hint-is-a-string": (hint_string, True, "take-over hint"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_one_jobs_broken_keys_stop_only_that_job(
    single: Store, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    breaker, x_runs, logged = CASES[case]
    raw = single.raw()
    try:
        await breaker(raw, single.prefix)
    finally:
        await raw.aclose()
    ran: dict[str, list[int]] = {"x": [], "y": []}
    scheduler = Scheduler(RedisBackend(url=single.url, prefix=single.prefix), instance_id="i-1")
    for name in ran:
        scheduler.add(name, "* * * * * *", (lambda n: lambda ctx: ran[n].append(ctx.slot_ms))(name), jitter_ms=0)
    with caplog.at_level(logging.WARNING):
        await scheduler.start()
        began = time.time()
        try:
            await asyncio.sleep(5)
            # The hint is read by the take-over poll, every 5 s (jittered) while the heartbeat runs.
            deadline = time.monotonic() + 10
            while logged not in caplog.text and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            history = {name: await scheduler.history(name) for name in ran}
        finally:
            await scheduler.stop()
    ended = time.time()
    # Every slot from the first after start to the last one a second before the end.
    expected = list(range((int(began) + 1) * 1000, int(ended - 1) * 1000 + 1, 1000))
    assert len(expected) >= 3
    done = {r.slot_ms for r in history["y"] if r.status is RunStatus.SUCCEEDED}
    assert [s for s in expected if s not in done] == [], f"y missed slots; it ran {sorted(ran['y'])}"
    if x_runs:
        assert {s for s in expected} <= set(ran["x"])
    else:
        assert ran["x"] == []
    assert logged in caplog.text
    if case == "hint-is-a-string":
        # The scheduler never counted the backend as failing: the error stayed with the one key.
        assert "retrying with back-off" not in caplog.text
