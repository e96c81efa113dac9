"""Jobs that misbehave (exit, block, ignore cancellation, stop their own scheduler) never wedge an instance."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import ClassVar

import pytest

from anarchon import Capabilities, MemoryBackend, MemoryStore, RunStatus, Scheduler
from anarchon._runner import STOP_BOUND_S
from anarchon_conformance import eventually


async def test_system_exit_in_a_job_is_recorded_failed_and_the_instance_goes_on() -> None:
    s = Scheduler(MemoryBackend())

    def leave() -> None:
        raise SystemExit(3)

    async def interrupt() -> None:
        raise KeyboardInterrupt

    s.add("leave", "0 0 1 1 *", leave)
    s.add("interrupt", "0 0 1 1 *", interrupt)
    run = await s.run_now("leave")
    assert run.status is RunStatus.FAILED and run.error == "SystemExit: 3"
    run = await s.run_now("interrupt")
    assert run.status is RunStatus.FAILED and run.error is not None and run.error.startswith("KeyboardInterrupt")


async def test_a_plain_function_returning_a_coroutine_runs_that_coroutine() -> None:
    s = Scheduler(MemoryBackend())
    done: list[str] = []

    async def fetch() -> None:
        await asyncio.sleep(0)
        done.append("fetched")

    s.add("wrapped", "0 0 1 1 *", lambda: fetch())
    assert (await s.run_now("wrapped")).status is RunStatus.SUCCEEDED
    assert done == ["fetched"]


async def test_an_async_job_that_blocks_past_its_timeout_is_timed_out_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="anarchon")
    s = Scheduler(MemoryBackend())

    async def blocking() -> None:
        time.sleep(1.3)

    s.add("blocking", "0 0 1 1 *", blocking, timeout_ms=200)
    async with s:
        await asyncio.sleep(0.3)  # the watchdog ticks
        run = await s.run_now("blocking")
        await asyncio.sleep(0.3)  # the watchdog's next tick reports the block
    assert run.status is RunStatus.TIMED_OUT and "blocked the event loop" in (run.error or "")
    warning = next(r for r in caplog.records if "event loop was blocked" in r.getMessage())
    assert warning.jobs == ["blocking"]  # type: ignore[attr-defined]


async def test_a_job_that_stops_its_own_scheduler_leaves_it_fully_stopped() -> None:
    store = MemoryStore()
    s = Scheduler(MemoryBackend(store))
    stopped = asyncio.Event()

    async def stop_me() -> None:
        await s.stop(grace_ms=2000)
        stopped.set()

    s.add("stopper", "* * * * * *", stop_me, jitter_ms=0)
    await s.start()
    await asyncio.wait_for(stopped.wait(), 5)
    await eventually(lambda: not s.started)  # the stop ran to its end in a task of its own
    (run,) = store.history("stopper", 10)
    assert run.status.final, f"the run that stopped the scheduler is still {run.status}"
    await s.start()  # and it can start and stop again
    assert s.started
    await s.stop()
    assert not s.started


async def test_stop_is_bounded_when_a_job_ignores_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="anarchon")
    s = Scheduler(MemoryBackend())
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # ignores every cancel

    s.add("stubborn", "* * * * * *", stubborn, jitter_ms=0)
    await s.start()
    await eventually(lambda: s._runner.active)
    began = time.monotonic()
    await s.stop(grace_ms=100)
    took = time.monotonic() - began
    release.set()
    assert took < 0.1 + STOP_BOUND_S + 2, f"stop() took {took:.1f} s"
    assert any("ignored cancellation" in r.getMessage() and "stubborn" in r.getMessage() for r in caplog.records)


async def test_stop_returns_when_the_clock_check_turns_the_cancel_into_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that turns a cancellation into its own error (seen with redis-py) must not delay stop()."""

    class Swallowing(MemoryBackend):
        capabilities: ClassVar[Capabilities] = Capabilities(
            lease=True, history_ttl=True, server_clock=True, multi_process=False
        )
        asked = asyncio.Event()

        async def now_ms(self) -> int:
            self.asked.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise ConnectionError("connection closed") from None
            return 0

    backend = Swallowing()
    s = Scheduler(backend)
    s.add("tick", "0 0 1 1 *", lambda: None)
    await s.start()
    await asyncio.wait_for(backend.asked.wait(), 5)
    caplog.set_level(logging.WARNING, logger="anarchon")
    await asyncio.wait_for(s.stop(), 10)
    assert not [r for r in caplog.records if "left behind" in r.getMessage()], "the clock check went back to sleep"
