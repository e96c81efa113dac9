"""``anarchon audit``: who paused, resumed, triggered, backfilled or changed a schedule, when and why.

Reads the backend's audit trail (capability ``audit``, :mod:`anarchon.audit`)
newest first, read-only: it never creates or migrates a schema. One line per
entry; ``--json`` gives every field, the instant as ISO 8601 UTC, for scripts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from ..audit import AuditEntry, read_audit
from ..errors import UnsupportedOperationError
from ..options import check_job_name
from ..run import ms_to_datetime
from ._common import BACKEND_ENV, positive_int, print_json, reading, resolve, table, utc

__all__ = ["COMMANDS", "register"]

Command = Callable[..., argparse.ArgumentParser]


def register(command: Command, options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``audit``; ``options`` adds ``--backend`` and ``--json``."""
    p = command(
        "audit",
        "show the audit trail: every pause, resume, trigger, backfill and schedule change, newest first",
        "Show the backend's audit trail, newest first: when, who (user@host from the CLI, the signed-in name "
        "from the dashboard, the caller's by= from the API), the action, the job or schedule, and the reason. "
        f"Name the backend with --backend URL or {BACKEND_ENV}. Needs a backend with the capability 'audit' "
        "(`anarchon backends` lists each one's).",
    )
    p.add_argument("target", metavar="module:attr", nargs="?", help="the Scheduler, as module:attr (optional)")
    options(p)
    p.add_argument("--job", metavar="NAME", help="only the entries of this job or stored schedule")
    p.add_argument("--limit", type=positive_int, default=50, metavar="N", help="show the newest N entries (default 50)")
    p.add_argument(
        "--before",
        type=positive_int,
        metavar="ID",
        help="only entries older than this id (the next page of a long trail)",
    )


def _line(entry: AuditEntry) -> list[object]:
    detail = json.dumps(dict(entry.detail), sort_keys=True, separators=(",", ":")) if entry.detail else ""
    when = utc(ms_to_datetime(entry.at_ms))
    return [entry.id, when, entry.by, entry.action, entry.job, entry.reason or "", detail]


async def audit(args: argparse.Namespace) -> int:
    _, backend = resolve(args.target, args.backend)
    if args.job is not None:
        check_job_name(args.job)
    if not backend.capabilities.audit:
        raise UnsupportedOperationError(
            f"backend {backend.name!r} keeps no audit trail (capability 'audit'); use a backend that does: "
            "`anarchon backends` lists each one's capabilities",
            operation="audit",
            capability="audit",
        )
    async with reading(backend):
        entries = await read_audit(backend, limit=args.limit, before_id=args.before, job=args.job)
    if args.json:
        print_json([e.to_dict() for e in entries])
    elif entries:
        print(table(["id", "when (UTC)", "by", "action", "job", "reason", "detail"], [_line(e) for e in entries]))
    else:
        print("no audit entries" + (f" for {args.job}" if args.job else ""))
    return 0


COMMANDS = {"audit": audit}
