"""What the referee's work does as the fleet grows: N instance processes on one backend, the jobs fixed.

``python -m benchmarks.fleet_size [--backends sqlite,redis,postgres] [--sizes 1,2,4,8,16] [--jobs 100]
[--seconds 30] [--jitter-ms MS] [--quick] [--no-report] [--pairs K] [--idle]``

For each backend and each fleet size N, ``anarchon_conformance.fleet.Fleet``
starts N instance processes sharing ``--jobs`` every-second jobs with the
default options (ranked claims: rank 0 claims at the slot, and a later rank
only a slot it did not hear decided; ``--jitter-ms 0`` turns ranking off, so
every instance tries every slot in the same millisecond, the case whose cost
grew with N), lets them settle, and measures over ``--seconds``:

- server CPU per run: time on a CPU of the server processes the target names
  (PostgreSQL: the backends serving the instances; Redis: the whole
  ``redis-server``), per run started in the window, from
  ``/proc/<pid>/schedstat`` (nanoseconds: ``stat``'s 10 ms ticks moved one
  idle instance's figure by half a millisecond a second from one run to the
  next); none for SQLite, whose store lives in the instances;
- referee operations per run: the server's own counters (Redis ``INFO
  commandstats``: every command, those inside scripts too, and the script
  calls, which are the round trips; PostgreSQL ``pg_stat_database``:
  transactions, flushed by each session at most once a second, so a window
  carries up to a second's error per connection);
- client CPU per run: the instance processes (also from ``schedstat``);
- start delay (the ledger's start time minus the slot), p50 and p99;
- claims lost and slots heard decided (no claim sent) per run, for the
  window's slots only: the start-up's are not the pace (eight instances, 1,000
  jobs: 5,677 of a run's 5,991 lost claims fell on its first two slots);
- runs per instance: the busiest against the least busy;
- twice and missed slots, from the fleet's ledger.

Ratios to N=1 are printed per backend. ``--quick`` is the short case (N = 1
and 4, 12 s windows) that prints the N=4/N=1 ratios in a minute or two per
backend. ``--pairs K`` runs the first and the last size back to back K times
and prints the server-CPU ratio of each pair and their median (a ratio of two
single runs moves with the machine's load); it writes nothing. Otherwise writes
its section of ``benchmarks/results/REPORT.md`` and the chart the docs show
(``docs/images/fleet-size.png``) unless ``--no-report``.

``--idle`` measures what grows with N whatever the jobs: N instances (sizes
1 and 8 by default) whose jobs never come due, so each sends only what keeps
it known to the fleet (its heartbeat, its registry entry and reads, its
polls); it prints the server's CPU, the referee's operations and the
instance's own CPU per instance per second, and writes its own section of the
report. Seven such instances are what N=8 adds to N=1 before any slot.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from anarchon_conformance.fleet import Fleet, FleetReport
from scripts.report import BENCHMARK_INTRO, write_section

from ._cli import _ensure_requirements
from ._machine import machine
from ._proc import oncpu_seconds
from ._stats import Latency
from ._target import Target, new_namespace
from .backends import load

__all__ = ["Idle", "Point", "measure", "measure_idle"]

REPORT = Path(__file__).parent / "results" / "REPORT.md"
#: The chart lives with the docs, which show it beside the protocol's table; the report links to it.
CHART = Path(__file__).parent.parent / "docs" / "images" / "fleet-size.png"
#: A cron that never comes due while measured (1 January, midnight): the instances only keep themselves known.
NEVER = "0 0 0 1 1 *"


@dataclass(frozen=True)
class Point:
    """One backend at one fleet size."""

    instances: int
    runs: int
    twice: int
    missed: int
    server_ms_per_run: float
    client_ms_per_run: float
    ops_per_run: dict[str, float]
    delay: Latency
    per_instance: list[int] = field(default_factory=list)
    #: Per run, for the window's slots: claims sent and lost, and slots heard decided (no claim sent).
    claims_lost: float = math.nan
    heard_decided: float = math.nan

    @property
    def spread(self) -> float:
        """Runs of the busiest instance over those of the least busy (1.0: even)."""
        if not self.per_instance:
            return 1.0
        low = min(self.per_instance)
        return max(self.per_instance) / low if low else math.inf


async def _counters(target: Target, ns: str) -> tuple[dict[str, float], float]:
    return await target.referee_counters(ns), oncpu_seconds(await target.server_pids(ns))


@dataclass(frozen=True)
class _Window:
    """What one measured window of a fleet read: the referee's counters, server and instance CPU (s)."""

    since: int
    until: int
    ops: dict[str, float]
    server_s: float
    client_s: float
    ledger: list[dict[str, Any]]
    members: list[str]
    report: FleetReport


def _window(target: Target, instances: int, jobs: int, seconds: float, options: dict[str, Any], cron: str) -> _Window:
    """Start ``instances`` processes on a fresh namespace, measure ``seconds`` of steady state, clean up."""
    ns = new_namespace()
    spec = target.spec(ns)
    try:
        with tempfile.TemporaryDirectory(prefix=f"anarchon-{ns}-size-") as tmp:
            fleet = Fleet(
                Path(tmp),
                backend_class=spec.class_path,
                backend_kwargs=spec.kwargs,
                instances=instances,
                jobs=jobs,
                cron=cron,
                options={**options, **target.fleet_options},
                grace_ms=5_000,
            )
            with fleet:
                fleet.start(timeout=180)
                time.sleep(3)  # past the first slots' start-up work
                pids = [m.process.pid for m in fleet.members]
                ops_before, server_before = asyncio.run(_counters(target, ns))
                client_before = oncpu_seconds(pids)
                since = time.time_ns() // 1_000_000
                time.sleep(seconds)
                until = time.time_ns() // 1_000_000
                ops_after, server_after = asyncio.run(_counters(target, ns))
                client_after = oncpu_seconds(pids)
                fleet.stop(timeout=60)
                report = fleet.report(since_ms=since + 1000, until_ms=until - 2000)
                ledger = fleet.ledger()
                members = [m.instance for m in fleet.members]
    finally:
        asyncio.run(target.cleanup(ns))
    return _Window(
        since=since,
        until=until,
        ops={k: ops_after[k] - ops_before.get(k, 0.0) for k in ops_after},
        server_s=server_after - server_before,
        client_s=client_after - client_before,
        ledger=ledger,
        members=members,
        report=report,
    )


def measure(target: Target, instances: int, jobs: int, seconds: float, jitter_ms: int | None = None) -> Point:
    """``instances`` processes sharing ``jobs`` every-second jobs: the referee's cost per run."""
    options = {} if jitter_ms is None else {"jitter_ms": jitter_ms}
    seen = _window(target, instances, jobs, seconds, options, "* * * * * *")
    since, until, ledger = seen.since, seen.until, seen.ledger
    starts = [r for r in ledger if r["e"] == "start" and since <= r["t"] <= until]
    ran = len(starts) or 1
    # Each instance writes its tallies per slot at its stop: the slots of the measured window count,
    # not the start-up's first ones (see the module's docstring).
    tallies = [
        counts
        for r in ledger
        if r["e"] == "claims"
        for slot, counts in r["slots"].items()
        if since <= int(slot) <= until
    ]
    by_instance = Counter(r["instance"] for r in starts)
    return Point(
        instances=instances,
        runs=len(starts),
        twice=seen.report.duplicates,
        missed=seen.report.missed,
        server_ms_per_run=seen.server_s / ran * 1000,
        client_ms_per_run=seen.client_s / ran * 1000,
        ops_per_run={k: v / ran for k, v in seen.ops.items()},
        delay=Latency.of([float(r["t"] - r["slot"]) for r in starts]),
        per_instance=[by_instance.get(m, 0) for m in seen.members],
        claims_lost=sum(lost for lost, _ in tallies) / ran,
        heard_decided=sum(decided for _, decided in tallies) / ran,
    )


@dataclass(frozen=True)
class Idle:
    """What each instance of a fleet sends and costs on its own, per second, while no slot is due."""

    instances: int
    server_ms: float
    client_ms: float
    ops: dict[str, float]


def measure_idle(target: Target, instances: int, seconds: float) -> Idle:
    """``instances`` processes whose 10 jobs never come due: heartbeat, registry, polls, and nothing else."""
    seen = _window(target, instances, 10, seconds, {}, NEVER)
    per = (seen.until - seen.since) / 1000 * instances
    return Idle(
        instances=instances,
        server_ms=seen.server_s / per * 1000,
        client_ms=seen.client_s / per * 1000,
        ops={k: v / per for k, v in seen.ops.items()},
    )


def _f(x: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def _page(results: dict[str, list[Point]], args: argparse.Namespace, chart: bool) -> str:
    info = machine()
    lines = [
        "# Referee cost as the fleet grows",
        "",
        f"`python -m benchmarks.fleet_size {args.argv}`: N instance processes, {args.jobs.replace(',', ' or ')} "
        "every-second jobs "
        f"({'default options: ranked claims' if args.jitter_ms is None else f'jitter_ms={args.jitter_ms}'}), "
        f"{args.seconds:.0f} s measured per point after the fleet settled.",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
    ]
    for name, points in results.items():
        base = points[0]
        keys = sorted({k for p in points for k in p.ops_per_run})
        lines += [f"## {name}", ""]
        header = ["N", "runs", "twice", "missed", "server CPU ms/run", *(f"{k}/run" for k in keys)]
        header += ["claims lost/run", "heard decided/run"]
        header += ["client CPU ms/run", "delay p50 ms", "delay p99 ms", "busiest/least busy"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for p in points:
            row = [str(p.instances), str(p.runs), str(p.twice), str(p.missed), _f(p.server_ms_per_run, 3)]
            row += [_f(p.ops_per_run.get(k, math.nan)) for k in keys]
            row += [_f(p.claims_lost), _f(p.heard_decided)]
            row += [_f(p.client_ms_per_run, 3), _f(p.delay.p50, 0), _f(p.delay.p99, 0), _f(p.spread)]
            lines.append("| " + " | ".join(row) + " |")
        if len(points) > 1:
            last = points[-1]
            ratios = [f"server CPU {_ratio(last.server_ms_per_run, base.server_ms_per_run)}"]
            ratios += [
                f"{k} {_ratio(last.ops_per_run.get(k, math.nan), base.ops_per_run.get(k, math.nan))}" for k in keys
            ]
            ratios.append(f"client CPU {_ratio(last.client_ms_per_run, base.client_ms_per_run)}")
            lines += ["", f"N={last.instances} against N=1, per run: " + ", ".join(ratios) + "."]
        lines.append("")
    if chart:
        lines += ["![Server CPU per run against fleet size](../../docs/images/fleet-size.png)", ""]
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    return "n/a" if not b or math.isnan(a) or math.isnan(b) else f"{a / b:.2f}x"


def _chart(results: dict[str, list[Point]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in results.items():
        ys = [_cpu(p) for p in points]
        label = name if points[0].server_ms_per_run > 0 else f"{name} (instances' CPU: no server)"
        ax.plot([p.instances for p in points], ys, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # 100 and 1,000 jobs differ several-fold: each line's slope is what matters
    ax.set_xlabel("instances (N)")
    ax.set_ylabel("CPU ms per run")
    ax.set_title("Referee CPU per run as the fleet grows")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_size", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--sizes", default=None, help="fleet sizes, comma-separated (default 1,2,4,8,16)")
    parser.add_argument("--jobs", default="100", help="jobs per fleet, comma-separated for several (e.g. 100,1000)")
    parser.add_argument("--seconds", type=float, default=None, help="measured window per point (default 30)")
    parser.add_argument("--jitter-ms", type=int, default=None, help="the jobs' jitter_ms (0: no ranked claims)")
    parser.add_argument("--quick", action="store_true", help="N=1 and N=4, 12 s each: the ratio in a minute or two")
    parser.add_argument("--no-report", action="store_true", help="print only; leave REPORT.md alone")
    parser.add_argument(
        "--pairs", type=int, default=0, help="K pairs of the first and last size run back to back; prints only"
    )
    parser.add_argument(
        "--idle", action="store_true", help="what each instance costs on its own, no slot due (sizes 1,8 by default)"
    )
    args = parser.parse_args(argv)
    sizes_text = args.sizes or ("1,4" if args.quick else "1,8" if args.idle else "1,2,4,8,16")
    try:
        sizes = [int(s) for s in sizes_text.split(",")]
    except ValueError:
        parser.error(f"--sizes={sizes_text!r} must be whole numbers separated by commas, e.g. 1,2,4")
    if not sizes or min(sizes) < 1:
        parser.error(f"--sizes={sizes_text!r}: every size must be at least 1, e.g. 1,2,4")
    try:
        job_counts = [int(j) for j in args.jobs.split(",")]
    except ValueError:
        parser.error(f"--jobs={args.jobs!r} must be whole numbers separated by commas, e.g. 100,1000")
    if not job_counts or min(job_counts) < 1:
        parser.error(f"--jobs={args.jobs!r}: every count must be at least 1, e.g. 100")
    args.seconds = args.seconds or (12.0 if args.quick else 30.0)
    args.argv = " ".join(sys.argv[1:] if argv is None else argv)
    if args.pairs < 0:
        parser.error(f"--pairs={args.pairs}: give a number of pairs, at least 1, e.g. --pairs 3")
    if args.pairs:
        _pairs(args, sizes[0], sizes[-1], job_counts)
        return
    if args.idle:
        _idle(args, sizes)
        return
    results: dict[str, list[Point]] = {}
    for name, target in _reachable(args.backends):
        for jobs in job_counts:
            label = name if len(job_counts) == 1 else f"{name}, {jobs} jobs"
            results[label] = [_measured(label, target, n, jobs, args) for n in sizes]
    if not args.no_report:
        _ensure_requirements()  # matplotlib, for the chart beside the table
    drew = not args.no_report and _chart(results, CHART)
    page = _page(results, args, drew)
    print(page)
    if not args.no_report:
        label = "Referee cost as the fleet grows (`python -m benchmarks.fleet_size`)"
        write_section(REPORT, "fleet-size", label, page, BENCHMARK_INTRO)


def _pairs(args: argparse.Namespace, small: int, big: int, job_counts: list[int]) -> None:
    """Alternate N=small and N=big ``--pairs`` times: a ratio of two single runs moves with the machine's load.

    The server's CPU per run where there is a server, else (SQLite) the instances'.
    """
    for name, target in _reachable(args.backends):
        for jobs in job_counts:
            label = f"{name}, {jobs} jobs"
            ratios = []
            for _ in range(args.pairs):
                a, b = _measured(label, target, small, jobs, args), _measured(label, target, big, jobs, args)
                ratios.append(_cpu(b) / _cpu(a))
            what = "server" if a.server_ms_per_run > 0 else "instances'"
            shown = ", ".join(f"{r:.2f}x" for r in ratios)
            median = sorted(ratios)[len(ratios) // 2]
            print(f"{label}: {what} CPU per run, N={big} over N={small}, pair by pair: {shown}; median {median:.2f}x")


def _idle(args: argparse.Namespace, sizes: list[int]) -> None:
    """Each backend at each size with nothing due: the cost each instance adds to the fleet, per second."""
    lines = [
        "# What each instance costs on its own",
        "",
        f"`python -m benchmarks.fleet_size {args.argv}`: N instance processes with 10 jobs that never come due "
        f"(default options), {args.seconds:.0f} s measured per point after the fleet settled: only what each "
        "instance sends to keep itself known (heartbeat, fleet registry, polls). Per instance per second.",
        "",
        *(f"- {k}: {v}" for k, v in machine().items()),
        "",
    ]
    for name, target in _reachable(args.backends):
        points = [measure_idle(target, n, args.seconds) for n in sizes]
        keys = sorted({k for p in points for k in p.ops})
        header = ["N", "server CPU ms/s", *(f"{k}/s" for k in keys), "instance CPU ms/s"]
        lines += [f"## {name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for p in points:
            row = [str(p.instances), _f(p.server_ms) if p.server_ms else "n/a"]
            row += [_f(p.ops.get(k, math.nan)) for k in keys]
            lines.append("| " + " | ".join([*row, _f(p.client_ms)]) + " |")
            print(f"{name} idle N={p.instances}: {lines[-1]}", flush=True)
        first, last = points[0], points[-1]
        if last.instances > first.instances:
            # Totals, not shares: the server's own background (Redis's timer) is spread over N in the table.
            added = partial(_added, first.instances, last.instances)
            each = [f"server CPU {added(first.server_ms, last.server_ms)} ms/s"] if first.server_ms else []
            each += [f"{k} {added(first.ops.get(k, 0.0), last.ops.get(k, 0.0))}/s" for k in keys]
            each.append(f"its own CPU {added(first.client_ms, last.client_ms)} ms/s")
            lines += ["", "Each instance beyond the first adds: " + ", ".join(each) + "."]
        lines.append("")
    page = "\n".join(lines)
    print(page)
    if not args.no_report:
        label = "What each instance costs on its own (`python -m benchmarks.fleet_size --idle`)"
        write_section(REPORT, "fleet-size-idle", label, page, BENCHMARK_INTRO)


def _added(n_a: int, n_b: int, a: float, b: float) -> str:
    """What each instance between n_a and n_b adds, from the per-instance figures at both sizes."""
    return _f((b * n_b - a * n_a) / (n_b - n_a))


def _cpu(point: Point) -> float:
    """The CPU per run a fleet's cost is read from: the server's, or the instances' where there is none."""
    return point.server_ms_per_run if point.server_ms_per_run > 0 else point.client_ms_per_run


def _reachable(backends: str) -> Iterator[tuple[str, Target]]:
    """Each backend named (comma-separated) that answers; the others are said not measured."""
    for name in backends.split(","):
        target = load(name)
        why = asyncio.run(target.unreachable())
        if why:
            print(f"{name}: not measured ({why})", flush=True)
        else:
            yield name, target


def _measured(name: str, target: Target, n: int, jobs: int, args: argparse.Namespace) -> Point:
    point = measure(target, n, jobs, args.seconds, args.jitter_ms)
    print(
        f"{name} N={n}: {point.runs} runs, {point.twice} twice, {point.missed} missed, "
        f"server {point.server_ms_per_run:.3f} ms/run, ops {point.ops_per_run}, "
        f"claims lost {point.claims_lost:.2f}/run, heard decided {point.heard_decided:.2f}/run, "
        f"client {point.client_ms_per_run:.3f} ms/run, delay p50/p99 {point.delay.p50:.0f}/"
        f"{point.delay.p99:.0f} ms, per instance {point.per_instance}",
        flush=True,
    )
    return point


if __name__ == "__main__":
    main()
