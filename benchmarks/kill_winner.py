"""Kill the winner: what a ``kill -9`` of an instance holding granted runs costs, with the default options.

``python -m benchmarks.kill_winner [sqlite redis postgres] [--seconds 60] [--jobs 200]``
starts 3 instance processes (the conformance fleet harness) with JOBS
every-second jobs and no option set, waits 15 s, kills with ``-9`` the
instance whose claim batch is granted next, before it runs any of it (the
harness's ``--die-mid-claim``: every run it won that moment is in flight),
starts a replacement, runs on to SECONDS in all, stops and reconciles the
ledger: slots run, missed, skipped for overlap, run twice, and what became
of the next slot of each dead grant (skipped while the dead owner's
heartbeat held, then revived, or not). Each backend gets a namespace of its
own (a temp file, a Redis prefix, a PostgreSQL schema). Writes its section
of ``benchmarks/results/REPORT.md`` unless ``--no-report``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from anarchon_conformance.fleet import Fleet
from scripts.report import write_section

REPORT = Path(__file__).parent / "results" / "REPORT.md"
URLS = {
    "sqlite": "sqlite:///{tmp}/kill-winner.sqlite3",
    "redis": os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0") + "?prefix=kw{tag}:",
    "postgres": os.environ.get("ANARCHON_POSTGRES_URL", "postgresql://127.0.0.1/test") + "?schema=kw{tag}",
}


def one(name: str, seconds: float, jobs: int, tmp: Path) -> dict[str, int]:
    url = URLS[name].format(tmp=tmp, tag=uuid.uuid4().hex[:8])
    with Fleet(tmp / name, backend=url, instances=3, jobs=jobs) as fleet:
        fleet.start(timeout=120)
        began = time.monotonic()
        time.sleep(15)
        _, granted = fleet.kill_mid_claim(timeout=30)
        fleet.restart(timeout=120)
        time.sleep(max(0.0, seconds - (time.monotonic() - began)))
        fleet.stop()
        report = fleet.report()
        ledger = fleet.ledger()
    skips = {(r["job"], r["slot"]) for r in ledger if r["e"] == "skip" and r.get("reason") == "overlap"}
    started = {(r["job"], r["slot"]) for r in ledger if r["e"] == "start"}
    after = {(job, slot + 1000) for job, slot in granted}
    figures = {
        "slots": report.slots,
        "ran": report.runs,
        "missed": report.missed,
        "skipped": report.skipped,
        "twice": report.duplicates,
        "grants": len(granted),
        "next_skipped": len(after & skips),
        "next_revived": len(after & skips & started),
    }
    print(f"{name}: {figures}; {report.summary()}", flush=True)
    return figures


def _page(rows: list[tuple[str, dict[str, int]]], args: argparse.Namespace) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Kill the winner, {now}",
        "",
        f"Command: `python -m benchmarks.kill_winner {' '.join(args.backends)} --seconds {args.seconds:g} "
        f"--jobs {args.jobs}`; {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}.",
        "",
        f"3 processes, {args.jobs} every-second jobs, every option at its default; after 15 s the instance whose "
        "claim batch is granted next dies (`kill -9` from inside, before running any of it) and a new one "
        "starts. The next slot of each dead grant is claimed while the dead owner's heartbeat still holds "
        "(up to 1.5 s), so it is skipped for overlap first; `revive` then runs it once the run is found dead.",
        "",
        "| backend | slots | ran | missed | skipped (overlap) | run twice | dead grants "
        "| their next slots skipped | of those run later |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['slots']:,} | {f['ran']:,} | {f['missed']} | {f['skipped']} | {f['twice']} | "
            f"{f['grants']} | {f['next_skipped']} | {f['next_revived']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kill_winner", description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="*", choices=[*URLS, []], help="default: all three")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--no-report", action="store_true", help="print only; leave REPORT.md alone")
    args = parser.parse_args()
    args.backends = args.backends or list(URLS)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [(name, one(name, args.seconds, args.jobs, Path(tmp))) for name in args.backends]
    page = _page(rows, args)
    print(page)
    if not args.no_report:
        write_section(REPORT, "kill-winner", "Kill the winner (`python -m benchmarks.kill_winner`)", page, "")


if __name__ == "__main__":
    main()
