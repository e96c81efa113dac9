"""The instance's clock, injectable so tests and the fault harness can skew or drive it.

Two readings, kept together: ``now_ms()``, the wall clock (when slots are due,
how late a claim is, the times recorded on runs), and ``monotonic()``, the
clock that measures durations on the event loop (when a claim was sent, when
a lease must be presumed lost, when to renew it). The scheduler's parts read
both from the one clock they are given, never from :mod:`time`, so a test can
run them on :class:`LoopClock` and fast-forward the event loop (with
``looptime``) instead of waiting. In production both are the system's:
``monotonic()`` is :func:`time.monotonic`, the clock asyncio's own timers use.

Backends judge leases on their own clock, so a skewed instance can be late or
early, never the owner of a lease it should not hold. The heartbeat runs in a
thread with a loop of its own and reads :func:`time.monotonic` itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "LoopClock", "SkewedClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch, as this instance believes."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps, on the base of the event loop's timers."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


class SkewedClock(SystemClock):
    """The system clock off by ``offset_ms`` (positive: runs ahead); durations are the system's."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.offset_ms

    def __repr__(self) -> str:
        return f"SkewedClock(offset_ms={self.offset_ms})"


class LoopClock:
    """Both readings from the running event loop's time: wall = ``start_ms`` + loop time.

    For tests: under an event loop whose time is fast-forwarded (``looptime``),
    every sleep, timeout and deadline of the parts moves with it, and so does
    the wall clock, so a test of many seconds takes none. ``start_ms`` is the
    wall time when the loop's time reads 0.
    """

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def now_ms(self) -> int:
        return self.start_ms + round(self.monotonic() * 1000)

    def __repr__(self) -> str:
        return f"LoopClock(start_ms={self.start_ms})"
