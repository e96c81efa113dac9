"""How soon another instance follows a stored-schedule change: the backend's push against the poll alone.

``python -m benchmarks.schedule_push [--changes 20] [--idle 60] [--backend URL ...]``

Per backend with the capability ``schedule_notify`` (in a namespace of its
own, removed afterwards): an instance (a ``Scheduler`` with the task) follows
the stored schedules; another backend object changes one schedule
``--changes`` times, at random gaps of 0.5 to 1.5 s, so the changes fall at
every phase of the poll. Measured: the counter reads (polls) the instance
makes per minute over ``--idle`` seconds without a change, and from the end of
each ``put_schedule`` to the instance's watch applying the change, median and
worst. Twice: with the push, and with the
instance's wait replaced by the base one, which only sleeps (the poll every
second, as on a backend without the capability, or while the push is down).
Writes its section of ``benchmarks/results/REPORT.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from anarchon import Scheduler
from anarchon.backend import Backend
from benchmarks.registry_cost import default_backends
from scripts.report import write_section

REPORT = Path(__file__).parent / "results" / "REPORT.md"


def _namespaced(url: str) -> tuple[str, str | None]:
    """The URL in a namespace of this run's own (a PostgreSQL schema, a Redis prefix), and that namespace.

    Another backend keeps the namespace its manifest gives benchmarks (``[bench] namespace``); the run
    removes the schedule it changed there (the tombstone goes with a change 12 hours on).
    """
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    tag = uuid.uuid4().hex[:8]
    if parts.scheme.startswith("postgres"):
        key, name = "schema", f"bench_push_{tag}"
    elif parts.scheme.startswith("redis"):
        key, name = "prefix", f"bpush{tag}:"
    else:
        return url, None
    query[key] = name
    return urlunsplit(parts._replace(query=urlencode(query))), name


async def _drop(url: str, namespace: str | None) -> None:
    parts = urlsplit(url)
    if namespace is None:
        return
    if parts.scheme.startswith("postgres"):
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(urlunsplit(parts._replace(query="")))
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')
        finally:
            await conn.close()
    elif parts.scheme.startswith("redis"):
        from redis.asyncio import Redis

        client = Redis.from_url(urlunsplit(parts._replace(query="")))
        try:
            async for key in client.scan_iter(match=f"{namespace}*", count=1000):
                await client.delete(key)
        finally:
            await client.aclose()


async def _run(url: str, changes: int, idle_s: float, *, push: bool) -> dict[str, float]:
    scheduler = Scheduler(url, instance_id=f"bench-push-{os.getpid()}")
    scheduler.task(lambda n=0: None, name="report")
    backend: Any = scheduler.backend
    polls = 0
    read = backend.schedules_revision

    async def counted() -> int:
        nonlocal polls
        polls += 1
        return int(await read())

    backend.schedules_revision = counted
    if not push:  # the instance waits as a backend without the capability does: it sleeps
        backend.wait_schedules = lambda revision, timeout_ms: Backend.wait_schedules(backend, revision, timeout_ms)
    seen: dict[int, float] = {}
    arrived = asyncio.Event()
    watch: Any = scheduler._stored
    apply = watch._apply

    def applied(name: str, record: str | None, revision: int) -> None:
        apply(name, record, revision)
        seen.setdefault(revision, time.monotonic())
        arrived.set()

    async def seen_at(revision: int) -> float:
        while revision not in seen:
            arrived.clear()
            await arrived.wait()
        return seen[revision]

    watch._apply = applied
    writer = type(backend).from_url(url)
    await writer.start()
    await scheduler.start()
    name = f"tenant-{uuid.uuid4().hex[:8]}"  # removed at the end: a shared namespace keeps nothing of the run
    try:
        record = json.dumps({"format": 1, "task": "report", "cron": "0 3 * * *", "kwargs": {}, "options": {}})
        revision = await writer.put_schedule(name, record, expect=None, change="{}")
        await seen_at(revision)
        await asyncio.sleep(2)  # past the first waits: the push is live, or the poll steady
        began, polls = time.monotonic(), 0
        await asyncio.sleep(idle_s)  # nothing changes: what following the schedules costs
        idle = polls / (time.monotonic() - began) * 60
        delays = []
        for i in range(changes):
            await asyncio.sleep(random.uniform(0.5, 1.5))
            text = json.dumps({"format": 1, "task": "report", "cron": "0 3 * * *", "kwargs": {"n": i}, "options": {}})
            revision = await writer.put_schedule(name, text, expect=revision, change="{}")
            done = time.monotonic()
            delays.append(await seen_at(revision) - done)
    finally:
        await scheduler.stop()
        try:
            await writer.put_schedule(name, None, expect=None, change="{}")
        finally:
            await writer.close()
    return {"p50": statistics.median(delays), "max": max(delays), "idle_polls_per_min": idle}


def _page(rows: list[tuple[str, dict[str, float], dict[str, float]]], args: argparse.Namespace) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Stored-schedule changes pushed, {now}",
        "",
        f"Command: `python -m benchmarks.schedule_push --changes {args.changes} --idle {args.idle:g}`; "
        f"{os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}.",
        "",
        f"One instance follows the stored schedules; another backend object changes one schedule {args.changes} "
        "times, 0.5-1.5 s apart. Seen: from the end of `put_schedule` to the instance applying the change, "
        f"median and worst. Idle polls: the instance's counter reads per minute over {args.idle:g} s without a "
        "change (each is one small read of the backend). Push: the backend's notification "
        "(capability `schedule_notify`) with the poll every 10 s as the fallback; poll: the wait replaced by "
        "the base one, which sleeps (every 1 s, as without the capability).",
        "",
        "| backend | push: seen p50 ms | push: seen max ms | push: idle polls/min | poll: seen p50 ms "
        "| poll: seen max ms | poll: idle polls/min |",
        "|---|---|---|---|---|---|---|",
    ]
    for url, pushed, polled in rows:
        lines.append(
            f"| {urlsplit(url).scheme} | {pushed['p50'] * 1000:.1f} | {pushed['max'] * 1000:.1f} "
            f"| {pushed['idle_polls_per_min']:.1f} | {polled['p50'] * 1000:.0f} | {polled['max'] * 1000:.0f} "
            f"| {polled['idle_polls_per_min']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.schedule_push")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds without a change, polls counted")
    parser.add_argument("--backend", action="append", help="backend URL (repeatable); default: every one with it")
    parser.add_argument("--no-report", action="store_true", help="print only; leave REPORT.md alone")
    args = parser.parse_args()
    rows = []
    for base in args.backend or default_backends(tempfile.mkdtemp(prefix="anarchon-push-"), "schedule_notify"):
        url, namespace = _namespaced(base)
        try:
            pushed = asyncio.run(_run(url, args.changes, args.idle, push=True))
            polled = asyncio.run(_run(url, args.changes, args.idle, push=False))
        finally:
            asyncio.run(_drop(url, namespace))
        rows.append((url, pushed, polled))
        print(urlsplit(url).scheme, pushed, polled, flush=True)
    page = _page(rows, args)
    print(page)
    if not args.no_report:
        write_section(REPORT, "schedule-push", "Stored-schedule changes pushed (`python -m benchmarks.schedule_push`)",
                      page, "")  # fmt: skip


if __name__ == "__main__":
    main()
