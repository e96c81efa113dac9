"""The background tasks of one scheduler, so that ``stop()`` can end them all."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["Tasks", "ignore_outcome"]

T = TypeVar("T")


def ignore_outcome(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a call given up on, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


class Tasks:
    """Tasks the scheduler spawned, and backend calls it gave up on but that have not ended."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Referenced here so that a call given up on is not collected before it ends.
        self._calls: set[asyncio.Future[Any]] = set()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def call(self, coro: Awaitable[T]) -> asyncio.Future[T]:
        """A backend call as a task the caller may give up on without awaiting its cancellation."""
        call = asyncio.ensure_future(coro)
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)
        return call

    async def cancel_all(self, bound_s: float) -> int:
        """Cancel every task and wait for them, ``bound_s`` at most; how many ignored the cancel.

        A task left behind (a job that swallows cancellation) stays referenced until it ends.
        """
        for task in list(self._tasks):
            task.cancel()
        if not self._tasks:
            return 0
        _, pending = await asyncio.wait(list(self._tasks), timeout=bound_s)
        for task in pending:
            task.add_done_callback(ignore_outcome)
        return len(pending)
