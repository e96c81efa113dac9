"""The audit trail in PostgreSQL: migration 11 from a version-10 schema, the trim, a look at an older schema."""

from __future__ import annotations

import asyncio

import asyncpg  # type: ignore[import-untyped]
import pytest

from anarchon.cli import main
from anarchon_postgres import SCHEMA_VERSION, PostgresBackend


def _entry(n: int) -> str:
    return f'{{"at_ms": {n}, "by": "t", "action": "pause", "job": "j", "reason": null, "detail": {{}}}}'


async def test_the_trail_keeps_the_newest(make_backend):
    backend = await make_backend()
    backend.audit_keep = 3
    ids = [await backend.audit_append("report", _entry(n)) for n in range(5)]
    assert ids == sorted(ids)
    assert [i for i, _ in await backend.audit_entries(limit=10)] == ids[:1:-1], "not the newest 3"
    assert await backend.audit_entries(limit=10, job="other") == []


async def test_migrate_brings_a_version_10_schema_to_the_trail(
    make_backend, pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
):
    assert SCHEMA_VERSION == 15  # 13 and 14 replace functions only; 15's tables are dropped below
    await make_backend()
    conn = await asyncpg.connect(pg_dsn)
    try:  # the schema as release 10 left it
        await conn.execute(f'DROP TABLE "{schema}".audit')
        await conn.execute(f'ALTER TABLE "{schema}".runs DROP COLUMN earlier')  # version 12's
        await conn.execute(f'DROP TABLE "{schema}".group_places, "{schema}".group_limits')  # version 15's
        await conn.execute(f'DELETE FROM "{schema}".schema_version WHERE version >= 11')
    finally:
        await conn.close()
    look = PostgresBackend(dsn=pg_dsn, schema=schema)
    await look.start_read_only()
    try:
        assert await look.audit_entries(limit=5) == [], "a look at a version-10 schema must read nothing"
    finally:
        await look.close()
    url = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"schema={schema}"
    assert await asyncio.to_thread(main, ["migrate", "--backend", url]) == 0  # the CLI runs its own loop
    assert "schema at version 15" in capsys.readouterr().out
    backend = await make_backend()
    entry_id = await backend.audit_append("report", _entry(1))
    assert await backend.audit_entries(limit=5, job="report") == [(entry_id, _entry(1))]
