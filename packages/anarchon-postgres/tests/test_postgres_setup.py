"""Construction, URLs, secrets, schema creation under a crowd, pool ownership."""

from __future__ import annotations

import asyncio
import logging
import socket
from importlib.metadata import entry_points
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from anarchon.errors import BackendUnavailableError
from anarchon_postgres import SCHEMA_VERSION, PostgresBackend

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize(
    "bad",
    ["", "1abc", "a-b", "a b", 'x"; DROP TABLE jobs; --', "x.y", "pg_anything", "PG_Catalog", "a" * 64, None, 7],
)
def test_schema_names_are_checked(bad):
    with pytest.raises(ValueError, match="schema="):
        PostgresBackend(schema=bad)


@pytest.mark.parametrize("system", ["information_schema", "INFORMATION_SCHEMA", "pg_catalog", "pg_toast", "pg_temp_3"])
def test_system_schemas_are_refused(system):
    with pytest.raises(ValueError, match="system schema"):
        PostgresBackend(schema=system)


def test_declares_the_lease_tier():
    caps = PostgresBackend.capabilities
    assert (caps.lease, caps.history_ttl, caps.server_clock, caps.multi_process) == (True, True, True, True)
    assert PostgresBackend.name == "postgres"
    assert PostgresBackend.url_schemes == ("postgresql", "postgres")


def test_registered_through_the_entry_point():
    (ep,) = [ep for ep in entry_points(group="anarchon") if ep.name == "postgres"]
    assert ep.load().anarchon_register_backends() == [PostgresBackend]


def test_passwords_stay_out_of_repr():
    backend = PostgresBackend("postgresql://app:s3cr3t-pw@db.internal:5432/prod?sslmode=require")
    assert "s3cr3t-pw" not in repr(backend)
    assert "s3cr3t-pw" not in backend.dsn
    assert "app:***@db.internal" in repr(backend)


def test_from_url_takes_the_schema_from_the_query():
    backend = PostgresBackend.from_url("postgres://u:pw@h/db?schema=cron_x&application_name=web")
    assert backend.schema == "cron_x"
    assert backend.dsn == "postgres://u:***@h/db?application_name=web"
    assert PostgresBackend.from_url("postgresql://h/db").schema == "anarchon"
    with pytest.raises(ValueError, match="schema="):
        PostgresBackend.from_url("postgresql://h/db?schema=bad-name")


def test_timeout_must_be_positive():
    with pytest.raises(ValueError, match="timeout_ms"):
        PostgresBackend(timeout_ms=0)


def _with_password(dsn: str, password: str) -> str:
    parts = urlsplit(dsn)
    user = parts.username or "postgres"
    host = parts.hostname or "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}{port}"))


async def test_an_unreachable_server_fails_start_without_showing_the_password(caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = PostgresBackend(f"postgresql://app:hunter2-pw@127.0.0.1:{port}/x", timeout_ms=1000)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError) as info:
        await backend.start()
    assert "hunter2-pw" not in str(info.value)
    assert "app:***@127.0.0.1" in str(info.value)
    assert "hunter2-pw" not in caplog.text


async def test_twenty_instances_starting_at_once_create_the_schema_once(pg_dsn, schema, caplog):
    caplog.set_level(logging.INFO, logger="anarchon.postgres")
    password_dsn = _with_password(pg_dsn, "never-logged")  # trust auth ignores it
    backends = [PostgresBackend(password_dsn, schema=schema) for _ in range(20)]
    try:
        await asyncio.gather(*(b.start() for b in backends))
        conn = await asyncpg.connect(pg_dsn)
        try:
            versions = await conn.fetch(f'SELECT version FROM "{schema}".schema_version')
            tables = await conn.fetchval(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema
            )
        finally:
            await conn.close()
        assert [r["version"] for r in versions] == list(range(1, SCHEMA_VERSION + 1))
        # jobs, runs, schema_version; instances (migration 4); pauses, requests (5); registry (7);
        # schedules, schedule_log, schedule_counter (8); audit (11); group_limits, group_places (15)
        assert tables == 13
        assert caplog.text.count("migrated to version 1\n") == 1  # not "version 10"
        assert "never-logged" not in caplog.text
    finally:
        await asyncio.gather(*(b.close() for b in backends))


async def test_a_schema_name_needing_quotes_works(pg_dsn, make_job, make_claim):
    name = "Anarchon_MixedCase"
    backend = PostgresBackend(pg_dsn, schema=name)
    try:
        await backend.start()
        await backend.start()  # idempotent
        assert (await backend.claim([make_claim(make_job("q"), 1000)]))[0].won
    finally:
        await backend.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await conn.close()


async def test_a_newer_schema_version_is_accepted(make_backend, pg_dsn, schema, make_job, make_claim):
    await make_backend()
    conn = await asyncpg.connect(pg_dsn)
    await conn.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES (99)')
    await conn.close()
    later = await make_backend()  # a rolling upgrade: the old release keeps working
    assert (await later.claim([make_claim(make_job("v"), 1000)]))[0].won


async def test_the_callers_pool_is_used_and_never_closed(pg_dsn, schema, make_job, make_claim):
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        backend = PostgresBackend(pool=pool, schema=schema)
        assert "caller's pool" in repr(backend)
        await backend.start()
        assert (await backend.claim([make_claim(make_job("own"), 1000)]))[0].won
        await backend.close()
        assert not pool._closed
        assert await pool.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


async def test_calls_before_start_say_what_to_do():
    with pytest.raises(RuntimeError, match="start"):
        await PostgresBackend().history("x")


async def test_a_schema_at_version_1_is_migrated_on_start(make_backend, pg_dsn, schema, make_job, make_claim):
    """Version 2 replaces the claim function (a new result column): its DROP must match version 1's."""
    from anarchon_postgres._schema import _MIGRATIONS, quote_schema

    conn = await asyncpg.connect(pg_dsn)
    try:
        quoted = quote_schema(schema)
        async with conn.transaction():
            await conn.execute(f"CREATE SCHEMA {quoted}")
            await conn.execute(
                f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY, applied_at "
                "timestamptz NOT NULL DEFAULT now())"
            )
            await conn.execute(_MIGRATIONS[0](quoted))
            await conn.execute(f"INSERT INTO {quoted}.schema_version (version) VALUES (1)")
        backend = await make_backend()
        versions = [r["version"] for r in await conn.fetch(f"SELECT version FROM {quoted}.schema_version")]
    finally:
        await conn.close()
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    job = make_job("migrated", overlap="allow")
    (first,) = await backend.claim([make_claim(job, 1000)])
    (second,) = await backend.claim([make_claim(job, 3000)])
    assert first.won and second.won and second.grant is not None
    assert second.grant.previous_mark == 1000
