"""The control loop alone, on a clock the test drives: pauses read into the gate, run requests taken once.

Two instances' control loops share one memory store, as two processes share a
backend; ``looptime`` fast-forwards their polls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from anarchon import Grant, LoopClock, MemoryBackend, MemoryStore
from anarchon._batcher import ClaimBatcher
from anarchon._control_loop import ControlLoop
from anarchon._health import BackendHealth
from anarchon._pausegate import PauseGate
from anarchon._registry import JobRegistry
from anarchon._runlog import RunLog
from anarchon._tasks import Tasks
from anarchon.control import CONTROL_NOTIFIED_POLL_MS, CONTROL_POLL_MS
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000


class Instance:
    """One instance's control loop and what it needs, over a store shared with the others."""

    def __init__(self, name: str, store: MemoryStore, clock: LoopClock, notices: bool = True) -> None:
        self.backend = MemoryBackend(store) if notices else _Polled(store)
        self.polls = 0
        self.ran: list[tuple[str, Grant]] = []
        observers = Observers(PluginManager(entry_points=False), scheduler=None)  # type: ignore[arg-type]
        health = BackendHealth(self.backend, observers)
        tasks = Tasks()
        self.gate = PauseGate(self.backend)
        self.registry = JobRegistry()
        self.job = make_job(self.backend, "report", "0 2 * * *")
        self.registry.add(self.job, {})
        self.stopped = False
        batcher = ClaimBatcher(
            self.gate, clock, name, health, observers, tasks,
            run=self._run, runlog=RunLog(), stopping=lambda: self.stopped,
        )  # fmt: skip
        self.loop = ControlLoop(
            self.backend, self.gate, self.registry, health, tasks, batcher, name, clock,
            run=self._run, stopping=lambda: self.stopped,
        )  # fmt: skip
        original = self.loop.poll

        async def counted() -> None:
            self.polls += 1
            await original()

        self.loop.poll = counted  # type: ignore[method-assign]

    async def _run(self, job: Job, grant: Grant, sent: float, due_ms: int | None) -> Any:
        self.ran.append((job.name, grant))


class _Polled(MemoryBackend):
    """The memory backend as one without ``control_notify``: its instances poll twice a second."""

    capabilities = dataclasses.replace(MemoryBackend.capabilities, control_notify=False)


def _fleet(n: int, notices: bool = True) -> list[Instance]:
    clock = LoopClock(START_MS)
    store = MemoryStore(clock=clock.now_ms)
    return [Instance(f"i{k}", store, clock, notices) for k in range(n)]


async def test_a_run_request_is_taken_by_exactly_one_instance_and_marked_done() -> None:
    a, b = _fleet(2)
    request = await a.backend.request_run("report", by="ops@bastion")
    await asyncio.gather(a.loop.poll(), b.loop.poll())
    await asyncio.sleep(0)  # the run is spawned as a task
    runs = a.ran + b.ran
    assert len(runs) == 1
    ((name, grant),) = runs
    assert name == "report" and grant.manual and grant.slot_ms == request.slot_ms
    assert await a.backend.run_requests() == []
    await asyncio.gather(a.loop.poll(), b.loop.poll())
    assert len(a.ran + b.ran) == 1  # not taken again


async def test_a_pause_read_by_a_poll_reaches_the_gate_and_a_resume_lifts_it() -> None:
    (a,) = _fleet(1)
    await a.backend.pause("report", reason="warehouse migration", by="ops")
    assert await a.loop.refresh_pauses()
    state = a.gate.known("report")
    assert state is not None and state.paused and state.reason == "warehouse migration"
    await a.backend.resume("report")
    await a.loop.refresh_pauses()
    after = a.gate.known("report")
    assert after is None or not after.paused


async def test_without_notices_the_loop_polls_about_once_a_period_until_it_stops() -> None:
    (a,) = _fleet(1, notices=False)
    task = asyncio.ensure_future(a.loop.run_forever())
    seconds = 60
    await asyncio.sleep(seconds)
    a.stopped = True
    await task
    period = CONTROL_POLL_MS / 1000
    # Each wait is the period times 0.75-1.25, so the count lies between these.
    assert seconds / (1.25 * period) - 1 <= a.polls <= seconds / (0.75 * period) + 1


async def test_with_notices_a_pause_is_read_when_told_and_the_poll_comes_every_10_s() -> None:
    a, b = _fleet(2)
    task = asyncio.ensure_future(a.loop.run_forever())
    seconds = 60
    await asyncio.sleep(seconds)
    period = CONTROL_NOTIFIED_POLL_MS / 1000
    # One poll when the watch subscribed, then one per 7.5-12.5 s.
    assert seconds / (1.25 * period) <= a.polls <= seconds / (0.75 * period) + 2
    before = a.polls
    await b.backend.pause("report", reason="told", by="ops")
    await asyncio.sleep(0.05)  # loop time: the next poll without the notice is seconds away
    state = a.gate.known("report")
    assert state is not None and state.paused, "a pause told to the instance was not read at once"
    assert a.polls == before + 1
    a.stopped = True
    await task
