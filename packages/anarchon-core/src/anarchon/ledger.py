"""What became of every slot of a job: the ledger that history, the dashboard and alerts read.

A backend keeps one record per slot that was claimed. The ledger adds what
the records alone do not say, so an operator can tell real misses from the
ordinary:

``ran``
    the run succeeded;
``failed``
    it raised, timed out (``timed-out``) or was cancelled (``cancelled``);
``skipped``
    on purpose: the previous run still held the job (``overlap``), or the job
    was paused (``paused``);
``missed``
    the slot was due and nobody claimed it (every instance down, or late past
    ``max_late_ms``): a slot of the schedule with no record, between two
    records or older than ``max_late_ms``. When a later run covered it (a
    catch-up, ``Run.missed``) the entry says which (``covered_by``);
``lost``
    it was claimed and its runner died, and nobody took it over (``max_takeovers``
    used up, or a newer slot was won first): record status ``abandoned``;
``died``
    an earlier attempt of a slot that was taken over (``Run.earlier``), listed
    under the attempt that followed;
``running``
    in progress.

Missed slots are computed from the job's schedule as it is now, read when
history is read: nothing more is stored per slot, on any backend. After a
schedule change, slots of the new schedule between records of the old one
show as missed; only the span between the oldest and the newest record read
(and the due slots after the newest) is filled, at most :data:`MAX_MISSED`
entries.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .cron import Schedule
from .run import Run, RunStatus

__all__ = ["MAX_MISSED", "Entry", "SlotOutcome", "ledger", "outcome_of"]

#: At most this many ``missed`` entries are made for one read (a job down for a day of seconds).
MAX_MISSED = 1000


class SlotOutcome(str, enum.Enum):
    RAN = "ran"
    FAILED = "failed"
    SKIPPED = "skipped"
    MISSED = "missed"
    LOST = "lost"
    DIED = "died"
    RUNNING = "running"

    def __str__(self) -> str:
        return self.value


_OF_STATUS: dict[RunStatus, tuple[SlotOutcome, str]] = {
    RunStatus.SUCCEEDED: (SlotOutcome.RAN, ""),
    RunStatus.FAILED: (SlotOutcome.FAILED, ""),
    RunStatus.TIMED_OUT: (SlotOutcome.FAILED, "timed-out"),
    RunStatus.CANCELLED: (SlotOutcome.FAILED, "cancelled"),
    RunStatus.SKIPPED: (SlotOutcome.SKIPPED, "overlap"),
    RunStatus.PAUSED: (SlotOutcome.SKIPPED, "paused"),
    RunStatus.ABANDONED: (SlotOutcome.LOST, "its runner died and nobody took it over"),
    RunStatus.RUNNING: (SlotOutcome.RUNNING, ""),
}


def outcome_of(run: Run) -> tuple[SlotOutcome, str]:
    """The ledger's outcome of a record, and why (``overlap``, ``paused``, ``timed-out``…; ``""``: nothing to add)."""
    return _OF_STATUS[run.status]


@dataclass(frozen=True)
class Entry:
    """One line of the ledger: a slot's record, an earlier attempt of it, or a slot nobody claimed."""

    job: str
    slot_ms: int
    outcome: SlotOutcome
    reason: str = ""
    #: The slot's record (``None`` for a missed slot); for ``died``, the record of the attempt that followed.
    run: Run | None = None
    attempt: int | None = None
    instance: str | None = None
    #: For ``missed`` and ``lost``: the slot of the later run that covered it (a catch-up), if one did.
    covered_by: int | None = None
    #: How many slots the entry stands for: more than 1 only for a gap too long to list slot by slot.
    count: int = 1

    def to_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "slot_ms": self.slot_ms,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "attempt": self.attempt,
            "instance": self.instance,
            "covered_by": self.covered_by,
            "count": self.count,
            "run": None if self.run is None else self.run.to_dict(),
        }


def _of_record(run: Run, covered_by: int | None) -> list[Entry]:
    outcome, reason = outcome_of(run)
    entries = [Entry(run.job, run.slot_ms, outcome, reason, run, run.attempt, run.instance, covered_by)]
    for attempt in reversed(run.earlier):  # newest first, as the ledger reads
        why = f"its runner died; attempt {attempt.attempt + 1} took the slot over"
        entries.append(Entry(run.job, run.slot_ms, SlotOutcome.DIED, why, run, attempt.attempt, attempt.instance))
    return entries


def _unclaimed(schedule: Schedule, after_ms: int, before_ms: int, room: int) -> tuple[list[int], int, int | None]:
    """Slots of the schedule in ``(after_ms, before_ms)``: oldest first (none if over ``room``), count, newest."""
    count, newest = schedule.count_between(after_ms, before_ms - 1, cap=10 * MAX_MISSED)
    if count > room:
        return [], count, newest
    found: list[int] = []
    moment = after_ms
    while (slot := schedule.next_or_none(moment)) is not None and slot < before_ms and len(found) < count:
        found.append(moment := slot)
    return found, count, newest


def ledger(runs: Sequence[Run], schedule: Schedule | None = None, *, due_before_ms: int | None = None) -> list[Entry]:
    """The ledger of one job's records (any order), newest slot first.

    With the job's ``schedule``, the slots with no record are added as
    ``missed``: those between two scheduled records, and, with
    ``due_before_ms`` (now less the job's ``max_late_ms``: nobody may claim
    them any more), those after the newest record and before it. A run whose
    ``missed`` counts ``n`` slots covered the ``n - 1`` newest of them before
    it; so did a run that superseded a ``lost`` one.
    """
    scheduled = sorted((r for r in runs if not r.manual), key=lambda r: r.slot_ms)
    covered: dict[int, int] = {}  # slot -> the slot of the run that covered it
    entries: list[Entry] = []
    job = runs[0].job if runs else ""
    budget = MAX_MISSED
    if schedule is not None and scheduled:
        edges = [r.slot_ms for r in scheduled]
        if due_before_ms is not None and due_before_ms > edges[-1]:
            edges.append(due_before_ms)  # slots before it are past max_late_ms: nobody may claim them now
        for index in range(len(edges) - 1):
            gap, count, newest = _unclaimed(schedule, edges[index], edges[index + 1], budget)
            later = scheduled[index + 1] if index + 1 < len(scheduled) else None
            covers = later.missed - 1 if later is not None else 0
            if count and not gap:  # too many to list: one entry for the whole gap, at its newest slot
                entries.append(
                    Entry(
                        job,
                        newest or edges[index + 1] - 1,
                        SlotOutcome.MISSED,
                        f"nobody claimed it, nor the {count - 1}{'+' if count >= 10 * MAX_MISSED else ''} slots "
                        "before it since the previous record",
                        covered_by=later.slot_ms if later is not None and covers >= count else None,
                        count=count,
                    )
                )
                continue
            budget -= len(gap)
            before = gap + ([scheduled[index].slot_ms] if scheduled[index].status is RunStatus.ABANDONED else [])
            if later is not None and covers > 0:
                for slot in sorted(before)[-covers:]:
                    covered[slot] = later.slot_ms
            for slot in gap:
                entries.append(Entry(job, slot, SlotOutcome.MISSED, "nobody claimed it", covered_by=covered.get(slot)))
    for run in runs:
        entries.extend(_of_record(run, covered.get(run.slot_ms) if not run.manual else None))
    # Newest slot first; within a slot the record before its earlier attempts (a stable sort keeps that).
    entries.sort(key=lambda e: e.slot_ms, reverse=True)
    return entries
