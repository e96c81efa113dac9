"""The slot strip: the job's due slots, as its own cron says, each with its outcome.

The due slots come from the job's schedule (``Job.next_slot_ms``, the
scheduler's own slot math, DST rules included), never from a second cron
parser. Each is matched with the history record of that slot. Rules, per slot:

* a record: its status names the outcome; a succeeded run with ``attempt > 1``
  is *taken over* (its first runner died), a succeeded catch-up run is
  *caught up*; manual runs are no slots and stay out of the strip;
* no record, but a later record's ``missed`` counts it (a catch-up, or a run
  that covered a dead run's slots): *caught up*;
* no record, and still claimable (due less than ``max_late_ms + jitter_ms``
  ago): *pending*;
* otherwise *missed*: the cron said it was due and nobody recorded it.

Slots older than the oldest record read are not judged: history read with a
limit says nothing about them, and before a job's first record it may not
have existed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from anarchon import Job, Run, RunStatus

__all__ = ["OUTCOMES", "Slot", "due_slots", "outcome_of", "strip"]

#: Every outcome a slot can show, with the words the legend uses.
OUTCOMES: dict[str, str] = {
    "succeeded": "succeeded",
    "taken-over": "taken over (attempt > 1)",
    "caught-up": "caught up",
    "failed": "failed",
    "timed-out": "timed out",
    "skipped": "skipped for overlap",
    "paused": "paused (the job was paused)",
    "running": "running",
    "cancelled": "cancelled",
    "abandoned": "lost (its runner died, nobody took it over)",
    "missed": "missed (due, nobody claimed it)",
    "pending": "pending (still claimable)",
}

#: How far back the search for due slots may go (a yearly job shows a few slots, not a century).
_MAX_SPAN_MS = 400 * 86_400_000


@dataclass(frozen=True)
class Slot:
    slot_ms: int
    outcome: str
    run: Run | None = None

    @property
    def label(self) -> str:
        return OUTCOMES[self.outcome]


def outcome_of(run: Run) -> str:
    """The strip's word for a record (also used for history rows)."""
    if run.status is RunStatus.SUCCEEDED:
        if run.attempt > 1:
            return "taken-over"
        return "caught-up" if run.catch_up else "succeeded"
    return str(run.status.value)


def due_slots(job: Job, until_ms: int, count: int, since_ms: int | None = None) -> list[int]:
    """The newest ``count`` slots at or before ``until_ms`` (and after ``since_ms``), oldest first.

    Searches back from the job's current period and widens fourfold until it
    has ``count`` slots, so a dense job costs ``count`` steps and a sparse
    one a few more.
    """
    if count <= 0:
        return []
    first = job.next_slot_ms(until_ms)
    second = None if first is None else job.next_slot_ms(first)
    # No two slots ahead (an @at, or one that has passed): search the whole span at once.
    period = _MAX_SPAN_MS if first is None or second is None else max(1000, second - first)
    span = period * (count + 1)
    floor = until_ms - _MAX_SPAN_MS if since_ms is None else max(since_ms, until_ms - _MAX_SPAN_MS)
    while True:
        start = max(until_ms - span, floor)
        found: list[int] = []
        moment = job.next_slot_ms(start - 1) if start > floor else job.next_slot_ms(start)
        while moment is not None and moment <= until_ms:
            found.append(moment)
            if len(found) > count * 4:
                del found[: len(found) - count]
            moment = job.next_slot_ms(moment)
        if len(found) >= count or start <= floor:
            return found[-count:]
        span *= 4


def strip(job: Job, runs: Sequence[Run], now_ms: int, count: int) -> list[Slot]:
    """The last ``count`` slots of ``job`` up to ``now_ms``, judged against ``runs`` (any order)."""
    records = {r.slot_ms: r for r in runs if not r.manual and r.slot_ms <= now_ms}
    if not records:
        return []
    oldest = min(records)
    slots = sorted(set(due_slots(job, now_ms, count, since_ms=oldest - 1)) | set(records))[-count:]
    covered: set[int] = set()
    for slot_ms, run in records.items():
        if run.missed > 1:
            at = bisect.bisect_left(slots, slot_ms)
            covered.update(slots[max(0, at - run.missed + 1) : at])
    claimable_after = now_ms - job.options.max_late_ms - job.options.jitter_ms
    out = []
    for slot_ms in slots:
        record = records.get(slot_ms)
        if record is not None:
            out.append(Slot(slot_ms, outcome_of(record), record))
        elif slot_ms in covered:
            out.append(Slot(slot_ms, "caught-up"))
        elif slot_ms > claimable_after:
            out.append(Slot(slot_ms, "pending"))
        else:
            out.append(Slot(slot_ms, "missed"))
    return out
