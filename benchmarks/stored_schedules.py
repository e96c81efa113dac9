"""Stored schedules at scale: 100,000 tenant-style schedules, one instance that runs them all.

``python -m benchmarks.stored_schedules [--schedules 100000] [--idle 20] [--changes 10] [--backend URL ...]``

Per backend (every installed one with the capability ``schedules``, in a
namespace of its own): the schedules are stored (half daily ``H H * * *``,
half hourly ``H * * * *``, spread by name, with a tenant in their kwargs);
then one instance with the task starts in a process of its own. Measured:
its ``start()`` (every schedule read and made a job), its resident set, its
CPU while idle (no slot due in the window is likely; the counter poll each
second is what remains), and, ``--changes`` times, how long after a change
(one ``Schedules.set``, timed too) the instance applies it, with the size
of what the instance read to do so. Writes its section of
``benchmarks/results/REPORT.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from anarchon import Scheduler, Schedules
from anarchon.schedules import StoredSchedule
from benchmarks._proc import cpu_seconds, rss_mb
from benchmarks.registry_cost import default_backends
from scripts.report import write_section

REPORT = Path(__file__).parent / "results" / "REPORT.md"
#: Stored concurrently while seeding (a server backend answers many puts at once).
SEED_CONCURRENCY = 64


def _schedule(i: int) -> StoredSchedule:
    cron = "H H * * *" if i % 2 else "H * * * *"
    zone = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")[i % 4]
    return StoredSchedule(f"tenant-{i}", "report", cron, {"tenant": i}, {"timezone": zone}, "api", 0, 0, "bench")


async def _seed(url: str, count: int) -> float:
    """Store ``count`` schedules (replacing earlier runs'); seconds taken."""
    async with Schedules(url, by="bench") as admin:
        backend = admin.backend
        began = time.monotonic()
        for start in range(0, count, SEED_CONCURRENCY):
            batch = [_schedule(i) for i in range(start, min(count, start + SEED_CONCURRENCY))]
            await asyncio.gather(*(backend.put_schedule(s.name, s.record(), expect=None, change="{}") for s in batch))
        return time.monotonic() - began


def _child(url: str) -> None:
    """The instance: start, say so, then print each schedule it applies, until stdin closes."""

    async def run() -> None:
        scheduler = Scheduler(url, instance_id=f"bench-stored-{os.getpid()}")
        scheduler.task(lambda tenant, round=0.0: None, name="report")  # a change sets round
        watch: Any = scheduler._stored
        apply = watch._apply

        def seen(name: str, record: str | None, revision: int) -> None:
            apply(name, record, revision)
            if watch.revision:  # after the first read: a change
                print(f"SEEN {name} {time.time():.6f}", flush=True)

        began = time.monotonic()
        await scheduler.start()
        watch._apply = seen
        print(f"STARTED {time.monotonic() - began:.3f} {len(scheduler.jobs)}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await scheduler.stop()

    asyncio.run(run())


def _measure(url: str, args: argparse.Namespace) -> dict[str, float]:
    seed_s = asyncio.run(_seed(url, args.schedules))
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.stored_schedules", "--child", url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    try:
        _, start_s, jobs = child.stdout.readline().split()
        time.sleep(2)  # the first polls after the start
        cpu0, t0 = cpu_seconds([child.pid]), time.monotonic()
        time.sleep(args.idle)
        idle = (cpu_seconds([child.pid]) - cpu0) / (time.monotonic() - t0)
        rss = rss_mb([child.pid])
        delays, puts = [], []

        async def change(i: int) -> float:
            async with Schedules(url, by="bench") as admin:
                began = time.monotonic()
                await admin.set(f"tenant-{i}", kwargs={"tenant": i, "round": time.time()})
                puts.append(time.monotonic() - began)
            return time.time()

        for i in range(args.changes):
            changed = asyncio.run(change(i * 7))
            line = child.stdout.readline().split()
            delays.append(float(line[2]) - changed)
    finally:
        child.stdin.close()
        child.wait(30)
    return {
        "seed_s": seed_s, "start_s": float(start_s), "jobs": float(jobs), "rss_mb": rss, "idle_cpu": idle * 100,
        "seen_p50": statistics.median(delays), "seen_max": max(delays), "put_ms": statistics.median(puts) * 1000,
    }  # fmt: skip


def _page(rows: list[tuple[str, dict[str, float]]], args: argparse.Namespace) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Stored schedules at scale, {now}",
        "",
        f"Command: `python -m benchmarks.stored_schedules --schedules {args.schedules} --idle {args.idle:g} "
        f"--changes {args.changes}`; {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}.",
        "",
        f"{args.schedules:,} stored schedules (half `H H * * *`, half `H * * * *`, four time zones); one "
        "instance with their task, in a process of its own. Start: `start()` until every schedule is a job. "
        f"Idle CPU: over {args.idle:g} s, in % of one core. Seen: from the end of a change (`Schedules.set`) "
        "to the instance applying it, median and worst of "
        f"{args.changes}. Change: the `set` call itself (a read and one atomic write).",
        "",
        "| backend | stored in s | start() s | jobs | RSS MB | idle CPU % | seen p50 s | seen max s | change ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for url, r in rows:
        lines.append(
            f"| {url.split(':', 1)[0]} | {r['seed_s']:.1f} | {r['start_s']:.2f} | {r['jobs']:,.0f} "
            f"| {r['rss_mb']:.0f} | {r['idle_cpu']:.1f} | {r['seen_p50']:.2f} | {r['seen_max']:.2f} "
            f"| {r['put_ms']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stored_schedules")
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measured")
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--backend", action="append", help="backend URL (repeatable); default: every one with it")
    parser.add_argument("--no-report", action="store_true", help="print only; leave REPORT.md alone")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    tmp = tempfile.mkdtemp(prefix="anarchon-stored-")
    rows = []
    for url in args.backend or default_backends(tmp, "schedules"):
        row = _measure(url, args)
        rows.append((url, row))
        print(url.split("?")[0].split("@")[-1], row, flush=True)
    page = _page(rows, args)
    print(page)
    if not args.no_report:
        write_section(REPORT, "stored-schedules", "Stored schedules at scale (`python -m benchmarks.stored_schedules`)",
                      page, "")  # fmt: skip


if __name__ == "__main__":
    main()
