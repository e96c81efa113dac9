"""Slots skipped for a run that was already dead: run once the fleet knows it died.

With ``overlap="skip"`` a slot due while a run holds its lease is skipped.
When that run's owner was already dead (``kill -9``, a frozen host) but its
heartbeat had not yet expired, the ~1.5 s before the fleet notices, the slot
was skipped for a run that was not running: measured with 3 instances and
200 every-second jobs, one slot of every job the dead instance held. Once a
run is found dead, either taken over (``attempt > 1``) or superseded by a
newer slot's claim (``Grant.supersedes``), the instance that learned it asks
the backend to *revive* those slots (:meth:`~anarchon.backend.LeaseBackend.revive`):
each is granted once, never beside a live run (the backend refuses while one
holds the job), and only after this instance's own run of the job ended.

Which slots: the schedule's slots after the dead run's and before the moment
its death was known (the take-over's start, or the superseding slot), none
older than ``max_late_ms``, as the job's catch-up policy says: none with
``catch_up="none"``, the newest with ``"coalesce"`` (its ``missed`` counting
the others), each with ``"each"`` (the newest ``catch_up_max``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

from ._health import BackendHealth
from .backend import Claim, Grant, LeaseBackend, Outcome
from .clock import Clock
from .job import Job
from .options import CATCH_UP_EACH_DEFAULT
from .run import ms_to_datetime

__all__ = ["Reviver", "revival_plan"]

log = logging.getLogger("anarchon.runs")

#: At most this many slots are looked at per dead run (an every-second job over max_late_ms's default: 60).
MAX_LOOKED_AT = 1000


def revival_plan(job: Job, dead_slot_ms: int, before_ms: int, now_ms: int) -> list[tuple[int, int]]:
    """``(slot, missed)`` to revive, oldest first: the slots skipped for the dead run, by the catch-up policy."""
    opts = job.options
    if opts.overlap != "skip" or not opts.catches_up:
        return []
    slots: list[int] = []
    moment = max(dead_slot_ms, now_ms - opts.max_late_ms - 1)
    while len(slots) < MAX_LOOKED_AT:
        found = job.next_slot_ms(moment)
        if found is None or found >= before_ms:
            break
        slots.append(moment := found)
    if not slots:
        return []
    if opts.catch_up == "coalesce":
        return [(slots[-1], len(slots))]
    return [(slot, 1) for slot in slots[-(opts.catch_up_max or CATCH_UP_EACH_DEFAULT) :]]


def dead_slot(grant: Grant) -> int | None:
    """The slot of the run this grant found dead: its own when taken over, the superseded one's."""
    if grant.manual:
        return None
    if grant.supersedes is not None:
        return grant.supersedes
    return grant.slot_ms if grant.attempt > 1 else None


class Reviver:
    """Revives, after a run that found another dead, the slots skipped for the dead one."""

    def __init__(
        self,
        backend: LeaseBackend,
        clock: Clock,
        instance_id: str,
        health: BackendHealth,
        stopping: Callable[[], bool],
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._instance_id = instance_id
        self._health = health
        self._stopping = stopping

    async def after(
        self,
        job: Job,
        grant: Grant,
        known_ms: int,
        execute: Callable[[Job, Grant, float], Awaitable[object]],
    ) -> None:
        """Once ``grant``'s run ended: revive and run, one after another, the slots skipped for the dead run."""
        dead = dead_slot(grant)
        if dead is None:
            return
        before = grant.slot_ms if grant.supersedes is not None else known_ms
        for slot, missed in revival_plan(job, dead, before, self._clock.now_ms()):
            if self._stopping():
                return
            claim = Claim(
                job=job.name,
                spec=job,
                slot_ms=slot,
                instance=self._instance_id,
                token=os.urandom(16).hex(),
                now_ms=self._clock.now_ms(),
                catch_up=True,
                missed=missed,
            )
            sent = self._clock.monotonic()
            try:
                (result,) = await self._backend.revive([claim])
            except Exception as exc:
                self._health.failed("revive", exc)
                return
            if result.outcome is Outcome.SKIPPED:
                return  # a live run holds the job now: the later slots would be skipped alike
            if result.outcome is not Outcome.WON or result.grant is None:
                continue
            log.info(
                "job %s, slot %s: skipped for a run whose owner was dead (slot %s); running it now",
                job.name,
                ms_to_datetime(slot),
                ms_to_datetime(dead),
                extra={"job": job.name, "slot_ms": slot, "instance": self._instance_id, "status": "revived"},
            )
            await execute(job, result.grant, sent)
