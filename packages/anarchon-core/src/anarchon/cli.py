"""The ``anarchon`` command: run, inspect and check a scheduler from a shell.

Every command but ``backends`` takes ``module:attr`` naming a
:class:`~anarchon.Scheduler` (or a function returning one), as uvicorn and
celery do, and ``--backend URL`` to point it elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .errors import AnarchonError
from .plugins import PluginManager
from .run import Run
from .scheduler import Scheduler

__all__ = ["main"]


class UsageError(AnarchonError):
    """A command line that cannot work; the message says how to fix it."""


def load_scheduler(target: str, backend: str | None = None) -> Scheduler:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{target!r} is not module:attr; for example myapp.tasks:scheduler")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(
                f"cannot import {module_name!r}: run from the folder that holds it, or fix PYTHONPATH"
            ) from exc
        raise
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, Scheduler) and callable(obj):
        obj = obj()
    if not isinstance(obj, Scheduler):
        raise UsageError(f"{target} is a {type(obj).__name__}, not an anarchon Scheduler")
    if backend:
        obj.use_backend(backend)
    return obj


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z" if moment else "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell: readable in a terminal, greppable in a log."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_rows(runs: Sequence[Run]) -> list[list[object]]:
    return [
        [
            _when(r.slot),
            r.status.value,
            r.instance,
            r.attempt,
            r.fencing,
            "yes" if r.manual else "",
            f"{r.missed} missed" if r.catch_up else "",
            r.duration_ms,
            r.error or "",
        ]
        for r in runs
    ]


RUN_HEADERS = ["slot", "status", "instance", "attempt", "fencing", "manual", "catch-up", "ms", "error"]


def _print_runs(runs: Sequence[Run], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_dict() for r in runs], indent=2))
    elif runs:
        print(table(RUN_HEADERS, run_rows(runs)))
    else:
        print("no runs recorded")


async def _jobs(scheduler: Scheduler, as_json: bool) -> None:
    rows = []
    for job in scheduler.jobs.values():
        last = await scheduler.last_run(job.name)
        rows.append(
            {
                "name": job.name,
                "cron": job.cron,
                "timezone": job.timezone,
                "next_slot": scheduler.next_slot(job.name).isoformat(),
                "last_status": last.status.value if last else None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(["name", "cron", "timezone", "next slot", "last status"], [list(r.values()) for r in rows]))


def _backends(as_json: bool) -> None:
    manager = PluginManager()
    entries = [
        {
            "name": cls.name,
            "schemes": list(cls.url_schemes),
            "kind": cls.capabilities.kind,
            "capabilities": cls.capabilities.describe(),
            "class": f"{cls.__module__}.{cls.__qualname__}",
        }
        for cls in sorted(manager.backends().values(), key=lambda c: c.name)
    ]
    if as_json:
        print(json.dumps(entries, indent=2))
        return
    print(
        table(
            ["name", "schemes", "kind", "capabilities", "class"],
            [[e["name"], ",".join(e["schemes"]), e["kind"], ",".join(e["capabilities"]), e["class"]] for e in entries],
        )
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anarchon", description="Distributed cron: exactly one instance runs each slot."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def target(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("target", metavar="module:attr", help="the Scheduler, e.g. myapp.tasks:scheduler")
        p.add_argument("--backend", metavar="URL", help="use this backend instead of the scheduler's own")
        return p

    target("run", "run the scheduler until SIGINT or SIGTERM")
    target("jobs", "list jobs: name, cron, timezone, next slot, last status").add_argument(
        "--json", action="store_true"
    )
    p = target("history", "show a job's runs, newest first")
    p.add_argument("job")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p = target("run-now", "run a job now on this machine, through the backend")
    p.add_argument("job")
    p.add_argument("--json", action="store_true")
    target("check", "check every job's options against the backend, without starting")
    sub.add_parser("backends", help="list installed backends").add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "backends":
            _backends(args.json)
            return 0
        scheduler = load_scheduler(args.target, args.backend)
        if args.command == "run":
            scheduler.run()
        elif args.command == "jobs":
            asyncio.run(_jobs(scheduler, args.json))
        elif args.command == "history":
            _print_runs(asyncio.run(scheduler.history(args.job, args.limit)), args.json)
        elif args.command == "run-now":
            run = asyncio.run(scheduler.run_now(args.job))
            _print_runs([run], args.json)
            return 0 if run.status.value in ("succeeded", "skipped") else 1
        elif args.command == "check":
            print(f"{len(scheduler.jobs)} job(s) checked against backend {scheduler.backend.name!r}: all options valid")
    except (AnarchonError, ValueError, TypeError) as exc:
        print(f"anarchon: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
