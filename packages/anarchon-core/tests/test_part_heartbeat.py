"""The heartbeat alone, over the memory backend's heart: what it holds, when it gives up, whom it reports dead.

The heartbeat runs in a thread with an event loop of its own and reads the
real monotonic clock, so these tests keep real time; they never sleep for a
fixed window, they await what the heartbeat itself signals (its first
acknowledged beat, its report of the dead).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from anarchon import Beat, Heart, MemoryBackend, MemoryStore
from anarchon.heartbeat import Heartbeat

PERIOD_MS, TTL_MS = 50, 300


class Dead:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.event = asyncio.Event()

    def __call__(self, dead: Mapping[str, int]) -> None:
        self.seen.update(dead)
        self.event.set()


class Broken(Heart):
    async def open(self) -> None:
        pass

    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        raise ConnectionError("the store is away")

    async def leave(self, instance: str) -> None:
        pass

    async def close(self) -> None:
        pass


def _heartbeat(store: MemoryStore, instance: str, dead: Dead) -> Heartbeat:
    return Heartbeat(MemoryBackend(store).heart(), instance, on_dead=dead, period_ms=PERIOD_MS, ttl_ms=TTL_MS)


async def test_claims_sent_after_the_first_acknowledged_beat_are_held_and_earlier_ones_are_not() -> None:
    before = time.monotonic()
    beat = _heartbeat(MemoryStore(), "i1", Dead())
    try:
        assert await beat.start(timeout_s=5)
        after = time.monotonic()
        assert beat.beating()
        assert beat.held(after) and not beat.held(before)
    finally:
        await beat.stop(leave=True)


async def test_a_heart_that_never_answers_fails_the_start_and_holds_nothing() -> None:
    beat = Heartbeat(Broken(), "i1", on_dead=Dead(), period_ms=PERIOD_MS, ttl_ms=TTL_MS)
    try:
        assert not await beat.start(timeout_s=0.3)
        assert not beat.beating() and not beat.held(time.monotonic())
    finally:
        await beat.stop(leave=False)


async def test_an_instance_that_leaves_is_reported_dead_to_the_others_at_their_next_beat() -> None:
    store = MemoryStore()
    dead = Dead()
    leaving = _heartbeat(store, "leaving", Dead())
    staying = _heartbeat(store, "staying", dead)
    try:
        assert await leaving.start(timeout_s=5) and await staying.start(timeout_s=5)
        assert dead.seen == {}
        await leaving.stop(leave=True)  # expires its record at once
        await asyncio.wait_for(dead.event.wait(), 5)
        assert set(dead.seen) == {"leaving"}
    finally:
        await staying.stop(leave=True)


class _Telling(Broken):
    """A heart whose beats tell a next expiry (only its class attribute matters to the pace)."""

    tells_next_expiry = True


def _paced(heart: Heart, busy: bool) -> Heartbeat:
    return Heartbeat(heart, "i1", on_dead=Dead(), period_ms=100, idle_period_ms=400, busy=lambda: busy)


def test_an_instance_holding_no_run_beats_at_the_idle_pace_and_one_holding_runs_at_the_full_pace() -> None:
    sent = time.monotonic()
    assert _paced(_Telling(), busy=False)._next_beat(sent, Beat()) == sent + 0.4
    assert _paced(_Telling(), busy=True)._next_beat(sent, Beat()) == sent + 0.1


def test_a_heart_that_does_not_tell_the_next_expiry_keeps_the_full_pace_even_when_idle() -> None:
    sent = time.monotonic()
    assert _paced(Broken(), busy=False)._next_beat(sent, Beat(next_expiry_ms=5)) == sent + 0.1


def test_a_beat_is_aimed_just_after_the_next_expiry_when_it_comes_before_the_pace() -> None:
    sent = time.monotonic()
    at = _paced(_Telling(), busy=False)._next_beat(sent, Beat(next_expiry_ms=150))
    after = time.monotonic()
    assert sent + 0.15 < at <= after + 0.15 + 0.01 + 1e-9, "not aimed just after the expiry"
    assert _paced(_Telling(), busy=False)._next_beat(sent, Beat(next_expiry_ms=1000)) == sent + 0.4
    # An expiry that is due now still leaves a gap between two beats.
    late = time.monotonic() + 5  # a beat "sent" later than the expiry it would be aimed at
    assert _paced(_Telling(), busy=True)._next_beat(late, Beat(next_expiry_ms=0)) == late + 0.02


async def test_an_idle_instance_reports_a_death_at_the_expiry_not_at_its_own_pace() -> None:
    """The survivor beats every 5 s when idle, yet reports the other's death soon after its 0.6 s TTL ran out.

    A third instance beats at the full pace, so the store is never silent
    (:func:`anarchon.liveness.after_silence`) while the survivor waits.
    """
    store = MemoryStore()
    dead = Dead()

    def full_pace(name: str) -> Heartbeat:
        return Heartbeat(MemoryBackend(store).heart(), name, on_dead=Dead(), period_ms=PERIOD_MS, ttl_ms=600)

    keeper, dying = full_pace("keeper"), full_pace("dying")
    survivor = Heartbeat(
        MemoryBackend(store).heart(), "survivor", on_dead=dead, ttl_ms=600, busy=lambda: False, idle_period_ms=5000
    )
    try:
        assert await keeper.start(timeout_s=5) and await dying.start(timeout_s=5)
        assert await survivor.start(timeout_s=5)
        await dying.stop(leave=False)  # as after kill -9: the record expires by itself
        # At its own pace the survivor's next beat would come 5 s after its first.
        await asyncio.wait_for(dead.event.wait(), 3)
        assert "dying" in dead.seen
    finally:
        await survivor.stop(leave=True)
        await keeper.stop(leave=True)
