"""How statements reach PostgreSQL: the pool, a call retried once on a fresh connection, and what counts as dead.

Mixed into :class:`~anarchon_postgres.PostgresBackend`, as every optional part
of a backend here is (:mod:`._control`, :mod:`._backfill`). Here too is what a
look (``start_read_only``) at a schema with no tables says, since every
part's read-only path asks for it (``_missing_schema``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, urlsplit

import asyncpg  # type: ignore[import-untyped]

from anarchon.errors import BackendUnavailableError

from ._full import NoFreeConnection, capped, own_connection

__all__ = ["POOL_MAX", "UNREACHABLE", "CallsMixin"]

log = logging.getLogger("anarchon.postgres")

T = TypeVar("T")

#: Connections of the backend's own pool. Claims due together travel in one
#: call, so a handful covers claims, renewals and finishes overlapping. The pool
#: keeps no floor (``min_size=0``; start() still opens the first connection):
#: asyncpg (0.32) restores a floor from a task of its own that logs a WARNING with
#: a whole traceback at each failed try (1, 2, 4… s), 20-odd lines a try per
#: instance for as long as the server refuses connections, beside the
#: scheduler's one warning. A scheduler calls every half second, and each call
#: opens a connection when none is left, so the floor added nothing.
POOL_MAX = 4

#: Failures that leave a connection in doubt: the server ended the session,
#: the socket died, or the client's protocol state is broken (a session killed
#: while idle shows up as an InternalClientError on its next use). Such a
#: connection is terminated, never handed back to the pool.
_DEAD: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.InternalClientError,
    ConnectionError,
)
#: After these the same call is sent once more on another connection: nothing
#: was committed, or what was is recognised (claims carry their token,
#: take-overs and renewals re-judge the lease, a finish accepts its own record).
_RETRYABLE: tuple[type[BaseException], ...] = (
    *_DEAD,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)
_SUSPECT: tuple[type[BaseException], ...] = (*_DEAD, asyncio.TimeoutError)
UNREACHABLE: tuple[type[BaseException], ...] = (*_RETRYABLE, OSError, asyncio.TimeoutError)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool reset that sends nothing: the backend leaves no session state behind.

    asyncpg's default reset costs one round trip per release (BROKER-NOTES);
    an open transaction is still rolled back by the pool itself.
    """


class CallsMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    _dsn: str
    schema: str
    _timeout: float
    _pool: asyncpg.Pool | None
    _own_pool: bool
    _read_only: bool
    schema_version: int | None
    #: The server's max_connections, read by start() for the text of a refusal (None before).
    _max_connections: int | None = None
    #: When (monotonic) the pool last went on with the connections it held (see ``_full.capped``).
    _capped_at: float | None = None

    if TYPE_CHECKING:  # the backend's own, used here

        @property
        def dsn(self) -> str: ...

    def _settings(self) -> dict[str, str]:
        """The session settings of the backend's own connections (the DSN's own win)."""
        if "application_name" in dict(parse_qsl(urlsplit(self._dsn).query)):
            return {}
        return {"application_name": "anarchon"}

    async def _open_pool(self) -> asyncpg.Pool:
        settings = self._settings()

        async def open_pool() -> asyncpg.Pool:
            pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=POOL_MAX,
                timeout=self._timeout,
                command_timeout=self._timeout,
                reset=_keep_session,
                server_settings=settings,
            )
            try:
                # The first connection now, as min_size=1 would, so a server that refuses it fails start().
                await pool.release(await pool.acquire())
            except BaseException:
                pool.terminate()
                raise
            return pool

        try:
            pool = await asyncio.wait_for(open_pool(), self._timeout * 2)
        except asyncpg.TooManyConnectionsError as exc:
            raise self._no_free_connection().error(exc, starting=True) from exc
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise BackendUnavailableError(
                f"could not reach PostgreSQL at {self._where()} within {self._timeout:g} s "
                f"({type(exc).__name__}: {exc}); check the DSN and that the server accepts connections"
            ) from exc
        assert pool is not None
        return pool

    def _no_free_connection(self) -> NoFreeConnection:
        """What a refusal for want of connections is told as (see :mod:`._full`)."""
        pool_max = self._pool.get_max_size() if self._pool is not None else POOL_MAX
        heart = 1 if self._own_pool else 0  # heart() keeps a connection of its own only beside our own pool
        return NoFreeConnection(self._where(), self._max_connections, pool_max + heart, pool_max)

    def _where(self) -> str:
        return self.dsn if self._own_pool else "the caller's pool"

    def _missing_schema(self) -> None:
        """Raise ``LookupError`` on a look (start_read_only) at a schema without anarchon tables."""
        if self._read_only and not self.schema_version:
            raise LookupError(
                f"schema {self.schema!r} at {self._where()} has no anarchon tables: nothing ran under it; "
                "check the schema (?schema=… in the URL), or create it with `anarchon migrate --backend URL`"
            )

    async def _drop_own_pool(self) -> None:
        if not self._own_pool or self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            await asyncio.wait_for(pool.close(), self._timeout)
        except (Exception, asyncio.TimeoutError):
            pool.terminate()

    async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T:
        """Run ``op`` on a pooled connection; once more on a fresh one if the first died.

        ``op`` gets ``retry=True`` the second time, for statements that must
        recognise their own earlier, committed effect.
        """
        pool = self._pool
        if pool is None:
            raise RuntimeError(f"{self!r} is not started; call start() first")
        try:
            try:
                return await self._attempt(pool, op, retry=False)
            except _RETRYABLE as exc:
                log.info("anarchon-postgres: %s failed (%s: %s); retrying once", what, type(exc).__name__, exc)
                if isinstance(exc, _DEAD):
                    # What ended one session (a server restart, killed backends) likely ended the
                    # idle ones too: have the pool replace them, so the retry gets a fresh one.
                    await pool.expire_connections()
            return await self._attempt(pool, op, retry=True)
        except asyncpg.TooManyConnectionsError as exc:
            # The pool holds no connection and the server gives none (a growth waits for the pool's own:
            # _acquire). Not retried here: the scheduler backs off and warns once per outage, with this text.
            raise self._no_free_connection().error(exc, starting=False) from exc

    async def _attempt(
        self, pool: asyncpg.Pool, op: Callable[[asyncpg.Connection, bool], Awaitable[T]], *, retry: bool
    ) -> T:
        conn = await self._acquire(pool)
        try:
            return await op(conn, retry)
        except _SUSPECT:
            # A session the server ended may already be back in the pool, its proxy detached:
            # terminating it then raises InterfaceError, which would hide the retryable error.
            with contextlib.suppress(asyncpg.InterfaceError):
                conn.terminate()
            raise
        finally:
            await pool.release(conn)

    async def _acquire(self, pool: asyncpg.Pool) -> asyncpg.Connection:
        # A free connection is handed over at once; only a wait for one needs the timer (and
        # asyncpg's timed acquire costs a task and a loop turn per call).
        if pool.get_idle_size():
            return await pool.acquire()
        try:
            return await pool.acquire(timeout=self._timeout)
        except asyncpg.TooManyConnectionsError as exc:
            if not pool.get_size():
                raise
            self._capped_at = capped(log, self._capped_at, self._no_free_connection(), exc, pool.get_size())
            return await own_connection(pool, exc, self._timeout)
