"""Burst: 10,000 jobs due at the same second, shared by 3 instances.

Every job runs at seconds 0 and 30 of each minute (``0,30 * * * * *``), so
the whole fleet claims 10,000 slots in one instant and then idles. For each
burst after the first (which also creates the jobs' rows), the ledger gives
the time from the slot to the last of its runs starting, and ``/proc`` the
CPU the instance processes (and the server, where it has processes of its
own) spent on it, per 1,000 runs.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from anarchon_conformance.fleet import Fleet

from ._proc import cpu_seconds
from ._stats import percentile
from ._target import Target

__all__ = ["Burst", "burst"]

JOBS = 10_000
CRON = "0,30 * * * * *"
_PERIOD_MS = 30_000


@dataclass(frozen=True)
class Burst:
    jobs: int
    instances: int
    slot_ms: int
    runs: int
    duplicates: int
    first_start_ms: float
    p50_start_ms: float
    p99_start_ms: float
    last_start_ms: float
    instance_cpu_s_per_1000: float
    server_cpu_s_per_1000: float


def burst(target: Target, ns: str, bursts: int = 2, jobs: int = JOBS) -> list[Burst]:
    """Measure ``bursts`` bursts after the first one the fleet sees."""
    spec = target.spec(ns)
    options: dict[str, object] = {"jitter_ms": 0, "history_size": 100, **target.fleet_options}
    out: list[Burst] = []
    with tempfile.TemporaryDirectory(prefix=f"anarchon-{ns}-burst-") as tmp:
        fleet = Fleet(
            Path(tmp),
            backend_class=spec.class_path,
            backend_kwargs=spec.kwargs,
            instances=target.fleet_instances,
            jobs=jobs,
            cron=CRON,
            options=options,
            grace_ms=5_000,
        )
        with fleet:
            fleet.start(timeout=300)
            pids = [m.process.pid for m in fleet.members]
            ready = fleet.ready_ms or int(time.time() * 1000)
            # Skip the first burst: it creates every job's row on the backend.
            first = (ready // _PERIOD_MS + 2) * _PERIOD_MS
            for k in range(bursts):
                slot = first + k * _PERIOD_MS
                time.sleep(max(0.0, (slot - 2000) / 1000 - time.time()))
                server = asyncio.run(target.server_pids(ns))
                cpu_i, cpu_s = cpu_seconds(pids), cpu_seconds(server)
                starts = _wait_for(fleet.ledger_path, slot, jobs, deadline=slot / 1000 + 25)
                time.sleep(1.0)  # the finishes of the last runs
                cpu_i, cpu_s = cpu_seconds(pids) - cpu_i, cpu_seconds(server) - cpu_s
                delays = sorted(float(r["t"] - slot) for r in starts)
                keys = [r["job"] for r in starts]
                runs = len(set(keys))
                out.append(
                    Burst(
                        jobs=jobs,
                        instances=target.fleet_instances,
                        slot_ms=slot,
                        runs=runs,
                        duplicates=len(keys) - runs,
                        first_start_ms=delays[0] if delays else float("nan"),
                        p50_start_ms=percentile(delays, 50),
                        p99_start_ms=percentile(delays, 99),
                        last_start_ms=delays[-1] if delays else float("nan"),
                        instance_cpu_s_per_1000=cpu_i / runs * 1000 if runs else float("nan"),
                        server_cpu_s_per_1000=cpu_s / runs * 1000 if runs and server else float("nan"),
                    )
                )
                b = out[-1]
                print(
                    f"\n    burst {k + 1}: {b.runs:,}/{jobs:,} started, last {b.last_start_ms:.0f} ms after the slot "
                    f"(p50 {b.p50_start_ms:.0f}, p99 {b.p99_start_ms:.0f}), CPU per 1,000 runs: "
                    f"instances {b.instance_cpu_s_per_1000:.3f} s, server {b.server_cpu_s_per_1000:.3f} s",
                    end="",
                    flush=True,
                )
            fleet.stop(timeout=60)
    return out


def _wait_for(ledger: Path, slot: int, jobs: int, deadline: float) -> list[dict[str, object]]:
    """The start lines of ``slot``, once all ``jobs`` have one or at ``deadline`` (epoch seconds)."""
    offset, starts, seen = 0, [], set()
    while True:
        with ledger.open("rb") as f:
            f.seek(offset)
            data = f.read()
        cut = data.rfind(b"\n") + 1
        offset += cut
        for line in data[:cut].splitlines():
            rec = json.loads(line)
            if rec.get("e") == "start" and rec.get("slot") == slot:
                starts.append(rec)
                seen.add(rec["job"])
        if len(seen) >= jobs or time.time() >= deadline:
            return starts
        time.sleep(0.2)
