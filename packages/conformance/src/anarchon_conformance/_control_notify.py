"""Control changes told to the fleet (capability ``control_notify``): what lets instances poll every 10 s.

With ``control_notify`` an instance reads the pauses and run requests when
told, and otherwise only every ``CONTROL_NOTIFIED_POLL_MS`` (10 s), so a
pause, a resume and a run request must each be told to every watcher, and a
watch must say when its subscription is made (what came before was not heard).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._requires import gated

__all__ = ["ControlNotifyTests"]

#: The bound on a notice reaching another instance.
HEARD_S = 5.0


class _Bell:
    """``watch_control``'s ``changed``: how often it rang, and an event per ring."""

    def __init__(self) -> None:
        self.rings = 0
        self.rang = asyncio.Event()

    def __call__(self) -> None:
        self.rings += 1
        self.rang.set()

    async def after(self, act: Callable[[], Awaitable[object]], what: str) -> None:
        """Do ``act`` and wait for a ring that came after it started."""
        self.rang.clear()
        await act()
        try:
            await asyncio.wait_for(self.rang.wait(), HEARD_S)
        except TimeoutError:
            raise AssertionError(f"{what} was not told to the watching instance within {HEARD_S} s") from None


@contextlib.asynccontextmanager
async def _watching(listener: Instance) -> AsyncIterator[_Bell]:
    bell = _Bell()
    watch = asyncio.ensure_future(listener.backend.watch_control(bell))
    try:
        try:
            await asyncio.wait_for(bell.rang.wait(), HEARD_S + 10)
        except TimeoutError:
            raise AssertionError("watch_control() never said its subscription was made") from None
        assert not watch.done(), f"watch_control() returned: {watch}"
        yield bell
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch


@gated("control_notify")
class ControlNotifyTests(SuiteBase):
    """A pause, a resume and a run request made by one instance are each told to another."""

    async def test_a_pause_a_resume_and_a_request_are_each_told(self, conformance: Conformance) -> None:
        listener, writer = await conformance.instances(2)
        job = conformance.job("ctl-told")
        async with _watching(listener) as bell:
            await bell.after(lambda: writer.backend.pause(job.name, reason="told?"), "a pause")
            assert [p.job for p in await listener.backend.pauses() if p.paused] == [job.name]
            await bell.after(lambda: writer.backend.resume(job.name), "a resume")
            await bell.after(lambda: writer.backend.request_run(job.name), "a run request")
            assert [r.job for r in await listener.backend.run_requests()] == [job.name]
