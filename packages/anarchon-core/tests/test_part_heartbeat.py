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
