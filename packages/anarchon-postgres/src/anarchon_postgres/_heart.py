"""The instance's heartbeat in PostgreSQL: one row of ``instances``, renewed on a connection of its own.

:meth:`PostgresBackend.heart` builds a :class:`PostgresHeart` from plain data
(the DSN, the rendered statements, the timeout, the session settings, the
text of a refusal for want of connections: :mod:`._full`), and
the scheduler drives it from its heartbeat thread's event loop, where the
backend's pool cannot be used: :meth:`PostgresHeart.open` connects there.

Why a row and not a session-level advisory lock held by that connection (a
lock is released the moment the server sees the session end, so a death
would be noticed at once, with no write at all): the server lets go of a
lock when it reads the end of the client's socket, which comes at once after
a ``kill -9`` (the kernel closes the socket) but not when a host loses power
or its network (the session lives until TCP keepalive gives up: over two
hours with the operating system's defaults); a frozen process (a stopped
container, a debugger, swapping) keeps its lock and its runs' leases forever
while it keeps nothing alive; a pooler in transaction mode (PgBouncer) cannot
hold a session lock at all; and testing another session's lock inside a claim
means reading ``pg_locks`` (every lock of the server) or taking the lock. A
row with ``alive_until`` on the server's clock answers in all of those cases
within the TTL, is read inside the claim's statement as one primary-key probe,
and is what the core's rule and the protocol model assume (an expiry time that
the next beat revives).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import asyncpg  # type: ignore[import-untyped]

from anarchon.liveness import RETAIN_DEAD_MS, Beat, Heart

from ._full import NoFreeConnection

__all__ = ["PostgresHeart"]

#: Errors after which the heart's connection is kept: the server answered,
#: the session is fine (a missing table, say). After any other failure, a
#: timeout or a cancellation among them, it is closed and the next beat
#: connects again.
_ANSWERED = asyncpg.PostgresError
_GONE = (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError)


class PostgresHeart(Heart):
    tells_next_expiry = True

    def __init__(
        self,
        dsn: str,
        beat_sql: str,
        leave_sql: str,
        *,
        timeout_s: float,
        settings: Mapping[str, str],
        no_free: NoFreeConnection | None = None,
    ) -> None:
        self._dsn = dsn
        #: Tells a refusal for want of connections as the backend's calls do (see :mod:`._full`).
        self._no_free = no_free
        self._beat_sql = beat_sql
        self._leave_sql = leave_sql
        self._timeout = timeout_s
        self._settings = dict(settings)
        self._conn: asyncpg.Connection | None = None
        #: Whether a connection was ever made: a refusal before it keeps the instance from starting.
        self._connected_once = False

    async def open(self) -> None:
        await self._connection()

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            try:
                self._conn = await asyncpg.connect(
                    self._dsn,
                    timeout=self._timeout,
                    command_timeout=self._timeout,
                    server_settings=self._settings,
                )
            except asyncpg.TooManyConnectionsError as exc:
                if self._no_free is None:
                    raise
                raise self._no_free.error(exc, starting=not self._connected_once) from exc
            self._connected_once = True
        return self._conn

    async def _fetch(self, sql: str, *args: object, timeout_s: float) -> list[asyncpg.Record]:
        conn = await self._connection()
        try:
            rows: list[asyncpg.Record] = await conn.fetch(sql, *args, timeout=timeout_s)
        except BaseException as exc:
            if not isinstance(exc, _ANSWERED) or isinstance(exc, _GONE):
                self._drop()
            raise
        return rows

    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        rows = await self._fetch(
            self._beat_sql, instance, ttl_ms, RETAIN_DEAD_MS, timeout_s=min(self._timeout, ttl_ms / 1000)
        )
        soonest = [int(row[1]) for row in rows if row[0] is None]
        return Beat({row[0]: int(row[1]) for row in rows if row[0] is not None}, soonest[0] if soonest else None)

    async def leave(self, instance: str) -> None:
        await self._fetch(self._leave_sql, instance, timeout_s=self._timeout)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await asyncio.wait_for(conn.close(), self._timeout)
        except (Exception, asyncio.TimeoutError):
            with contextlib.suppress(Exception):
                conn.terminate()
