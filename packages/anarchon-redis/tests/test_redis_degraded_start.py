"""start(wait=False): a Redis that is down at deploy does not take the app down; jobs run once it is up."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from anarchon import RedisBackend, Scheduler

pytestmark = pytest.mark.redis


async def test_a_scheduler_started_degraded_claims_once_redis_comes_up(unstarted_server: Any) -> None:
    server = unstarted_server  # its port is free: nothing answers yet
    ran: list[int] = []
    s = Scheduler(RedisBackend(server.url, prefix="degraded:"))
    s.add("tick", "* * * * * *", lambda ctx: ran.append(ctx.slot_ms), jitter_ms=0)
    with pytest.raises(ConnectionError):
        await s.start()  # the default fails fast
    await s.start(wait=False)
    try:
        assert s.started and not s.ready
        await asyncio.sleep(1.5)
        assert not ran, "nothing is claimed while the backend is away"
        server.start()
        deadline = time.monotonic() + 30
        while not ran and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert s.ready and ran, "the scheduler never claimed after Redis came up"
    finally:
        await s.stop()
    assert not s.started and not s.ready


async def test_stop_while_still_waiting_for_the_backend(unstarted_server: Any) -> None:
    server = unstarted_server
    s = Scheduler(RedisBackend(server.url, prefix="degraded:"))
    s.add("tick", "* * * * * *", lambda: None)
    await s.start(wait=False)
    await asyncio.sleep(0.5)
    began = time.monotonic()
    await s.stop()
    assert time.monotonic() - began < 3 and not s.started
