"""Concurrency groups in PostgreSQL: migration 15 from a version-14 schema, a look at one, the notices, the order.

The rule itself (places in slot order up to the limit, a dead holder's place
freed) is the conformance suite's GroupTests; these are what only this
backend can get wrong.
"""

from __future__ import annotations

import asyncio

import pytest

from anarchon.groups import GroupState, Place
from anarchon_postgres import SCHEMA_VERSION, PostgresBackend
from anarchon_postgres._heart import PostgresHeart
from anarchon_postgres._schema import migration_script

pytestmark = pytest.mark.postgres

TTL_MS = 60_000


async def _beating(backend: PostgresBackend, instance: str) -> PostgresHeart:
    heart = backend.heart()
    assert isinstance(heart, PostgresHeart)
    await heart.open()
    await heart.beat(instance, TTL_MS)
    return heart


def _place(job: str, slot_ms: int, instance: str = "i1", group: str = "g") -> Place:
    return Place(group, job, slot_ms, False, f"{instance}-{job}-{slot_ms}", instance)


async def test_a_version_14_schema_gets_the_group_tables_on_start_and_a_look_finds_no_group(
    pg_dsn, schema, make_backend, schema_at
):
    assert SCHEMA_VERSION == 15
    await schema_at(schema, 14)
    script = migration_script(schema, 14)
    assert f'CREATE TABLE "{schema}".group_places' in script and f'CREATE TABLE "{schema}".runs' not in script
    look = PostgresBackend(pg_dsn, schema=schema)
    await look.start_read_only()
    try:
        assert (look.schema_version, look.needs_migration) == (14, True)
        assert await look.groups() == [], "a look at a version-14 schema must find no group and make nothing"
    finally:
        await look.close()
    backend = await make_backend()
    assert backend.schema_version == SCHEMA_VERSION
    await backend.set_group("reports", 2)
    assert await backend.groups() == [GroupState("reports", 2, 0, 0)]


async def test_turns_go_in_byte_order_of_job_names_whatever_the_collation(make_backend):
    """The reference sorts in Python (code points): ``B`` before ``_`` before ``a``, ``-`` before all three."""
    backend = await make_backend()
    heart = await _beating(backend, "i1")
    try:
        await backend.set_group("g", 1)
        jobs = ["a", "_", "B", "-"]  # one slot: the job name decides the turn
        order: list[str] = []
        for _ in jobs:  # the holder leaves, and the place goes to the next in turn
            rest = [j for j in jobs if j not in order]
            left = [_place(order[-1], 1000)] if order else []
            answers = await backend.places(left, [_place(j, 1000) for j in rest])
            assert answers.count(True) == 1, answers
            order.append(rest[answers.index(True)])
        assert order == sorted(jobs) == ["-", "B", "_", "a"]
    finally:
        await heart.close()


async def test_a_freed_place_and_a_set_limit_are_heard_by_the_other_instances(make_backend):
    a, b = await make_backend(), await make_backend()
    heard = asyncio.Event()
    watch = asyncio.ensure_future(a.watch_groups(heard.set))
    heart = await _beating(b, "ib")
    try:
        await asyncio.wait_for(heard.wait(), 5)  # the subscription made: told once, as after a lost connection
        heard.clear()
        await b.set_group("g", 1)
        await asyncio.wait_for(heard.wait(), 5)
        heard.clear()
        held = _place("j", 1000, "ib")
        assert await b.places([], [held]) == [True]
        await asyncio.sleep(0.2)
        assert not heard.is_set(), "an ask freed nothing, yet was told"
        await b.places([Place("g", "j", 1000, False, "stale", "ib")], [])
        await asyncio.sleep(0.2)
        assert not heard.is_set(), "a leave with another token freed nothing, yet was told"
        await b.places([held], [])
        await asyncio.wait_for(heard.wait(), 5)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        await heart.close()


async def test_calls_sharing_groups_in_any_order_queue_up_and_keep_the_limit(make_backend):
    backends = [await make_backend() for _ in range(4)]
    hearts = [await _beating(b, f"i{n}") for n, b in enumerate(backends)]
    groups = ["g0", "g1", "g2"]
    try:
        for group in groups:
            await backends[0].set_group(group, 2)

        async def asks(n: int) -> None:
            mine = [_place(f"j{n}", slot, f"i{n}", group) for slot in range(0, 40_000, 1000) for group in groups]
            for i in range(0, len(mine), 6):
                part = mine[i : i + 6][:: -1 if n % 2 else 1]  # the groups in another order each time
                held = [p for p, ok in zip(part, await backends[n].places([], part), strict=True) if ok]
                await backends[n].places(held[:1], [])

        await asyncio.gather(*(asks(n) for n in range(4)))
        states = {s.name: s for s in await backends[0].groups()}
        assert all(states[g].running <= 2 for g in groups), states
    finally:
        for heart in hearts:
            await heart.close()
