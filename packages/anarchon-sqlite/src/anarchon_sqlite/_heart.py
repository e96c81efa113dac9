"""The heartbeat of one SQLite instance: a row in ``anarchon_instances``, on a connection of its own.

The scheduler calls it from its heartbeat thread (:mod:`anarchon.liveness`),
so a plain blocking ``sqlite3`` connection is right here: it blocks only that
thread's loop. Each beat is one short ``BEGIN IMMEDIATE`` transaction on the
host's clock, the clock that judges leases; it queues with this process's
other writers (:func:`~anarchon_sqlite._waiting.in_turn`) as they do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from anarchon.liveness import RETAIN_DEAD_MS, Beat, Heart, after_silence, soonest_expiry

from . import _store
from ._schema import open_store
from ._space import check_room, no_space
from ._sql import statement
from ._waiting import in_turn

__all__ = ["SQLiteHeart"]

_UPSERT = statement("heart_upsert")
_FORGET = statement("heart_forget")
_ALL = statement("heart_all")
_LEAVE = statement("heart_leave")


class SQLiteHeart(Heart):
    tells_next_expiry = True

    def __init__(self, path: str, busy_timeout_ms: int, synchronous: str, clock: Callable[[], int]) -> None:
        self._path = path
        self._timeout_s = busy_timeout_ms / 1000
        self._synchronous = synchronous
        self._clock = clock
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self._path, timeout=self._timeout_s, isolation_level=None, check_same_thread=False)
            try:
                open_store(conn, self._path, self._synchronous, self._timeout_s)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _write(self, body: _store.Body[Beat | None]) -> Beat | None:
        check_room(self._path)  # the scheduler's connection and this one see one full filesystem (_space)
        conn = self._connection()
        try:
            return in_turn(self._path, self._timeout_s, lambda: _store.transaction(conn, body, self._clock))
        except sqlite3.Error as exc:
            full = no_space(self._path, exc)
            if full is not None:
                raise full from exc  # the transaction rolled back; the connection is sound
            self._conn = None  # reopen on the next beat
            conn.close()
            raise

    async def open(self) -> None:
        self._connection()

    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        def body(conn: sqlite3.Connection, now: int) -> Beat:
            records = dict(conn.execute(_ALL).fetchall())  # one read: the transaction holds the write lock
            renewed = after_silence(records, now, ttl_ms)  # anarchon.liveness
            conn.executemany(_UPSERT, renewed.items())
            conn.execute(_UPSERT, (instance, now + ttl_ms))
            conn.execute(_FORGET, (now - RETAIN_DEAD_MS,))
            records.update(renewed)
            records[instance] = now + ttl_ms
            dead = {name: until for name, until in records.items() if now - RETAIN_DEAD_MS <= until < now}
            return Beat(dead, soonest_expiry(records, instance, now))

        beat = self._write(body)
        assert beat is not None
        return beat

    async def leave(self, instance: str) -> None:
        def body(conn: sqlite3.Connection, now: int) -> None:
            conn.execute(_LEAVE, (instance, now - 1))

        self._write(body)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
