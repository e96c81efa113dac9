"""Three instances, one SQLite file, every slot run once — even when one is killed.

Starts three instance processes of the same scheduler sharing a new SQLite
database: four every-second jobs and one ``slow`` job (every 5 s, 3 s long).
When an instance is running the slow job it is killed with SIGKILL; another
instance takes that run over once the lease expires. After about twenty
seconds the demo prints, per slot, which instance ran each job, and a summary.

    make demo            # or: .venv/bin/python examples/demo.py --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from anarchon import Scheduler
from anarchon.cli import RUN_HEADERS, run_rows, table
from anarchon_conformance.fleet import Fleet, FleetReport

JOBS = 4
LEASE_MS = 1500


def cell(runs: tuple[tuple[str, int, str], ...], skipped: bool) -> str:
    if not runs:
        return "skipped (overlap)" if skipped else "MISSED"
    parts = []
    for instance, attempt, status in runs:
        name = instance.replace("instance-", "i")
        if status == "died":
            parts.append(f"{name} killed")
        else:
            parts.append(name if attempt == 1 else f"{name} (attempt {attempt})")
    finished = [r for r in runs if r[2] == "succeeded"]
    return ("DUPLICATE " if len(finished) > 1 else "") + " -> ".join(parts)


def slot_table(report: FleetReport, jobs: list[str]) -> str:
    by_slot: dict[int, dict[str, str]] = {}
    for row in report.rows:
        by_slot.setdefault(row.slot_ms, {})[row.job] = cell(row.runs, row.skipped)
    rows = [
        [time.strftime("%H:%M:%S", time.gmtime(slot / 1000)), *(cells.get(j, "") for j in jobs)]
        for slot, cells in sorted(by_slot.items())
    ]
    return table(["slot (UTC)", *jobs], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the instances run")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite file and the instance logs")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="anarchon-demo-"))
    database = workdir / "demo.sqlite3"
    url = f"sqlite:///{database}"
    print(f"anarchon demo: 3 instances share {database}")
    print(f"  {JOBS} jobs every second, and 'job-slow' every 5 s taking 3 s (lease {LEASE_MS} ms)")
    with Fleet(
        workdir,
        backend=url,
        instances=3,
        jobs=JOBS,
        options={"jitter_ms": 200, "lease_ms": LEASE_MS},
        slow_cron="*/5 * * * * *",
        slow_seconds=3.0,
    ) as fleet:
        fleet.start()
        print(f"  started: {', '.join(m.instance for m in fleet.members)}")
        began = time.monotonic()
        victim_run = fleet.wait_for(lambda r: r["e"] == "start" and r["job"] == "job-slow", timeout=args.seconds)
        victim = fleet.member(victim_run["instance"])
        fleet.kill(victim)
        slot = time.strftime("%H:%M:%S", time.gmtime(victim_run["slot"] / 1000))
        print(f"  killed {victim.instance} with SIGKILL while it ran job-slow for slot {slot}")
        time.sleep(max(0.0, args.seconds - (time.monotonic() - began)))
        fleet.stop()
        report = fleet.report(since_ms=min((fleet.ready_ms or 0) + 1000, victim_run["slot"]))
        print()
        print(slot_table(report, fleet.job_names()))
        print()
        history = asyncio.run(Scheduler(url).history("job-slow", limit=6))
        print("history of job-slow, as the backend keeps it (newest first):")
        print(table(RUN_HEADERS, run_rows(history)))
        print()
        print(f"summary: {report.summary()}")
    if not args.keep:
        for path in sorted(workdir.iterdir()):
            path.unlink()
        workdir.rmdir()
    else:
        print(f"kept {workdir}")
    return 0 if report.duplicates == 0 and report.missed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
