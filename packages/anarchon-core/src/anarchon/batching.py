"""Gathering the backend calls made at the same moment into one round trip, for backends.

A thousand runs due together finish within milliseconds of each other. Sent
one by one, each call takes a connection and a round trip of its own (a
commit per run on PostgreSQL; on Redis a connection each from a pool that
refuses the 101st). :class:`Batcher` gathers the calls of one event-loop turn
into one list for ``send``; the calls made while ``in_flight`` sends are out
wait for the next one.

Each caller gets its own reply or its own error; a send that fails as a
whole (the connection dropped) fails every call in it, each of which the
scheduler retries as it would a single call. Used by anarchon-redis (one
pipeline per batch) and anarchon-postgres (one statement per batch of
finishes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["Batcher"]

T = TypeVar("T")


class Batcher(Generic[T]):
    """Gathers items into lists for ``send``, which answers each item (a reply or an exception)."""

    def __init__(self, send: Callable[[Sequence[T]], Awaitable[Sequence[Any]]], in_flight: int) -> None:
        self._send = send
        self._limit = in_flight
        self._pending: list[tuple[T, asyncio.Future[Any]]] = []
        self._flushes: set[asyncio.Task[None]] = set()
        self._scheduled = False

    async def call(self, item: T) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._schedule()
        return await future

    async def drain(self) -> None:
        """Wait until every call made so far has its answer."""
        while self._pending or self._flushes:
            if self._flushes:
                await asyncio.gather(*self._flushes, return_exceptions=True)
            else:
                await asyncio.sleep(0)

    def _schedule(self) -> None:
        # On the next turn, not now: the callers woken in this turn join the same call of send.
        if not self._scheduled and len(self._flushes) < self._limit:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._launch)

    def _launch(self) -> None:
        self._scheduled = False
        batch = [(item, future) for item, future in self._pending if not future.done()]
        self._pending = []
        if batch:
            task = asyncio.ensure_future(self._flush(batch))
            self._flushes.add(task)
            task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushes.discard(task)
        if self._pending:
            self._schedule()

    async def _flush(self, batch: list[tuple[T, asyncio.Future[Any]]]) -> None:
        try:
            replies = await self._send([item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
