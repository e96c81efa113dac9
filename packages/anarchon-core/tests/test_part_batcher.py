"""The claim batcher alone, on a clock the test drives: batches raced by two instances, parts, and a failing backend.

Two batchers share one memory store, as two instances share a backend; the
runs they would start are recorded instead of run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from anarchon import Claim, ClaimResult, Grant, LoopClock, MemoryBackend, MemoryStore, Outcome
from anarchon._batcher import PART, ClaimBatcher
from anarchon._health import BackendHealth
from anarchon._runlog import RunLog
from anarchon._tasks import Tasks
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000


class Counting(MemoryBackend):
    """The memory backend, counting its claim calls and their sizes, able to fail them."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.calls: list[int] = []
        self.fail = False

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        self.calls.append(len(claims))
        if self.fail:
            raise ConnectionError("the link is down")
        return await super().claim(claims)


class Instance:
    def __init__(self, name: str, store: MemoryStore, clock: LoopClock) -> None:
        self.backend = Counting(store)
        self.runs: list[tuple[str, int]] = []
        observers = Observers(PluginManager(entry_points=False), scheduler=None)  # type: ignore[arg-type]
        self.health = BackendHealth(self.backend, observers)
        self.batcher = ClaimBatcher(
            self.backend, clock, name, self.health, observers, Tasks(),
            run=self._run, runlog=RunLog(), stopping=lambda: False,
        )  # fmt: skip
        self.batcher.start()

    async def _run(self, job: Job, grant: Grant, sent: float, due_ms: int | None) -> Any:
        self.runs.append((job.name, grant.slot_ms))


def _fleet(n: int) -> tuple[list[Instance], LoopClock]:
    clock = LoopClock(START_MS)
    store = MemoryStore(clock=clock.now_ms)
    return [Instance(f"i{k}", store, clock) for k in range(n)], clock


async def test_slots_due_together_go_in_one_call_and_each_is_won_by_one_instance() -> None:
    (a, b), clock = _fleet(2)
    # overlap="allow": the runs recorded here never finish, and each slot is still won once.
    jobs = [make_job(a.backend, f"job-{k}", jitter_ms=0, overlap="allow") for k in range(50)]
    for second in range(1, 4):
        slot = START_MS + 1000 * second
        await asyncio.sleep(slot / 1000 - clock.now_ms() / 1000)
        for instance in (a, b):
            instance.batcher.submit_due([(job, slot, slot) for job in jobs])
        await asyncio.sleep(0.1)
    assert a.backend.calls == [50, 50, 50] and b.backend.calls == [50, 50, 50]
    won = sorted(a.runs + b.runs)
    assert won == sorted((job.name, START_MS + 1000 * s) for job in jobs for s in range(1, 4))  # each once


async def test_a_batch_past_a_part_goes_out_in_parts() -> None:
    (a,), _ = _fleet(1)
    jobs = [make_job(a.backend, f"job-{k}", jitter_ms=0) for k in range(PART + 10)]
    slot = START_MS + 1000
    await asyncio.sleep(1.0)
    a.batcher.submit_due([(job, slot, slot) for job in jobs])
    await asyncio.sleep(0.5)
    assert sorted(a.backend.calls) == [10, PART]
    assert len(a.runs) == PART + 10


async def test_a_lease_backend_that_fails_is_not_retried_and_nothing_runs() -> None:
    (a,), _ = _fleet(1)
    job = make_job(a.backend, "job", jitter_ms=0)
    a.backend.fail = True
    await asyncio.sleep(1.0)
    slot = START_MS + 1000
    results, _ = await a.batcher.decide(a.batcher.claims([(job, slot)]))
    # Unknown, never won: a lease backend catches the slot up once it answers again.
    assert [r.outcome for r in results] == [Outcome.UNKNOWN]
    assert a.backend.calls == [1] and a.health.degraded and a.runs == []
