"""PostgreSQL on a private server with initdb's defaults, autovacuum on among them.

Why: this machine's shared server runs with ``autovacuum = off`` (server-wide,
not ours to change). Finished and trimmed runs leave dead rows that only
VACUUM reclaims, so on it the soak's table size, dead rows and server memory
grow minute by minute, which says nothing about a deployment, where
autovacuum is on by default. This target starts the fault suite's private
server (``chaos.brokers.PostgresBroker``: ``initdb`` on a temporary
directory, a free port, ``fsync`` and ``synchronous_commit`` on, the rest
default) for the run and stops it after.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .postgres import PostgresTarget


class PrivatePostgresTarget(PostgresTarget):
    name = "postgres_private"
    server_note = "the PostgreSQL backend processes serving the instances' connections (private server)"

    def __init__(self) -> None:
        super().__init__("")
        self._server: Any = None
        self._workdir: Path | None = None

    async def setup(self) -> None:
        from chaos.brokers import PostgresBroker

        self._workdir = Path(tempfile.mkdtemp(prefix="anarchon-bench-postgres-"))
        self._workdir.chmod(0o755)  # the server runs as the postgres user when we are root
        self._server = PostgresBroker(self._workdir)
        await asyncio.to_thread(self._server.start)
        self.dsn = f"postgresql://postgres@127.0.0.1:{self._server.port}/postgres"
        self.notes = ["postgres_private: a private PostgreSQL with initdb's defaults (autovacuum on)"]

    async def teardown(self) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
            self._server = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


TARGET = PrivatePostgresTarget()
