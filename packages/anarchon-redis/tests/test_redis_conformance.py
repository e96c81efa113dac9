"""The conformance suite: all of it on one server, its claim and lease parts on the cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from anarchon_conformance import BackendFactory, BackendSuite, ClaimTests, LeaseTests
from anarchon_redis import RedisBackend


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


class TestRedisConformance(BackendSuite):
    @pytest.fixture
    async def backend_factory(self, redis_url: str) -> AsyncIterator[BackendFactory]:
        async for factory in _factory(redis_url):
            yield factory


class TestRedisClusterConformance(ClaimTests, LeaseTests):
    @pytest.fixture
    async def backend_factory(self, cluster_url: str) -> AsyncIterator[BackendFactory]:
        async for factory in _factory(cluster_url):
            yield factory
