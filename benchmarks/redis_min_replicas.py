"""What ``min_replicas=1`` costs a Redis claim: p50/p95 with and without the ``WAIT``.

``python benchmarks/redis_min_replicas.py [ROUNDS]`` starts its own primary
and replica (``redis-server`` on free ports, no persistence), claims one job
``ROUNDS`` times (default 2000) one claim at a time, then 100 jobs due at
once as one call, with each setting, and stops both servers.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid

import redis
from redis_kill9 import _server  # the same private redis-server

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon.options import resolve_options
from anarchon_conformance import free_port
from anarchon_redis import RedisBackend

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def _job(name: str) -> Job:
    options = resolve_options(name, {"overlap": "allow"}, RedisBackend.capabilities, "redis")
    return Job(name, "* * * * * *", lambda: None, options=options)


async def measure(url: str, replicas: int) -> str:
    backend = RedisBackend(url=url, prefix=f"bench{uuid.uuid4().hex[:6]}:", min_replicas=replicas)
    await backend.start()
    job, many = _job("one"), [_job(f"many-{i}") for i in range(100)]
    times: list[float] = []
    try:
        for slot in range(1, ROUNDS + 1):
            claim = Claim(job=job, slot_ms=slot * 1000, instance="a", token=uuid.uuid4().hex, now_ms=slot * 1000)
            began = time.perf_counter()
            (result,) = await backend.claim([claim])
            times.append((time.perf_counter() - began) * 1000)
            assert result.won, result
        began = time.perf_counter()
        claims = [Claim(job=j, slot_ms=1000, instance="a", token=uuid.uuid4().hex, now_ms=1000) for j in many]
        results = await backend.claim(claims)
        batch = (time.perf_counter() - began) * 1000
        assert all(r.won for r in results)
    finally:
        await backend.close()
    times.sort()
    return (
        f"min_replicas={replicas}: one claim p50 {statistics.median(times):.3f} ms, "
        f"p95 {times[int(len(times) * 0.95)]:.3f} ms; 100 jobs in one call {batch:.2f} ms"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        primary_port = free_port()
        replica_port = free_port({primary_port})
        procs = [_server(primary_port, d)]
        try:
            procs.append(_server(replica_port, d, "--replicaof", "127.0.0.1", str(primary_port)))
            assert redis.Redis(port=primary_port).wait(1, 10_000) == 1
            url = f"redis://127.0.0.1:{primary_port}/0"
            for replicas in (0, 1, 0, 1):
                print(asyncio.run(measure(url, replicas)), flush=True)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(10)


if __name__ == "__main__":
    main()
