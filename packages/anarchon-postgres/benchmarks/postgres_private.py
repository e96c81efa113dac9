"""PostgreSQL on a private server with initdb's defaults, autovacuum on among them.

Why: this machine's shared server runs with ``autovacuum = off`` (server-wide,
not ours to change). Finished and trimmed runs leave dead rows that only
VACUUM reclaims, so on it the soak's table size, dead rows and server memory
grow minute by minute, which says nothing about a deployment, where
autovacuum is on by default. This target starts the fault suite's private
server (``chaos.postgres.PostgresBroker``: ``initdb`` on a temporary
directory, a free port, ``fsync`` and ``synchronous_commit`` on, the rest
default) for the run and stops it after.
"""

from __future__ import annotations

from ._private import PrivateServer
from .postgres import PostgresTarget


class PrivatePostgresTarget(PostgresTarget):
    name = "postgres_private"
    server_note = "the PostgreSQL backend processes serving the instances' connections (private server)"

    def __init__(self) -> None:
        super().__init__("")
        self._private = PrivateServer("anarchon-bench-postgres-")

    async def setup(self) -> None:
        from chaos.postgres import PostgresBroker

        server = await self._private.start(PostgresBroker)
        self.dsn = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        self.notes = ["postgres_private: a private PostgreSQL with initdb's defaults (autovacuum on)"]

    async def teardown(self) -> None:
        await self._private.stop()


TARGET = PrivatePostgresTarget()
