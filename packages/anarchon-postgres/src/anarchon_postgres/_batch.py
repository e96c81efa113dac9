"""Send the finishes made at the same moment as one statement.

The scheduler calls :meth:`~anarchon.backend.Backend.finish` once per run, so
when a thousand jobs are due in one second a thousand finishes start within
milliseconds of each other. Sent one by one, each is a transaction of its
own: a commit (a WAL flush) per run, and the four connections of the pool
busy with finishes while the next second's claim waits for one. Gathered
here, the finishes of one event-loop turn go out as one ``UPDATE … FROM
unnest(…)``, one commit; those made while a statement is out wait for the
next one, a couple at most in flight so a claim always finds a connection.

Each caller gets its own reply; a statement that fails as a whole (the
connection dropped) fails every finish in it, each of which the scheduler
retries as it would a single call. The same gatherer as anarchon-redis's
``_batch`` (a pipeline there); kept apart so neither package imports the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["Batcher"]

T = TypeVar("T")

#: Statements out at once: one slow reply does not hold up the next turn's finishes, and claims keep a connection.
IN_FLIGHT = 2


class Batcher(Generic[T]):
    """Gathers items into lists for ``send``, which answers each item (a reply or an exception)."""

    def __init__(self, send: Callable[[Sequence[T]], Awaitable[Sequence[Any]]], in_flight: int = IN_FLIGHT) -> None:
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
        # On the next turn, not now: the callers woken in this turn join the same statement.
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
