"""What a job's call can hand back, and which of its exceptions a run contains.

Pure helpers for the scheduler's run path:

* :func:`settle` awaits what a *sync* job function returned when it is
  awaitable: ``add("w", cron, lambda: some_async())`` makes a sync job (the
  lambda) whose call returns a coroutine; without this the coroutine never
  runs and the run is recorded ``succeeded``.
* :func:`contained` says which exceptions end the run as ``failed`` instead of
  leaving the job: every ``Exception``, and also ``SystemExit`` and
  ``KeyboardInterrupt`` raised by the job itself (a ``sys.exit()`` deep in a
  library must not kill every instance in turn as each takes the run over).
  ``asyncio.CancelledError`` and ``GeneratorExit`` are not: they are how the
  scheduler stops a run.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ._errortext import error_text

__all__ = ["JobExit", "call_async", "call_sync", "contained", "settle"]


class JobExit(Exception):
    """A ``SystemExit`` or ``KeyboardInterrupt`` a job raised, carried as an ordinary exception.

    asyncio re-raises those two out of the event loop from any task that
    raises them, awaited or not, and a worker thread hands them to whoever
    awaits its future; so they are turned into this where the job runs, and
    the run records the original (``"SystemExit: 3"``).
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(error_text(original))
        self.original = original

    def __str__(self) -> str:
        return str(self.args[0])


def call_sync(func: Callable[..., Any], *args: Any) -> Any:
    """Call a sync job function (in its worker thread), its exit exceptions carried as :class:`JobExit`."""
    try:
        return func(*args)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise JobExit(exc) from exc


async def call_async(awaitable: Awaitable[Any]) -> Any:
    """Await an async job (and whatever awaitable it returns), its exit exceptions carried as :class:`JobExit`."""
    try:
        return await settle(awaitable)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise JobExit(exc) from exc


async def settle(value: object) -> object:
    """``value``, awaited first if it is awaitable (a coroutine, a future, a task)."""
    while inspect.isawaitable(value):
        value = await value
    return value


def contained(exc: BaseException) -> bool:
    """Whether a run that raised ``exc`` is recorded ``failed`` and the scheduler goes on."""
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return False
    return isinstance(exc, (Exception, SystemExit, KeyboardInterrupt))
