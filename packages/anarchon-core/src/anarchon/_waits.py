"""Bounded waits without a task of their own.

``asyncio.wait_for`` (before Python 3.12) runs what it waits for in a task of
its own: every bounded wait costs a task, its scheduling and a callback, on
top of the loop's own wake-up. An instance makes such waits all its life (the
slot timer, the lease keeper, the control and group polls, the heartbeat four
times a second), so that machinery was a measurable share of an idle
instance's CPU (the heartbeat thread's alone: 1.45 to 1.57 ms a second
against 1.23 to 1.34 without it, on a two-core virtual machine).
``asyncio.timeout`` (Python 3.11 and later) cancels the waiting task itself at
the deadline instead; Python 3.10 keeps ``wait_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["at_most", "within"]

T = TypeVar("T")


async def within(call: Awaitable[T], seconds: float | None) -> T:
    """``await call``, raising ``TimeoutError`` after ``seconds`` (``None``: no bound)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await call
    return await asyncio.wait_for(call, seconds)  # pragma: no cover - Python 3.10


async def at_most(waitable: Awaitable[object], seconds: float | None) -> None:
    """Wait for ``waitable`` (an event, a flag), ``seconds`` at most; running out is not an error."""
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        await within(waitable, seconds)
