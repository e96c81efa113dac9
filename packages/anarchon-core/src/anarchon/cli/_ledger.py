"""``anarchon history``'s table: the job's ledger (:mod:`anarchon.ledger`), not only its records.

The schedule that tells which slots were due comes from the scheduler named
as ``module:attr``, or else from the fleet registry: the definition the live
fleet runs, or the stored schedule. A job no live instance defines any more
has no schedule to read, so its history shows records only, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backend import Backend
from ..cron import Schedule
from ..fleet import read_fleet
from ..ledger import Entry, ledger
from ..options import JobOptions
from ..run import Run, ms_to_datetime
from ..scheduler import Scheduler
from ._common import print_json, table, utc
from ._fleet import running_schedule

__all__ = ["LEDGER_HEADERS", "job_schedule", "print_ledger"]

LEDGER_HEADERS = ["slot (UTC)", "outcome", "reason", "instance", "attempt", "fencing", "manual", "ms", "error"]


async def job_schedule(scheduler: Scheduler | None, backend: Backend, job: str) -> tuple[Schedule, int] | None:
    """The job's schedule and ``max_late_ms``, from the scheduler or the fleet registry; ``None`` if unknown."""
    if scheduler is not None:
        known = scheduler.jobs[job]
        return known.schedule, known.options.max_late_ms
    if not backend.capabilities.registry:
        return None
    view = await read_fleet(backend)
    found = view.job(job)
    schedule = None if found is None else running_schedule(view, found)
    if found is None or schedule is None:  # no live definition, or one of another version: records only
        return None
    late = view.running(found).options.get("max_late_ms", JobOptions.max_late_ms)
    return schedule, late if isinstance(late, int) and not isinstance(late, bool) else JobOptions.max_late_ms


def _row(e: Entry) -> list[object]:
    run = e.run
    reason = e.reason
    if e.covered_by is not None:
        reason = f"{reason}; covered by the run of {utc(ms_to_datetime(e.covered_by))}".lstrip("; ")
    own = e.outcome.value not in ("missed", "died")
    return [
        utc(ms_to_datetime(e.slot_ms)),
        e.outcome.value,
        reason,
        e.instance or "",
        e.attempt or "",
        run.fencing if run is not None and own else "",
        "yes" if run is not None and run.manual else "",
        run.duration_ms if run is not None and own and run.duration_ms is not None else "",
        run.error or "" if run is not None and own else "",
    ]


def print_ledger(
    runs: Sequence[Run], known: tuple[Schedule, int] | None, now_ms: int, limit: int, as_json: bool, empty: str
) -> None:
    """The newest ``limit`` lines of the ledger: a table, or with ``as_json`` its entries."""
    schedule, late = known if known is not None else (None, 0)
    entries = ledger(runs, schedule, due_before_ms=now_ms - late if known is not None else None)[:limit]
    if as_json:
        print_json([e.to_dict() for e in entries])
    elif entries:
        print(table(LEDGER_HEADERS, [_row(e) for e in entries]))
        if known is None:
            print("(slots nobody claimed are not shown: no live instance or stored schedule defines this job)")
    else:
        print(empty)
