"""What an instance's heartbeat (liveness) costs on Redis: server commands and CPU per second.

``python benchmarks/redis_heartbeat.py [SECONDS] [INSTANCES]`` starts its own
``redis-server`` on a free port (no persistence), runs the scheduler's own
:class:`anarchon.heartbeat.Heartbeat` for ``INSTANCES`` instances (default 1)
in this process for ``SECONDS`` (default 60), with the default period and TTL,
and prints: commands per second the server executed for them (``INFO
commandstats`` before and after: the ``EVALSHA`` and the commands inside the
script), the server's CPU per second against its idle CPU measured for a
third as long before, and the CPU per second of each heartbeat thread
(``/proc/self/task/<tid>/stat``, 10 ms ticks). Then it stops the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid

import redis
from redis_kill9 import _server  # the same private redis-server

from anarchon.heartbeat import Heartbeat
from anarchon.liveness import HEARTBEAT_MS, LIVENESS_TTL_MS
from anarchon_conformance import free_port
from anarchon_redis import RedisBackend

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
INSTANCES = int(sys.argv[2]) if len(sys.argv) > 2 else 1
TICK = os.sysconf("SC_CLK_TCK")


def _thread_cpu_s(native_id: int) -> float:
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def _stats(client: redis.Redis) -> tuple[dict[str, int], float]:
    calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in client.info("commandstats").items()}
    cpu = client.info("cpu")
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def main(port: int) -> None:
    admin = redis.Redis(port=port)
    prefix = f"bench:hb:{uuid.uuid4().hex[:8]}:"
    _, idle0 = _stats(admin)
    t0 = time.monotonic()
    await asyncio.sleep(SECONDS / 3)  # the server's own idle work (its timers), to subtract
    _, idle1 = _stats(admin)
    idle = (idle1 - idle0) / (time.monotonic() - t0)
    backends = [RedisBackend(url=f"redis://127.0.0.1:{port}/0", prefix=prefix) for _ in range(INSTANCES)]
    beats = []
    for i, backend in enumerate(backends):
        heart = backend.heart()
        assert heart is not None
        beat = Heartbeat(heart, f"bench-{i}", on_dead=lambda dead: None)
        assert await beat.start(10), "first beat not acknowledged"
        beats.append(beat)
    threads = [t for t in threading.enumerate() if t.name.startswith("anarchon-heartbeat-")]
    assert threads and all(t.native_id is not None for t in threads)
    await asyncio.sleep(1)  # past the first beat and the script's first EVAL
    calls0, server0 = _stats(admin)
    cpu0 = [_thread_cpu_s(t.native_id or 0) for t in threads]
    t0 = time.monotonic()
    await asyncio.sleep(SECONDS)
    elapsed = time.monotonic() - t0
    calls1, server1 = _stats(admin)
    cpu1 = [_thread_cpu_s(t.native_id or 0) for t in threads]
    for beat in beats:
        await beat.stop(leave=True)
    for backend in backends:
        await backend.close()
    admin.close()
    print(f"{INSTANCES} instance(s), HEARTBEAT_MS={HEARTBEAT_MS}, LIVENESS_TTL_MS={LIVENESS_TTL_MS}, {elapsed:.1f} s")
    for name in sorted(calls1):
        delta = calls1[name] - calls0.get(name, 0)
        if delta and name not in ("info",):
            print(f"  server {name}: {delta / elapsed / INSTANCES:.2f} calls/s per instance")
    busy = (server1 - server0) / elapsed
    print(f"  server CPU: {busy * 1000:.3f} ms/s in all, {idle * 1000:.3f} ms/s idle before the heartbeats")
    print(f"  server CPU of the heartbeats: {(busy - idle) * 1000 / INSTANCES:.3f} ms/s per instance")
    for t, a, b in zip(threads, cpu0, cpu1, strict=True):
        print(f"  thread {t.name}: {(b - a) / elapsed * 1000:.2f} ms CPU/s")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        proc = _server(port, directory)
        try:
            asyncio.run(main(port))
        finally:
            proc.terminate()
            proc.wait()
