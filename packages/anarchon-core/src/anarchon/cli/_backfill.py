"""``anarchon backfill``: run the past slots of a range that have not run, once across the fleet.

This process is the instance that runs them (it needs the job's function, so
``module:attr`` is required); the running fleet goes on as it is. Progress is
a ``rich`` bar on a terminal when ``rich`` is installed (``pip install
anarchon-core[progress]``), else a line to stderr every tenth of the range:
the core itself depends on nothing for it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from .._identity import default_actor
from ..backfill import BackfillSummary
from ..run import ms_to_datetime
from ._common import UsageError, print_json, resolve, table, utc

if TYPE_CHECKING:
    from .._backfill import Progress

__all__ = ["CONFIRM_SLOTS", "backfill", "parse_moment"]

#: A range of more slots than this needs --yes.
CONFIRM_SLOTS = 1000


def parse_moment(text: str) -> datetime:
    """An ISO 8601 time (``2026-11-30T02:00``, ``2026-11-30 02:00+01:00``, ``…Z``); no zone: the job's."""
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time; write e.g. 2026-11-30T02:00 (the job's timezone) or "
            "2026-11-30T02:00Z (UTC)"
        ) from None


def _has_rich() -> bool:
    """Whether the optional ``rich`` is installed (``anarchon-core[progress]``)."""
    return importlib.util.find_spec("rich") is not None


@contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Progress | None]:
    if quiet or total == 0:
        yield None
        return
    if _has_rich() and sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress as Bar

        with Bar(console=Console(stderr=True), transient=False) as bar:
            task = bar.add_task("backfill", total=total)
            yield lambda _slot, _what: bar.advance(task)
        return
    done = 0
    step = max(1, total // 10)

    def line(_slot: int, _what: str) -> None:
        nonlocal done
        done += 1
        if done % step == 0 or done == total:
            print(f"backfill: {done}/{total} slots decided", file=sys.stderr, flush=True)

    yield line


def _print(summary: BackfillSummary) -> None:
    counts = summary.counts()
    if summary.dry_run:
        for slot in summary.would_run:
            print(f"would run {utc(ms_to_datetime(slot))}")
        print(f"dry run: {len(summary.would_run)} slots would run, {len(summary.already_run)} already run")
        return
    rows = [
        [utc(ms_to_datetime(s)), r.status.value, r.attempt, r.duration_ms, r.error or ""]
        for s, r in sorted(summary.runs.items())
    ]
    if rows:
        print(table(["slot (UTC)", "status", "attempt", "ms", "error"], rows))
    print(", ".join(f"{n.replace('_', ' ')} {c}" for n, c in counts.items()))


async def backfill(args: argparse.Namespace) -> int:
    scheduler, _ = resolve(args.target, args.backend)
    assert scheduler is not None
    job = scheduler.jobs.get(args.job)
    if job is None:
        known = ", ".join(sorted(scheduler.jobs)) or "none"
        raise UsageError(f"{args.target} has no job {args.job!r}; its jobs: {known}")
    plan = await scheduler.backfill(args.job, args.start, args.end, dry_run=True)
    if plan.would_run and len(plan.would_run) > CONFIRM_SLOTS and not args.yes and not args.dry_run:
        raise UsageError(
            f"the range holds {len(plan.would_run)} slots to run (more than {CONFIRM_SLOTS}): pass --yes to run "
            "them all, or --dry-run to list them"
        )
    if args.dry_run:
        summary = plan
    else:
        with _progress(plan.slots, args.json) as progress:
            summary = await scheduler.backfill(
                args.job, args.start, args.end, concurrency=args.concurrency, progress=progress,
                reason=args.reason, by=default_actor(),
            )  # fmt: skip
    if args.json:
        print_json(summary.to_dict())
    else:
        _print(summary)
    return 1 if summary.failed or summary.skipped else 0
