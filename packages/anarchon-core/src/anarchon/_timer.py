"""The slot timer: one heap of due claims for every job, however many jobs there are.

A job costs a heap entry, not a sleeping task. Each entry is the time its
claim is due (the slot plus this instance's delay: by its rank for the slot,
or the jitter; see :mod:`anarchon._rank`) and the slot; taking an
entry off schedules the job's next one. The timer hands the slots that come
due together (within ``COALESCE_MS``) to one callback, which claims them in
one backend call.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable
from typing import NamedTuple

from ._collector import CollectionDeferred
from ._health import BackendHealth
from ._rank import jittered
from ._registry import JobRegistry
from ._waits import at_most
from .clock import Clock
from .job import Job
from .observers import Observers
from .run import ms_to_datetime

__all__ = ["COALESCE_MS", "Due", "SlotTimer"]

log = logging.getLogger("anarchon.timer")

#: Claims due within this many ms of each other share one backend call.
COALESCE_MS = 5


class Due(NamedTuple):
    """One heap entry: when to claim which slot of which registration of a job."""

    at_ms: int
    seq: int
    job: str
    slot_ms: int
    generation: int


class SlotTimer:
    def __init__(
        self,
        registry: JobRegistry,
        clock: Clock,
        health: BackendHealth,
        observers: Observers,
        *,
        lease: bool,
        on_due: Callable[[list[tuple[Job, int, int]]], None],
        delay: Callable[[Job, int], int] = jittered,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._health = health
        self._observers = observers
        self._lease = lease
        self._on_due = on_due
        self._delay = delay
        self._heap: list[Due] = []
        self._seq = 0
        #: Per job, the newest slot a catch-up claimed; the timer must not claim it (or older) again.
        self._caught_up: dict[str, int] = {}
        #: Per job, the first slot this instance set out to claim since start(): a job whose mark is
        #: still unset after an outage is caught up from there (its first claim may have been lost).
        self._first: dict[str, int] = {}
        self._wake: asyncio.Event | None = None
        self._stopped = True

    def next_at_ms(self) -> int | None:
        """When the next claim is due (this instance's clock), ``None`` with no job."""
        return self._heap[0].at_ms if self._heap else None

    def schedule(self, job: Job, after_ms: int) -> None:
        """Queue the job's first slot after ``after_ms``, due after this instance's delay for it."""
        slot = job.next_slot_ms(after_ms)
        if slot is None:  # an @at that has passed: nothing more to claim
            return
        self._seq += 1
        heapq.heappush(
            self._heap,
            Due(slot + self._delay(job, slot), self._seq, job.name, slot, self._registry.generation(job.name)),
        )

    def wake(self) -> None:
        """Look at the heap again now (a job was added while running)."""
        if self._wake is not None:
            self._wake.set()

    def first_claimed(self, job: str) -> int | None:
        """The first slot of ``job`` this instance set out to claim since start(), if any."""
        return self._first.get(job)

    def caught_up(self, job: str, slot_ms: int) -> None:
        """A catch-up claimed this slot (with the ones it missed): never claim it, or older ones, again."""
        self._caught_up[job] = slot_ms

    def start(self, jobs: list[Job], now_ms: int) -> None:
        self._stopped = False
        self._first.clear()
        self._wake = asyncio.Event()
        for job in jobs:
            self.schedule(job, now_ms)

    def stop(self) -> None:
        self._stopped = True
        self.wake()

    def clear(self) -> None:
        self._heap.clear()

    async def run(self) -> None:
        assert self._wake is not None
        while not self._stopped:
            now = self._clock.now_ms()
            if not self._heap or self._heap[0].at_ms > now:
                delay = (self._heap[0].at_ms - now) / 1000 if self._heap else None
                self._wake.clear()
                await at_most(self._wake.wait(), delay)
                continue
            with CollectionDeferred():
                due = self._pop_due(now)
                if due:
                    self._on_due(due)
            await asyncio.sleep(0)

    def _pop_due(self, now: int) -> list[tuple[Job, int, int]]:
        """Take the slots due now (and those within ``COALESCE_MS``) off the heap, scheduling each job's next.

        Each is ``(job, slot_ms, due_ms)``: ``due_ms`` is when its claim was due, the slot plus the delay.
        """
        due: list[tuple[Job, int, int]] = []
        heap = self._heap
        while heap and heap[0].at_ms <= now + COALESCE_MS and heap[0].slot_ms <= now:
            entry = heapq.heappop(heap)
            name, slot = entry.job, entry.slot_ms
            job = self._registry.current(name, entry.generation)
            if job is None:
                continue
            self.schedule(job, slot)
            if slot <= self._caught_up.get(name, -1):
                continue  # a catch-up claimed it, with the slots it missed
            if now > slot + job.options.max_late_ms:
                log.warning("job %s: slot %s reached %d ms late; skipped", name, ms_to_datetime(slot), now - slot)
                self._observers.slot_skipped(job, slot, "late")
                continue
            self._first.setdefault(name, slot)
            if self._health.degraded and self._lease:
                # Not claimed while the backend is away; the recovery catches it up.
                self._observers.claim_lost(job, slot, "unknown")
                continue
            due.append((job, slot, entry.at_ms))
        return due
