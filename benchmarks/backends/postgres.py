"""PostgreSQL: the primitive is ``INSERT … ON CONFLICT DO NOTHING RETURNING`` on one held asyncpg connection."""

from __future__ import annotations

import os

import asyncpg

from .._target import BackendSpec, RawClient, Target

DSN = os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")


class _Raw(RawClient):
    description = "`INSERT … ON CONFLICT DO NOTHING RETURNING` (asyncpg, one held connection, synchronous_commit on)"

    def __init__(self, ns: str) -> None:
        self.schema = f"{ns}_raw"

    async def open(self) -> None:
        self.conn = await asyncpg.connect(DSN)
        await self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        await self.conn.execute(f'CREATE TABLE IF NOT EXISTS "{self.schema}".gate (key text PRIMARY KEY)')
        self.sql = f'INSERT INTO "{self.schema}".gate VALUES ($1) ON CONFLICT DO NOTHING RETURNING key'

    async def once(self, key: str) -> bool:
        return await self.conn.fetchval(self.sql, key) is not None

    async def close(self) -> None:
        await self.conn.close()


class PostgresTarget(Target):
    name = "postgres"

    async def unreachable(self) -> str | None:
        try:
            conn = await asyncpg.connect(DSN, timeout=3)
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            return f"{type(exc).__name__}: {exc}"
        await conn.close()
        return None

    def spec(self, ns: str) -> BackendSpec:
        return BackendSpec("anarchon_postgres:PostgresBackend", {"dsn": DSN, "schema": ns})

    def raw(self, ns: str) -> RawClient:
        return _Raw(ns)

    async def cleanup(self, ns: str) -> None:
        conn = await asyncpg.connect(DSN)
        try:
            for schema in (ns, f"{ns}_raw"):
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    async def versions(self) -> dict[str, str]:
        conn = await asyncpg.connect(DSN)
        try:
            server = await conn.fetchval("SHOW server_version")
        finally:
            await conn.close()
        return {"asyncpg": asyncpg.__version__, "PostgreSQL": str(server).split()[0]}


TARGET = PostgresTarget()
