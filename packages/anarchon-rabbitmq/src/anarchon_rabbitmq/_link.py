"""One connection and its channel pool, reopened on the next call after a loss.

The backend keeps two: one for claims, one for history records. RabbitMQ
3.10 closes a whole connection (``INTERNAL_ERROR``) when a stream is touched
while it is still being created, so history lives apart and a stream can
never take in-flight claims down with it. A connection the caller passed in
is used for both and never reopened or closed here.

A link also says when it lost the connection it has since got back
(:attr:`Link.lost_at_ms`), since the loss may have been the broker's restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika.abc

from anarchon.errors import BackendUnavailableError

from ._channels import ChannelPool

__all__ = ["Link"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _alive(connection: aio_pika.abc.AbstractConnection) -> bool:
    # aio-pika notices a broker-side close later than the aiormq connection under it.
    underlay = getattr(getattr(connection, "transport", None), "connection", None)
    return not connection.is_closed and underlay is not None and not underlay.is_closed


class Link:
    def __init__(
        self,
        open_connection: Callable[[], Awaitable[aio_pika.abc.AbstractConnection]],
        pool_size: int,
        given: aio_pika.abc.AbstractConnection | None = None,
    ) -> None:
        self._open = open_connection
        self._pool_size = pool_size
        self._given = given
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._pool: ChannelPool | None = None
        self._lock = asyncio.Lock()
        #: Wall-clock ms when the link lost a connection it has since got back (None until then).
        self.lost_at_ms: int | None = None
        self._closed_ms: int | None = None
        self._opened = False

    def _usable(self) -> bool:
        if self._connection is None:
            return False
        if self._given is not None:  # the caller's to reconnect (a robust connection does it alone)
            return not self._connection.is_closed
        return _alive(self._connection)

    async def get(self) -> tuple[aio_pika.abc.AbstractConnection, ChannelPool]:
        if not self._usable():
            async with self._lock:
                if not self._usable():
                    await self._drop()
                    connection = self._given if self._given is not None else await self._open()
                    if connection.is_closed:
                        raise BackendUnavailableError(
                            "the aio-pika connection given to RabbitMQBackend is closed; it is yours to reopen "
                            "(aio_pika.connect_robust reconnects by itself)"
                        )
                    if self._given is None or not self._opened:
                        connection.close_callbacks.add(functools.partial(self._closed, connection))
                        reconnects = getattr(connection, "reconnect_callbacks", None)  # a robust connection's
                        if reconnects is not None:
                            reconnects.add(self._back)
                    if self._opened and self._given is None:
                        self._back()
                    self._opened = True
                    self._connection, self._pool = connection, ChannelPool(connection, self._pool_size)
        assert self._connection is not None and self._pool is not None
        return self._connection, self._pool

    def _closed(self, connection: aio_pika.abc.AbstractConnection, *_: Any) -> None:
        """A close callback: the first close of the link's current connection is when it was lost."""
        if connection is self._connection and self._closed_ms is None:
            self._closed_ms = _now_ms()

    def _back(self, *_: Any) -> None:
        """A connection replaced a lost one (or a robust one reconnected)."""
        self.lost_at_ms = self._closed_ms if self._closed_ms is not None else _now_ms()
        self._closed_ms = None

    async def _drop(self) -> None:
        pool, connection = self._pool, self._connection
        self._pool = self._connection = None
        if pool is not None:
            await pool.close()
        if connection is not None and self._given is None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
