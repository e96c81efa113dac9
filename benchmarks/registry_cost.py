"""What the fleet registry costs: backend calls and bytes per instance per second, and start-up at 10,000 jobs.

``python -m benchmarks.registry_cost [--seconds 20] [--instances 3] [--backend URL ...]``

Steady state: ``--instances`` schedulers in one process share a backend, each
with 100 jobs that never come due (so nothing but the registry and the
heartbeat talks to the backend); after a warm-up, the registry's calls of
each instance are counted for ``--seconds`` (wrapped around the backend's
``register``, ``keep_registered``, ``registered`` and ``registered_jobs``),
with the bytes of the texts written and read. Start-up: one instance with
10,000 jobs writes its entry (timed: the ``register()`` call and the size of
its jobs text), then a second instance reads those definitions (timed: the
``registered_jobs()`` call), as every instance does once for each other
instance that starts. The server's own CPU is not measured here. Writes its
section of ``benchmarks/results/REPORT.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import platform
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from anarchon import Scheduler
from anarchon.fleet import decode_jobs
from scripts import backends
from scripts.report import write_section

NEVER = "0 0 1 1 *"
REPORT = Path(__file__).parent / "results" / "REPORT.md"


def default_backends(tmp: str, capability: str = "registry") -> list[str]:
    """Every installed backend with ``capability``: its service's URL (``ANARCHON_*`` first), or a temp file."""
    urls = []
    for manifest in backends.load():
        cls = getattr(importlib.import_module(manifest.module), manifest.cls)
        if not getattr(cls.capabilities, capability):
            continue
        service = manifest.service
        if service is None:
            urls.append(f"{manifest.url_schemes[0]}:///{tmp}/{capability}.{manifest.name}")
        else:
            urls.append(os.environ.get(service["env"], service["url"]) + manifest.bench.get("namespace", ""))
    return urls


class Meter:
    """Counts one backend object's registry calls and the bytes of their texts."""

    def __init__(self, backend: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes_out = self.bytes_in = 0
        self.counting = False
        for name in ("register", "keep_registered", "registered", "registered_jobs"):
            setattr(backend, name, self._wrap(name, getattr(backend, name)))

    def _wrap(self, name: str, call: Any) -> Any:
        async def counted(*args: Any) -> Any:
            answer = await call(*args)
            if self.counting:
                self.calls[name] += 1
                if name == "register":
                    self.bytes_out += len(args[1]) + len(args[2])
                elif name == "registered":
                    self.bytes_in += sum(len(head) for _, head, _ in answer)
                elif name == "registered_jobs":
                    self.bytes_in += sum(len(text) for text in answer.values())
            return answer

        return counted


async def _steady(url: str, instances: int, seconds: float) -> dict[str, float]:
    schedulers, meters = [], []
    for i in range(instances):
        s = Scheduler(url, instance_id=f"bench-{i}-{os.getpid()}")
        for j in range(100):
            s.add(f"job-{j}", NEVER, lambda: None)
        meters.append(Meter(s.backend))
        schedulers.append(s)
    for s in schedulers:
        await s.start()
    try:
        await asyncio.sleep(3)  # every instance has read every other's jobs once
        for m in meters:
            m.counting = True
        began = time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - began
    finally:
        for s in schedulers:
            await s.stop()
    per = elapsed * instances
    calls = sum((m.calls for m in meters), Counter())
    return {
        "calls_per_s": sum(calls.values()) / per,
        "writes_per_s": (calls["register"] + calls["keep_registered"]) / per,
        "reads_per_s": (calls["registered"] + calls["registered_jobs"]) / per,
        "bytes_out_per_s": sum(m.bytes_out for m in meters) / per,
        "bytes_in_per_s": sum(m.bytes_in for m in meters) / per,
    }


async def _startup(url: str, jobs: int) -> dict[str, float]:
    big = Scheduler(url, instance_id=f"bench-big-{os.getpid()}")
    for j in range(jobs):
        big.add(f"job-{j}", NEVER, lambda: None)
    watch: Any = big._fleetwatch
    join = watch.join
    joined: list[float] = []

    async def timed_join() -> None:
        began = time.monotonic()
        await join()
        joined.append(time.monotonic() - began)

    watch.join = timed_join
    began = time.monotonic()
    await big.start()
    start_s = time.monotonic() - began
    reader = Scheduler(url, instance_id=f"bench-reader-{os.getpid()}").backend
    await reader.start()
    try:
        began = time.monotonic()
        texts = await reader.registered_jobs([big.instance_id])
        (text,) = texts.values()
        assert len(decode_jobs(big.instance_id, text) or ()) == jobs
        read_s = time.monotonic() - began
    finally:
        await reader.close()
        await big.stop()
    return {"start_s": start_s, "join_s": joined[0], "jobs_bytes": float(len(text)), "read_s": read_s}


def _page(rows: list[tuple[str, dict[str, float], dict[str, float]]], args: argparse.Namespace) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Fleet registry cost, {now}",
        "",
        f"Command: `python -m benchmarks.registry_cost --seconds {args.seconds:g} --instances {args.instances}`; "
        f"{os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}.",
        "",
        f"Steady state: {args.instances} instances with 100 jobs each that never come due; per instance per second. "
        "Writes are the entry's refresh (its expiry; the head again where no heartbeat keeps it) once the entry is "
        "written; texts written counts the entries written again (none while no job changes), texts read the "
        "heads and definitions read.",
        "",
        "| backend | registry calls/s | writes/s | reads/s | texts written, bytes/s | texts read, bytes/s |",
        "|---|---|---|---|---|---|",
    ]
    for url, steady, _ in rows:
        name = url.split(":", 1)[0]
        lines.append(
            f"| {name} | {steady['calls_per_s']:.2f} | {steady['writes_per_s']:.2f} | {steady['reads_per_s']:.2f} "
            f"| {steady['bytes_out_per_s']:.0f} | {steady['bytes_in_per_s']:.0f} |"
        )
    lines += [
        "",
        f"Start-up at {args.jobs:,} jobs: the whole `start()`, the registry's part of it (the entry built and "
        "written, the fleet read once), the size of the stored definitions, and the time another instance takes "
        "to read and decode them (once per instance that starts or changes its jobs).",
        "",
        "| backend | start() s | of which the registry s | definitions bytes | read and decoded by another s |",
        "|---|---|---|---|---|",
    ]
    for url, _, start in rows:
        name = url.split(":", 1)[0]
        lines.append(
            f"| {name} | {start['start_s']:.2f} | {start['join_s']:.3f} | {start['jobs_bytes']:,.0f} "
            f"| {start['read_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.registry_cost")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument(
        "--backend", action="append", help="backend URL (repeatable); default: every backend with a registry"
    )
    parser.add_argument("--no-report", action="store_true", help="print only; leave REPORT.md alone")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="anarchon-registry-")
    rows = []
    for url in args.backend or default_backends(tmp):
        steady = asyncio.run(_steady(url, args.instances, args.seconds))
        start = asyncio.run(_startup(url, args.jobs))
        rows.append((url, steady, start))
        print(url.split("?")[0].split("@")[-1], steady, start, flush=True)
    page = _page(rows, args)
    print(page)
    if not args.no_report:
        write_section(REPORT, "registry", "Fleet registry cost (`python -m benchmarks.registry_cost`)", page, "")


if __name__ == "__main__":
    main()
