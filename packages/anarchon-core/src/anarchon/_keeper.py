"""The lease keeper: one task renews the leases of every run this instance holds.

Each lease is renewed every third of it, the runs due together in one call.
A lease is presumed lost at its local deadline (``held_until``), a tenth
before the backend could let a backup take it, and the run is then stopped.
The keeper ends when no run holds a lease; the next run starts it again.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from typing import NamedTuple

from ._active import ActiveRun, ActiveRuns
from ._health import BackendHealth
from ._tasks import Tasks, ignore_outcome
from ._waits import at_most
from .backend import LeaseBackend
from .clock import Clock
from .observers import Observers

__all__ = ["LEASE_SAFETY", "LeaseKeeper", "held_until", "lose_lease"]

log = logging.getLogger("anarchon.leases")

#: Share of a lease this instance gives up early, so it stops before a backup starts.
LEASE_SAFETY = 0.1
#: A renewal this close is due now. The event loop counts a timer due within its
#: clock's resolution; a wait shorter than that returns at once, and on a clock
#: that reads in whole ticks (a test's fast-forwarded loop) the keeper would wait
#: for the last fraction of a tick forever.
TICK_S = 1e-6


def held_until(sent: float, lease_ms: int) -> float:
    """When (monotonic) this instance must presume a lease granted or renewed at ``sent`` lost.

    The backend starts the lease when it receives the call, no earlier than
    ``sent``; giving up a tenth of the lease before that bound leaves room for
    a busy event loop to cancel the job before any backup can take it over.
    """
    return sent + lease_ms * (1 - LEASE_SAFETY) / 1000


def lose_lease(active: ActiveRun, why: str, observers: Observers) -> None:
    """Presume the run's lease lost: stop its job; a run whose job already returned keeps writing its record."""
    log.warning(
        "job %s, slot %s: %s; %s",
        active.job.name,
        active.context.slot,
        why,
        "the job has returned, so its record is still written (a take-over's token refuses it)"
        if active.finishing
        else "stopping this run",
        extra={"job": active.job.name, "slot_ms": active.context.slot_ms, "attempt": active.context.attempt},
    )
    active.context.lease_lost = True
    active.cancel_job()
    observers.lease_lost(active.job, active.context.slot_ms, why)


class Renewal(NamedTuple):
    """One heap entry: renew this run's lease at ``at`` (monotonic s); stale entries are skipped."""

    at: float
    seq: int
    active: ActiveRun


class LeaseKeeper:
    def __init__(
        self,
        backend: LeaseBackend,
        clock: Clock,
        active: ActiveRuns,
        health: BackendHealth,
        observers: Observers,
        tasks: Tasks,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._observers = observers
        self._active = active
        self._health = health
        self._tasks = tasks
        self._heap: list[Renewal] = []
        self._seq = 0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    def watch(self, active: ActiveRun, at: float) -> None:
        """Renew this run's lease at ``at``; one keeper serves every run."""
        active.renew_at = at
        self._seq += 1
        heapq.heappush(self._heap, Renewal(at, self._seq, active))
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = self._tasks.spawn(self._keep())
        elif self._heap[0].active is active and self._wake is not None:
            self._wake.set()

    def clear(self) -> None:
        self._heap.clear()

    def _current(self, entry: Renewal) -> bool:
        return self._active.holds(entry.active) and entry.at == entry.active.renew_at

    async def _keep(self) -> None:
        assert self._wake is not None
        wake = self._wake
        heap = self._heap
        while True:
            while heap and not self._current(heap[0]):
                heapq.heappop(heap)
            if not heap:
                self._task = None
                return
            now = self._clock.monotonic()
            if heap[0].at > now + TICK_S:
                wake.clear()
                await at_most(wake.wait(), heap[0].at - now)
                continue
            due: list[ActiveRun] = []
            while heap and heap[0].at <= now + TICK_S:
                entry = heapq.heappop(heap)
                if not self._current(entry):
                    continue
                if now >= entry.active.lease_deadline:
                    lose_lease(entry.active, "the lease could not be renewed before it expired", self._observers)
                    continue
                due.append(entry.active)
            if due:
                await self._renew(due)

    async def _renew(self, due: list[ActiveRun]) -> None:
        sent = self._clock.monotonic()
        limit = max(0.001, min(a.lease_deadline for a in due) - sent)
        renewing = self._tasks.call(self._backend.renew([a.grant for a in due]))
        try:
            await asyncio.wait((renewing,), timeout=limit)
        except asyncio.CancelledError:
            renewing.cancel()
            raise
        try:
            if not renewing.done():
                # Cancelled but not awaited: a client can take long to cancel a call (asyncpg waits
                # for the server to confirm it over a held link), and the keeper must stop runs meanwhile.
                renewing.cancel()
                renewing.add_done_callback(ignore_outcome)  # kept by Tasks until it ends
                raise asyncio.TimeoutError(f"no answer within {limit:.3f} s")
            results = renewing.result()
        except (Exception, asyncio.TimeoutError) as exc:
            self._health.failed("renew", exc)
            now = self._clock.monotonic()
            for active in due:
                if self._active.holds(active):
                    self.watch(active, now + min(0.1, max(0.0, active.lease_deadline - now)))
            return
        now = self._clock.monotonic()
        for active, ok in zip(due, results, strict=True):
            if not self._active.holds(active):
                continue
            if not ok:
                lose_lease(active, "another instance took the run over", self._observers)
                continue
            active.lease_deadline = held_until(sent, active.grant.lease_ms)
            self.watch(active, now + active.grant.lease_ms / 3000)
