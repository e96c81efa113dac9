"""The conformance suite: all of it on one server, its claim, lease, liveness and group parts on the cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from anarchon.backend import Backend
from anarchon_conformance import (
    AttemptTests,
    AuditTests,
    BackendFactory,
    BackendSuite,
    BackfillTests,
    ClaimTests,
    ControlNotifyTests,
    DecidedNotifyTests,
    GroupTests,
    HistoryLimitTests,
    LeaseTests,
    LivenessTests,
    PlantForeignRecord,
    RegistryTests,
    ReviveTests,
    ScheduleNotifyTests,
    ScheduleStoreTests,
)
from anarchon_redis import RedisBackend


async def _plant(backend: Backend, job: str, slot_ms: int) -> None:
    """Records under the job's keys that no version wrote: not JSON, wrong types, bogus status, huge times."""
    assert isinstance(backend, RedisBackend)
    k = backend._keys.job(job)
    records = {
        str(slot_ms): "not json {",
        str(slot_ms + 1): '{"slot": 1e20, "status": "succeeded", "instance": "x"}',
        str(slot_ms + 2): f'{{"slot": {slot_ms + 2}, "status": "bogus", "instance": "x"}}',
        str(slot_ms + 3): f'{{"slot": {slot_ms + 3}, "status": "succeeded", "instance": "x", "started": 1e300}}',
        str(slot_ms + 4): "[1, 2]",
    }
    client = backend._redis()
    await client.hset(k.runs, mapping=records)
    await client.zadd(k.order, {rid: int(rid) * 2 for rid in records})


async def _factory(url: str) -> AsyncIterator[BackendFactory]:
    store = Store(url)
    try:
        yield store.make
    finally:
        await store.cleanup()


class Store:
    """One prefix per test: the suite's isolated namespace."""

    def __init__(self, url: str) -> None:
        import uuid

        self.url = url
        self.prefix = f"t:conf:{uuid.uuid4().hex[:10]}:"

    def make(self) -> RedisBackend:
        return RedisBackend(url=self.url, prefix=self.prefix)

    async def cleanup(self) -> None:
        backend = self.make()
        client = backend._redis()
        try:
            async for key in client.scan_iter(match=f"{self.prefix}*", count=1000):
                await client.delete(key)
        finally:
            await backend.close()


class TestRedisConformance(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    async def backend_factory(self, redis_url: str) -> AsyncIterator[BackendFactory]:
        async for factory in _factory(redis_url):
            yield factory

    @pytest.fixture
    def plant_foreign_record(self) -> PlantForeignRecord:
        return _plant


class TestRedisClusterConformance(
    ClaimTests,
    LeaseTests,
    AttemptTests,
    BackfillTests,
    ReviveTests,
    LivenessTests,
    RegistryTests,
    ScheduleStoreTests,
    ScheduleNotifyTests,
    DecidedNotifyTests,
    ControlNotifyTests,
    AuditTests,
    GroupTests,
):
    @pytest.fixture
    async def backend_factory(self, cluster_url: str) -> AsyncIterator[BackendFactory]:
        async for factory in _factory(cluster_url):
            yield factory
