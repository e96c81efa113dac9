"""The heartbeat in PostgreSQL: its table comes with the schema, its connection heals, its rule holds in SQL.

The rule itself (a dead owner's run is taken over, a live one's is not, no
record counts as alive) is the conformance suite's LivenessTests; these are
what only this backend can get wrong.
"""

from __future__ import annotations

import asyncpg
import pytest

from anarchon_postgres import SCHEMA_VERSION, PostgresBackend
from anarchon_postgres._heart import PostgresHeart
from anarchon_postgres._schema import migration_script

pytestmark = pytest.mark.postgres

TTL_MS = 400


async def _seen_dead(b_heart: PostgresHeart, wait_until) -> None:
    """Wait until ``b``'s beats report ``a`` dead (its record lapsed)."""

    async def a_dead() -> bool:
        return "a" in (await b_heart.beat("b", TTL_MS)).dead

    await wait_until(a_dead)


def _heart(backend: PostgresBackend) -> PostgresHeart:
    heart = backend.heart()
    assert isinstance(heart, PostgresHeart)
    return heart


async def test_a_version_3_schema_gets_the_heartbeat_table_on_start(
    pg_dsn, schema, make_backend, make_job, make_claim, schema_at
):
    await schema_at(schema, 3)
    script = migration_script(schema, 3)
    assert f'CREATE TABLE "{schema}".instances' in script and f'CREATE TABLE "{schema}".runs' not in script
    backend = await make_backend()
    # 4: instances; 5: pauses; 6: finish_many; 7: registry; 8: schedules; 9: fencing floor; 10: schedule NOTIFY;
    # 11: audit; 12: runs.earlier; 13: the claim functions notify each decided slot; 14: silence condemns nobody;
    # 15: concurrency groups
    assert backend.schema_version == SCHEMA_VERSION == 15
    heart = _heart(backend)
    await heart.open()
    try:
        assert (await heart.beat("i1", TTL_MS)).dead == {}
        assert (await backend.claim([make_claim(make_job("after"), 1000, "i1")]))[0].won
    finally:
        await heart.close()


async def test_read_only_start_creates_no_heartbeat_table(pg_dsn, schema, make_backend, schema_at):
    await schema_at(schema, 3)
    reader = PostgresBackend(pg_dsn, schema=schema)
    await reader.start_read_only()
    try:
        assert reader.schema_version == 3 and reader.needs_migration
        conn = await asyncpg.connect(pg_dsn)
        try:
            found = await conn.fetchval("SELECT to_regclass($1)", f'"{schema}".instances')
        finally:
            await conn.close()
        assert found is None, "a read-only start created the heartbeat table"
    finally:
        await reader.close()


async def test_the_heart_connects_again_after_its_session_is_killed(backend, pg_dsn, wait_until):
    heart = _heart(backend)
    await heart.open()
    try:
        await heart.beat("i1", TTL_MS)
        assert heart._conn is not None
        pid = heart._conn.get_server_pid()
        conn = await asyncpg.connect(pg_dsn)
        try:
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)

            async def gone() -> bool:
                return not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid)

            await wait_until(gone)
        finally:
            await conn.close()
        failures = 0
        for _ in range(3):  # the beat that finds the session dead fails; the next connects anew
            try:
                await heart.beat("i1", TTL_MS)
                break
            # The killed session's end can reach asyncpg while the next query is being sent: it then
            # says InternalClientError ("another operation is in progress", seen once in CI against
            # a container's server). The heart drops the connection on it as on the others.
            except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError):
                failures += 1
        assert failures <= 1
        assert heart._conn is not None and heart._conn.get_server_pid() != pid
    finally:
        await heart.close()


async def test_the_heart_commits_without_waiting_for_the_wal(backend):
    heart = _heart(backend)
    await heart.open()
    try:
        assert heart._conn is not None
        assert await heart._conn.fetchval("SHOW synchronous_commit") == "off"
    finally:
        await heart.close()


async def test_a_callers_pool_gets_no_heartbeat(pg_dsn, schema):
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1)
    try:
        backend = PostgresBackend(pool=pool, schema=schema)
        assert backend.heart() is None
    finally:
        await pool.close()


@pytest.mark.parametrize("owner_alive", [False, True])
async def test_a_batch_of_claims_judges_each_older_runs_owner(
    make_backend, make_job, make_claim, wait_until, owner_alive
):
    """Many jobs due together go through claim_batch, which reads the dead owners once per batch."""
    a_backend, b_backend = await make_backend(), await make_backend()
    jobs = [make_job(f"batch-{n}", overlap="skip") for n in range(3)]
    a_heart, b_heart = _heart(a_backend), _heart(b_backend)
    await a_heart.open()
    await b_heart.open()
    try:
        await a_heart.beat("a", TTL_MS)
        first = await a_backend.claim([make_claim(j, 1000, "a") for j in jobs])
        assert all(r.won for r in first)
        if owner_alive:
            await a_heart.beat("a", 60_000)  # alive for the rest of the test
        else:
            await a_heart.close()

            await _seen_dead(b_heart, wait_until)
        second = await b_backend.claim([make_claim(j, 2000, "b") for j in jobs])
        if owner_alive:
            assert [r.outcome.name for r in second] == ["SKIPPED"] * 3, "a live owner's runs did not make overlap"
        else:
            assert [r.outcome.name for r in second] == ["WON"] * 3, "a dead owner's runs made the next slots skip"
            assert [r.grant.supersedes for r in second if r.grant] == [1000] * 3
            for job in jobs:
                (old,) = [run for run in await b_backend.history(job.name) if run.slot_ms == 1000]
                assert old.status.value == "abandoned"
    finally:
        await a_heart.close()
        await b_heart.close()


@pytest.mark.parametrize("overlap", ["allow", "skip"])
@pytest.mark.parametrize("owner_alive", [False, True])
async def test_a_lone_claim_judges_the_older_runs_owner(
    make_backend, make_job, make_claim, wait_until, owner_alive, overlap
):
    """One claim goes through claim(): its fast path (overlap allow) or its general path (skip).

    Each path writes the owner rule into its own statement, so each gets
    its own case: a dead owner's running run is abandoned and superseded, a
    live one's is left running (and, with ``skip``, makes the claim skipped).
    """
    a_backend, b_backend = await make_backend(), await make_backend()
    job = make_job(f"lone-{overlap}", overlap=overlap)
    a_heart, b_heart = _heart(a_backend), _heart(b_backend)
    await a_heart.open()
    await b_heart.open()
    try:
        await a_heart.beat("a", TTL_MS)
        (first,) = await a_backend.claim([make_claim(job, 1000, "a")])
        assert first.won
        if owner_alive:
            await a_heart.beat("a", 60_000)
        else:
            await a_heart.close()

            await _seen_dead(b_heart, wait_until)
        (second,) = await b_backend.claim([make_claim(job, 2000, "b")])
        (old,) = [run for run in await b_backend.history(job.name) if run.slot_ms == 1000]
        if owner_alive:
            assert second.outcome.name == ("WON" if overlap == "allow" else "SKIPPED")
            assert old.status.value == "running", "a live owner's run was abandoned"
        else:
            assert second.won, "a dead owner's run made the next slot skip"
            assert second.grant is not None and second.grant.supersedes == 1000
            assert old.status.value == "abandoned"
    finally:
        await a_heart.close()
        await b_heart.close()


@pytest.mark.parametrize("owner_alive", [False, True])
async def test_a_late_claim_is_skipped_only_behind_a_live_owners_run(
    make_backend, make_job, make_claim, wait_until, owner_alive
):
    """A slot claimed after a newer one was decided is recorded skipped only if a live run overlapped it.

    Slot 1000 runs on ``a``; 3000 is skipped behind it (``a`` alive then);
    then 2000 arrives late. With ``a`` still alive, 2000 was overlapped all
    along and is recorded skipped; once ``a`` is dead its run no longer
    counts, and the late slot is lost with no record.
    """
    a_backend, b_backend = await make_backend(), await make_backend()
    job = make_job("late", overlap="skip")
    a_heart, b_heart = _heart(a_backend), _heart(b_backend)
    await a_heart.open()
    await b_heart.open()
    try:
        await a_heart.beat("a", 60_000)
        assert (await a_backend.claim([make_claim(job, 1000, "a")]))[0].won
        assert (await b_backend.claim([make_claim(job, 3000, "b")]))[0].outcome.name == "SKIPPED"
        if not owner_alive:
            await a_heart.beat("a", TTL_MS)  # its record lapses in TTL_MS: the owner is dead
            await a_heart.close()

            await _seen_dead(b_heart, wait_until)
        (late,) = await b_backend.claim([make_claim(job, 2000, "b")])
        slots = {run.slot_ms: run.status.value for run in await b_backend.history(job.name)}
        if owner_alive:
            assert late.outcome.name == "SKIPPED" and slots.get(2000) == "skipped"
        else:
            assert late.outcome.name == "LOST" and 2000 not in slots
    finally:
        await a_heart.close()
        await b_heart.close()
