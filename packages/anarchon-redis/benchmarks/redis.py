"""Redis: the primitive is ``SET key token NX PX``, on the client class the backend uses."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import redis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from .._proc import pids_named
from .._target import BackendSpec, RawClient, Target

URL = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")


class _Raw(RawClient):
    description = "`SET key tok NX PX 30000` (redis-py asyncio)"

    def __init__(self, ns: str) -> None:
        self.ns = ns

    async def open(self) -> None:
        self.client = Redis.from_url(URL)

    async def once(self, key: str) -> bool:
        return bool(await self.client.set(f"{self.ns}:raw:{key}", "tok", nx=True, px=30_000))

    async def close(self) -> None:
        await self.client.aclose()


class RedisTarget(Target):
    name = "redis"

    async def unreachable(self) -> str | None:
        client = Redis.from_url(URL, socket_connect_timeout=3)
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            await client.aclose()
        return None

    server_note = "the whole shared redis-server process (other clients included)"

    async def server_pids(self, ns: str) -> list[int]:
        return pids_named("redis-server", urlsplit(URL).netloc.rsplit("@", 1)[-1])

    async def footprint(self, ns: str) -> dict[str, float]:
        client = Redis.from_url(URL)
        try:
            keys = [key async for key in client.scan_iter(match=f"{ns}:*", count=1000)]
            used = 0
            for i in range(0, len(keys), 500):
                pipe = client.pipeline(transaction=False)
                for key in keys[i : i + 500]:
                    pipe.memory_usage(key)
                used += sum(int(n or 0) for n in await pipe.execute())
        finally:
            await client.aclose()
        return {"keys": float(len(keys)), "MB": used / 1e6}

    def spec(self, ns: str) -> BackendSpec:
        return BackendSpec("anarchon_redis:RedisBackend", {"url": URL, "prefix": f"{ns}:"})

    async def referee_counters(self, ns: str) -> dict[str, float]:
        """Commands executed (those inside scripts too: ``INFO commandstats``) and script calls (round trips)."""
        client = Redis.from_url(URL)
        try:
            stats = await client.info("commandstats")
        finally:
            await client.aclose()
        calls = {name.removeprefix("cmdstat_"): float(v["calls"]) for name, v in stats.items()}
        scripts = sum(n for name, n in calls.items() if name.split("|")[0] in ("eval", "evalsha", "fcall"))
        return {"commands": sum(calls.values()), "script calls": scripts}

    def raw(self, ns: str) -> RawClient:
        return _Raw(ns)

    async def cleanup(self, ns: str) -> None:
        client = Redis.from_url(URL)
        try:
            batch = [key async for key in client.scan_iter(match=f"{ns}:*", count=1000)]
            for i in range(0, len(batch), 1000):
                await client.delete(*batch[i : i + 1000])
        finally:
            await client.aclose()

    async def versions(self) -> dict[str, str]:
        client = Redis.from_url(URL)
        try:
            info = await client.info("server")
        finally:
            await client.aclose()
        return {"redis-py": redis.__version__, "Redis": str(info.get("redis_version"))}


TARGET = RedisTarget()
