"""Stored-schedule changes notified (migration 10): the channel, the NOTIFY at commit, the listener's faults.

The conformance suite's ``ScheduleNotifyTests`` check the wait itself; here
what only PostgreSQL has: the channel derived from the schema, a refused
change notifying nothing, a schema of the release before brought to notify,
the listening session killed, and a caller's pool, on which nothing listens.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid

import asyncpg
import pytest

import anarchon.listener
from anarchon.errors import ScheduleConflictError
from anarchon_postgres import PostgresBackend
from anarchon_postgres._schema import _MIGRATIONS, quote_schema, render_sql, schedules_channel

pytestmark = pytest.mark.postgres


def _record(cron: str = "0 * * * *") -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


def test_the_schedules_channel_is_a_plain_name_of_at_most_63_characters_one_per_schema() -> None:
    assert schedules_channel("anarchon") == "anarchon_schedules_anarchon"
    assert schedules_channel("Billing_EU") == "anarchon_schedules_Billing_EU"  # the case is kept
    long_a, long_b = "a" * 62 + "x", "a" * 62 + "y"
    for name in (long_a, long_b):
        assert re.fullmatch(r"[A-Za-z0-9_]{1,63}", schedules_channel(name)), schedules_channel(name)
    assert schedules_channel(long_a) != schedules_channel(long_b)
    for bad in ("a b", "x'; DROP TABLE y; --", "pg_catalog", ""):
        with pytest.raises(ValueError, match="schema="):
            schedules_channel(bad)
    function = render_sql("schedule_put_function.sql", quote_schema("app_cron"))
    assert "PERFORM pg_notify('anarchon_schedules_app_cron', v_counter::text);" in function


async def _listen(pg_dsn: str, schema: str) -> tuple[asyncpg.Connection, asyncio.Queue[str]]:
    heard: asyncio.Queue[str] = asyncio.Queue()
    conn = await asyncpg.connect(pg_dsn)
    await conn.add_listener(schedules_channel(schema), lambda *args: heard.put_nowait(args[3]))
    return conn, heard


async def test_each_schedule_change_is_notified_with_its_revision_and_a_refused_one_is_not(
    pg_dsn: str, schema: str, make_backend
) -> None:
    backend = await make_backend()
    conn, heard = await _listen(pg_dsn, schema)
    try:
        first = await backend.put_schedule("s", _record(), expect=0, change="{}")
        with pytest.raises(ScheduleConflictError):
            await backend.put_schedule("s", _record("5 * * * *"), expect=0, change="{}")
        second = await backend.put_schedule("s", None, expect=first, change="{}")
        got = [await asyncio.wait_for(heard.get(), 5) for _ in range(2)]
        assert got == [str(first), str(second)], "the refused change was notified, or a change was not"
    finally:
        await conn.close()


async def test_a_schema_of_the_release_before_is_brought_to_notify_by_start(pg_dsn: str, schema: str) -> None:
    """Version 9 had put_schedule without NOTIFY; start() runs migration 10, which replaces it in place."""
    quoted = quote_schema(schema)
    conn = await asyncpg.connect(pg_dsn)
    try:
        async with conn.transaction():
            await conn.execute(f"CREATE SCHEMA {quoted}")
            await conn.execute(render_sql("schema_version_table.sql", quoted))
            for n, migration in enumerate(_MIGRATIONS[:9], 1):
                await conn.execute(migration(quoted))
                await conn.execute(f"INSERT INTO {quoted}.schema_version (version) VALUES ({n})")
            old = render_sql("schedule_put_function.sql", quoted).replace("PERFORM pg_notify(", "-- (", 1)
            await conn.execute(old)
    finally:
        await conn.close()
    before = PostgresBackend(pg_dsn, schema=schema)
    await before.start_read_only()
    assert before.schema_version == 9 and before.needs_migration
    await before.close()
    backend = PostgresBackend(pg_dsn, schema=schema)
    await backend.start()
    conn, heard = await _listen(pg_dsn, schema)
    try:
        revision = await backend.put_schedule("s", _record(), expect=0, change="{}")
        assert await asyncio.wait_for(heard.get(), 5) == str(revision)
    finally:
        await conn.close()
        await backend.close()


async def test_a_killed_listening_session_falls_back_to_the_poll_and_listens_again(
    pg_dsn: str, make_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anarchon.listener, "RETRY_S", 0.5)
    writer, reader = await make_backend(), await make_backend()
    revision = await reader.schedules_revision()
    assert await reader.wait_schedules(revision, 5000) is True, "the first wait subscribes and answers at once"
    listener = reader._listener
    assert listener is not None and listener._conn is not None
    pid = listener._conn.get_server_pid()
    waiting = asyncio.ensure_future(reader.wait_schedules(revision, 30_000))
    await asyncio.sleep(0)
    admin = await asyncpg.connect(pg_dsn)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    assert await asyncio.wait_for(waiting, 5) is False, "a lost listener must end the wait with False, not raise"
    began = time.monotonic()
    while not await reader.wait_schedules(revision, 200):  # sleeps until RETRY_S passed, then subscribes again
        assert time.monotonic() - began < 5, "the listener never subscribed again"
    assert listener._conn is not None and listener._conn.get_server_pid() != pid
    waiting = asyncio.ensure_future(reader.wait_schedules(await reader.schedules_revision(), 30_000))
    await asyncio.sleep(0)
    await writer.put_schedule("after", _record(), expect=0, change="{}")
    assert await asyncio.wait_for(waiting, 5) is True


async def test_a_backend_on_a_callers_pool_does_not_listen_and_polls(pg_dsn: str, schema: str, make_backend) -> None:
    await make_backend()  # the schema
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    backend = PostgresBackend(pool=pool, schema=schema)
    try:
        await backend.start()
        began = time.monotonic()
        assert await backend.wait_schedules(0, 300) is False
        assert time.monotonic() - began >= 0.29
        assert backend._listener is None
    finally:
        await backend.close()
        await pool.close()


async def test_a_schema_of_63_characters_is_notified_on_its_hashed_channel(pg_dsn: str) -> None:
    schema = ("anarchon_t_" + uuid.uuid4().hex * 2)[:63]
    writer, reader = PostgresBackend(pg_dsn, schema=schema), PostgresBackend(pg_dsn, schema=schema)
    try:
        await writer.start()
        await reader.start()
        await reader.wait_schedules(0, 1000)
        waiting = asyncio.ensure_future(reader.wait_schedules(await reader.schedules_revision(), 30_000))
        await asyncio.sleep(0)
        await writer.put_schedule("s", _record(), expect=0, change="{}")
        assert await asyncio.wait_for(waiting, 5) is True
    finally:
        await writer.close()
        await reader.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
