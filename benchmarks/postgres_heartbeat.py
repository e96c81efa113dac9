"""What the PostgreSQL heartbeat costs, and how soon a ``kill -9`` is answered with it.

``python benchmarks/postgres_heartbeat.py cost [SECONDS] [INSTANCES]`` beats
as ``INSTANCES`` instances (default 1) through the scheduler's own heartbeat
thread (:class:`anarchon.heartbeat.Heartbeat`, the defaults: every 250 ms,
TTL 1.5 s) into a private database it creates and drops, for ``SECONDS``
(default 60), and prints the transactions the database committed
(``pg_stat_database.xact_commit``; nothing else uses it), the CPU of the
server processes serving the heart connections (``/proc/<pid>/stat``, so the
server must run on this host) and the CPU of the heartbeat threads.

``python benchmarks/postgres_heartbeat.py kill [ROUNDS]`` starts 3 instance
processes (50 every-second jobs, one job of 3 s every 5 s, default options) on
a fresh schema, ``kill -9`` s the one that starts the slow job, and prints the
time from the kill until another instance started that run again, and the
slots missed or run twice; ``ROUNDS`` times (default 3).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import asyncpg

from anarchon.heartbeat import Heartbeat
from anarchon_conformance.fleet import Fleet
from anarchon_postgres import PostgresBackend

DSN = os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(stat: str) -> float:
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def _on(db: str) -> str:
    base, _, _ = DSN.rpartition("/")
    return f"{base}/{db}"


async def cost(seconds: float, instances: int) -> None:
    db = f"anarchon_hb_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(DSN)
    await admin.execute(f'CREATE DATABASE "{db}"')
    backend = PostgresBackend(_on(db))
    beats: list[Heartbeat] = []
    try:
        await backend.start()
        for n in range(instances):
            heart = backend.heart()
            assert heart is not None
            beat = Heartbeat(heart, f"bench-{n}", on_dead=lambda dead: None)
            assert await beat.start(10), "the first beat was not acknowledged"
            beats.append(beat)
        await backend.close()  # only the hearts' connections stay on the database
        await asyncio.sleep(3)
        hearts = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query LIKE '%instances%'"
        pids = [r["pid"] for r in await admin.fetch(hearts, db)]
        assert len(pids) == instances, f"found {len(pids)} heart sessions, expected {instances}"
        threads = [t.native_id for t in threading.enumerate() if t.name.startswith("anarchon-heartbeat-")]
        query = "SELECT xact_commit FROM pg_stat_database WHERE datname = $1"

        def sample() -> tuple[float, float, float]:
            server = sum(_cpu_s(f"/proc/{pid}/stat") for pid in pids)
            client = sum(_cpu_s(f"/proc/self/task/{tid}/stat") for tid in threads)
            return time.monotonic(), server, client

        commits0 = await admin.fetchval(query, db)
        t0, server0, client0 = sample()
        await asyncio.sleep(seconds)
        t1, server1, client1 = sample()
        await asyncio.sleep(1.5)  # backends report their counts at most once a second
        commits1 = await admin.fetchval(query, db)
        span = t1 - t0
        per = span * instances
        print(f"{instances} instance(s), {span:.1f} s, load {os.getloadavg()[0]:.2f}:")
        each = "per instance per second"
        print(f"  commits: {commits1 - commits0} = {(commits1 - commits0) / per:.2f} {each}")
        print(f"  server CPU: {server1 - server0:.2f} s = {(server1 - server0) / per * 1000:.2f} ms {each}")
        print(f"  heartbeat thread CPU: {client1 - client0:.2f} s = {(client1 - client0) / per * 1000:.2f} ms {each}")
    finally:
        for beat in beats:
            await beat.stop(leave=True)
        await backend.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


def kill(rounds: int) -> None:
    for n in range(rounds):
        schema = f"anarchon_hbk_{uuid.uuid4().hex[:10]}"
        with (
            tempfile.TemporaryDirectory() as tmp,
            Fleet(
                Path(tmp),
                backend_class="anarchon_postgres:PostgresBackend",
                backend_kwargs={"dsn": DSN, "schema": schema},
                instances=3,
                jobs=50,
                slow_cron="*/5 * * * * *",
                slow_seconds=3,
            ) as fleet,
        ):
            try:
                fleet.start()
                take_over = fleet.take_over_after_kill("job-slow", timeout=60)
                time.sleep(6)
                fleet.stop()
                report = fleet.report()
                print(
                    f"round {n + 1}: take-over {take_over.took_ms} ms after kill -9, "
                    f"load {os.getloadavg()[0]:.2f}; {report.summary()}"
                )
            finally:
                asyncio.run(_drop(schema))


async def _drop(schema: str) -> None:
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "cost"
    if what == "cost":
        asyncio.run(cost(float(sys.argv[2]) if len(sys.argv) > 2 else 60, int(sys.argv[3]) if len(sys.argv) > 3 else 1))
    elif what == "kill":
        kill(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    else:
        raise SystemExit(f"unknown measurement {what!r}: use 'cost' or 'kill'")
