"""Regression tests for what the fault suite found, each reduced to one scheduler-level case.

A grant whose answer is held up longer than its lease used to be run beside
the instance that had taken it over meanwhile: the scheduler counted the
lease from the answer, not from when the claim was sent. They use the shared
Redis on loopback (a unique key prefix, deleted afterwards) through a proxy of
the suite's own.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from anarchon import RunContext, Scheduler
from anarchon_redis import RedisBackend
from chaos.proxy import ProxyLoop

pytestmark = pytest.mark.slow

REDIS_URL = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")
LEASE_MS = 1000
PERIOD_S = 5


@pytest.fixture
def redis_port() -> int:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: no Redis at {REDIS_URL} ({exc})")
        pytest.skip(f"!!! SKIPPED: no Redis at {REDIS_URL} ({exc}); set ANARCHON_REDIS_URL")
    finally:
        client.close()
    return int(client.connection_pool.connection_kwargs.get("port", 6379))


@pytest.fixture
def prefix() -> Iterator[str]:
    prefix = f"t:chaos:{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    finally:
        client.close()


async def test_a_grant_answered_after_its_lease_expired_is_not_run_beside_the_take_over(
    redis_port: int, prefix: str
) -> None:
    loop = ProxyLoop()
    proxy = loop.proxy(redis_port)
    runs: list[tuple[str, int, int, float, float]] = []  # instance, slot, attempt, started, ended (monotonic)

    def scheduler(instance: str, port: int) -> Scheduler:
        s = Scheduler(RedisBackend(url=f"redis://127.0.0.1:{port}/0", prefix=prefix), instance_id=instance)

        async def slow(ctx: RunContext) -> None:
            began = time.monotonic()
            try:
                await asyncio.sleep(2.5)
            finally:
                runs.append((instance, ctx.slot_ms, ctx.attempt, began, time.monotonic()))

        s.add("slow", f"*/{PERIOD_S} * * * * *", slow, jitter_ms=0, lease_ms=LEASE_MS)
        return s

    late, backup = scheduler("late", proxy.port), scheduler("backup", redis_port)
    try:
        # Start "late" right after a slot, so it alone claims the next one.
        await asyncio.sleep(PERIOD_S - time.time() % PERIOD_S + 0.2)
        await late.start()
        slot_s = (int(time.time()) // PERIOD_S + 1) * PERIOD_S
        # The claim reaches Redis and wins; its answer (and every later one) stays in the proxy.
        # Armed now, seconds ahead: armed 0.3 s before the slot, a loop late by that much on a
        # loaded machine let the claim through first, and "late" ran the slot undisturbed.
        proxy.hold_answers_after(struct.pack("<d", slot_s * 1000))  # the slot as the claim script gets it
        await asyncio.sleep(slot_s - time.time() + 0.2)
        await backup.start()  # too late for the slot, in time to take it over when the lease expires
        assert proxy.triggered.is_set(), "the claim was not sent"
        await asyncio.sleep(LEASE_MS / 1000 + 1.2)
        proxy.heal()  # the late grant arrives, after "backup" took the run over
        await asyncio.sleep(3.5)
    finally:
        await late.stop(grace_ms=0)
        await backup.stop(grace_ms=0)
        loop.close()
    slot_runs = sorted((r for r in runs if r[1] == slot_s * 1000), key=lambda r: r[3])
    assert [r[0] for r in slot_runs].count("backup") == 1, f"the backup took the run over: {slot_runs}"
    overlapping = [(a, b) for i, a in enumerate(slot_runs) for b in slot_runs[i + 1 :] if b[3] < a[4] and a[3] < b[4]]
    assert overlapping == [], f"two runs of one slot at the same time: {overlapping}"
