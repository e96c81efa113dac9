"""The lease keeper alone, on a clock the test drives: renewals every third of a lease, and a lease lost on time.

The keeper reads time from the :class:`~anarchon.clock.LoopClock` it is given
and waits with the event loop's timers; ``looptime`` fast-forwards the loop
whenever every task waits, so a lease of 30 s is renewed ten times in no time
at all, and every instant below is exact, not "about".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from anarchon import Claim, Grant, LoopClock, MemoryBackend, MemoryStore, Outcome, RunContext, hookimpl
from anarchon._active import ActiveRun, ActiveRuns
from anarchon._health import BackendHealth
from anarchon._keeper import LeaseKeeper, held_until
from anarchon._tasks import Tasks
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000
LEASE_MS = 3_000


class Backend(MemoryBackend):
    """The memory backend, noting when each renewal reached it, and able to refuse or stall them."""

    def __init__(self, store: MemoryStore, clock: LoopClock) -> None:
        super().__init__(store)
        self.clock = clock
        self.renewed_at: list[float] = []
        self.refuse = False
        self.stall: asyncio.Event | None = None
        self.fail = 0

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        self.renewed_at.append(self.clock.monotonic())
        if self.stall is not None:
            await self.stall.wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the link is down")
        if self.refuse:
            return [False for _ in grants]
        return await super().renew(grants)


class Losses:
    def __init__(self, clock: LoopClock) -> None:
        self.clock = clock
        self.at: list[tuple[float, str]] = []
        self.lost = asyncio.Event()

    @hookimpl
    def anarchon_lease_lost(self, reason: str) -> None:
        self.at.append((self.clock.monotonic(), reason))
        self.lost.set()


class Parts:
    def __init__(self) -> None:
        self.clock = LoopClock(START_MS)
        self.store = MemoryStore(clock=self.clock.now_ms)
        self.backend = Backend(self.store, self.clock)
        self.losses = Losses(self.clock)
        plugins = PluginManager([self.losses], entry_points=False)
        observers = Observers(plugins, scheduler=None)  # type: ignore[arg-type]  # no hook here reads it
        self.active = ActiveRuns()
        self.keeper = LeaseKeeper(
            self.backend, self.clock, self.active, BackendHealth(self.backend, observers), observers, Tasks()
        )

    async def granted(self) -> ActiveRun:
        """A run won now, held as the executor holds one, and handed to the keeper a third of a lease later."""
        job = make_job(self.backend, "renewed", lease_ms=LEASE_MS, overlap="allow")
        sent = self.clock.monotonic()
        now = self.clock.now_ms()
        claim = Claim(job, now - now % 1000, "i1", "t1", now)
        (result,) = await self.backend.claim([claim])
        assert result.outcome is Outcome.WON and result.grant is not None
        active = ActiveRun(
            job, result.grant, RunContext(job, result.grant.slot_ms, "i1"), held_until(sent, LEASE_MS), sent=sent
        )
        self.active[active.key] = active
        self.keeper.watch(active, sent + LEASE_MS / 3000)
        return active


async def test_a_held_lease_is_renewed_every_third_of_it() -> None:
    parts = Parts()
    active = await parts.granted()
    await asyncio.sleep(10.5)
    assert parts.backend.renewed_at == pytest.approx([1.0 * i for i in range(1, 11)], abs=1e-6)
    assert not active.context.lease_lost and parts.losses.at == []
    assert active.lease_deadline == pytest.approx(10.0 + held_until(0, LEASE_MS), abs=1e-6)


async def test_a_refused_renewal_loses_the_lease_at_once() -> None:
    parts = Parts()
    active = await parts.granted()
    parts.backend.refuse = True
    await parts.losses.lost.wait()
    ((at, reason),) = parts.losses.at
    assert at == pytest.approx(1.0, abs=1e-6) and "took the run over" in reason
    assert active.context.lease_lost


async def test_a_renewal_without_answer_loses_the_lease_at_its_local_deadline_not_later() -> None:
    parts = Parts()
    active = await parts.granted()
    parts.backend.stall = asyncio.Event()  # the link holds every call
    await parts.losses.lost.wait()
    ((at, _),) = parts.losses.at
    # Granted at 0: presumed lost a tenth of the lease early, before any backup may take it.
    assert at == pytest.approx(held_until(0, LEASE_MS), abs=1e-3)
    assert at < LEASE_MS / 1000
    assert active.context.lease_lost
    parts.backend.stall.set()


async def test_a_failed_renewal_is_tried_again_within_a_tenth_of_a_second_and_keeps_the_lease() -> None:
    parts = Parts()
    active = await parts.granted()
    parts.backend.fail = 2
    await asyncio.sleep(2.5)
    first, second, third, *rest = parts.backend.renewed_at
    assert first == pytest.approx(1.0, abs=1e-6)
    assert second - first == pytest.approx(0.1, abs=1e-6) and third - second == pytest.approx(0.1, abs=1e-6)
    assert rest == pytest.approx([third + 1.0], abs=1e-6)  # back to every third of the lease
    assert not active.context.lease_lost
    assert active.lease_deadline == pytest.approx(rest[-1] + held_until(0, LEASE_MS), abs=1e-6)


async def test_the_keeper_ends_when_no_run_holds_a_lease() -> None:
    parts = Parts()
    active = await parts.granted()
    await asyncio.sleep(1.5)
    parts.active.discard(active)
    await asyncio.sleep(5)
    assert len(parts.backend.renewed_at) == 1  # the run ended between the first and the second renewal
