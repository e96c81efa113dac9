"""The instance's clock, injectable so tests and the fault harness can skew it.

Only the scheduler reads it (to decide when slots are due and how late a claim
is). Backends judge leases on their own clock, so a skewed instance can be late
or early, never the owner of a lease it should not hold.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SkewedClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch, as this instance believes."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class SkewedClock:
    """The system clock off by ``offset_ms`` (positive: runs ahead)."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def __repr__(self) -> str:
        return f"SkewedClock(offset_ms={self.offset_ms})"
