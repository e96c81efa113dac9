"""The views from the backend alone: ``anarchon fleet`` and ``anarchon jobs --backend URL``, and the job check.

They read the fleet registry (:mod:`anarchon.fleet`), so an operator on a
host with nothing but the backend URL sees the live instances and the jobs
they define. :func:`check_known` is what ``pause``, ``resume``, ``trigger``
and ``history`` ask before they act on a job named on the command line.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..backend import Backend
from ..cron import Schedule
from ..errors import JobNotFoundError, UnsupportedOperationError
from ..fleet import Fleet, FleetJob, read_fleet
from ..run import ms_to_datetime
from ._common import iso, print_json, reading, resolve, table, utc

__all__ = ["check_known", "fleet", "fleet_jobs", "job_rows", "running_schedule"]


def _registry(backend: Backend) -> None:
    if not backend.capabilities.registry:
        raise UnsupportedOperationError(
            f"backend {backend.name!r} keeps no fleet registry (capability 'registry'), so there is nothing to "
            "list from the backend alone; name the scheduler as module:attr instead "
            "(`anarchon backends` lists each backend's capabilities)",
            operation="registered()",
            capability="registry",
        )


async def fleet(args: argparse.Namespace) -> int:
    """The live instances: id, host, pid, version, started, last heard of, jobs."""
    _, backend = resolve(None, args.backend)
    _registry(backend)
    async with reading(backend):
        view = await read_fleet(backend)
    rows: list[dict[str, Any]] = [
        {
            "instance": i.instance,
            "host": i.host,
            "pid": i.pid,
            "version": i.version,
            "started": utc(ms_to_datetime(i.started_ms)),
            "last_seen": utc(ms_to_datetime(i.seen_ms)) if i.seen_ms is not None else None,
            "jobs": i.jobs,
            "drift_policy": i.drift,
            "tasks": list(i.tasks),
        }
        for i in view.instances
    ]
    if args.json:
        print_json(rows)
    elif rows:
        headers = ["instance", "host", "pid", "version", "started", "last_seen", "jobs", "drift_policy", "tasks"]
        body = [[", ".join(r[h]) if h == "tasks" else r[h] for h in headers] for r in rows]
        print(table([h.replace("_", " ") for h in headers], body))
    else:
        print(f"no live instance in {backend!r}")
    return 0


def running_schedule(fleet_view: Fleet, job: FleetJob) -> Schedule | None:
    """The schedule of the definition the fleet runs; ``None`` for one this version cannot read."""
    d = fleet_view.running(job)
    try:
        return Schedule(d.cron, d.timezone, dst=d.options.get("dst", "cron"), name=job.name)
    except (ValueError, TypeError):  # a definition of another version
        return None


def _next_slot(fleet_view: Fleet, job: FleetJob, now_ms: int) -> str | None:
    schedule = running_schedule(fleet_view, job)
    if schedule is None:  # shown without a next slot
        return None
    slot = schedule.next_or_none(now_ms)
    return iso(None if slot is None else ms_to_datetime(slot))


async def job_rows(backend: Backend, view: Fleet) -> list[dict[str, Any]]:
    """Each job the live fleet defines, with its definitions, pause and last run."""
    paused: set[str] | None = None
    if backend.capabilities.pause:
        paused = {p.job for p in await backend.pauses() if p.paused}
    now = int(time.time() * 1000)
    rows = []
    for job in view.jobs():
        running = view.running(job)
        last = await backend.last_run(job.name)
        rows.append(
            {
                "name": job.name,
                "cron": running.cron,
                "timezone": running.timezone,
                "stored": job.name in view.stored,
                "instances": len(job.instances),
                "definitions": len(job.definitions),
                "paused": None if paused is None else job.name in paused,
                "next_slot": _next_slot(view, job, now),
                "last_run": last.to_dict() if last is not None else None,
                "differing_fields": job.differing_fields(),
                "variants": [
                    {"fingerprint": fp, "cron": d.cron, "options": dict(d.options), "instances": list(holders)}
                    for fp, (d, holders) in job.definitions.items()
                ],
            }
        )
    return rows


async def fleet_jobs(args: argparse.Namespace) -> int:
    """``anarchon jobs --backend URL``: the fleet's jobs from the registry."""
    _, backend = resolve(None, args.backend)
    _registry(backend)
    async with reading(backend):
        view = await read_fleet(backend)
        rows = await job_rows(backend, view)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no live instance defines a job in {backend!r}")
        return 0

    def definitions(r: dict[str, Any]) -> str:
        n = r["definitions"]
        return str(n) if n == 1 else f"{n} (differ: {', '.join(r['differing_fields'])})"

    shown = [
        [
            r["name"],
            r["cron"],
            r["timezone"],
            r["instances"],
            r["definitions"]
            if r["definitions"] == 1
            else f"{r['definitions']} (differ: {', '.join(r['differing_fields'])})",
            r["next_slot"],
            r["last_run"]["status"] if r["last_run"] else None,
            "-" if r["paused"] is None else "paused" if r["paused"] else "",
        ]
        for r in rows
    ]
    headers = ["name", "cron", "timezone", "instances", "definitions", "next slot (UTC)", "last status", "paused"]
    print(table(headers, shown))
    return 0


async def check_known(backend: Backend, job: str, *, also: set[str] | None = None) -> None:
    """Refuse a job that no live instance defines (where the backend keeps a registry).

    ``also``: names accepted besides (a stored pause for ``resume``, …). The
    backend must be open. A backend without a registry accepts any name.
    """
    if not backend.capabilities.registry:
        return
    view = await read_fleet(backend)
    known = {j.name for j in view.jobs()} | view.stored
    if job in known or (also and job in also):
        return
    listed = ", ".join(sorted(known)[:20]) + (" …" if len(known) > 20 else "") if known else "none"
    raise JobNotFoundError(
        f"no live instance defines a job named {job!r} in {backend!r}; the fleet's jobs: {listed}. "
        "Check the name; to act on it anyway (a job of instances not started yet), pass --force"
    )
