"""The read-only commands: ``jobs``, ``history`` and ``backends``. None of them writes to the backend."""

from __future__ import annotations

import argparse
import sys
from zoneinfo import ZoneInfo

from ..errors import JobNotFoundError
from ..options import check_job_name
from ..plugins import PluginManager
from ._common import iso, print_json, print_runs, reading, resolve, table, utc
from ._fleet import check_known, fleet_jobs
from ._ledger import job_schedule, print_ledger

__all__ = ["backends", "history", "jobs"]


async def jobs(args: argparse.Namespace) -> int:
    """Each job's cron, zone, next slot (UTC and the job's zone), last status and whether it is paused.

    ``paused`` is ``None`` (shown ``-``) on a backend without the ``pause``
    capability: no job there can be paused, and "no" would claim a read.
    """
    if args.target is None:
        return await fleet_jobs(args)
    scheduler, backend = resolve(args.target, args.backend)
    assert scheduler is not None
    rows, shown = [], []
    missing: str | None = None
    async with reading(backend):
        paused: set[str] | None = None
        if backend.capabilities.pause:
            try:
                paused = {p.job for p in await backend.pauses() if p.paused}
            except LookupError as exc:  # nothing stored yet (PostgreSQL: no schema): nothing paused
                missing, paused = str(exc), set()
        for job in scheduler.jobs.values():
            try:
                last = None if missing else await backend.last_run(job.name)
            except LookupError as exc:  # a namespace nothing ran in yet (PostgreSQL: no schema): no last run
                missing, last = str(exc), None
            slot = scheduler.next_slot(job.name)
            local = None if slot is None else slot.astimezone(ZoneInfo(job.timezone))
            status = last.status.value if last else None
            rows.append(
                {
                    "name": job.name,
                    "cron": job.cron,
                    "timezone": job.timezone,
                    "next_slot": iso(slot),
                    "next_slot_local": None if local is None else local.isoformat(),
                    "last_status": status,
                    "paused": None if paused is None else job.name in paused,
                }
            )
            mark = "-" if paused is None else "paused" if job.name in paused else ""
            when = "-" if local is None else local.strftime("%Y-%m-%d %H:%M:%S %Z")
            shown.append([job.name, job.cron, job.timezone, "-" if slot is None else utc(slot), when, status, mark])
    if args.json:
        print_json(rows)
    else:
        headers = ["name", "cron", "timezone", "next slot (UTC)", "next slot (job's zone)", "last status", "paused"]
        print(table(headers, shown))
    if missing:
        print(f"anarchon: note: {missing}", file=sys.stderr)
    return 0


async def history(args: argparse.Namespace) -> int:
    """The job's ledger, newest first (runs, skips, slots nobody claimed, attempts that died); ``--json``: its runs.

    With ``module:attr`` the job must be one of its jobs.
    """
    scheduler, backend = resolve(args.target, args.backend)
    check_job_name(args.job)
    if scheduler is not None and args.job not in scheduler.jobs:
        known = ", ".join(sorted(scheduler.jobs)) or "none"
        raise JobNotFoundError(
            f"no job named {args.job!r} in {args.target}; its jobs: {known} "
            "(for the runs of a job no longer in the code, give only --backend URL and the job's name)"
        )
    empty = f"no runs recorded for {args.job!r} in {backend!r}"
    async with reading(backend):
        runs = await backend.history(args.job, args.limit)
        if scheduler is None and not runs and not args.force:  # no runs, no live instance defines it: a typo?
            await check_known(backend, args.job)
        if args.json and not args.ledger:  # the records, as scripts have read them
            print_runs(runs, True, empty=empty)
            return 0
        schedule = await job_schedule(scheduler, backend, args.job)
        now_ms = await backend.now_ms()
    print_ledger(runs, schedule, now_ms, args.limit, args.json, empty)
    return 0


def backends(args: argparse.Namespace) -> int:
    """Installed backends with their schemes, tier and capabilities (no connection made)."""
    entries = [
        {
            "name": cls.name,
            "schemes": list(cls.url_schemes),
            "kind": cls.capabilities.kind,
            "capabilities": cls.capabilities.describe(),
            "class": f"{cls.__module__}.{cls.__qualname__}",
        }
        for cls in sorted(PluginManager().backends().values(), key=lambda c: c.name)
    ]
    if args.json:
        print_json(entries)
        return 0
    print(
        table(
            ["name", "schemes", "kind", "capabilities", "class"],
            [[e["name"], ",".join(e["schemes"]), e["kind"], ",".join(e["capabilities"]), e["class"]] for e in entries],
        )
    )
    return 0
