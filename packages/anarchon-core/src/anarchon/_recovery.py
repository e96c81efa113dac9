"""The lease tier's second chances: take-over, catch-up, and the way back from an outage.

* **take-over**: every poll (a third of the shortest lease, at most a
  second), runs whose lease expired are granted to this instance again.
  With a heartbeat, a dead owner's runs are taken over as soon as a beat
  reports it dead (``Scheduler._on_dead``), so the poll is left only the
  runs of owners alive but stalled past their lease, and comes every 5 s
  (:data:`TAKE_OVER_POLL_LIVENESS_MS`): one statement a second less per
  instance, which is what grew with the fleet;
* **catch-up**: at start, the slots missed while nobody could claim them are
  claimed as the job's ``catch_up`` policy says (``_catchup.py``);
* **recovery**: after a backend failure, claims pause; once the backend
  answers, dead runs are taken over first, then missed slots are caught up.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence

from ._batcher import ClaimBatcher
from ._catchup import plan_catch_up
from ._health import BackendHealth
from ._registry import JobRegistry
from ._tasks import Tasks
from ._timer import SlotTimer
from .backend import Claim, Grant, LeaseBackend
from .clock import Clock
from .job import Job
from .observers import Observers
from .run import ms_to_datetime

__all__ = ["Recovery"]

log = logging.getLogger("anarchon.recovery")

#: Longest pause between take-over polls on a lease backend.
TAKE_OVER_POLL_MS = 1000
#: The same while this instance's heartbeat reports dead instances (their runs are taken over then).
TAKE_OVER_POLL_LIVENESS_MS = 5000
#: A take-over poll this close (ms) to a batch of claims waits until the batch's runs started,
#: at most a quarter of its period, so a take-over comes at worst that much later.
TAKE_OVER_QUIET_MS = 50
#: Back-off of the probes while the backend is away, doubling up to the maximum.
BACKOFF_MIN_MS, BACKOFF_MAX_MS = 200, 30_000


class Recovery:
    def __init__(
        self,
        backend: LeaseBackend,
        clock: Clock,
        instance_id: str,
        registry: JobRegistry,
        health: BackendHealth,
        observers: Observers,
        tasks: Tasks,
        batcher: ClaimBatcher,
        timer: SlotTimer,
        *,
        run: Callable[[Job, Grant, float, int | None], Awaitable[object]],
        stopping: Callable[[], bool],
        beating: Callable[[], bool] = lambda: True,
        reports_dead: Callable[[], bool] = lambda: False,
        claims: Callable[[str], bool] = lambda name: True,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._instance_id = instance_id
        self._registry = registry
        self._health = health
        self._observers = observers
        self._tasks = tasks
        self._batcher = batcher
        self._timer = timer
        self._run = run
        self._stopping = stopping
        #: Whether this instance's heartbeat holds (always, without liveness): while it has
        #: lapsed, every grant would be handed straight back, so nothing is taken over.
        self._beating = beating
        #: Whether a heartbeat runs, telling of dead owners as they die: then the poll can be slow.
        self._reports_dead = reports_dead
        #: Whether this instance claims a job's slots (not when the fleet runs another definition).
        self._claims = claims

    async def take_over_loop(self) -> None:
        while not self._stopping():
            jobs = self._registry.snapshot()
            shortest = self._registry.lowest("lease_ms") or TAKE_OVER_POLL_MS * 3
            longest = TAKE_OVER_POLL_LIVENESS_MS if self._reports_dead() else TAKE_OVER_POLL_MS
            period = min(longest, shortest / 3) / 1000
            await asyncio.sleep(period * random.uniform(0.75, 1.25))
            await self._batcher.between_batches(period / 4, TAKE_OVER_QUIET_MS, self._timer.next_at_ms)
            if jobs and not self._stopping():
                await self.take_over(jobs)

    async def take_over(self, jobs: Sequence[Job]) -> bool:
        """One take-over pass: run every expired run the backend grants this instance."""
        if not self._beating():
            return False
        sent = self._clock.monotonic()
        try:
            results = await self._backend.take_over(jobs, self._instance_id)
        except Exception as exc:
            self._health.failed("take_over", exc)
            return False
        self._health.ok()
        for result in results:
            if result.grant is None or self._stopping():
                continue
            job = self._registry.find(result.grant.job)
            if job is None:
                continue
            grant = result.grant
            log.info(
                "job %s, slot %s: taken over by %s (attempt %d)",
                job.name,
                ms_to_datetime(grant.slot_ms),
                self._instance_id,
                grant.attempt,
                extra={
                    "job": job.name,
                    "slot_ms": grant.slot_ms,
                    "instance": self._instance_id,
                    "attempt": grant.attempt,
                    "fencing": grant.fencing,
                    "status": "taken-over",
                },
            )
            self._observers.run_taken_over(job, grant.slot_ms, grant.attempt)
            self._tasks.spawn(self._run(job, grant, sent, None))
        return True

    async def catch_up(self) -> None:
        """Claim the slots missed while no instance could claim them, per each job's ``catch_up``."""
        jobs = [j for j in self._registry.all() if j.options.catches_up and self._claims(j.name)]
        if not jobs:
            return
        try:
            marks = await self._backend.marks(jobs)
        except Exception as exc:
            self._health.failed("marks", exc)
            return
        self._claim_missed(jobs, marks)

    def _claim_missed(self, jobs: list[Job], marks: Mapping[str, int | None]) -> None:
        now = self._clock.now_ms()
        claims: list[Claim] = []
        for job in jobs:
            mark = marks.get(job.name)
            if mark is None:
                # Nobody ever decided a slot of this job. If this instance set out to claim one since it
                # started (its claim lost in the outage), the slots from that one on are missed, not
                # never due: without this the first slot was neither run, recorded nor counted
                # (found by the protocol model, model/README.md).
                first = self._timer.first_claimed(job.name)
                if first is None:
                    continue
                mark = first - 1
            plan = plan_catch_up(job, mark, now)
            if not plan.slots:
                continue
            log.info(
                "job %s: catching up %s, covering %d missed slot(s) (catch_up=%r)",
                job.name,
                ", ".join(str(ms_to_datetime(slot)) for slot in plan.slots[:3]) + (" …" if len(plan.slots) > 3 else ""),
                sum(plan.missed),
                job.options.catch_up,
                extra={
                    "job": job.name,
                    "slot_ms": plan.slots[-1],
                    "instance": self._instance_id,
                    "missed": sum(plan.missed),
                },
            )
            # Oldest first, in this one batch: each claim finds the mark below its slot (see _catchup).
            claims.extend(
                self._batcher.claim(job, slot, catch_up=True, missed=missed)
                for slot, missed in zip(plan.slots, plan.missed, strict=True)
            )
            self._timer.caught_up(job.name, plan.slots[-1])
        if claims:
            self._batcher.submit(claims)

    async def recover(self) -> None:
        """Probe the backend with back-off; once it answers, take over, catch up, claim again.

        Claims pause meanwhile, so the first answer after an outage is the
        catch-up's, not a new slot's that would move the mark past the missed
        ones. Runs that died during the outage are taken over first: a
        catch-up claim would otherwise abandon them as superseded, and the
        slots skipped for them would have run nothing.
        """
        delay = BACKOFF_MIN_MS
        while not self._stopping():
            await asyncio.sleep(delay / 1000 * random.uniform(0.8, 1.2))
            if not self._beating():
                # Claims stay paused until this instance's heartbeat is acknowledged again. That is a
                # local read, no call to the backend, so it keeps the shortest pace: backing off here
                # kept claims paused up to 30 s after beats came back (measured: 5.2-5.5 s after a 7.6 s lapse).
                delay = BACKOFF_MIN_MS
                continue
            jobs = self._registry.all()
            try:
                marks = await self._backend.marks(jobs)
            except Exception as exc:
                self._observers.backend_error("marks", exc)
                delay = min(delay * 2, BACKOFF_MAX_MS)
                continue
            log.info("backend %r answers again; catching up", self._backend)
            if not await self.take_over(jobs):
                delay = min(delay * 2, BACKOFF_MAX_MS)
                continue
            self._claim_missed([j for j in jobs if j.options.catches_up], marks)
            self._health.recovered()
            return
