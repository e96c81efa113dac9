"""Stored schedules in a :class:`~anarchon.memory.MemoryStore`: the reference for the server backends.

One counter for every change, a record or a tombstone per name, and each
name's change log, all under the store's lock, so each change is one atomic
step as the contract asks (:meth:`~anarchon.backend.Backend.put_schedule`).
Each change wakes every :meth:`~MemorySchedules.wait` (capability
``schedule_notify``), in whichever thread's event loop it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Protocol

from .errors import ScheduleConflictError
from .schedules import LOG_KEEP, REUSE_AFTER_MS, TOMBSTONE_MS

__all__ = ["MemorySchedules", "SchedulesMixin"]


class _Store(Protocol):
    clock: Callable[[], int]
    _lock: threading.Lock

    def forget_job(self, job: str, since_ms: int) -> bool:
        """Drop the job's state unless it is in use; the caller holds ``_lock``."""
        ...


class MemorySchedules:
    def __init__(self, store: _Store) -> None:
        self._store = store
        self.revision = 0
        #: name -> (record or None for a tombstone, revision, changed at ms)
        self._rows: dict[str, tuple[str | None, int, int]] = {}
        self._logs: dict[str, list[tuple[int, str]]] = {}
        #: The waits in progress, each with its event loop (several backends may share the store across threads).
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def put(self, name: str, record: str | None, expect: int | None, change: str) -> int:
        with self._store._lock:
            now = self._store.clock()
            for gone in [n for n, (r, _, at) in self._rows.items() if r is None and at < now - TOMBSTONE_MS]:
                del self._rows[gone]
                self._logs.pop(gone, None)
            row = self._rows.get(name)
            current = row[1] if row is not None and row[0] is not None else 0
            if (expect is not None and expect != current) or (record is None and current == 0):
                raise ScheduleConflictError(name, expect, current)
            self.revision += 1
            self._rows[name] = (record, self.revision, now)
            log = self._logs.setdefault(name, [])
            log.append((self.revision, change))
            del log[:-LOG_KEEP]
            for loop, waiter in self._waiters:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(_wake, waiter)
            return self.revision

    async def wait(self, revision: int, timeout_ms: int) -> bool:
        """Until the counter is past ``revision`` (at once if it is), at most ``timeout_ms``; always "listening"."""
        loop = asyncio.get_running_loop()
        entry = (loop, loop.create_future())
        with self._store._lock:
            if self.revision > revision:
                return True
            self._waiters.append(entry)
        try:
            await asyncio.wait_for(entry[1], timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            with self._store._lock:
                self._waiters.remove(entry)
        return True

    def forget(self, older_than_ms: int) -> list[str]:
        with self._store._lock:
            now = self._store.clock()
            old = [(n, at) for n, (r, _, at) in self._rows.items() if r is None and at <= now - older_than_ms]
            for name, _ in old:
                del self._rows[name]
                self._logs.pop(name, None)
            return [name for name, at in old if self._store.forget_job(name, at + REUSE_AFTER_MS)]

    def since(self, revision: int) -> list[tuple[str, str | None, int]]:
        with self._store._lock:
            rows = [(n, r, rev) for n, (r, rev, _) in self._rows.items() if rev > revision]
        if revision == 0:
            rows = [row for row in rows if row[1] is not None]
        return sorted(rows, key=lambda row: row[2])

    def get(self, name: str) -> tuple[str, int] | None:
        with self._store._lock:
            row = self._rows.get(name)
        return None if row is None or row[0] is None else (row[0], row[1])

    def log(self, name: str) -> list[tuple[int, str]]:
        with self._store._lock:
            return list(self._logs.get(name, ()))


class _Scheduled(Protocol):
    schedules: MemorySchedules


class SchedulesMixin:
    """Mixed into :class:`~anarchon.memory.MemoryBackend`."""

    store: _Scheduled

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        return self.store.schedules.put(name, record, expect, change)

    async def schedules_revision(self) -> int:
        return self.store.schedules.revision

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        return self.store.schedules.since(revision)

    async def schedule(self, name: str) -> tuple[str, int] | None:
        return self.store.schedules.get(name)

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        return self.store.schedules.log(name)

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        return await self.store.schedules.wait(revision, timeout_ms)

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        return self.store.schedules.forget(older_than_ms)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
