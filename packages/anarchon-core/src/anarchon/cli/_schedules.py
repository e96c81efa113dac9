"""``anarchon schedules add|set|remove|apply|list|show|log``: stored schedules from the command line.

Each verb is one call of :class:`~anarchon.Schedules` on the backend named by
``--backend`` (or ``ANARCHON_BACKEND``); changes are recorded as made by
``user@host`` with an optional ``--reason``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._schedule_admin import Schedules
from .._schedule_apply import apply_plan, load_file, plan
from ..fleet import read_fleet
from ..run import ms_to_datetime
from ..schedules import StoredSchedule
from ._common import BACKEND_ENV, UsageError, iso, print_json, resolve, table, utc

__all__ = ["COMMANDS", "register"]

Command = Callable[..., argparse.ArgumentParser]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--kwargs {text!r} is not JSON ({exc}); e.g. --kwargs '{{\"tenant\": 42}}'"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--kwargs {text!r} must be a JSON object, e.g. --kwargs '{{\"tenant\": 42}}'")
    return value


def _option(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option {text!r} must be KEY=VALUE, e.g. --option max_late_ms=60000")
    try:
        return key, json.loads(raw)  # numbers, booleans, null
    except ValueError:
        return key, raw  # a plain string: --option overlap=allow


def register(command: Command, options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``schedules`` and its verbs; ``options`` adds ``--backend`` and ``--json``."""
    top = command(
        "schedules",
        "add, change, remove and list schedules stored in the backend, run by instances that have their task",
        "Schedules stored in the backend (capability 'schedules'): every live instance that registered the "
        "schedule's task runs it, once per slot across the fleet, and follows a change within about a second. "
        f"Name the backend with --backend URL or {BACKEND_ENV}.",
    )
    verbs = top.add_subparsers(
        dest="verb", required=True, metavar="verb", help="add, set, remove, apply, list, show or log"
    )

    def fields(p: argparse.ArgumentParser, *, required: bool) -> None:
        p.add_argument("--task", required=required, help="the task an instance registered with scheduler.task()")
        when = p.add_mutually_exclusive_group(required=required)
        when.add_argument("--cron", metavar="EXPR", help="a cron expression, H allowed")
        when.add_argument("--every", metavar="DURATION", help="an interval on a grid from the epoch, e.g. 90s, 1h30m")
        when.add_argument("--at", metavar="TIME", help="one time, ISO 8601, e.g. 2026-12-24T18:00:00+01:00")
        p.add_argument("--timezone", metavar="TZ", help="an IANA time zone (default UTC)")
        p.add_argument("--kwargs", type=_json_object, metavar="JSON", help="the task's keyword arguments")
        p.add_argument(
            "--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
            help="any job option, e.g. --option max_late_ms=60000 (repeatable)",
        )  # fmt: skip
        p.add_argument(
            "--force", action="store_true", help="store it although no live instance has the task or its --at passed"
        )

    def change(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reason", metavar="TEXT", help="why; shown by 'anarchon schedules log'")
        options(p)

    p = verbs.add_parser("add", help="store a new schedule")
    p.add_argument("name", help="the schedule's name: 1 to 100 letters, digits, '_' or '-'")
    fields(p, required=True)
    change(p)
    p = verbs.add_parser("set", help="change fields of a stored schedule")
    p.add_argument("name", help="the schedule's name: 1 to 100 letters, digits, '_' or '-'")
    fields(p, required=False)
    p.add_argument("--if-revision", type=int, metavar="N", help="refuse the change unless the schedule is at N")
    change(p)
    p = verbs.add_parser("remove", help="remove a stored schedule (its run history stays)")
    p.add_argument("name", help="the schedule's name: 1 to 100 letters, digits, '_' or '-'")
    p.add_argument("--if-revision", type=int, metavar="N", help="refuse unless the schedule is at revision N")
    change(p)
    p = verbs.add_parser(
        "apply",
        help="make the stored schedules what a TOML or YAML file says; prints the diff",
        description="Make the stored schedules what FILE says (one table per schedule: task, one of cron, every "
        "or at, timezone, kwargs, options). Prints what is added, changed field by field, and with --prune "
        "removed (only schedules an earlier apply wrote), then does it. A file with one bad entry changes nothing.",
    )
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--prune", action="store_true", help="remove schedules an earlier apply wrote that FILE lacks")
    p.add_argument("--dry-run", action="store_true", help="print the diff and change nothing")
    change(p)
    p = verbs.add_parser("list", help="every stored schedule, with the live instances that can run it")
    options(p)
    p = verbs.add_parser("show", help="one stored schedule, every field")
    p.add_argument("name", help="the schedule's name: 1 to 100 letters, digits, '_' or '-'")
    options(p)
    p = verbs.add_parser("log", help="a schedule's changes: revision, when, who, what, why")
    p.add_argument("name", help="the schedule's name: 1 to 100 letters, digits, '_' or '-'")
    options(p)


def _print(schedule: StoredSchedule, as_json: bool) -> None:
    if as_json:
        print_json(schedule.to_dict())
        return
    for key, value in schedule.to_dict().items():
        shown = utc(ms_to_datetime(value)) if key == "updated_ms" else value
        print(f"{key}: {json.dumps(shown) if isinstance(shown, (dict, list)) else shown}")


async def schedules(args: argparse.Namespace) -> int:
    _, backend = resolve(None, args.backend)
    async with Schedules(backend) as admin:
        if args.verb == "add":
            opts = dict(args.option)
            done = await admin.add(
                args.name, task=args.task, cron=args.cron, every=args.every, at=args.at, timezone=args.timezone,
                kwargs=args.kwargs or {}, options=opts, reason=args.reason, force=args.force,
            )  # fmt: skip
            _print(done, args.json)
        elif args.verb == "set":
            given: dict[str, Any] = {
                k: v
                for k, v in (
                    ("task", args.task), ("cron", args.cron), ("every", args.every), ("at", args.at),
                    ("kwargs", args.kwargs),
                )
                if v is not None
            }  # fmt: skip
            if args.timezone is not None:
                given["timezone"] = args.timezone
            if not given and not args.option:
                raise UsageError(
                    "name a field to change: --task, --cron, --every, --at, --timezone, --kwargs or --option"
                )
            done = await admin.set(
                args.name, options=dict(args.option), if_revision=args.if_revision, reason=args.reason,
                force=args.force, **given,
            )  # fmt: skip
            _print(done, args.json)
        elif args.verb == "remove":
            revision = await admin.remove(args.name, if_revision=args.if_revision, reason=args.reason)
            print_json({"removed": args.name, "revision": revision}) if args.json else print(
                f"removed {args.name!r} (revision {revision})"
            )
        elif args.verb == "apply":
            await _apply(admin, args)
        elif args.verb == "show":
            _print(await admin.get(args.name), args.json)
        elif args.verb == "log":
            log = await admin.log(args.name)
            rows = [
                {"revision": c.revision, "at": utc(ms_to_datetime(c.at_ms)), "by": c.by, "op": c.op,
                 "changes": dict(c.changes), "reason": c.reason}
                for c in log
            ]  # fmt: skip
            if args.json:
                print_json(rows)
            else:
                headers = ["revision", "at", "by", "op", "changes", "reason"]
                print(table(headers, [[json.dumps(r[h]) if h == "changes" else r[h] for h in headers] for r in rows]))
        else:
            await _list(admin, args.json)
    return 0


async def _apply(admin: Schedules, args: argparse.Namespace) -> None:
    wanted = load_file(args.file, admin)
    todo = plan(wanted, await admin.list(), prune=args.prune)
    done = 0 if args.dry_run else await apply_plan(admin, todo, reason=args.reason)
    if args.json:
        print_json({**todo.to_dict(), "dry_run": args.dry_run, "changes_made": done})
        return
    print("\n".join(todo.lines()))
    if args.dry_run and not todo.empty:
        print("dry run: nothing changed")


async def _list(admin: Schedules, as_json: bool) -> None:
    stored = await admin.list()
    runners: dict[str, list[str]] = {}
    if admin.backend.capabilities.registry:
        for info in (await read_fleet(admin.backend)).instances:
            for task in info.tasks:
                runners.setdefault(task, []).append(info.instance)
    now = int(time.time() * 1000)
    rows = [{**s.to_dict(), "next_slot": _next(s, now), "instances": len(runners.get(s.task, []))} for s in stored]
    if as_json:
        print_json(rows)
        return
    if not rows:
        print("no stored schedule")
        return
    headers = ["name", "task", "cron", "timezone", "next_slot", "revision", "instances"]
    shown = {"instances": "0 (no live instance has the task)", "next_slot": "none (its time has passed)"}
    body = [[r[h] if r[h] or h not in shown else shown[h] for h in headers] for r in rows]
    print(table([h.replace("_", " ") for h in headers], body))


def _next(schedule: StoredSchedule, now_ms: int) -> str | None:
    slot = schedule.next_slot_ms(now_ms)
    return iso(None if slot is None else ms_to_datetime(slot))


COMMANDS = {"schedules": schedules}
