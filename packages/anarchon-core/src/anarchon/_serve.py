"""``Scheduler.run()``: start, wait for SIGINT or SIGTERM, stop; a second signal forces the stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Protocol

__all__ = ["serve"]

log = logging.getLogger("anarchon")


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self, grace_ms: int = ...) -> None: ...


async def serve(scheduler: _Startable, cancel_runs: Callable[[], None], grace_ms: int) -> None:
    """Start, wait for a signal, stop with ``grace_ms``; a second signal cancels the runs now."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def signalled() -> None:
        if stop.is_set():
            log.warning("second signal: cancelling the running jobs now")
            cancel_runs()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, signalled)
    await scheduler.start()
    try:
        await stop.wait()
    finally:
        await scheduler.stop(grace_ms)
