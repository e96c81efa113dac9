"""Every attempt of a slot in PostgreSQL: migration 12 from a version-11 schema, and a look at one.

The rule itself (a take-over keeps the attempt it replaces, finish keeps them,
a hand-over adds none) is the conformance suite's AttemptTests; these are what
only this backend can get wrong.
"""

from __future__ import annotations

import json

import asyncpg  # type: ignore[import-untyped]
import pytest

from anarchon.claims import Grant
from anarchon.run import Run, RunStatus, ms_to_datetime
from anarchon_postgres import SCHEMA_VERSION, PostgresBackend

pytestmark = pytest.mark.postgres

SLOT = 1_800_000_000_000


def _done(grant: Grant) -> Run:
    return grant.finished(RunStatus.SUCCEEDED, started_ms=grant.started_at_ms, finished_ms=grant.started_at_ms + 5)


async def _as_version_11(pg_dsn: str, schema: str) -> None:
    """The schema as release 11 left it: runs without earlier, no group tables, no version 12 recorded."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(f'ALTER TABLE "{schema}".runs DROP COLUMN earlier')
        await conn.execute(f'DROP TABLE "{schema}".group_places, "{schema}".group_limits')  # version 15's
        await conn.execute(f'DELETE FROM "{schema}".schema_version WHERE version >= 12')
    finally:
        await conn.close()


async def test_a_version_11_schema_is_migrated_and_its_runs_read_back_without_earlier_attempts(
    make_backend, pg_dsn, schema, make_job, make_claim, wait_until
):
    assert SCHEMA_VERSION == 15  # 13 and 14 replace functions only; 15's tables are dropped above
    old = await make_backend()
    job = make_job("older", lease_ms=300)
    (done,) = await old.claim([make_claim(job, SLOT, "a")])
    assert await old.finish(done.grant, _done(done.grant))
    (running,) = await old.claim([make_claim(job, SLOT + 1000, "a")])
    assert running.grant is not None
    await _as_version_11(pg_dsn, schema)

    look = PostgresBackend(pg_dsn, schema=schema)
    await look.start_read_only()
    try:
        assert (look.schema_version, look.needs_migration) == (11, True)
        seen = [(r.slot_ms, r.status, r.earlier) for r in await look.history("older")]
        assert seen == [(SLOT + 1000, RunStatus.RUNNING, ()), (SLOT, RunStatus.SUCCEEDED, ())], "a look at version 11"
    finally:
        await look.close()

    backend = await make_backend()
    assert backend.schema_version == SCHEMA_VERSION
    seen = [(r.slot_ms, r.status, r.earlier) for r in await backend.history("older")]
    assert seen == [(SLOT + 1000, RunStatus.RUNNING, ()), (SLOT, RunStatus.SUCCEEDED, ())]
    (taken,) = await wait_until(lambda: backend.take_over([job], "b"))
    assert taken.grant is not None and taken.grant.attempt == 2
    assert await backend.finish(taken.grant, _done(taken.grant))
    record = (await backend.history("older"))[0]
    assert (record.status, record.attempt, record.instance) == (RunStatus.SUCCEEDED, 2, "b")
    assert [(e.attempt, e.instance, e.fencing, e.started_at) for e in record.earlier] == [
        (1, "a", running.grant.fencing, ms_to_datetime(running.grant.started_at_ms))
    ]


async def test_history_reads_earlier_attempts_through_a_pool_that_decodes_jsonb(
    pg_dsn, schema, make_backend, make_job, make_claim, wait_until
):
    """A caller's pool may set a codec for jsonb: earlier then comes decoded, not as text."""

    async def init(conn: asyncpg.Connection) -> None:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")

    owner = await make_backend()
    job = make_job("codec", lease_ms=300)
    (won,) = await owner.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    (taken,) = await wait_until(lambda: owner.take_over([job], "b"))
    assert taken.grant is not None
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2, init=init)
    try:
        reader = await make_backend(pool=pool)
        (record,) = await reader.history("codec")
        assert [(e.attempt, e.instance) for e in record.earlier] == [(1, "a")]
    finally:
        await pool.close()
