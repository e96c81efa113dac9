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

__all__ = ["contained", "settle"]


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
