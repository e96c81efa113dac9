"""Backfill: which past slots of a job a backfill runs, and what it reports.

A backfill runs every slot of a range that has not run, once. "Has run" is
read from the job's history: a slot with any record of its scheduled run
(succeeded, failed, skipped, abandoned, running…) is *already run*. The
backend decides each slot atomically (:meth:`~anarchon.LeaseBackend.backfill`):
its record is the one the fleet's claim of that slot would write, so the
live fleet and any overlapping backfill race for one record and exactly one
wins. A backfilled slot newer than the job's ``mark`` moves the mark up to
it, as any decided scheduled slot does; older ones leave it.

History is the only memory of what ran, so a backfill is refused where
history cannot tell: a range reaching past what ``history_size`` keeps (a
record trimmed is a slot that looks as if it never ran, and the backfill's
own records must not push the range's records out either), or older than
``history_ttl_ms``. Times without a zone are read in the job's timezone, as
its cron expression is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .cron.timeline import zone
from .errors import BackfillError
from .job import Job
from .run import Run, datetime_to_ms, ms_to_datetime

__all__ = ["MAX_SLOTS", "BackfillPlan", "BackfillSummary", "plan_backfill", "range_ms"]

#: Most slots one backfill takes: its plan is a list in memory.
MAX_SLOTS = 100_000


def range_ms(job: Job, moment: datetime, option: str) -> int:
    """``moment`` as epoch ms; a naive one is a wall time in the job's zone (the first of a repeated hour)."""
    if not isinstance(moment, datetime):
        raise BackfillError(f"{option}={moment!r} is not a datetime", option=option)
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=zone(job.timezone))
    return datetime_to_ms(moment)


@dataclass(frozen=True)
class BackfillPlan:
    """The range's slots, split by what history says of them when the plan was made."""

    job: str
    start_ms: int
    end_ms: int
    #: Slots with no record: the ones to claim.
    missing: list[int]
    #: Slots with a record of their scheduled run, and that record.
    recorded: dict[int, Run]

    @property
    def slots(self) -> int:
        return len(self.missing) + len(self.recorded)


def plan_backfill(job: Job, start_ms: int, end_ms: int, now_ms: int, history: Sequence[Run]) -> BackfillPlan:
    """Check the range against the job and its history (newest ``history_size`` records), and split it."""
    if start_ms > end_ms:
        raise BackfillError(
            f"--from {ms_to_datetime(start_ms).isoformat()} is after --to {ms_to_datetime(end_ms).isoformat()}: "
            "swap them",
            option="--from",
        )
    if end_ms > now_ms:
        raise BackfillError(
            f"--to {ms_to_datetime(end_ms).isoformat()} is in the future (now {ms_to_datetime(now_ms).isoformat()}): "
            "the fleet runs those slots when they come; end the range at or before now",
            option="--to",
        )
    ttl = job.options.history_ttl_ms
    if ttl is not None and start_ms < now_ms - ttl:
        raise BackfillError(
            f"--from {ms_to_datetime(start_ms).isoformat()} is older than job {job.name!r}'s history_ttl_ms={ttl}: "
            "records of those slots are dropped, so whether they ran cannot be told; start the range later",
            option="--from",
        )
    slots: list[int] = []
    moment = start_ms - 1
    while len(slots) <= MAX_SLOTS:
        found = job.next_slot_ms(moment)
        if found is None or found > end_ms:
            break
        slots.append(moment := found)
    if len(slots) > MAX_SLOTS:
        raise BackfillError(
            f"the range holds more than {MAX_SLOTS} slots of job {job.name!r}: split it into smaller ranges",
            option="--to",
        )
    scheduled = {r.slot_ms: r for r in history if not r.manual}
    recorded = {s: scheduled[s] for s in slots if s in scheduled}
    missing = [s for s in slots if s not in scheduled]
    kept_from_start = sum(1 for r in history if r.slot_ms >= start_ms)
    size = job.options.history_size
    if missing and kept_from_start + len(missing) > size:
        raise BackfillError(
            f"job {job.name!r} keeps {size} runs (history_size) and {kept_from_start} of them are from --from on; "
            f"with the range's {len(missing)} slots without a record that is more than it keeps, so records "
            "would be trimmed and a slot that ran would look as if it had not: "
            f"raise history_size to at least {kept_from_start + len(missing)}, or start the range later",
            option="history_size",
        )
    return BackfillPlan(job.name, start_ms, end_ms, missing, recorded)


@dataclass
class BackfillSummary:
    """What a backfill did, slot by slot (epoch ms), as ``Scheduler.backfill`` returns it.

    ``ran``: run here and succeeded; ``failed``: run here and did not succeed
    (failed, timed-out, cancelled, or its lease was lost); ``already_run``: a
    record existed (history, the fleet, another backfill); ``skipped``: not
    decided (the backend's answer was lost or it failed): backfill again.
    """

    job: str
    start_ms: int
    end_ms: int
    dry_run: bool = False
    ran: list[int] = field(default_factory=list)
    already_run: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    #: The runs this backfill made, by slot.
    runs: dict[int, Run] = field(default_factory=dict)
    #: Slots a dry run would claim.
    would_run: list[int] = field(default_factory=list)

    @property
    def slots(self) -> int:
        return len(self.ran) + len(self.already_run) + len(self.skipped) + len(self.failed) + len(self.would_run)

    def counts(self) -> dict[str, int]:
        names = ("ran", "already_run", "skipped", "failed")
        found = {name: len(getattr(self, name)) for name in names}
        if self.dry_run:
            found["would_run"] = len(self.would_run)
        return found

    def to_dict(self) -> dict[str, Any]:
        def stamps(slots: list[int]) -> list[str]:
            return [ms_to_datetime(s).isoformat() for s in sorted(slots)]

        return {
            "job": self.job,
            "from": ms_to_datetime(self.start_ms).isoformat(),
            "to": ms_to_datetime(self.end_ms).isoformat(),
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "ran": stamps(self.ran),
            "already_run": stamps(self.already_run),
            "skipped": stamps(self.skipped),
            "failed": stamps(self.failed),
            **({"would_run": stamps(self.would_run)} if self.dry_run else {}),
        }
