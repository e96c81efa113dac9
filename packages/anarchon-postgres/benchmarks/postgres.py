"""PostgreSQL: the primitive is ``INSERT … ON CONFLICT DO NOTHING RETURNING`` on one held asyncpg connection."""

from __future__ import annotations

import os

import asyncpg

from .._target import BackendSpec, RawClient, Target

DSN = os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")


class _Raw(RawClient):
    description = "`INSERT … ON CONFLICT DO NOTHING RETURNING` (asyncpg, one held connection, synchronous_commit on)"

    def __init__(self, dsn: str, ns: str) -> None:
        self.dsn, self.schema = dsn, f"{ns}_raw"

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)
        await self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        await self.conn.execute(f'CREATE TABLE IF NOT EXISTS "{self.schema}".gate (key text PRIMARY KEY)')
        self.sql = f'INSERT INTO "{self.schema}".gate VALUES ($1) ON CONFLICT DO NOTHING RETURNING key'

    async def once(self, key: str) -> bool:
        return await self.conn.fetchval(self.sql, key) is not None

    async def close(self) -> None:
        await self.conn.close()


class PostgresTarget(Target):
    name = "postgres"

    def __init__(self, dsn: str = DSN) -> None:
        self.dsn = dsn

    async def unreachable(self) -> str | None:
        try:
            conn = await asyncpg.connect(self.dsn, timeout=3)
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            return f"{type(exc).__name__}: {exc}"
        await conn.close()
        return None

    server_note = "the PostgreSQL backend processes serving the instances' connections"

    def spec(self, ns: str) -> BackendSpec:
        # The namespace as application_name: the soak finds the server processes serving it.
        dsn = f"{self.dsn}{'&' if '?' in self.dsn else '?'}application_name={ns}"
        return BackendSpec("anarchon_postgres:PostgresBackend", {"dsn": dsn, "schema": ns})

    async def server_pids(self, ns: str) -> list[int]:
        conn = await asyncpg.connect(self.dsn)
        try:
            rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1", ns)
        finally:
            await conn.close()
        return [r["pid"] for r in rows]

    async def referee_counters(self, ns: str) -> dict[str, float]:
        """Transactions, and rows written (the referee's own work, like Redis's commands), in the database.

        From ``pg_stat_database``, so others' too. Transactions count what each instance sends
        whatever the fleet does (its heartbeat, its registry read); rows written count the work per
        run (the run's record, the job's mark and counter, the trims) and the beats' rows.
        """
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute("SELECT pg_stat_force_next_flush()")  # this session's own counts, now
            row = await conn.fetchrow(
                "SELECT xact_commit + xact_rollback AS x, tup_inserted + tup_updated + tup_deleted AS w "
                "FROM pg_stat_database WHERE datname = current_database()"
            )
        finally:
            await conn.close()
        return {"transactions": float(row["x"]), "rows written": float(row["w"])}

    async def footprint(self, ns: str) -> dict[str, float]:
        conn = await asyncpg.connect(self.dsn)
        try:
            q = f'"{ns}"'
            rows = await conn.fetchval(f"SELECT (SELECT count(*) FROM {q}.runs) + (SELECT count(*) FROM {q}.jobs)")
            size = await conn.fetchval(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
                ns,
            )
            dead = await conn.fetchval(
                "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = $1", ns
            )
        finally:
            await conn.close()
        return {"rows": float(rows), "dead rows": float(dead), "MB": float(size or 0) / 1e6}

    def raw(self, ns: str) -> RawClient:
        return _Raw(self.dsn, ns)

    async def cleanup(self, ns: str) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            for schema in (ns, f"{ns}_raw"):
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    async def versions(self) -> dict[str, str]:
        conn = await asyncpg.connect(self.dsn)
        try:
            server = await conn.fetchval("SHOW server_version")
            # Dead rows of finished and trimmed runs are reclaimed only by VACUUM: say whether it runs.
            autovacuum = await conn.fetchval("SHOW autovacuum")
        finally:
            await conn.close()
        return {"asyncpg": asyncpg.__version__, "PostgreSQL": str(server).split()[0], "autovacuum": str(autovacuum)}


TARGET = PostgresTarget()
