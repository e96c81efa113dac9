"""The sync face: a scheduler whose event loop runs in a thread of its own.

Flask, Django, gunicorn workers and scripts have no event loop the scheduler
could share, and a scheduler's coroutines cannot be awaited from another
thread's loop (``Future attached to a different loop``). So
:func:`start_in_background` gives the scheduler a loop in a new thread and
returns a :class:`SchedulerThread`: every one of its methods may be called
from any thread except that loop's own; it hands the call to the loop with
:func:`asyncio.run_coroutine_threadsafe`, blocks until the answer or the
timeout, and raises the call's own exception in the caller.

Signal handlers belong to the main thread, so the background loop installs
none: the application stops the scheduler from its own shutdown path (or
leaves that to the ``atexit`` hook registered here, which stops it with the
same grace as :meth:`SchedulerThread.stop`).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .control import PauseState, RunRequest
from .health import HealthServer, check_health_port, serve_health
from .job import Job
from .run import Run
from .scheduler import Scheduler

__all__ = ["SchedulerThread", "start_in_background"]

T = TypeVar("T")

#: How long a call waits for its answer unless told otherwise, in seconds.
DEFAULT_TIMEOUT_S = 30.0
#: How much longer than its timeout a caller waits for a loop that does not answer at all.
LOOP_BLOCKED_S = 10.0


class SchedulerThread:
    """A started scheduler whose loop runs in a thread; made by :func:`start_in_background`.

    Every method blocks the calling thread, at most ``timeout`` seconds
    (``None``: as long as it takes), and raises :class:`TimeoutError` when the
    answer did not come in time; the call is cancelled then. An error of the
    call itself (``JobNotFoundError``, a backend's error) is raised as is.
    """

    def __init__(
        self, scheduler: Scheduler, *, grace_ms: int, name: str, health: tuple[int, str] | None = None
    ) -> None:
        self.scheduler = scheduler
        self.grace_ms = grace_ms
        #: (port, host) of the health endpoints, served on the scheduler's loop; None: none.
        self._health_at = health
        #: The health endpoints once served (:attr:`HealthServer.port` tells a port 0 picked).
        self.health: HealthServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._done: asyncio.Event | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"SchedulerThread({self.scheduler!r}, {state})"

    @property
    def running(self) -> bool:
        """True from a successful start until :meth:`stop` was asked for or the loop ended."""
        return self._ready.is_set() and self._startup_error is None and not self._stopping and self._thread.is_alive()

    # -- the loop's thread ---------------------------------------------------------

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        try:
            try:
                if self._health_at is not None:
                    self.health = await serve_health(self.scheduler, *self._health_at)
                await self.scheduler.start()
            except BaseException as exc:  # handed to the caller of start_in_background(), which raises it
                self._startup_error = exc
                return
            finally:
                self._ready.set()
            await self._done.wait()
        finally:
            if self.health is not None:  # closed before the thread ends, so before the caller sees it end
                await self.health.close()

    async def _stop(self, grace_ms: int) -> None:
        assert self._done is not None
        try:
            await self.scheduler.stop(grace_ms)
        finally:
            self._done.set()

    def _start(self, timeout: float | None) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            loop = self._loop
            self._stopping = True
            if loop is not None:  # give up on the start: cancel it, so the thread ends
                loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks()])
            self._thread.join(5)
            raise TimeoutError(f"the scheduler did not start within {timeout} s; is its backend reachable?")
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error
        atexit.register(self._at_exit)

    # -- any other thread ---------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T], what: str, timeout: float | None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"{what} was called on the scheduler's own loop: await scheduler.{what} there instead")
        with self._lock:
            if not self.running or self._loop is None:
                coro.close()
                raise RuntimeError(f"{what}: the scheduler is stopped; start_in_background() it again")
            future = asyncio.run_coroutine_threadsafe(_bounded(coro, what, timeout), self._loop)
        # The loop keeps the time; this thread waits longer only in case the loop itself is blocked.
        return _answer(future, what, None if timeout is None else timeout + LOOP_BLOCKED_S)

    def history(self, name: str, limit: int = 100, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> list[Run]:
        """The job's runs, newest first: :meth:`Scheduler.history`."""
        return self._submit(self.scheduler.history(name, limit), "history()", timeout)

    def last_run(self, name: str, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> Run | None:
        """The job's newest run, or ``None``: :meth:`Scheduler.last_run`."""
        return self._submit(self.scheduler.last_run(name), "last_run()", timeout)

    def run_now(self, name: str, *, timeout: float | None = None) -> Run:
        """Run the job now on this instance and return the finished run: :meth:`Scheduler.run_now`.

        Waits as long as the job runs unless given a ``timeout``; a run given
        up on is cancelled and recorded so.
        """
        return self._submit(self.scheduler.run_now(name), "run_now()", timeout)

    def pause(
        self,
        name: str,
        *,
        reason: str | None = None,
        by: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> PauseState:
        """Pause the job on every instance: :meth:`Scheduler.pause` (``by``, ``reason``: the audit trail)."""
        return self._submit(self.scheduler.pause(name, reason=reason, by=by), "pause()", timeout)

    def resume(
        self,
        name: str,
        *,
        reason: str | None = None,
        by: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> PauseState | None:
        """End the job's pause: :meth:`Scheduler.resume`."""
        return self._submit(self.scheduler.resume(name, reason=reason, by=by), "resume()", timeout)

    def trigger(
        self,
        name: str,
        *,
        reason: str | None = None,
        by: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> RunRequest:
        """Ask the fleet to run the job once now: :meth:`Scheduler.trigger`."""
        return self._submit(self.scheduler.trigger(name, reason=reason, by=by), "trigger()", timeout)

    def trigger_result(self, request: RunRequest, *, timeout_s: float = 60.0) -> Run:
        """Wait for the run a trigger became: :meth:`Scheduler.trigger_result`."""
        return self._submit(self.scheduler.trigger_result(request, timeout_s=timeout_s), "trigger_result()", None)

    def call(self, func: Callable[[], T], *, timeout: float | None = DEFAULT_TIMEOUT_S) -> T:
        """Call ``func`` on the scheduler's loop and return its result (for what has no method here)."""

        async def on_loop() -> T:
            return func()

        return self._submit(on_loop(), getattr(func, "__name__", "call") + "()", timeout)

    def add(self, name: str, cron: str, func: Callable[..., Any], **options: Any) -> Job:
        """Add a job while the scheduler runs: :meth:`Scheduler.add`, on the loop."""
        return self.call(lambda: self.scheduler.add(name, cron, func, **options))

    def remove(self, name: str) -> Job:
        """Remove a job while the scheduler runs: :meth:`Scheduler.remove`, on the loop."""
        return self.call(lambda: self.scheduler.remove(name))

    def stop(self, grace_ms: int | None = None, *, timeout: float | None = None) -> None:
        """Stop the scheduler (``grace_ms`` for running jobs, then hand-over) and end its thread.

        Safe to call twice and from several threads; every caller returns once
        the loop has ended. ``timeout`` defaults to the grace plus 30 s.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("stop() was called on the scheduler's own loop: await scheduler.stop() there instead")
        grace = self.grace_ms if grace_ms is None else grace_ms
        wait = grace / 1000 + DEFAULT_TIMEOUT_S if timeout is None else timeout
        future: concurrent.futures.Future[None] | None = None
        with self._lock:
            if self.running and self._loop is not None:
                future = asyncio.run_coroutine_threadsafe(self._stop(grace), self._loop)
            self._stopping = True
        if future is not None:
            atexit.unregister(self._at_exit)
            _answer(future, "stop()", wait)
        self._thread.join(wait)
        if self._thread.is_alive():
            raise TimeoutError(f"the scheduler's thread did not end within {wait} s")

    def _at_exit(self) -> None:
        self.stop()

    def __enter__(self) -> SchedulerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _bounded(coro: Coroutine[Any, Any, T], what: str, timeout: float | None) -> T:
    """Await ``coro`` on the loop; past ``timeout`` cancel it and wait until it ended, then raise.

    So when the caller sees the ``TimeoutError``, the call is over: a run
    given up on is already recorded cancelled.
    """
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait([task], timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.wait([task])
        raise TimeoutError(f"{what} got no answer within {timeout} s, and was cancelled")
    return task.result()


def _answer(future: concurrent.futures.Future[T], what: str, timeout: float | None) -> T:
    """The call's result or its own exception; a call not answered in time is cancelled.

    Waited for apart from ``result()``: since Python 3.11 a ``TimeoutError``
    the call itself raised would look like the wait's own.
    """
    done, _ = concurrent.futures.wait([future], timeout)
    if not done:
        future.cancel()
        raise TimeoutError(f"{what}: the scheduler's loop did not answer within {timeout} s (is it blocked?)")
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        raise RuntimeError(f"{what} was cancelled: the scheduler stopped meanwhile") from None


def start_in_background(
    scheduler: Scheduler,
    *,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    grace_ms: int = 10_000,
    name: str = "anarchon",
    health_port: int | None = None,
    health_host: str = "127.0.0.1",
) -> SchedulerThread:
    """Start ``scheduler`` on an event loop in a new daemon thread and return its handle.

    Returns once the scheduler started; an error of ``start()`` (a backend
    that cannot be reached, a job its backend refuses) is raised here, in the
    caller, and no thread is left behind. ``grace_ms`` is what :meth:`stop`
    and the interpreter's exit give running jobs. ``health_port`` serves
    ``/healthz`` and ``/readyz`` (:mod:`anarchon.health`) on the scheduler's
    loop; the handle's ``health.port`` tells the port when 0 was given.
    """
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"start_in_background() needs a Scheduler, not {type(scheduler).__name__}")
    if scheduler.started:
        raise RuntimeError("this scheduler is already started on a loop of its own; stop() it first")
    health = (check_health_port(health_port), health_host) if health_port is not None else None
    handle = SchedulerThread(scheduler, grace_ms=grace_ms, name=name, health=health)
    handle._start(timeout)
    return handle
