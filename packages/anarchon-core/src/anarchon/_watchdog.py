"""Notice an event loop that a job blocks, and name the job.

A sync call inside an ``async def`` job (``time.sleep``, a blocking driver)
stops every other job and every lease renewal on that loop, and its
``timeout_ms`` cannot fire while it blocks. :class:`LoopWatchdog` is a task
that wakes every ``period_s`` and measures how late it woke: a lag over
``threshold_s`` means something held the loop, and the runs active then are
the suspects, named in the warning with the time lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

__all__ = ["LoopWatchdog"]

log = logging.getLogger("anarchon")


class LoopWatchdog:
    """``start()`` in the loop to watch, ``stop()`` when done; ``suspects()`` names the runs active now."""

    def __init__(
        self,
        suspects: Callable[[], Iterable[str]],
        *,
        threshold_s: float = 0.5,
        period_s: float = 0.1,
        on_block: Callable[[float, list[str]], None] | None = None,
    ) -> None:
        if threshold_s <= 0 or period_s <= 0:
            raise ValueError(f"threshold_s={threshold_s!r} and period_s={period_s!r} must be positive")
        self._suspects = suspects
        self.threshold_s = threshold_s
        self.period_s = period_s
        self._on_block = on_block or self._warn
        self._task: asyncio.Task[None] | None = None
        #: Every block seen: (seconds the loop was held, the runs active then).
        self.blocks: list[tuple[float, list[str]]] = []

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="anarchon-watchdog")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            # Who was running when the loop was last free: the job that blocks it is among them.
            before = sorted(set(self._suspects()))
            asked = time.monotonic()
            await asyncio.sleep(self.period_s)
            lag = time.monotonic() - asked - self.period_s
            if lag > self.threshold_s:
                names = sorted(set(before) | set(self._suspects()))
                self.blocks.append((lag, names))
                self._on_block(lag, names)

    @staticmethod
    def _warn(lag: float, names: list[str]) -> None:
        log.warning(
            "the event loop was blocked for %.3f s while job(s) %s ran: a blocking call in an async job stops "
            "every other job and lease renewal; make the job a plain def (it then runs in a thread) or await "
            "asyncio.to_thread(...)",
            lag,
            ", ".join(names) or "(none)",
        )
