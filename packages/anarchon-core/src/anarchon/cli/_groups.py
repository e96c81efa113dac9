"""``anarchon groups set|remove|list``: the limits of concurrency groups from the command line.

Each verb is one call of :class:`~anarchon.Groups` on the backend named by
``--backend`` (or ``ANARCHON_BACKEND``); changes are recorded in the audit
trail as made by ``user@host`` with an optional ``--reason``. ``list`` only
reads (it never creates or migrates a schema).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from .._group_admin import Groups
from ..groups import GroupState
from ._common import BACKEND_ENV, positive_int, print_json, reading, resolve, table
from ._control import REASON_HELP

__all__ = ["COMMANDS", "register"]

Command = Callable[..., argparse.ArgumentParser]


def register(command: Command, options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``groups`` and its verbs; ``options`` adds ``--backend`` and ``--json``."""
    top = command(
        "groups",
        "limit how many runs of a group of jobs run at once across the whole fleet",
        "Concurrency groups (capability 'groups'): a job or stored schedule names a group (group='reports'), "
        "and at most the group's limit of its runs run at once across every instance; the others wait in slot "
        "order, each up to its max_wait_ms (default: its max_late_ms), then are recorded skipped. A group with "
        f"no limit has none. Name the backend with --backend URL or {BACKEND_ENV}.",
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="verb", help="set, remove or list")
    p = verbs.add_parser("set", help="set a group's limit; every instance obeys it within about a second")
    p.add_argument("name", metavar="NAME", help="the group's name")
    p.add_argument("--max-running", type=positive_int, required=True, metavar="N", help="runs at once, fleet-wide")
    p.add_argument("--reason", metavar="TEXT", help=REASON_HELP)
    options(p)
    p = verbs.add_parser("remove", help="lift a group's limit (its waiting runs start)")
    p.add_argument("name", metavar="NAME", help="the group's name")
    p.add_argument("--reason", metavar="TEXT", help=REASON_HELP)
    options(p)
    p = verbs.add_parser("list", help="every group: limit, running now, waiting, oldest wait")
    options(p)


def _print(states: list[GroupState], as_json: bool, now_ms: int) -> None:
    if as_json:
        print_json([s.to_dict(now_ms) for s in states])
        return
    rows = []
    for s in states:
        wait = s.to_dict(now_ms)["oldest_wait_ms"]
        limit = "none" if s.max_running is None else s.max_running
        rows.append([s.name, limit, s.running, s.waiting, "-" if wait is None else f"{wait / 1000:.1f} s"])
    print(table(["group", "max running", "running", "waiting", "oldest wait"], rows) if rows else "no groups")


async def groups(args: argparse.Namespace) -> int:
    _, backend = resolve(None, args.backend)
    if args.verb == "list":
        async with reading(backend):
            states = await Groups(backend, started=True).list()
            now_ms = await backend.now_ms()
        _print(states, args.json, now_ms)
        return 0
    admin = Groups(backend)
    if args.verb == "set":
        state = await admin.set(args.name, args.max_running, reason=args.reason)
        _print([state], args.json, int(time.time() * 1000))
        return 0
    await admin.remove(args.name, reason=args.reason)
    if not args.json:
        print(f"group {args.name}: limit removed")
    return 0


COMMANDS = {"groups": groups}
