"""Recovery alone, on a clock the test drives: a dead run taken over once its lease expires, never while held.

Instance a wins a slot and dies (its lease is never renewed); instance b's
recovery takes the run over. ``looptime`` fast-forwards the lease.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from anarchon import Claim, Grant, LoopClock, MemoryBackend, MemoryStore, Outcome
from anarchon._batcher import ClaimBatcher
from anarchon._health import BackendHealth
from anarchon._recovery import Recovery
from anarchon._registry import JobRegistry
from anarchon._runlog import RunLog
from anarchon._tasks import Tasks
from anarchon._timer import SlotTimer
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000
LEASE_MS = 3_000


class Backup:
    def __init__(self, store: MemoryStore, clock: LoopClock, *, beating: bool = True) -> None:
        self.backend = MemoryBackend(store)
        self.runs: list[Grant] = []
        observers = Observers(PluginManager(entry_points=False), scheduler=None)  # type: ignore[arg-type]
        health = BackendHealth(self.backend, observers)
        tasks = Tasks()
        self.registry = JobRegistry()
        self.job = make_job(self.backend, "sync", lease_ms=LEASE_MS, jitter_ms=0)
        self.registry.add(self.job, {})
        batcher = ClaimBatcher(
            self.backend, clock, "b", health, observers, tasks, run=self._run, runlog=RunLog(), stopping=lambda: False
        )
        timer = SlotTimer(self.registry, clock, health, observers, lease=True, on_due=batcher.submit_due)
        self.recovery = Recovery(
            self.backend, clock, "b", self.registry, health, observers, tasks, batcher, timer,
            run=self._run, stopping=lambda: False, beating=lambda: beating,
        )  # fmt: skip

    async def _run(self, job: Job, grant: Grant, sent: float, due_ms: int | None) -> Any:
        self.runs.append(grant)


async def _dead_run(store: MemoryStore, clock: LoopClock, job: Job) -> Grant:
    """Instance a wins the slot due now and dies: its lease is never renewed."""
    now = clock.now_ms()
    (won,) = await MemoryBackend(store).claim([Claim(job, now - now % 1000, "a", "ta", now)])
    assert won.outcome is Outcome.WON and won.grant is not None
    return won.grant


async def test_a_dead_run_is_taken_over_once_its_lease_expired_as_the_next_attempt_with_a_higher_token() -> None:
    clock = LoopClock(START_MS)
    store = MemoryStore(clock=clock.now_ms)
    b = Backup(store, clock)
    first = await _dead_run(store, clock, b.job)
    await asyncio.sleep(LEASE_MS / 1000 - 0.5)
    assert await b.recovery.take_over([b.job]) and b.runs == []  # still within a's lease
    await asyncio.sleep(0.6)
    assert await b.recovery.take_over([b.job])
    await asyncio.sleep(0)
    (taken,) = b.runs
    assert (taken.slot_ms, taken.instance, taken.attempt) == (first.slot_ms, "b", 2)
    assert taken.fencing is not None and first.fencing is not None and taken.fencing > first.fencing
    assert await b.recovery.take_over([b.job])
    await asyncio.sleep(0)
    assert len(b.runs) == 1  # taken once


async def test_an_instance_whose_heartbeat_lapsed_takes_nothing_over() -> None:
    clock = LoopClock(START_MS)
    store = MemoryStore(clock=clock.now_ms)
    b = Backup(store, clock, beating=False)
    await _dead_run(store, clock, b.job)
    await asyncio.sleep(LEASE_MS / 1000 + 1)
    assert not await b.recovery.take_over([b.job])
    assert b.runs == []
