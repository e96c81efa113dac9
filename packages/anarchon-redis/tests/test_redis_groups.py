"""Concurrency groups in Redis: the reference's answers, the keys in the heartbeats' slot, the notices.

The conformance suite's ``GroupTests`` run on one server and on the
cluster; here what only Redis has. The differential runs random sequences of
heartbeat changes, limits set and removed, and ``places()`` calls (asks,
leaves with right and stale tokens, take-overs with new tokens, asks in
several groups at once, jobs whose names tie a slot) against the reference
:class:`~anarchon.memory.MemoryStore`, and every answer and every
``groups()`` must agree. Redis judges on its own clock (``TIME``), so each
heartbeat record is set far from now: alive, expired, or absent.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from redis.crc import key_slot
from redis.exceptions import ResponseError

from anarchon.groups import GroupState, Place
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon_conformance.testing import random_places
from anarchon_redis import RedisBackend

from .conftest import Store

GROUPS = ("g1", "g2")
#: Names that tie on one slot: "a" before "a-b" before "ab" (Python's order, and the members' bytes).
JOBS = ("a", "a-b", "ab", "b_1")
INSTANCES = ("i0", "i1", "i2")
#: Heartbeat records this far from the server's now: no test outlives them.
FAR_MS = 10**9


async def _set_record(backend: RedisBackend, store: MemoryStore, instance: str, state: str, now: int) -> None:
    """The instance's heartbeat record alive, expired, or gone, on both sides."""
    client = backend._redis()
    if state == "none":
        await client.zrem(backend._keys.instances, instance)
        store._alive.pop(instance, None)
        return
    until = now + FAR_MS if state == "alive" else now - FAR_MS
    await client.zadd(backend._keys.instances, {instance: until})
    store._alive[instance] = until


@pytest.mark.parametrize("seed", range(6))
async def test_same_answers_as_the_memory_store(store: Store, seed: int) -> None:
    rng = random.Random(seed)
    backend = await store.backend()
    now = await backend.now_ms()
    reference = MemoryStore(clock=lambda: now)
    mem = MemoryBackend(reference)
    for instance in INSTANCES:
        await _set_record(backend, reference, instance, "alive", now)
    held: list[Place] = []
    compared = 0
    for _ in range(150):
        op = rng.choices(["record", "limit", "places"], [2, 2, 10])[0]
        name = rng.choice(INSTANCES)
        if op == "record":
            await _set_record(backend, reference, name, rng.choice(["alive", "alive", "expired", "none"]), now)
        elif op == "limit":
            group, limit = rng.choice(GROUPS), rng.choice([None, 1, 2, 3])
            await mem.set_group(group, limit)
            await backend.set_group(group, limit)
        else:
            leave, take = random_places(rng, held, name, groups=GROUPS, jobs=JOBS, slot_ms=1_000_000)
            got = await backend.places(leave, take)
            assert got == await mem.places(leave, take), (leave, take)
            compared += bool(take)
        want: list[GroupState] = await mem.groups()
        assert await backend.groups() == want
    assert compared > 10


async def test_every_group_key_is_in_the_heartbeat_keys_slot(single: Store) -> None:
    backend = await single.backend()
    keys = backend._keys
    group = keys.group("reports")
    slot = key_slot(keys.instances.encode())
    for key in (*keys.groups, group.places, group.waiting, group.running, group.holders):
        assert key.startswith(single.prefix), f"{key} is not under the prefix: cleanup by prefix would miss it"
        assert key_slot(key.encode()) == slot, f"{key} is not in the slot of {keys.instances}"
    with pytest.raises(ValueError, match="group"):
        keys.group("bad}name")


async def _message(pubsub: Any) -> str:
    while True:
        message = await pubsub.get_message(timeout=1.0)
        if message is not None and message["type"] == "message":
            data = message["data"]
            return data.decode() if isinstance(data, bytes) else str(data)


async def test_a_freed_place_and_a_set_limit_are_published_and_a_stale_leave_is_not(single: Store) -> None:
    backend = await single.backend()
    now = await backend.now_ms()
    client = backend._redis()
    await client.zadd(backend._keys.instances, {"a": now + FAR_MS, "b": now + FAR_MS})
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(backend._keys.groups_channel)
        await backend.set_group("g", 1)
        assert await asyncio.wait_for(_message(pubsub), 10) == "g"
        held, mine = Place("g", "j", 1000, False, "ta", "a"), Place("g", "j", 2000, False, "tb", "b")
        assert await backend.places([], [held]) == [True]
        assert await backend.places([], [mine]) == [False]
        stale = Place("g", "j", 1000, False, "other", "a")
        assert await backend.places([stale], []) == []
        assert await backend.places([held], []) == []  # no ask: b's entry gets the place when b asks
        assert await asyncio.wait_for(_message(pubsub), 10) == "g", "a freed place was not told"
        assert await pubsub.get_message(timeout=0.3) is None, "a stale leave was told"
        # a's holds the place again; a dies; b's ask is not a's: the place goes to c's older waiting entry,
        # which no ask of the call named, so c is told
        await client.zadd(backend._keys.instances, {"c": now + FAR_MS})
        assert await backend.places([mine], [held]) == [True]
        older = Place("g", "j", 500, False, "tc", "c")
        assert await backend.places([], [older]) == [False]
        await client.zadd(backend._keys.instances, {"a": now - FAR_MS})
        assert await backend.places([], [mine]) == [False], "the younger entry got the place of the older one"
        assert await asyncio.wait_for(_message(pubsub), 10) == "g", "a place given to another's entry was not told"
        assert await backend.groups() == [GroupState("g", 1, 1, 1, 2000)]
    finally:
        await pubsub.aclose()


async def test_watch_groups_rings_once_subscribed_and_at_each_notice(single: Store) -> None:
    backend = await single.backend()
    rings: asyncio.Queue[None] = asyncio.Queue()
    watch = asyncio.ensure_future(backend.watch_groups(lambda: rings.put_nowait(None)))
    try:
        await asyncio.wait_for(rings.get(), 10)  # its subscription was made
        await backend.set_group("g", 2)
        await asyncio.wait_for(rings.get(), 10)
        assert not watch.done()
    finally:
        watch.cancel()
        await asyncio.wait([watch])


async def test_a_limit_that_is_not_a_number_stops_places_before_any_write(single: Store) -> None:
    backend = await single.backend()
    now = await backend.now_ms()
    client = backend._redis()
    await client.zadd(backend._keys.instances, {"a": now + FAR_MS})
    await client.hset(backend._keys.groups[0], "g", "lots")
    with pytest.raises(ResponseError, match="limit of group g"):
        await backend.places([], [Place("g", "j", 1000, False, "t", "a")])
    assert not await client.exists(backend._keys.group("g").places), "the refused call wrote an entry"
