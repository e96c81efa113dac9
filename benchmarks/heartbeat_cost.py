"""What an instance's heartbeat costs: one idle scheduler, heartbeat on vs off, per backend.

``python -m benchmarks.heartbeat_cost [--seconds 30] [--backend URL ...]``
runs, for each backend URL, two fresh processes with one scheduler and no
jobs: with the heartbeat (the default) and without it (``heart()`` answering
``None``, which is what a backend without liveness does). Each prints the
beats acknowledged per second (counted around the backend's own ``Heart``),
the process CPU per second, and the CPU per beat. The backend's own cost of a
beat (one short transaction or script) is not in these figures; the backends'
READMEs give it. A figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

DEFAULT_BACKENDS = (
    "memory://",
    "sqlite:///{tmp}/hb.sqlite3",
    "redis://127.0.0.1:6379/0",
    "postgresql://127.0.0.1:5432/test",
)


def _child(url: str, beating: bool, seconds: float) -> None:
    from anarchon import Scheduler

    scheduler = Scheduler(url)
    backend: Any = scheduler.backend
    beats = 0
    make = backend.heart

    def counted() -> Any:
        heart = make()
        if heart is None:
            return None
        beat = heart.beat

        async def beat_counted(instance: str, ttl_ms: int) -> Any:
            nonlocal beats
            answer = await beat(instance, ttl_ms)
            beats += 1
            return answer

        heart.beat = beat_counted
        return heart

    backend.heart = counted if beating else (lambda: None)

    async def main() -> None:
        async with scheduler:
            await asyncio.sleep(2)  # warm up
            before, b0, t0 = resource.getrusage(resource.RUSAGE_SELF), beats, time.monotonic()
            await asyncio.sleep(seconds)
            after, b1, t1 = resource.getrusage(resource.RUSAGE_SELF), beats, time.monotonic()
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(json.dumps({"beats_per_s": (b1 - b0) / (t1 - t0), "cpu_per_s": cpu / (t1 - t0)}))

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.heartbeat_cost")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--backend", action="append", help="backend URL (repeatable); default: all four")
    parser.add_argument("--child", nargs=2, metavar=("URL", "BEATING"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1] == "1", args.seconds)
        return
    tmp = tempfile.mkdtemp(prefix="anarchon-hb-")
    print(f"load average {os.getloadavg()[0]:.1f}; {args.seconds:.0f} s per run, one idle scheduler per process")
    print(f"{'backend':<36} {'beats/s':>8} {'CPU ms/s on':>12} {'CPU ms/s off':>13} {'CPU µs/beat':>12}")
    for url in args.backend or [u.format(tmp=tmp) for u in DEFAULT_BACKENDS]:
        rows = {}
        for beating in (True, False):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.heartbeat_cost", "--seconds", str(args.seconds),
                 "--child", url, "1" if beating else "0"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                print(f"{url:<36} failed: {out.stderr.strip().splitlines()[-1:]}")
                break
            rows[beating] = json.loads(out.stdout.strip().splitlines()[-1])
        else:
            on, off = rows[True], rows[False]
            per_beat = (on["cpu_per_s"] - off["cpu_per_s"]) / on["beats_per_s"] * 1e6 if on["beats_per_s"] else 0
            print(
                f"{url:<36} {on['beats_per_s']:>8.2f} {on['cpu_per_s'] * 1000:>12.2f} "
                f"{off['cpu_per_s'] * 1000:>13.2f} {per_beat:>12.0f}"
            )


if __name__ == "__main__":
    main()
