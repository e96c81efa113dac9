"""Concurrency groups in the SQLite file: the same answers as the reference, and the tables an older file gains.

The differential runs random sequences of beats, leaves, clock steps, limits
set and removed, and ``places()`` calls (asks, leaves with right and stale
tokens, take-overs with new tokens, asks in several groups at once) against
the reference :class:`~anarchon.memory.MemoryStore` and SQLite, on one clock;
every answer and every ``groups()`` must agree. The clock is replaced through
the backend's test hook, so heartbeats expire by steps, not by waiting.
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from anarchon.groups import GroupState, Place
from anarchon.liveness import RETAIN_DEAD_MS
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon_conformance.testing import random_places
from anarchon_sqlite import SQLiteBackend

NOW = 1_800_000_000_000
INSTANCES = 3
GROUPS = ("g1", "g2")
JOBS = ("a", "b", "c")


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.mark.parametrize("seed", range(30))
async def test_same_answers_as_the_memory_store(seed, tmp_path):
    rng = random.Random(seed)
    clock = Clock(NOW)
    store = MemoryStore(clock=clock)
    mem = MemoryBackend(store)
    sql = [SQLiteBackend(tmp_path / "groups.sqlite3") for _ in range(INSTANCES)]
    for backend in sql:
        backend._clock = clock
        await backend.start()
    mem_heart, sql_heart = mem.heart(), sql[0].heart()
    await sql_heart.open()
    held: list[Place] = []  # every place asked for, to leave or ask again
    compared = 0
    try:
        for _ in range(150):
            op = rng.choices(["beat", "leave", "tick", "limit", "places"], [5, 1, 4, 2, 10])[0]
            i = rng.randrange(INSTANCES)
            name = f"i{i}"
            if op == "beat":
                ttl = rng.choice([300, 1000, 5000])
                assert await sql_heart.beat(name, ttl) == await mem_heart.beat(name, ttl)
            elif op == "leave":
                await sql_heart.leave(name)
                await mem_heart.leave(name)
            elif op == "tick":
                clock.now += rng.choices([0, 100, 400, 1500, 6000, RETAIN_DEAD_MS + 1], [2, 4, 4, 3, 2, 1])[0]
            elif op == "limit":
                group, limit = rng.choice(GROUPS), rng.choice([None, 1, 2, 3])
                await mem.set_group(group, limit)
                await sql[i].set_group(group, limit)
            else:
                leave, take = random_places(rng, held, name, groups=GROUPS, jobs=JOBS, slot_ms=NOW)
                got = await sql[i].places(leave, take)
                assert got == await mem.places(leave, take), (leave, take)
                compared += bool(take)
            want: list[GroupState] = await mem.groups()
            assert await sql[rng.randrange(INSTANCES)].groups() == want
        assert compared > 10
    finally:
        await sql_heart.close()
        for backend in sql:
            await backend.close()


async def test_a_file_from_before_groups_gains_their_tables_when_opened(db_path):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    with sqlite3.connect(db_path) as raw:  # the file as a release before groups left it
        raw.execute("DROP TABLE anarchon_places")  # its indexes go with it
        raw.execute("DROP TABLE anarchon_group_limits")
    raw.close()
    await backend.start()
    heart = backend.heart()
    try:
        await heart.beat("a", 60_000)
        await backend.set_group("reports", 1)
        place = Place("reports", "job", 1000, False, "t", "a")
        assert await backend.places([], [place]) == [True]
        assert await backend.groups() == [GroupState("reports", 1, 1, 0, None)]
    finally:
        await heart.close()
        await backend.close()
    with sqlite3.connect(db_path) as raw:
        names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    raw.close()
    assert {"anarchon_group_limits", "anarchon_places", "anarchon_places_turn", "anarchon_places_by_holder"} <= names
