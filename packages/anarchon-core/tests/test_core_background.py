"""The sync face on the memory backend: a scheduler in its own thread, driven from plain threads.

These tests are plain functions: no event loop runs in the test's thread, as
in a Flask or Django process. The same calls against SQLite and Redis are in
tests/recipes/test_background_backends.py.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import anarchon
from anarchon import (
    BackendUnavailableError,
    JobNotFoundError,
    MemoryBackend,
    MemoryStore,
    RunContext,
    RunStatus,
    Scheduler,
    SchedulerThread,
    start_in_background,
)


class Unreachable(MemoryBackend):
    """A memory store whose connection cannot be opened, as a backend down at deploy."""

    async def start(self) -> None:
        raise BackendUnavailableError("memory://: connection refused (test)")


def test_start_in_background_is_public() -> None:
    assert {"start_in_background", "SchedulerThread"} <= set(anarchon.__all__)


def test_calls_from_many_threads_each_get_their_own_answer() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    ran_in: list[str] = []
    for i in range(8):
        scheduler.add(f"job-{i}", "0 0 1 1 *", lambda: ran_in.append(threading.current_thread().name))
    handle = start_in_background(scheduler)
    try:

        def use(i: int) -> tuple[str, int, str | None]:
            name = f"job-{i}"
            run = handle.run_now(name, timeout=30)
            runs = handle.history(name)
            last = handle.last_run(name)
            return run.status.value, len(runs), last.instance if last else None

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(use, range(8)))
    finally:
        handle.stop()
    assert answers == [("succeeded", 1, scheduler.instance_id)] * 8
    assert len(ran_in) == 8 and all(name.startswith("anarchon-job") for name in ran_in)


def test_scheduled_slots_run_on_the_background_loop() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    ticked = threading.Event()

    async def tick(ctx: RunContext) -> None:
        assert not ctx.manual
        ticked.set()

    with start_in_background(scheduler) as handle:
        handle.add("tick", "* * * * * *", tick, jitter_ms=0)
        assert ticked.wait(10), "an every-second job added through the handle never ran"
        assert "tick" in scheduler.jobs
        handle.remove("tick")
        assert "tick" not in scheduler.jobs
    assert not handle.running


def test_errors_of_a_call_are_raised_in_the_caller() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))

    def boom() -> None:
        raise RuntimeError("kaput")

    scheduler.add("boom", "0 0 1 1 *", boom)
    with start_in_background(scheduler) as handle:
        with pytest.raises(JobNotFoundError, match="nosuch"):
            handle.run_now("nosuch")
        with pytest.raises(ValueError, match="job name"):
            handle.history("not a name")
        failed = handle.run_now("boom")  # a failing job is a failed run, not an error of the call
    assert failed.status is RunStatus.FAILED and failed.error == "RuntimeError: kaput"


def test_a_call_not_answered_in_time_raises_and_is_cancelled() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    scheduler.add("forever", "0 0 1 1 *", forever)
    with start_in_background(scheduler) as handle:
        with pytest.raises(TimeoutError, match=r"run_now\(\) got no answer within 0.5 s"):
            handle.run_now("forever", timeout=0.5)
        assert started.is_set()
        runs = handle.history("forever")
    assert [r.status for r in runs] == [RunStatus.CANCELLED]


def test_a_backend_down_at_start_is_raised_to_the_caller_and_leaves_no_thread() -> None:
    scheduler = Scheduler(Unreachable(MemoryStore()))
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(BackendUnavailableError, match="connection refused"):
        start_in_background(scheduler, name="anarchon-doomed")
    assert not [t for t in threading.enumerate() if t.name == "anarchon-doomed" and t.ident not in before]


def test_stop_from_several_threads_at_once_then_calls_are_refused() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    scheduler.add("job", "0 0 1 1 *", lambda: None)
    handle = start_in_background(scheduler, name="anarchon-stopping")
    assert handle.running
    barrier = threading.Barrier(4)

    def stop() -> None:
        barrier.wait()
        handle.stop(grace_ms=1000)

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(stop) for _ in range(4)]:
            future.result(30)
    assert not handle.running
    assert "anarchon-stopping" not in [t.name for t in threading.enumerate()]
    with pytest.raises(RuntimeError, match="the scheduler is stopped"):
        handle.history("job")
    handle.stop()  # a second stop is a no-op


def test_calling_the_handle_from_its_own_loop_says_what_to_do() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    seen: list[BaseException] = []
    box: list[SchedulerThread] = []

    async def job() -> None:
        try:
            box[0].history("job")
        except RuntimeError as exc:
            seen.append(exc)

    scheduler.add("job", "0 0 1 1 *", job)
    with start_in_background(scheduler) as handle:
        box.append(handle)
        handle.run_now("job")
    assert len(seen) == 1 and "await scheduler.history()" in str(seen[0])


def test_start_in_background_refuses_what_is_not_a_scheduler() -> None:
    with pytest.raises(TypeError, match="needs a Scheduler, not str"):
        start_in_background("redis://localhost")  # type: ignore[arg-type]


def test_a_started_scheduler_is_refused() -> None:
    scheduler = Scheduler(MemoryBackend(MemoryStore()))
    with start_in_background(scheduler), pytest.raises(RuntimeError, match="already started"):
        start_in_background(scheduler)
