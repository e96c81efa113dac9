"""The clock-skew check: this instance's clock against the backend's, once a minute.

Only backends that judge leases on a clock of their own
(``capabilities.server_clock``) are asked. A skew beyond a quarter of the
smallest ``max_late_ms`` makes claims early or late, so it is logged and
reported to observers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ._health import BackendHealth
from ._registry import JobRegistry
from .backend import Backend
from .clock import Clock
from .observers import Observers

__all__ = ["SKEW_CHECK_EVERY_MS", "watch_skew"]

log = logging.getLogger("anarchon.clock")

SKEW_CHECK_EVERY_MS = 60_000


async def watch_skew(
    backend: Backend,
    clock: Clock,
    registry: JobRegistry,
    health: BackendHealth,
    observers: Observers,
    stopping: Callable[[], bool],
) -> None:
    if not backend.capabilities.server_clock:
        return
    while not stopping():
        try:
            sent = clock.now_ms()
            remote = await backend.now_ms()
            skew = (sent + clock.now_ms()) // 2 - remote
        except Exception as exc:
            if stopping():
                return  # a client that turned the stop's cancellation into an error of its own
            health.failed("now_ms", exc)
        else:
            observers.clock_checked(backend, skew)
            lowest = registry.lowest("max_late_ms")
            if lowest is not None and abs(skew) > lowest // 4:
                log.warning(
                    "this instance's clock is %d ms off the backend's (more than a quarter of max_late_ms); "
                    "slots will be claimed early or late: synchronise the clock (NTP)",
                    skew,
                )
                observers.clock_skew(backend, skew)
        await asyncio.sleep(SKEW_CHECK_EVERY_MS / 1000)
