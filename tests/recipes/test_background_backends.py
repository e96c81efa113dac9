"""The sync face against real backends: one background scheduler, many plain threads calling it."""

from __future__ import annotations

import asyncio
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from anarchon import BackendUnavailableError, RunStatus, Scheduler, start_in_background
from anarchon_conformance import free_port


def test_many_threads_run_and_read_jobs_through_one_handle(backend_url: str) -> None:
    """Eight threads, each with a job of its own: every manual run is recorded once, in each thread's answer."""
    scheduler = Scheduler(backend_url)
    names = [f"flask-cleanup-{i}" for i in range(8)]  # matched by the fixture's cleanup of 'flask-cleanup*'
    threads_seen: set[str] = set()
    for name in names:
        scheduler.add(name, "0 0 1 1 *", lambda: threads_seen.add(threading.current_thread().name))
    barrier = threading.Barrier(len(names))
    with start_in_background(scheduler) as handle:

        def use(name: str) -> tuple[list[str], str | None, int]:
            barrier.wait()
            statuses = [handle.run_now(name, timeout=60).status.value for _ in range(3)]
            last = handle.last_run(name)
            return statuses, last.status.value if last else None, len(handle.history(name))

        with ThreadPoolExecutor(len(names)) as pool:
            answers = list(pool.map(use, names))
    assert answers == [(["succeeded"] * 3, "succeeded", 3)] * len(names)
    assert threads_seen and all(t.startswith("anarchon-job") for t in threads_seen)


def test_a_scheduled_job_runs_on_the_background_loop_and_is_recorded(backend_url: str) -> None:
    scheduler = Scheduler(backend_url)
    ticked = threading.Event()
    scheduler.add("service-heartbeat", "* * * * * *", lambda: ticked.set(), jitter_ms=0)
    handle = start_in_background(scheduler)
    try:
        assert ticked.wait(15), "the every-second job never ran on the background loop"
    finally:
        handle.stop(grace_ms=2000)
    history = asyncio.run(Scheduler(backend_url).history("service-heartbeat"))  # read by another scheduler
    assert history and history[0].status in {RunStatus.SUCCEEDED, RunStatus.RUNNING}
    assert {r.instance for r in history if r.status is RunStatus.SUCCEEDED} == {scheduler.instance_id}


def test_an_unreachable_redis_at_start_is_raised_to_the_caller() -> None:
    pytest.importorskip("anarchon_redis")
    from anarchon_redis import RedisBackend

    port = free_port()  # nothing listens there
    scheduler = Scheduler(RedisBackend(f"redis://127.0.0.1:{port}/0", connect_timeout_ms=500))
    scheduler.add("flask-cleanup", "* * * * *", lambda: None)
    with pytest.raises(BackendUnavailableError, match=f"127.0.0.1:{port}"):
        start_in_background(scheduler, name="anarchon-unreachable")
    assert "anarchon-unreachable" not in [t.name for t in threading.enumerate()]


def test_a_redis_that_never_answers_at_start_times_out_and_leaves_no_thread() -> None:
    """A server that accepts the connection and never replies (a hung host): the start is given up on."""
    pytest.importorskip("anarchon_redis")
    from anarchon_redis import RedisBackend

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        scheduler = Scheduler(RedisBackend(f"redis://127.0.0.1:{port}/0", connect_timeout_ms=60_000))
        with pytest.raises(TimeoutError, match="did not start within 0.5 s"):
            start_in_background(scheduler, timeout=0.5, name="anarchon-hung")
    assert "anarchon-hung" not in [t.name for t in threading.enumerate()]
