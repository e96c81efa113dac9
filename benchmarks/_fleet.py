"""End to end: scheduler processes sharing 1,000 every-second jobs, judged by the fleet's ledger.

The jobs run with ``jitter_ms=0``: the scheduler draws a random jitter per slot
and records it nowhere, so only with no jitter is "start delay beyond the
jitter" a measured figure (the ledger's start time minus the slot) rather
than a guess. It is the hardest case too: every instance claims all 1,000
slots in the same millisecond.

CPU is read from ``/proc/<pid>/stat`` (user + system) of every instance
process when all are ready and again just before they are stopped, and
divided by the runs started between those two readings.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from anarchon_conformance.fleet import Fleet

from ._stats import Latency
from ._target import Target

__all__ = ["EndToEnd", "end_to_end"]

JOBS = 1000
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class EndToEnd:
    instances: int
    jobs: int
    seconds: float
    slots: int
    runs: int
    runs_per_s: float
    duplicates: int
    missed: int
    delay: Latency
    cpu_s_per_1000_runs: float
    cpu_cores: float
    options: dict[str, object]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of the line)


def end_to_end(target: Target, ns: str, seconds: float, jobs: int = JOBS) -> EndToEnd:
    spec = target.spec(ns)
    options: dict[str, object] = {"jitter_ms": 0, **target.fleet_options}
    with tempfile.TemporaryDirectory(prefix=f"anarchon-{ns}-fleet-") as tmp:
        fleet = Fleet(
            Path(tmp),
            backend_class=spec.class_path,
            backend_kwargs=spec.kwargs,
            instances=target.fleet_instances,
            jobs=jobs,
            options=options,
            grace_ms=5_000,
        )
        with fleet:
            fleet.start(timeout=180)
            pids = [m.process.pid for m in fleet.members]
            cpu_before = sum(_cpu_seconds(p) for p in pids)
            measured_from = time.time_ns() // 1_000_000
            time.sleep(seconds)
            cpu_after = sum(_cpu_seconds(p) for p in pids if Path(f"/proc/{p}").exists())
            measured_to = time.time_ns() // 1_000_000
            fleet.stop(timeout=60)
            # Judge whole seconds from the first full second after all were ready to 2 s before the stop.
            since = fleet.ready_ms + 1000 if fleet.ready_ms else measured_from
            until = measured_to - 2000
            report = fleet.report(since_ms=since, until_ms=until)
            ledger = fleet.ledger()
    starts = [r for r in ledger if r["e"] == "start"]
    window = [r for r in starts if since <= r["slot"] <= until]
    delays = [float(r["t"] - r["slot"]) for r in window]
    ran = sum(1 for r in starts if measured_from <= r["t"] <= measured_to)
    cpu = cpu_after - cpu_before
    span = (measured_to - measured_from) / 1000
    return EndToEnd(
        instances=target.fleet_instances,
        jobs=jobs,
        seconds=span,
        slots=report.slots,
        runs=report.runs,
        runs_per_s=report.runs / (report.slots / jobs) if report.slots else 0.0,
        duplicates=report.duplicates,
        missed=report.missed,
        delay=Latency.of(delays),
        cpu_s_per_1000_runs=cpu / ran * 1000 if ran else float("nan"),
        cpu_cores=cpu / span,
        options=options,
    )
