"""Stored-schedule changes pushed: ``LISTEN`` on a connection of the backend's own (capability ``schedule_notify``).

``put_schedule`` (migration 10) calls ``pg_notify`` on the schema's channel
(:func:`._schema.schedules_channel`) with the new revision, in the change's
transaction, so PostgreSQL delivers it at commit to every session listening.
Each backend object listens on one connection of its own, opened by its
instance's first wait (never by ``start()``, so the CLI and the dashboard hold
none) and closed by :meth:`~anarchon_postgres.PostgresBackend.close`: one
connection more per instance, beside the pool's and the heartbeat's. The
rules of the wait (a new subscription answers at once, a quiet wait pings,
a lost connection falls back to the poll) are :class:`anarchon.listener.ScheduleListener`'s.

The same connection also listens on the schema's decided channel
(:func:`._schema.decided_channel`, capability ``decided_notify``), where the
claim functions (migration 13) notify each scheduled slot they record, so
ranked claims cost no connection more. ``watch_decided`` adds its channel to
the listener and makes the subscription if no schedule wait made it yet. The
control channel (:func:`._schema.control_channel`, capability
``control_notify``) is heard the same way: each pause, resume and run request
is notified after its commit, so the instances read them when told instead of
twice a second.

A backend on a caller's ``pool`` does not listen: it does not know how that
pool connects, and a connection held for good from it would be one the
caller counted on. Its instances poll every second, as before, and claim
every slot they are ranked for, heard decided or not.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import Backend, read_decided
from anarchon.listener import RETRY_S, ScheduleListener

from ._full import NoFreeConnection
from ._schema import control_channel, decided_channel, quote_schema, render_sql, schedules_channel

__all__ = ["NotifyMixin", "PostgresListener"]


class PostgresListener(ScheduleListener):
    def __init__(
        self,
        what: str,
        dsn: str,
        channel: str,
        ping_sql: str,
        *,
        timeout_s: float,
        settings: Mapping[str, str],
        no_free: NoFreeConnection,
    ) -> None:
        super().__init__(what)
        self._dsn = dsn
        self.channel = channel
        self._ping_sql = ping_sql
        self._timeout = timeout_s
        self._settings = dict(settings)
        self._no_free = no_free
        self._conn: asyncpg.Connection | None = None
        #: More channels heard on the same connection, each with what its payload is handed to.
        self._also: dict[str, Callable[[str], None]] = {}

    async def subscribe(self) -> None:
        try:
            conn = await asyncpg.connect(
                self._dsn, timeout=self._timeout, command_timeout=self._timeout, server_settings=self._settings
            )
        except asyncpg.TooManyConnectionsError as exc:
            raise self._no_free.error(exc, starting=False) from exc
        self._conn = conn
        conn.add_termination_listener(self._ended)
        await asyncio.wait_for(conn.add_listener(self.channel, self._heard), self._timeout)
        for channel in list(self._also):
            await asyncio.wait_for(conn.add_listener(channel, self._heard_also), self._timeout)
        for handed in list(self._also.values()):
            handed("")  # a subscription made (again): what came before it was not heard

    async def also(self, channel: str, handed: Callable[[str], None]) -> None:
        """Hear ``channel`` too, on this subscription and every one made again after it.

        ``handed`` gets each notice's payload, and ``""`` each time the
        channel starts being heard (here, or by a subscription made again),
        since what came before was not heard.
        """
        self._also[channel] = handed
        conn = self._conn
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):  # the next subscription adds it
                await asyncio.wait_for(conn.add_listener(channel, self._heard_also), self._timeout)
                handed("")

    def drop(self, channel: str) -> None:
        self._also.pop(channel, None)

    def _heard_also(self, conn: asyncpg.Connection, pid: int, channel: str, payload: str) -> None:
        handed = self._also.get(channel)
        if conn is self._conn and handed is not None:
            handed(payload)

    def _heard(self, conn: asyncpg.Connection, pid: int, channel: str, payload: str) -> None:
        if conn is self._conn:
            self.changed(payload)

    def _ended(self, conn: asyncpg.Connection) -> None:
        if conn is self._conn:
            self.lost("the connection closed")

    async def ping(self) -> None:
        conn = self._conn
        if conn is None or conn.is_closed():
            raise ConnectionError("the listening connection is closed")
        await conn.fetchval(self._ping_sql, timeout=self._timeout)

    async def unsubscribe(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await asyncio.wait_for(conn.close(), self._timeout)
        except Exception:
            with contextlib.suppress(Exception):
                conn.terminate()
        except BaseException:  # cancelled: close it all the same, and let the cancellation go on
            with contextlib.suppress(Exception):
                conn.terminate()
            raise


class NotifyMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`: ``wait_schedules`` on a :class:`PostgresListener`."""

    schema: str
    _dsn: str
    _timeout: float
    _own_pool: bool
    _read_only: bool
    _listener: PostgresListener | None = None

    if TYPE_CHECKING:  # the backend's own, used here

        def _settings(self) -> dict[str, str]: ...

        def _no_free_connection(self) -> NoFreeConnection: ...

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        if not self._own_pool or self._read_only:  # a caller's pool, or a look: the poll
            return await Backend.wait_schedules(self, revision, timeout_ms)  # type: ignore[arg-type]
        return await self._schedule_listener().wait(revision, timeout_ms)

    async def watch_decided(self, heard: Callable[[Sequence[tuple[str, int]]], None]) -> None:
        """Decided slots on the stored-schedule listener's connection, until cancelled (nothing on a caller's pool)."""
        if not self._own_pool or self._read_only:
            await asyncio.Event().wait()  # no connection of its own: every ranked slot is claimed
        await self._hear(decided_channel(self.schema), lambda payload: heard(read_decided(payload)))

    async def watch_control(self, changed: Callable[[], None]) -> None:
        """Pauses, resumes and run requests on the stored-schedule listener's connection, until cancelled."""
        if not self._own_pool or self._read_only:
            return  # no connection of its own: the instance polls twice a second
        await self._hear(control_channel(self.schema), lambda _: changed())

    async def _hear(self, channel: str, handed: Callable[[str], None]) -> None:
        """``channel`` on the stored-schedule listener's connection (``""`` each time it starts), until cancelled."""
        listener = self._schedule_listener()
        await listener.also(channel, handed)
        try:
            while True:  # the schedule wait keeps the subscription; this makes it when nobody waits
                await listener.ensure()
                await asyncio.sleep(RETRY_S)
        finally:
            listener.drop(channel)

    def _schedule_listener(self) -> PostgresListener:
        if self._listener is None:
            self._listener = PostgresListener(
                repr(self),
                self._dsn,
                schedules_channel(self.schema),
                render_sql("statement_now_ms.sql", quote_schema(self.schema)).strip(),
                timeout_s=self._timeout,
                settings=self._settings(),
                no_free=self._no_free_connection(),
            )
        return self._listener

    async def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
