"""Soak: 3 instances x 1,000 every-second jobs for minutes, in the state real deployments live in.

Every job keeps ``history_size=100`` runs, so after 100 s every claim also
trims history, as it does in any deployment that has run for a while. The
ledger is read once a minute, a few seconds after the minute ended so its
last slots have started, and each minute gets its own row: slots run, missed,
run twice, the p99 start delay, the CPU of the instance processes and of the
server's side, the backend's size and the resident sets. The last minute
should look like the first: no growth, no slowdown.

Every other option keeps its default, ranked claims among them (rank 0
claims at the slot, a backup only a slot it did not hear decided): the soak
checks what a deployment runs. The start delay is then the delay a user sees;
on a backend without a view of the fleet it includes the drawn jitter.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anarchon_conformance.fleet import Fleet, grant_of

from ._proc import cpu_seconds, rss_mb
from ._stats import percentile
from ._target import Target

__all__ = ["Minute", "Soak", "soak"]

JOBS = 1000
HISTORY_SIZE = 100
#: Seconds after a minute ends before it is judged: its last slots must have started.
_SETTLE_S = 4.0


@dataclass(frozen=True)
class Minute:
    index: int
    slots: int
    runs: int
    missed: int
    duplicates: int
    skipped: int
    delay_p50_ms: float
    delay_p99_ms: float
    instance_cores: float
    server_cores: float
    instance_rss_mb: float
    server_rss_mb: float
    size: dict[str, float]


@dataclass
class Soak:
    jobs: int
    instances: int
    minutes: int
    history_size: int
    server_note: str
    rows: list[Minute] = field(default_factory=list)


class _LedgerTail:
    """Reads the lines appended to the ledger since the last call; keeps starts and skips by slot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.starts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        self.ends: dict[tuple[str, int], int] = defaultdict(int)
        self.skips: set[tuple[str, int]] = set()

    def read(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        for line in data[:cut].splitlines():
            rec = json.loads(line)
            if "job" not in rec:
                continue
            key = (rec["job"], rec["slot"])
            if rec["e"] == "start":
                self.starts[key].append(rec)
            elif rec["e"] == "end":
                self.ends[key] += 1
            elif rec["e"] == "skip" and rec.get("reason") == "overlap":
                self.skips.add(key)

    def judge(self, names: list[str], since_ms: int, until_ms: int) -> tuple[int, int, int, int, int, list[float]]:
        """Slots, runs, missed, duplicates, skipped and start delays of slots in [since, until); forgets them."""
        slots = runs = missed = duplicates = skipped = 0
        delays: list[float] = []
        for slot in range(since_ms, until_ms, 1000):
            for name in names:
                key = (name, slot)
                slots += 1
                starts = self.starts.pop(key, [])
                ends = self.ends.pop(key, 0)
                grants = [grant_of(r) for r in starts]
                if ends > 1 or len(grants) != len(set(grants)):
                    duplicates += 1
                if starts:
                    runs += 1
                    delays.append(float(min(r["t"] for r in starts) - slot))
                elif key in self.skips:
                    skipped += 1
                else:
                    missed += 1
                self.skips.discard(key)
        return slots, runs, missed, duplicates, skipped, delays


def soak(target: Target, ns: str, minutes: int, jobs: int = JOBS, history_size: int = HISTORY_SIZE) -> Soak:
    spec = target.soak_spec(ns, history_size)
    options: dict[str, object] = {"history_size": history_size, **target.fleet_options}
    names = [f"job-{i:02d}" for i in range(jobs)]
    result = Soak(jobs, target.fleet_instances, minutes, history_size, target.server_note)
    with tempfile.TemporaryDirectory(prefix=f"anarchon-{ns}-soak-") as tmp:
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
            fleet.start(timeout=300)
            pids = [m.process.pid for m in fleet.members]
            tail = _LedgerTail(fleet.ledger_path)
            # Minutes start at the first whole second after every instance is ready.
            start_ms = ((fleet.ready_ms or int(time.time() * 1000)) // 1000 + 2) * 1000
            server = asyncio.run(target.server_pids(ns))
            cpu_i, cpu_s, last = cpu_seconds(pids), cpu_seconds(server), time.monotonic()
            for index in range(minutes):
                since, until = start_ms + index * 60_000, start_ms + (index + 1) * 60_000
                time.sleep(max(0.0, (until / 1000 + _SETTLE_S) - time.time()))
                server = asyncio.run(target.server_pids(ns)) or server
                now_i, now_s, now = cpu_seconds(pids), cpu_seconds(server), time.monotonic()
                span = now - last
                tail.read()
                slots, runs, missed, dups, skipped, delays = tail.judge(names, since, until)
                row = Minute(
                    index=index + 1,
                    slots=slots,
                    runs=runs,
                    missed=missed,
                    duplicates=dups,
                    skipped=skipped,
                    delay_p50_ms=percentile(delays, 50),
                    delay_p99_ms=percentile(delays, 99),
                    instance_cores=(now_i - cpu_i) / span,
                    server_cores=(now_s - cpu_s) / span if server else float("nan"),
                    instance_rss_mb=rss_mb(pids),
                    server_rss_mb=rss_mb(server) if server else float("nan"),
                    size=asyncio.run(target.footprint(ns)),
                )
                cpu_i, cpu_s, last = now_i, now_s, now
                result.rows.append(row)
                size = ", ".join(f"{k} {v:,.0f}" for k, v in row.size.items())
                print(
                    f"\n    minute {row.index}: runs {row.runs:,}/{row.slots:,}, missed {row.missed}, "
                    f"dup {row.duplicates}, skipped {row.skipped}, delay p50/p99 {row.delay_p50_ms:.0f}/"
                    f"{row.delay_p99_ms:.0f} ms, cpu instances {row.instance_cores:.2f} server "
                    f"{row.server_cores:.2f} cores, rss {row.instance_rss_mb:.0f}/{row.server_rss_mb:.0f} MB, {size}",
                    end="",
                    flush=True,
                )
            fleet.stop(timeout=60)
    return result
