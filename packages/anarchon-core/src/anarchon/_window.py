"""A bound on the claims one instance has out to its backend at once; batches past it wait in order.

Why: nothing bounded them. A backend that answered slower than slots came
due (a broker once its per-subject limits were reached, in the
10-minute soak) had every second's batch of 1,000 claims sent at once and
left waiting; tens of batches were outstanding per instance, the resident
set grew from 174 MB to 1.1 GB, and the pile deepened the server's own
queue, so the fleet fell further behind the longer it ran. Behind the
window a batch waits for its turn instead, and a slot that reaches its
turn later than its job's ``max_late_ms`` is skipped as late, the rule a
late timer already follows (an instance that reaches the claim later than
``slot + max_late_ms`` does not claim; docs/concepts.md). Waiting batches are thereby
bounded too: no batch waits longer than ``max_late_ms`` for nothing.

A batch is let through while nothing is out, whatever its size, so a batch
larger than the bound is never stuck; the turn is first come, first served,
so an old batch is not overtaken by newer ones.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["ClaimWindow"]


class ClaimWindow:
    """At most ``limit`` claims out at once (more only as one batch alone); the rest wait their turn."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"ClaimWindow(limit={limit}): give at least 1")
        self._limit = limit
        self._out = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def out(self) -> int:
        """Claims out to the backend now."""
        return self._out

    @property
    def waiting(self) -> int:
        """Batches waiting for their turn now."""
        return len(self._waiting)

    def _fits(self, n: int) -> bool:
        return self._out == 0 or self._out + n <= self._limit

    async def enter(self, n: int) -> bool:
        """Wait for room for ``n`` claims (none if the window is empty), count them as out; ``True`` if it waited."""
        if not self._waiting and self._fits(n):
            self._out += n
            return False
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((n, turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.leave(n)  # given its turn in the same instant it was cancelled
            else:
                if (n, turn) in self._waiting:
                    self._waiting.remove((n, turn))
                self._wake()  # the batch behind it may fit now
            raise
        return True

    def leave(self, n: int) -> None:
        """``n`` claims are answered (or were never sent): room for the batches waiting."""
        self._out -= n
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            n, turn = self._waiting[0]
            if turn.cancelled():  # its task is on its way out; its except clause finds it gone
                self._waiting.popleft()
                continue
            if not self._fits(n):
                return
            self._waiting.popleft()
            self._out += n
            turn.set_result(None)
