"""The tenant scenario: thousands of stored schedules due in one minute, drained through one group's limit.

``python -m benchmarks.group_drain [--backends sqlite,redis,postgres] [--schedules 10000] [--limit 20]
[--job-ms 200] [--instances 3] [--lead 45] [--no-report]``

Per backend, in a namespace of its own: ``--schedules`` stored schedules of
one task, each due once, spread over one minute (about 167 a second for
10,000), all in the group ``tenants`` limited to ``--limit`` runs at once;
``--instances`` processes with the task run them, each run ``--job-ms``
long. Default options besides ``group`` and ``max_wait_ms`` (``--max-wait-ms``,
10 minutes: 10,000 runs of 200 ms through 20 places take 100 s, so with the
default bound, a minute, the slots queued longest would be recorded skipped). Measured from the
instances' own ledger and the server:

- runs, slots run twice, slots not run (skipped or never started);
- the most runs going at once, from the runs' start and end stamps;
- drain: from the first slot to the last run's end (the floor is
  schedules x run / limit, or the minute the slots span);
- start delay (start minus slot), p50, p99 and max: the wait in the queue;
- server CPU and referee operations per run, as ``benchmarks.fleet_size``
  counts them (none for SQLite, whose store lives in the instances).

Writes its section of ``benchmarks/results/REPORT.md`` unless ``--no-report``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from anarchon_conformance.ledger import most_at_once
from scripts.report import BENCHMARK_INTRO, write_section

from ._machine import machine
from ._proc import cpu_seconds
from ._stats import Latency
from ._target import BackendSpec, Target, new_namespace
from .backends import load

REPORT = Path(__file__).parent / "results" / "REPORT.md"
GROUP = "tenants"
#: Stored at once while seeding.
SEED_CONCURRENCY = 64
READY = "group-drain-ready"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _cron(at_ms: int) -> str:
    """A cron that fires once a year, at this second (UTC)."""
    t = datetime.fromtimestamp(at_ms / 1000, tz=timezone.utc)
    return f"{t.second} {t.minute} {t.hour} {t.day} {t.month} *"


async def _seed(spec: BackendSpec, count: int, first_ms: int, limit: int, max_wait_ms: int) -> float:
    """Store the schedules, due from ``first_ms`` over one minute, and the group's limit; seconds taken."""
    from anarchon.schedules import StoredSchedule

    backend = spec.build()
    await backend.start()
    began = time.monotonic()
    try:
        await backend.set_group(GROUP, limit)
        for start in range(0, count, SEED_CONCURRENCY):
            batch = []
            for i in range(start, min(count, start + SEED_CONCURRENCY)):
                cron = _cron(first_ms + (i % 60) * 1000)
                options = {"group": GROUP, "max_wait_ms": max_wait_ms}
                batch.append(
                    StoredSchedule(f"tenant-{i}", "report", cron, {"tenant": i}, options, "api", 0, 0, "bench")
                )
            await asyncio.gather(*(backend.put_schedule(s.name, s.record(), expect=None, change="{}") for s in batch))
    finally:
        await backend.close()
    return time.monotonic() - began


def _child(class_path: str, kwargs: str, ledger: str, instance: str, job_ms: int) -> None:
    """One instance: the task writes a start and an end line per run to the ledger."""
    from anarchon import RunContext, Scheduler

    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(event: str, ctx: RunContext) -> None:
        line = {
            "e": event,
            "job": ctx.job.name,
            "slot": ctx.slot_ms,
            "attempt": ctx.attempt,
            "i": instance,
            "t": _now_ms(),
        }
        os.write(fd, (json.dumps(line) + "\n").encode())

    async def report(ctx: RunContext, tenant: int) -> None:
        write("start", ctx)
        await asyncio.sleep(job_ms / 1000)
        write("end", ctx)

    async def run() -> None:
        scheduler = Scheduler(BackendSpec(class_path, json.loads(kwargs)).build(), instance_id=instance)
        scheduler.task(report, name="report")
        await scheduler.start()
        print(READY, len(scheduler.jobs), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await scheduler.stop(grace_ms=5000)

    asyncio.run(run())


def _most_at_once(rows: list[dict[str, Any]]) -> int:
    """From the ledger's stamps; a run with no end (its instance stopped first) counts as going on."""
    ends = {(r["job"], r["slot"], r["attempt"]): r["t"] for r in rows if r["e"] == "end"}
    return most_at_once(
        (r["t"], ends.get((r["job"], r["slot"], r["attempt"]), r["t"] + 10**9)) for r in rows if r["e"] == "start"
    )


def measure(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    ns = new_namespace()
    spec = target.spec(ns)
    first_ms = (_now_ms() // 1000 + args.lead) * 1000
    try:
        seed_s = asyncio.run(_seed(spec, args.schedules, first_ms, args.limit, args.max_wait_ms))
        with tempfile.TemporaryDirectory(prefix=f"anarchon-{ns}-drain-") as tmp:
            ledger = Path(tmp) / "ledger.jsonl"
            children = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.group_drain",
                        "--child",
                        spec.class_path,
                        json.dumps(spec.kwargs),
                        str(ledger),
                        f"drain-{i}",
                        str(args.job_ms),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for i in range(args.instances)
            ]
            try:
                for child in children:
                    assert child.stdout is not None
                    words = child.stdout.readline().split()
                    assert words and words[0] == READY, f"an instance did not start: {words}"
                ready_ms = _now_ms()
                before = asyncio.run(target.referee_counters(ns)), cpu_seconds(asyncio.run(target.server_pids(ns)))
                pids = [c.pid for c in children]
                client0 = cpu_seconds(pids)
                floor_s = max(60.0, args.schedules * args.job_ms / 1000 / args.limit)
                deadline = time.monotonic() + (first_ms - _now_ms()) / 1000 + floor_s + 120
                while time.monotonic() < deadline:
                    time.sleep(1)
                    rows = _read(ledger)
                    if sum(1 for r in rows if r["e"] == "end") >= args.schedules:
                        break
                after = asyncio.run(target.referee_counters(ns)), cpu_seconds(asyncio.run(target.server_pids(ns)))
                client1 = cpu_seconds(pids)
            finally:
                for child in children:
                    assert child.stdin is not None
                    child.stdin.close()
                for child in children:
                    child.wait(120)
            rows = _read(ledger)
    finally:
        asyncio.run(target.cleanup(ns))
    starts = [r for r in rows if r["e"] == "start"]
    ends = [r for r in rows if r["e"] == "end"]
    per_slot = Counter((r["job"], r["slot"]) for r in starts)
    ran = len(per_slot) or 1
    (ops0, server0), (ops1, server1) = before, after
    return {
        "seed_s": seed_s,
        "ready_before_s": (first_ms - ready_ms) / 1000,
        "runs": len(per_slot),
        "twice": sum(1 for n in per_slot.values() if n > 1),
        "not_run": args.schedules - len(per_slot),
        "most": _most_at_once(rows),
        "drain_s": (max(r["t"] for r in ends) - first_ms) / 1000 if ends else float("nan"),
        "floor_s": floor_s,
        "delay": Latency.of([float(r["t"] - r["slot"]) for r in starts]),
        "server_ms": (server1 - server0) / ran * 1000,
        "client_ms": (client1 - client0) / ran * 1000,
        "ops": {k: (ops1[k] - ops0.get(k, 0.0)) / ran for k in ops1},
        "per_instance": sorted(Counter(r["i"] for r in starts).values()),
    }


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _page(results: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> str:
    lines = [
        "# Draining a group: the tenant scenario",
        "",
        f"`python -m benchmarks.group_drain --schedules {args.schedules} --limit {args.limit} --job-ms "
        f"{args.job_ms} --instances {args.instances} --max-wait-ms {args.max_wait_ms}`.",
        "",
        *(f"- {k}: {v}" for k, v in machine().items()),
        "",
        f"{args.schedules:,} stored schedules of one task, each due once, spread evenly over one minute; all in one "
        f"group limited to {args.limit} runs at once; {args.instances} instance processes; each run "
        f"{args.job_ms} ms. Default options besides `group` and `max_wait_ms={args.max_wait_ms}` (the default, "
        "`max_late_ms`, a minute, would skip the slots queued longest). "
        "Most at once: from the runs' own start and end stamps. Drain: first slot to the last run's end; the "
        "floor is the larger of the minute the slots span and schedules x run / limit. Delay: start minus "
        "slot. Server CPU and referee operations: per run, counted as `benchmarks.fleet_size` does.",
        "",
        "| backend | runs | twice | not run | most at once | drain s (floor) | delay p50 / p99 / max s "
        "| server CPU ms/run | referee ops/run | client CPU ms/run | runs per instance |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results:
        d: Latency = r["delay"]
        ops = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["ops"].items())) or "-"
        server = f"{r['server_ms']:.3f}" if name != "sqlite" else "-"
        lines.append(
            f"| {name} | {r['runs']:,} | {r['twice']} | {r['not_run']} | {r['most']} | {r['drain_s']:.1f} "
            f"({r['floor_s']:.0f}) | {d.p50 / 1000:.2f} / {d.p99 / 1000:.2f} / {d.max / 1000:.2f} | {server} "
            f"| {ops} | {r['client_ms']:.2f} | {', '.join(map(str, r['per_instance']))} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_drain")
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--job-ms", type=int, default=200)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--lead", type=int, default=45, help="seconds from now to the first slot")
    parser.add_argument("--max-wait-ms", type=int, default=600_000, help="each schedule's max_wait_ms")
    parser.add_argument("--no-report", action="store_true")
    parser.add_argument(
        "--child", nargs=5, metavar=("CLASS", "KWARGS", "LEDGER", "ID", "JOB_MS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        class_path, kwargs, ledger, instance, job_ms = args.child
        _child(class_path, kwargs, ledger, instance, int(job_ms))
        return
    results = []
    for name in args.backends.split(","):
        target = load(name)
        asyncio.run(target.setup())
        try:
            row = measure(target, args)
        finally:
            asyncio.run(target.teardown())
        results.append((name, row))
        print(name, {k: v for k, v in row.items() if k != "delay"}, row["delay"], flush=True)
    page = _page(results, args)
    print(page)
    if not args.no_report:
        label = "Draining a group: the tenant scenario (`python -m benchmarks.group_drain`)"
        write_section(REPORT, "group-drain", label, page, BENCHMARK_INTRO)


if __name__ == "__main__":
    main()
