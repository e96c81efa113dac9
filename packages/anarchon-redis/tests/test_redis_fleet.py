"""Real instance processes on Redis, a single server and a cluster: the conformance suite's multi-process part."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from anarchon_conformance import FleetTests

pytestmark = pytest.mark.slow


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    prefix = f"t:fleet:{uuid.uuid4().hex[:10]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    finally:
        client.close()


class TestRedisFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, redis_url: str, prefix: str) -> dict[str, Any]:
        return {"backend_class": "anarchon_redis:RedisBackend", "backend_kwargs": {"url": redis_url, "prefix": prefix}}


class TestRedisClusterFleet(FleetTests):
    """The same processes against the three-node cluster: every key of a job in one hash slot."""

    @pytest.fixture
    def fleet_backend(self, cluster_url: str) -> dict[str, Any]:
        prefix = f"t:fleet:{uuid.uuid4().hex[:10]}:"  # the cluster is this session's own: nothing to clean
        return {
            "backend_class": "anarchon_redis:RedisBackend",
            "backend_kwargs": {"url": cluster_url, "prefix": prefix},
        }
