"""What the run log costs: one scheduler, 1,000 every-second jobs on the memory backend, logging off vs on.

``python -m benchmarks.logging_cost [--seconds 20]`` runs the same schedule
three times in fresh processes: logging at WARNING (run lines never
formatted), at INFO to a file (20 run lines a second, the rest counted for the
per-second summary), and at DEBUG to a file (every run line). It prints CPU
seconds per 1,000 runs and the lines written. A figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = 1000


def _child(level: str, seconds: float, log_path: str) -> None:
    from anarchon import MemoryBackend, Scheduler

    if level != "WARNING":
        handler = logging.FileHandler(log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("anarchon").addHandler(handler)
    logging.getLogger("anarchon").setLevel(level)
    runs = 0

    async def tick() -> None:
        nonlocal runs
        runs += 1

    async def main() -> None:
        s = Scheduler(MemoryBackend())
        for i in range(JOBS):
            s.add(f"job-{i:04d}", "* * * * * *", tick, jitter_ms=0)
        async with s:
            await asyncio.sleep(2)  # warm up
            before, counted = resource.getrusage(resource.RUSAGE_SELF), runs
            await asyncio.sleep(seconds)
            after, done = resource.getrusage(resource.RUSAGE_SELF), runs
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(json.dumps({"level": level, "runs": done - counted, "cpu_s": cpu}))

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.logging_cost")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child, args.seconds, args.log)
        return
    print(f"1,000 every-second jobs, memory backend, one process, {args.seconds:.0f} s measured per level")
    print("| logging | runs | CPU s per 1,000 runs | log lines |")
    print("|---|---|---|---|")
    for level in ("WARNING", "INFO", "DEBUG"):
        with tempfile.TemporaryDirectory() as tmp:
            log_path = str(Path(tmp) / "anarchon.log")
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.logging_cost", "--child", level, "--seconds", str(args.seconds),
                 "--log", log_path],
                capture_output=True, text=True, check=True, timeout=args.seconds + 120,
            )  # fmt: skip
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            lines = len(Path(log_path).read_text().splitlines()) if Path(log_path).exists() else 0
        per = figures["cpu_s"] / max(1, figures["runs"]) * 1000
        print(f"| {level} | {figures['runs']:,} | {per:.3f} | {lines:,} |")
        time.sleep(1)


if __name__ == "__main__":
    main()
