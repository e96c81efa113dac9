"""Scale of one scheduler: 10,000 jobs, most due rarely, in a process of its own.

Each measurement is a fresh process (``python -m benchmarks._scale …``), so
the resident set of an empty scheduler and of one holding 10,000 jobs are
taken alike: the same imports, the same backend, started and settled. Ten
jobs fire every ten seconds and the rest once a day at times spread over the
day, so the idle CPU includes the timer, the take-over poll of lease
backends and a little real work, as in an application whose jobs are mostly
daily or hourly.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ._target import BackendSpec, Target

__all__ = ["Scale", "scale"]

JOBS = 10_000
FREQUENT = 10
FREQUENT_CRON = "*/10 * * * * *"
#: ``--many``: 100,000 jobs, 100 of them every minute, the rest daily.
MANY_JOBS, MANY_FREQUENT, MANY_FREQUENT_CRON = 100_000, 100, "* * * * *"
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Scale:
    jobs: int
    frequent: str
    rss_empty_mb: float
    rss_full_mb: float
    add_s: float
    start_s: float
    idle_cpu_s_per_min: float
    idle_window_s: float

    @property
    def rss_above_empty_mb(self) -> float:
        return self.rss_full_mb - self.rss_empty_mb

    @property
    def idle_core_percent(self) -> float:
        return self.idle_cpu_s_per_min / 60 * 100


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE_KB / 1024


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _cron(i: int, frequent: int = FREQUENT, frequent_cron: str = FREQUENT_CRON) -> str:
    if i < frequent:
        return frequent_cron
    minute_of_day = i * 7 % 1440  # spread over the day, never all at once
    return f"{minute_of_day % 60} {minute_of_day // 60} * * *"


async def _child(
    spec: BackendSpec, jobs: int, settle_s: float, idle_s: float, frequent: int, frequent_cron: str
) -> dict[str, float]:
    from anarchon import Scheduler

    async def job() -> None:
        return None

    scheduler = Scheduler(spec.build(), instance_id="scale")
    t = time.perf_counter()
    for i in range(jobs):
        scheduler.add(f"job-{i:06d}", _cron(i, frequent, frequent_cron), job)
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    await scheduler.start()
    start_s = time.perf_counter() - t
    try:
        await asyncio.sleep(settle_s)
        gc.collect()
        rss = _rss_mb()
        cpu, wall = _cpu_s(), time.perf_counter()
        await asyncio.sleep(idle_s)
        idle_cpu, idle_wall = _cpu_s() - cpu, time.perf_counter() - wall
    finally:
        await scheduler.stop(grace_ms=1000)
    return {"rss_mb": rss, "add_s": add_s, "start_s": start_s, "cpu_s": idle_cpu, "wall_s": idle_wall}


def _run_child(
    spec: BackendSpec, jobs: int, settle_s: float, idle_s: float, frequent: int, frequent_cron: str
) -> dict[str, float]:
    argv = [sys.executable, "-m", "benchmarks._scale", spec.class_path, json.dumps(spec.kwargs)]
    argv += ["--jobs", str(jobs), "--settle", str(settle_s), "--idle", str(idle_s)]
    argv += ["--frequent", str(frequent), "--frequent-cron", frequent_cron]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=Path(__file__).parent.parent)
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip()][-3:]
        raise RuntimeError(f"the measuring process exited with {done.returncode}: {' / '.join(last)}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def scale(
    target: Target,
    empty_ns: str,
    full_ns: str,
    idle_s: float,
    jobs: int = JOBS,
    frequent: int = FREQUENT,
    frequent_cron: str = FREQUENT_CRON,
) -> Scale:
    """Two processes on two namespaces: one scheduler with no job, one with ``jobs``."""
    empty = _run_child(target.spec(empty_ns), 0, 2.0, 0.5, 0, frequent_cron)
    full = _run_child(target.spec(full_ns), jobs, 3.0, idle_s, frequent, frequent_cron)
    return Scale(
        jobs=jobs,
        frequent=f"{frequent} {frequent_cron}",
        rss_empty_mb=empty["rss_mb"],
        rss_full_mb=full["rss_mb"],
        add_s=full["add_s"],
        start_s=full["start_s"],
        idle_cpu_s_per_min=full["cpu_s"] / full["wall_s"] * 60,
        idle_window_s=full["wall_s"],
    )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks._scale")
    p.add_argument("class_path")
    p.add_argument("kwargs")
    p.add_argument("--jobs", type=int, default=JOBS)
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--idle", type=float, default=20.0)
    p.add_argument("--frequent", type=int, default=FREQUENT)
    p.add_argument("--frequent-cron", default=FREQUENT_CRON)
    args = p.parse_args()
    spec = BackendSpec(args.class_path, json.loads(args.kwargs))
    measured = _child(spec, args.jobs, args.settle, args.idle, args.frequent, args.frequent_cron)
    print(json.dumps(asyncio.run(measured)))


if __name__ == "__main__":
    main()
