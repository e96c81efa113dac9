"""Decided slots told to every watcher of a :class:`~anarchon.memory.MemoryStore` (capability ``decided_notify``).

The reference for the server backends' ``PUBLISH`` and ``NOTIFY``: each claim
call that decided scheduled slots tells every :meth:`MemoryDecided.watch` once,
in whichever thread's event loop it watches. The control notices
(``_memory_control``) use the same fan-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence

__all__ = ["MemoryDecided"]

Heard = Callable[[Sequence[tuple[str, int]]], None]


class MemoryDecided:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: list[tuple[asyncio.AbstractEventLoop, Heard]] = []

    def tell(self, decided: Sequence[tuple[str, int]]) -> None:
        if not decided:
            return
        with self._lock:
            watchers = list(self._watchers)
        told = tuple(decided)
        for loop, heard in watchers:
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(heard, told)

    async def watch(self, heard: Heard) -> None:
        """Tell ``heard`` of every decision from now on, until cancelled."""
        entry = (asyncio.get_running_loop(), heard)
        with self._lock:
            self._watchers.append(entry)
        try:
            await asyncio.Event().wait()
        finally:
            with self._lock:
                self._watchers.remove(entry)
