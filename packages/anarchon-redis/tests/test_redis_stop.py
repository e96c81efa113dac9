"""``stop()`` right after ``start()`` returns (issue 23): it took the clock-skew check's whole minute.

redis-py could swallow the cancellation of the skew check's ``TIME`` call,
which then slept 60 s before ``stop()`` could end. The bound below is the
contract (``stop()`` ends within its grace, here nothing runs), far above
what it takes, and far below the minute it used to take.
"""

from __future__ import annotations

import asyncio

from anarchon import Scheduler
from anarchon_redis import RedisBackend

from .conftest import Store


async def test_stop_right_after_start_is_not_held_by_the_skew_check(single: Store) -> None:
    for _ in range(3):
        scheduler = Scheduler(RedisBackend(url=single.url, prefix=single.prefix), instance_id="stopper")
        scheduler.add("x", "* * * * * *", lambda: None)
        await scheduler.start()
        await asyncio.wait_for(scheduler.stop(grace_ms=1000), timeout=20)
