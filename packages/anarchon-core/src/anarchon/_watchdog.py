"""The event-loop watchdog: a job that blocks the loop is named, not guessed at.

Every job, every claim and every lease renewal of an instance shares one
event loop, so an ``async def`` job that calls ``time.sleep`` or blocking I/O
stalls all of them, and a lease can expire under a run that is still alive.
A tick every ``TICK_S`` measures how late the loop woke; past ``BLOCKED_S``
a warning names the async jobs that were running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ._active import ActiveRuns
from ._invoke import JobInvoker

__all__ = ["BLOCKED_S", "watch_loop"]

log = logging.getLogger("anarchon.runs")

TICK_S = 0.25
#: A loop late by this much is reported.
BLOCKED_S = 1.0


def _running(active: ActiveRuns) -> set[str]:
    return {a.job.name for a in active.values() if a.in_job and a.job.is_async}


async def watch_loop(active: ActiveRuns, invoker: JobInvoker, stopping: Callable[[], bool]) -> None:
    while not stopping():
        before = time.monotonic()
        running = _running(active)
        await asyncio.sleep(TICK_S)
        woke = time.monotonic()
        late = woke - before - TICK_S
        if late >= BLOCKED_S:
            ended = {name for name, began, done in invoker.recent if done >= before and began <= woke}
            suspects = sorted(running | ended | _running(active))
            log.warning(
                "the event loop was blocked for %.1f s while these async jobs ran: %s; an async job that "
                "calls blocking code (time.sleep, blocking I/O) stalls every job and every lease renewal: "
                "await asyncio.sleep instead, or make the job a plain def, which runs in a thread",
                late,
                ", ".join(suspects) or "none (the blocking code was not a job's)",
                extra={"blocked_s": late, "jobs": suspects},
            )
