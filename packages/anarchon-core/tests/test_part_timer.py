"""The slot timer alone, on a clock the test drives: when each slot is handed on, what is late, what shares a call.

The timer reads the wall clock from a :class:`~anarchon.clock.LoopClock` and
sleeps on the event loop, which ``looptime`` fast-forwards: five seconds of
every-second slots take no time, and each slot's moment is exact.
"""

from __future__ import annotations

import asyncio

import pytest

from anarchon import LoopClock, MemoryBackend, hookimpl
from anarchon._health import BackendHealth
from anarchon._registry import JobRegistry
from anarchon._timer import COALESCE_MS, SlotTimer
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000  # a whole second


class Skips:
    def __init__(self) -> None:
        self.slots: list[tuple[str, int, str]] = []

    @hookimpl
    def anarchon_slot_skipped(self, job: Job, slot_ms: int, reason: str) -> None:
        self.slots.append((job.name, slot_ms, reason))


class JumpingClock(LoopClock):
    """A loop clock whose wall reading can jump ahead, as after a stalled process or a clock step."""

    jump_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.jump_ms


class Parts:
    def __init__(self, *jobs: tuple[str, dict[str, object]]) -> None:
        self.clock = JumpingClock(START_MS)
        self.backend = MemoryBackend()
        self.skips = Skips()
        observers = Observers(PluginManager([self.skips], entry_points=False), scheduler=None)  # type: ignore[arg-type]
        self.registry = JobRegistry()
        for name, options in jobs:
            self.registry.add(make_job(self.backend, name, **options), dict(options))  # type: ignore[arg-type]
        self.handed: list[tuple[int, list[tuple[str, int, int]]]] = []
        self.timer = SlotTimer(
            self.registry,
            self.clock,
            BackendHealth(self.backend, observers),
            observers,
            lease=True,
            on_due=lambda due: self.handed.append((self.clock.now_ms(), [(j.name, s, d) for j, s, d in due])),
        )

    async def run_for(self, seconds: float) -> None:
        self.timer.start(self.registry.all(), self.clock.now_ms())
        task = asyncio.ensure_future(self.timer.run())
        await asyncio.sleep(seconds)
        self.timer.stop()
        await task


async def test_each_slot_is_handed_on_at_its_own_time_once() -> None:
    parts = Parts(("tick", {"jitter_ms": 0}))
    await parts.run_for(5.5)
    slots = [START_MS + 1000 * i for i in range(1, 6)]
    assert parts.handed == [(slot, [("tick", slot, slot)]) for slot in slots]


async def test_a_jitter_delays_the_hand_on_within_it_and_never_before_the_slot() -> None:
    parts = Parts(("spread", {"jitter_ms": 200}))
    await parts.run_for(20.5)
    assert len(parts.handed) == 20
    for at, [(_, slot, due)] in parts.handed:
        assert slot <= due < slot + 200 and at == due


async def test_slots_due_within_the_coalescing_window_share_one_call() -> None:
    parts = Parts(("a", {"jitter_ms": 0}), ("b", {"jitter_ms": 0}), ("c", {"jitter_ms": 0}))
    await parts.run_for(3.5)
    assert [len(batch) for _, batch in parts.handed] == [3, 3, 3]
    assert COALESCE_MS > 0


async def test_a_slot_reached_later_than_max_late_is_skipped_as_late_and_not_handed_on() -> None:
    parts = Parts(("late", {"jitter_ms": 0, "max_late_ms": 500}))
    parts.timer.start(parts.registry.all(), parts.clock.now_ms())
    task = asyncio.ensure_future(parts.timer.run())
    await asyncio.sleep(1.5)  # slot +1 s handed on
    parts.clock.jump_ms = 1_700  # the wall clock leaps while the timer waits for slot +2 s
    await asyncio.sleep(0.6)  # it wakes at +2 s of loop time, +3.7 s of wall time
    parts.timer.stop()
    await task
    assert [batch for _, batch in parts.handed] == [[("late", START_MS + 1000, START_MS + 1000)]]
    # +2 s is 1.7 s late and +3 s 0.7 s: both past max_late_ms, neither claimed.
    assert parts.skips.slots == [("late", START_MS + 2000, "late"), ("late", START_MS + 3000, "late")]
