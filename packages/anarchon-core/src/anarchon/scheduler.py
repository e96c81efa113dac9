"""The scheduler: one timer for every job, claims through the backend, runs.

One task keeps a heap of (claim time, slot) entries, however many jobs there
are; a job costs a heap entry, not a sleeping task. Slots that come due
together are claimed in one backend call. A backend that fails never raises
into the application: the slot is not run here (an unknown answer is never a
win), the scheduler backs off, and on a lease backend catches up once the
backend answers again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import heapq
import logging
import os
import random
import secrets
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar

from ._collector import CollectionDeferred
from .backend import Backend, Claim, ClaimResult, Grant, Outcome
from .clock import Clock, SystemClock
from .errors import AnarchonError, BackendNotInstalledError, JobNotFoundError
from .job import Job, JobFunc
from .options import check_job_name
from .plugins import PluginManager, install_hint
from .run import Run, RunContext, RunStatus, ms_to_datetime

__all__ = ["Scheduler"]


log = logging.getLogger("anarchon")

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_BACKEND = "sqlite:///anarchon.sqlite3"
BACKEND_ENV = "ANARCHON_BACKEND"

#: Claims due within this many ms of each other share one backend call.
COALESCE_MS = 5
#: Longest pause between take-over polls on a lease backend.
TAKE_OVER_POLL_MS = 1000
#: A take-over poll this close (ms) to a batch of claims waits until the batch's runs started,
#: at most a quarter of its period, so a take-over comes at worst that much later.
TAKE_OVER_QUIET_MS = 50
#: Back-off after a failed backend call, doubling up to the maximum.
BACKOFF_MIN_MS, BACKOFF_MAX_MS = 200, 30_000
SKEW_CHECK_EVERY_MS = 60_000
#: Share of a lease this instance gives up early, so it stops before a backup starts.
LEASE_SAFETY = 0.1


def _default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def _held_until(sent: float, lease_ms: int) -> float:
    """When (monotonic) this instance must presume a lease granted or renewed at ``sent`` lost.

    The backend starts the lease when it receives the call, no earlier than
    ``sent``; giving up a tenth of the lease before that bound leaves room for
    a busy event loop to cancel the job before any backup can take it over.
    """
    return sent + lease_ms * (1 - LEASE_SAFETY) / 1000


def _ignore_outcome(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a call given up on, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Flag:
    """A flag that can be awaited; its Event is made only when someone waits.

    Each run has two, and an Event per run would be a cost paid every slot.
    """

    __slots__ = ("_event", "is_set")

    def __init__(self) -> None:
        self.is_set = False
        self._event: asyncio.Event | None = None

    def set(self) -> None:
        self.is_set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if not self.is_set:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()


@dataclass(eq=False)
class _Active:
    """A run this instance is executing."""

    job: Job
    grant: Grant
    context: RunContext
    #: Monotonic time (s) after which the lease must be presumed lost.
    lease_deadline: float
    #: Monotonic time (s) of the next renewal (lease backends).
    renew_at: float = 0.0
    #: The task the job function runs in; cancelled only while ``in_job``.
    task: asyncio.Task[Any] | None = None
    in_job: bool = False
    #: Cancels requested of ``task`` for the job (stop, lease lost, timeout), undone once it returned.
    cancels: int = 0
    timed_out: bool = False
    cancelled_by_stop: bool = False
    #: Set when the job function returned (a later attempt of this run waits for it).
    returned: _Flag = dataclasses.field(default_factory=_Flag)
    #: Set when the run's bookkeeping is done too (stop() waits for it).
    ended: _Flag = dataclasses.field(default_factory=_Flag)

    def cancel_job(self) -> bool:
        """Cancel the job function if it is still running; its bookkeeping is never interrupted."""
        if not self.in_job or self.task is None or self.task.done():
            return False
        self.cancels += 1
        self.task.cancel()
        return True

    def time_out(self) -> None:
        if self.in_job and not self.cancels:
            self.timed_out = True
            self.cancel_job()

    def job_returned(self) -> None:
        self.in_job = False
        self.returned.set()

    async def wait_job_returned(self) -> None:
        if self.in_job:
            await self.returned.wait()


class Scheduler:
    """Runs each slot of each job on exactly one instance.

    ``backend`` is a :class:`~anarchon.backend.Backend`, a URL whose scheme
    names one (``"redis://cache:6379/0"``), or ``None`` for the
    ``ANARCHON_BACKEND`` environment variable, else ``sqlite:///anarchon.sqlite3``.
    ``clock`` exists for tests and the fault harness.
    """

    def __init__(
        self,
        backend: Backend | str | None = None,
        *,
        instance_id: str | None = None,
        plugins: Iterable[object] = (),
        clock: Clock | None = None,
    ) -> None:
        self._plugins = PluginManager(plugins)
        self.backend = self._resolve_backend(backend)
        self.instance_id = instance_id or _default_instance_id()
        self.clock: Clock = clock or SystemClock()
        self._jobs: dict[str, Job] = {}
        self._explicit: dict[str, dict[str, Any]] = {}
        self._generation: dict[str, int] = {}
        #: Per job, the newest slot a catch-up claimed; the timer must not claim it (or older) again.
        self._caught_up: dict[str, int] = {}
        self._heap: list[tuple[int, int, str, int, int]] = []
        self._seq = 0
        self._active: dict[tuple[str, int, bool], _Active] = {}
        #: (renew_at, seq, key, active) of the runs whose leases the keeper renews; stale entries are skipped.
        self._renewals: list[tuple[float, int, tuple[str, int, bool], _Active]] = []
        self._keeper: asyncio.Task[None] | None = None
        self._keeper_wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Backend calls given up on but not yet ended (referenced here so they are not collected).
        self._calls: set[asyncio.Future[Any]] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._started = False
        self._stopping = False
        self._wake: asyncio.Event | None = None
        #: Claim batches not yet answered and started; ``_no_batches`` is set while there are none.
        self._batches = 0
        self._no_batches: asyncio.Event | None = None
        self._backend_open = False
        self._degraded = False

    def _resolve_backend(self, backend: Backend | str | None) -> Backend:
        if isinstance(backend, Backend):
            return backend
        if backend is None:
            backend = os.environ.get(BACKEND_ENV)
            if not backend:
                if "sqlite" not in self._plugins.schemes():
                    raise BackendNotInstalledError(
                        "no backend given: pass Scheduler(backend=...) or set "
                        f"{BACKEND_ENV}; for the embedded default, {install_hint('anarchon-sqlite')}"
                    )
                backend = DEFAULT_BACKEND
        if isinstance(backend, str):
            return self._plugins.backend_from_url(backend)
        raise TypeError(f"backend must be a Backend, a URL string or None, not {type(backend).__name__}")

    def __repr__(self) -> str:
        return f"Scheduler(backend={self.backend!r}, instance_id={self.instance_id!r}, jobs={len(self._jobs)})"

    # -- jobs ------------------------------------------------------------------

    @property
    def jobs(self) -> Mapping[str, Job]:
        return MappingProxyType(self._jobs)

    @property
    def plugins(self) -> PluginManager:
        return self._plugins

    def build_job(self, name: str, cron: str, func: JobFunc, **options: Any) -> Job:
        """Check a job against this scheduler's backend without adding it."""
        check_job_name(name)
        resolved = self.backend.job_options(name, options)
        job = Job(name, cron, func, resolved)
        self.backend.check_job(job)
        return job

    def add(self, name: str, cron: str, func: JobFunc, **options: Any) -> Job:
        """Register a job; every option is checked here, before anything runs."""
        if name in self._jobs:
            raise ValueError(f"a job named {name!r} is already added; remove() it first or pick another name")
        job = self.build_job(name, cron, func, **options)
        self._jobs[name] = job
        self._explicit[name] = options
        self._generation[name] = self._generation.get(name, 0) + 1
        if self._started and not self._stopping:
            self._schedule_next(job, self.clock.now_ms())
            self._spawn(self._prepare([job]))
            if self._wake is not None:
                self._wake.set()
        return job

    def job(self, cron: str, name: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add`; the name defaults to the function's."""

        def register(func: F) -> F:
            self.add(name or func.__name__, cron, func, **options)
            return func

        return register

    def remove(self, name: str) -> Job:
        """Unregister a job; a run already started finishes normally."""
        try:
            job = self._jobs.pop(name)
            self._explicit.pop(name, None)
        except KeyError:
            raise JobNotFoundError(self._not_found(name)) from None
        self._generation[name] += 1
        return job

    def use_backend(self, backend: Backend | str) -> None:
        """Point a scheduler that is not started at another backend.

        Every job is checked again against the new backend's tier, and none is
        kept unless all pass (``anarchon --backend`` relies on this).
        """
        if self._started:
            raise RuntimeError("use_backend() needs a stopped scheduler; stop() it first")
        previous = self.backend
        self.backend = self._resolve_backend(backend)
        try:
            self._jobs = {
                name: self.build_job(name, job.cron, job.func, **self._explicit[name])
                for name, job in self._jobs.items()
            }
        except BaseException:
            self.backend = previous
            raise

    def _job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise JobNotFoundError(self._not_found(name)) from None

    def _not_found(self, name: str) -> str:
        known = ", ".join(sorted(self._jobs)) or "none"
        return f"no job named {name!r} on this scheduler; jobs: {known}"

    def next_slot(self, name: str) -> datetime:
        return ms_to_datetime(self._job(name).next_slot_ms(self.clock.now_ms()))

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Connect to the backend and begin scheduling every job."""
        if self._started:
            return
        await self._open_backend()
        jobs = list(self._jobs.values())
        try:
            await self._prepare(jobs, raise_errors=True)
        except BaseException:
            await self._close_backend()
            raise
        self._started = True
        self._stopping = False
        self._batches = 0
        self._no_batches = asyncio.Event()
        self._no_batches.set()
        self._wake = asyncio.Event()
        now = self.clock.now_ms()
        for job in jobs:
            self._schedule_next(job, now)
        self._spawn(self._timer_loop())
        if self.backend.capabilities.lease:
            await self._catch_up()
            self._spawn(self._take_over_loop())
        self._spawn(self._check_skew())
        log.info("anarchon started: instance %s, %d jobs, backend %r", self.instance_id, len(jobs), self.backend)
        self._plugins.notify("anarchon_scheduler_started", scheduler=self)

    async def stop(self, grace_ms: int = 10_000) -> None:
        """Stop claiming; give running jobs ``grace_ms`` to finish, then cancel.

        On a lease backend, runs of jobs with ``hand_over`` are released so a
        backup instance takes them over at once.
        """
        if not self._started or self._stopping:
            return
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        waiters = [asyncio.ensure_future(a.ended.wait()) for a in self._active.values()]
        if waiters:
            _, late = await asyncio.wait(waiters, timeout=grace_ms / 1000)
            for waiter in late:
                waiter.cancel()
        for active in list(self._active.values()):
            if active.cancel_job():
                active.cancelled_by_stop = True
                active.context.lease_lost = True
        for active in list(self._active.values()):
            await active.ended.wait()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._heap.clear()
        self._renewals.clear()
        await self._close_backend()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._started = False
        log.info("anarchon stopped: instance %s", self.instance_id)
        self._plugins.notify("anarchon_scheduler_stopped", scheduler=self)

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def run(self, grace_ms: int = 10_000) -> None:
        """Run until SIGINT or SIGTERM, then stop gracefully. Blocks."""
        asyncio.run(self._serve(grace_ms))

    async def _serve(self, grace_ms: int) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop(grace_ms)

    async def _open_backend(self) -> None:
        if not self._backend_open:
            await self.backend.start()
            self._backend_open = True

    async def _close_backend(self) -> None:
        if self._backend_open:
            self._backend_open = False
            await self.backend.close()

    @contextlib.asynccontextmanager
    async def _connected(self) -> Any:
        """The backend, opened for this call when the scheduler is not started."""
        if self._backend_open:
            yield self.backend
            return
        await self._open_backend()
        try:
            yield self.backend
        finally:
            await self._close_backend()

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _backend_call(self, coro: Awaitable[T]) -> asyncio.Future[T]:
        """A backend call as a task the caller may give up on without awaiting its cancellation."""
        call = asyncio.ensure_future(coro)
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)
        return call

    async def _prepare(self, jobs: list[Job], *, raise_errors: bool = False) -> None:
        if not jobs:
            return
        try:
            await self.backend.prepare(jobs)
        except Exception as exc:
            if raise_errors:
                raise
            self._backend_failed("prepare", exc)

    # -- history ---------------------------------------------------------------

    async def history(self, name: str, limit: int = 100) -> list[Run]:
        """The job's runs, newest first (works before start() too)."""
        check_job_name(name)
        async with self._connected() as backend:
            runs: list[Run] = await backend.history(name, limit)
            return runs

    async def last_run(self, name: str) -> Run | None:
        check_job_name(name)
        async with self._connected() as backend:
            run: Run | None = await backend.last_run(name)
            return run

    async def run_now(self, name: str) -> Run:
        """Run the job now on this instance, through the backend, and return the finished run."""
        job = self._job(name)
        async with self._connected():
            slot_ms = self.clock.now_ms()
            for _ in range(5):
                claim = self._claim(job, slot_ms, manual=True)
                sent = time.monotonic()
                (result,) = await self.backend.claim([claim])
                if result.outcome is Outcome.WON and result.grant is not None:
                    run = await self._execute(job, result.grant, sent)
                    if run is None:
                        raise AnarchonError(f"run_now({name!r}): this instance lost the lease during the run")
                    return run
                if result.outcome is Outcome.SKIPPED:
                    self._plugins.notify(
                        "anarchon_slot_skipped", scheduler=self, job=job, slot_ms=slot_ms, reason="overlap"
                    )
                    return result.record or Run(
                        job=name, slot_ms=slot_ms, status=RunStatus.SKIPPED, instance=self.instance_id, manual=True
                    )
                if result.outcome is Outcome.UNKNOWN:
                    break
                slot_ms += 1  # another instance ran it in the same millisecond
            raise AnarchonError(f"run_now({name!r}): the backend did not grant a manual run; try again")

    # -- the timer -----------------------------------------------------------------

    def _schedule_next(self, job: Job, after_ms: int) -> None:
        slot = job.next_slot_ms(after_ms)
        jitter = random.randrange(job.options.jitter_ms) if job.options.jitter_ms else 0
        self._seq += 1
        heapq.heappush(self._heap, (slot + jitter, self._seq, job.name, slot, self._generation[job.name]))

    async def _timer_loop(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            now = self.clock.now_ms()
            if not self._heap or self._heap[0][0] > now:
                delay = (self._heap[0][0] - now) / 1000 if self._heap else None
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                continue
            with CollectionDeferred():
                due = self._pop_due(now)
                if due:
                    self._spawn(self._claim_and_run(self._claims(due)))
            await asyncio.sleep(0)

    def _pop_due(self, now: int) -> list[tuple[Job, int]]:
        """Take the slots due now (and those within ``COALESCE_MS``) off the heap, scheduling each job's next."""
        due: list[tuple[Job, int]] = []
        while self._heap and self._heap[0][0] <= now + COALESCE_MS and self._heap[0][3] <= now:
            _, _, name, slot, generation = heapq.heappop(self._heap)
            job = self._jobs.get(name)
            if job is None or self._generation[name] != generation:
                continue
            self._schedule_next(job, slot)
            if slot <= self._caught_up.get(name, -1):
                continue  # a catch-up claimed it, with the slots it missed
            if now > slot + job.options.max_late_ms:
                log.warning("job %s: slot %s reached %d ms late; skipped", name, ms_to_datetime(slot), now - slot)
                self._plugins.notify("anarchon_slot_skipped", scheduler=self, job=job, slot_ms=slot, reason="late")
                continue
            if self._degraded and self.backend.capabilities.lease:
                # Not claimed while the backend is away; the recovery catches it up.
                self._plugins.notify("anarchon_claim_lost", scheduler=self, job=job, slot_ms=slot, reason="unknown")
                continue
            due.append((job, slot))
        return due

    def _claim(self, job: Job, slot_ms: int, *, manual: bool = False, catch_up: bool = False, missed: int = 0) -> Claim:
        (claim,) = self._claims([(job, slot_ms)], manual=manual, catch_up=catch_up, missed=missed)
        return claim

    def _claims(
        self, due: list[tuple[Job, int]], *, manual: bool = False, catch_up: bool = False, missed: int = 0
    ) -> list[Claim]:
        """Claims of slots due together: one clock reading and one read of randomness for all of them."""
        now = self.clock.now_ms()
        tokens = os.urandom(16 * len(due)).hex()
        instance = self.instance_id
        return [
            Claim(
                job=job,
                slot_ms=slot,
                instance=instance,
                token=tokens[32 * i : 32 * i + 32],
                now_ms=now,
                manual=manual,
                catch_up=catch_up,
                missed=missed,
            )
            for i, (job, slot) in enumerate(due)
        ]

    def _claim_and_run(self, claims: list[Claim]) -> Awaitable[None]:
        """Count the batch as in flight from now (not from when its task starts), then claim and run it."""
        self._batches += 1
        if self._no_batches is not None:
            self._no_batches.clear()
        return self._claim_and_run_batch(claims)

    async def _claim_and_run_batch(self, claims: list[Claim]) -> None:
        try:
            # Not held while the backend answers: that wait may be long (a slow or
            # stalled store, batches overlapping), and collecting then costs nothing.
            results, sent = await self._decide(claims)
            with CollectionDeferred():
                for claim, result in zip(claims, results, strict=True):
                    self._dispatch(claim.job, claim.slot_ms, result, sent)
                # The runs just spawned were queued first: they start (up to their
                # first await) before this task resumes and lets the collector run.
                await asyncio.sleep(0)
        finally:
            self._batches -= 1
            if not self._batches and self._no_batches is not None:
                self._no_batches.set()

    async def _between_batches(self, limit: float) -> None:
        """Wait until no claim batch is in flight or due within ``TAKE_OVER_QUIET_MS``.

        A take-over pass reads every job's runs (a transaction of its own on a
        store): arriving together with a batch, it delayed every run of the
        batch. Waiting is capped at ``limit`` seconds, so dense schedules still get their polls.
        """
        assert self._no_batches is not None
        deadline = time.monotonic() + limit
        while not self._stopping and (left := deadline - time.monotonic()) > 0:
            if self._batches:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._no_batches.wait(), left)
                continue
            gap = self._heap[0][0] - self.clock.now_ms() if self._heap else TAKE_OVER_QUIET_MS
            if gap >= TAKE_OVER_QUIET_MS:
                return
            await asyncio.sleep(min(left, max(gap, 0) / 1000 + 0.002))

    async def _decide(self, claims: list[Claim]) -> tuple[list[ClaimResult], float]:
        """Claim, retrying with the same tokens where that is the only way not to lose the slot.

        A claim backend that recognises a retried token gets retries until the
        slot is too late. A lease backend does not need them: a grant whose
        answer was lost expires and is taken over, and slots not claimed are
        caught up once the backend answers again. Also returns when (monotonic)
        the answering call was sent: a lease runs from then, not from the answer.
        """
        caps = self.backend.capabilities
        retry = caps.idempotent_claim and not caps.lease
        delay = BACKOFF_MIN_MS / 1000
        while True:
            sent = time.monotonic()
            try:
                results = await self.backend.claim(claims)
            except Exception as exc:
                self._backend_failed("claim", exc)
                deadline = min(c.slot_ms + c.job.options.max_late_ms for c in claims)
                if not retry or self._stopping or self.clock.now_ms() + delay * 1000 >= deadline:
                    return [ClaimResult(Outcome.UNKNOWN) for _ in claims], sent
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._backend_ok()
            return results, sent

    def _dispatch(self, job: Job, slot_ms: int, result: ClaimResult, sent: float) -> None:
        if result.outcome is Outcome.WON and result.grant is not None:
            self._spawn(self._execute(job, result.grant, sent))
        elif result.outcome is Outcome.SKIPPED:
            self._plugins.notify("anarchon_slot_skipped", scheduler=self, job=job, slot_ms=slot_ms, reason="overlap")
        else:
            reason = "unknown" if result.outcome is Outcome.UNKNOWN else "lost"
            self._plugins.notify("anarchon_claim_lost", scheduler=self, job=job, slot_ms=slot_ms, reason=reason)

    # -- running -----------------------------------------------------------------

    async def _execute(self, job: Job, grant: Grant, sent: float) -> Run | None:
        """Run one granted slot to its end; the finished record, or None if the lease was lost.

        ``sent`` is when (monotonic) the claim or take-over that granted it was
        sent: the backend started the lease no earlier, so an answer that took
        longer than the lease may come after another instance took the run over.
        Such a grant is not run here but handed over, so that if the backend
        started the lease late (a store that was locked), a backup takes the
        run over at once instead of the slot waiting out a lease nobody uses.
        """
        lease = self.backend.capabilities.lease
        if lease and time.monotonic() >= _held_until(sent, grant.lease_ms):
            log.warning(
                "job %s, slot %s: the grant arrived after its lease could have run out; handing it over",
                job.name,
                ms_to_datetime(grant.slot_ms),
            )
            self._plugins.notify("anarchon_claim_lost", scheduler=self, job=job, slot_ms=grant.slot_ms, reason="stale")
            try:
                await self.backend.hand_over(grant)
            except Exception as exc:
                self._backend_failed("hand_over", exc)
            return None
        if not grant.manual:
            grant = self._covering(job, grant)
        ctx = RunContext(
            job=job,
            slot_ms=grant.slot_ms,
            instance=self.instance_id,
            attempt=grant.attempt,
            fencing=grant.fencing,
            manual=grant.manual,
            catch_up=grant.catch_up,
            missed=grant.missed,
        )
        key = (job.name, grant.slot_ms, grant.manual)
        previous = self._active.get(key)
        if previous is not None:
            # The backend granted this run again, so this instance's earlier attempt lost it there.
            self._lose_lease(previous, "the backend granted the run again (take-over)")
            await previous.wait_job_returned()
        granted = sent
        active = _Active(job, grant, ctx, lease_deadline=_held_until(granted, grant.lease_ms))
        self._active[key] = active
        if lease:
            self._watch_lease(key, active, granted + grant.lease_ms / 3000)
        started_ms = self.clock.now_ms()
        self._plugins.notify("anarchon_run_started", scheduler=self, job=job, context=ctx)
        try:
            status, error = await self._run_job(job, active)
            # Other runs due now start before this one's record is written.
            await asyncio.sleep(0)
            if status is RunStatus.CANCELLED and active.cancelled_by_stop and lease and job.options.hand_over:
                await self._hand_over(active)
                return None
            if ctx.lease_lost and not active.cancelled_by_stop:
                self._plugins.notify(
                    "anarchon_claim_lost", scheduler=self, job=job, slot_ms=grant.slot_ms, reason="stale"
                )
                return None
            finished_ms = self.clock.now_ms()
            run = grant.finished(status, started_ms=started_ms, finished_ms=finished_ms, error=error)
            if not await self._finish(active, run):
                return None
            self._plugins.notify("anarchon_run_finished", scheduler=self, job=job, run=run)
            return run
        finally:
            if self._active.get(key) is active:  # a later attempt of this run may hold the key by now
                del self._active[key]
            active.ended.set()

    @staticmethod
    def _covering(job: Job, grant: Grant) -> Grant:
        """The grant with ``missed`` counting the slots it covers, as a catch-up would.

        Those are the dead run's slot and the slots skipped for it
        (``supersedes``), and the slots nobody decided since the mark it found
        (``previous_mark``, when catch-up is on).
        """
        after = grant.slot_ms
        if grant.supersedes is not None:
            after = grant.supersedes - 1
        if grant.previous_mark is not None and job.options.catch_up_ms > 0:
            after = min(after, grant.previous_mark)
        covered, _ = job.schedule.count_between(after, grant.slot_ms)
        if covered <= 1 and grant.supersedes is None:
            return grant
        return dataclasses.replace(grant, missed=max(grant.missed, covered))

    async def _run_job(self, job: Job, active: _Active) -> tuple[RunStatus, str | None]:
        """Call the job function in this task and say how it ended.

        An async job is awaited here rather than in a task of its own: with
        a thousand runs due at once, a second task per run (and the shield
        and timer around it) was a large share of the delay before the last
        one started. Cancelling this task while ``in_job`` stops the job
        alone; :meth:`_Active.cancel_job` refuses once it returned.
        """
        ctx = active.context
        args = (ctx,) if job.takes_context else ()
        task = asyncio.current_task()
        active.task = task
        active.in_job = True
        timer = None
        if job.options.timeout_ms:
            timer = asyncio.get_running_loop().call_later(job.options.timeout_ms / 1000, active.time_out)
        status: RunStatus
        error: str | None = None
        try:
            await self._call(job, args)
        except asyncio.CancelledError:
            status = RunStatus.CANCELLED
        except asyncio.TimeoutError:
            status = RunStatus.TIMED_OUT
        except Exception as exc:
            log.error("job %s, slot %s failed", job.name, ctx.slot, exc_info=exc)
            status, error = RunStatus.FAILED, _error_text(exc)
        else:
            status = RunStatus.SUCCEEDED
        finally:
            active.job_returned()
            if timer is not None:
                timer.cancel()
            if sys.version_info >= (3, 11) and task is not None:
                for _ in range(active.cancels):
                    task.uncancel()  # those cancels were the job's, not this task's: finishing must not see them
        if status is RunStatus.TIMED_OUT or active.timed_out:
            return RunStatus.TIMED_OUT, f"TimeoutError: no result within timeout_ms={job.options.timeout_ms}"
        return status, error

    async def _call(self, job: Job, args: tuple[RunContext, ...] | tuple[()]) -> None:
        if job.is_async:
            await job.func(*args)
            return
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="anarchon-job")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, lambda: job.func(*args))

    def _watch_lease(self, key: tuple[str, int, bool], active: _Active, at: float) -> None:
        """Have the keeper renew this run's lease at ``at``; one keeper serves every run."""
        active.renew_at = at
        self._seq += 1
        heapq.heappush(self._renewals, (at, self._seq, key, active))
        if self._keeper is None or self._keeper.done():
            self._keeper_wake = asyncio.Event()
            self._keeper = self._spawn(self._keep_leases())
        elif self._renewals[0][3] is active and self._keeper_wake is not None:
            self._keeper_wake.set()

    async def _keep_leases(self) -> None:
        """Renew every third of each lease, the runs due together in one call.

        A lease is presumed lost at its local deadline. The keeper ends when no
        run holds a lease; the next run starts it again.
        """
        assert self._keeper_wake is not None
        wake = self._keeper_wake
        heap = self._renewals
        while True:
            while heap and (self._active.get(heap[0][2]) is not heap[0][3] or heap[0][0] != heap[0][3].renew_at):
                heapq.heappop(heap)
            if not heap:
                self._keeper = None
                return
            now = time.monotonic()
            if heap[0][0] > now:
                wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), heap[0][0] - now)
                continue
            due: list[tuple[tuple[str, int, bool], _Active]] = []
            while heap and heap[0][0] <= now:
                at, _, key, active = heapq.heappop(heap)
                if self._active.get(key) is not active or active.renew_at != at:
                    continue
                if now >= active.lease_deadline:
                    self._lose_lease(active, "the lease could not be renewed before it expired")
                    continue
                due.append((key, active))
            if due:
                await self._renew_due(due)

    async def _renew_due(self, due: list[tuple[tuple[str, int, bool], _Active]]) -> None:
        sent = time.monotonic()
        limit = max(0.001, min(a.lease_deadline for _, a in due) - sent)
        renewing = self._backend_call(self.backend.renew([a.grant for _, a in due]))
        try:
            await asyncio.wait((renewing,), timeout=limit)
        except asyncio.CancelledError:
            renewing.cancel()
            raise
        try:
            if not renewing.done():
                # Cancelled but not awaited: a client can take long to cancel a call (asyncpg waits
                # for the server to confirm it over a held link), and the keeper must stop runs meanwhile.
                renewing.cancel()
                renewing.add_done_callback(_ignore_outcome)  # kept in _calls until it ends
                raise asyncio.TimeoutError(f"no answer within {limit:.3f} s")
            results = renewing.result()
        except (Exception, asyncio.TimeoutError) as exc:
            self._backend_failed("renew", exc)
            now = time.monotonic()
            for key, active in due:
                if self._active.get(key) is active:
                    self._watch_lease(key, active, now + min(0.1, max(0.0, active.lease_deadline - now)))
            return
        now = time.monotonic()
        for (key, active), ok in zip(due, results, strict=True):
            if self._active.get(key) is not active:
                continue
            if not ok:
                self._lose_lease(active, "another instance took the run over")
                continue
            active.lease_deadline = _held_until(sent, active.grant.lease_ms)
            self._watch_lease(key, active, now + active.grant.lease_ms / 3000)

    def _lose_lease(self, active: _Active, why: str) -> None:
        log.warning("job %s, slot %s: %s; stopping this run", active.job.name, active.context.slot, why)
        active.context.lease_lost = True
        active.cancel_job()

    async def _finish(self, active: _Active, run: Run) -> bool:
        """Record the run; keep trying while the lease holds, so a success is not run again."""
        delay = BACKOFF_MIN_MS / 1000
        lease = self.backend.capabilities.lease
        attempts = 0
        while True:
            try:
                ok = await self.backend.finish(active.grant, run)
            except Exception as exc:
                self._backend_failed("finish", exc)
                attempts += 1
                if (lease and active.context.lease_lost) or (not lease and attempts >= 5):
                    log.error("job %s, slot %s: could not record the run: %s", run.job, run.slot, _error_text(exc))
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._backend_ok()
            if not ok:
                active.context.lease_lost = True
                self._plugins.notify(
                    "anarchon_claim_lost", scheduler=self, job=active.job, slot_ms=run.slot_ms, reason="stale"
                )
            return bool(ok)

    async def _hand_over(self, active: _Active) -> None:
        try:
            await self.backend.hand_over(active.grant)
            log.info("job %s, slot %s: handed over on stop", active.job.name, active.context.slot)
        except Exception as exc:
            self._backend_failed("hand_over", exc)

    # -- lease tier: take-over and catch-up ------------------------------------------------

    async def _take_over_loop(self) -> None:
        while not self._stopping:
            jobs = list(self._jobs.values())
            leases = [j.options.lease_ms for j in jobs] or [TAKE_OVER_POLL_MS * 3]
            period = min(TAKE_OVER_POLL_MS, min(leases) / 3) / 1000
            await asyncio.sleep(period * random.uniform(0.75, 1.25))
            await self._between_batches(period / 4)
            if jobs and not self._stopping:
                await self._take_over(jobs)

    async def _take_over(self, jobs: list[Job]) -> bool:
        """One take-over pass: run every expired run the backend grants this instance."""
        sent = time.monotonic()
        try:
            results = await self.backend.take_over(jobs, self.instance_id)
        except Exception as exc:
            self._backend_failed("take_over", exc)
            return False
        self._backend_ok()
        for result in results:
            if result.grant is None or self._stopping:
                continue
            job = self._jobs.get(result.grant.job)
            if job is None:
                continue
            log.info(
                "job %s, slot %s: taken over (attempt %d)",
                job.name,
                ms_to_datetime(result.grant.slot_ms),
                result.grant.attempt,
            )
            self._spawn(self._execute(job, result.grant, sent))
        return True

    async def _catch_up(self) -> None:
        """Run, once, the newest slot missed while no instance could claim it."""
        jobs = [j for j in self._jobs.values() if j.options.catch_up_ms > 0]
        if not jobs:
            return
        try:
            marks = await self.backend.marks(jobs)
        except Exception as exc:
            self._backend_failed("marks", exc)
            return
        self._claim_missed(jobs, marks)

    def _claim_missed(self, jobs: list[Job], marks: Mapping[str, int | None]) -> None:
        now = self.clock.now_ms()
        claims = []
        for job in jobs:
            mark = marks.get(job.name)
            if mark is None:
                continue
            missed, newest = job.schedule.count_between(mark, now)
            if newest is not None and now - newest <= job.options.catch_up_ms:
                claims.append(self._claim(job, newest, catch_up=True, missed=missed))
                self._caught_up[job.name] = newest
        if claims:
            self._spawn(self._claim_and_run(claims))

    async def _check_skew(self) -> None:
        if not self.backend.capabilities.server_clock:
            return
        while not self._stopping:
            try:
                sent = self.clock.now_ms()
                remote = await self.backend.now_ms()
                skew = (sent + self.clock.now_ms()) // 2 - remote
            except Exception as exc:
                self._backend_failed("now_ms", exc)
            else:
                limits = [j.options.max_late_ms // 4 for j in self._jobs.values()]
                if limits and abs(skew) > min(limits):
                    log.warning(
                        "this instance's clock is %d ms off the backend's (more than a quarter of max_late_ms); "
                        "slots will be claimed early or late: synchronise the clock (NTP)",
                        skew,
                    )
                    self._plugins.notify("anarchon_clock_skew", scheduler=self, backend=self.backend, skew_ms=skew)
            await asyncio.sleep(SKEW_CHECK_EVERY_MS / 1000)

    # -- backend health ------------------------------------------------------------

    def _backend_failed(self, operation: str, exc: BaseException) -> None:
        if not self._degraded:
            log.warning("backend %r: %s failed: %s; retrying with back-off", self.backend, operation, _error_text(exc))
            self._degraded = True
            if self.backend.capabilities.lease and self._started and not self._stopping:
                self._spawn(self._recover())
        self._plugins.notify("anarchon_backend_error", scheduler=self, operation=operation, error=exc)

    def _backend_ok(self) -> None:
        if self._degraded and not self.backend.capabilities.lease:
            log.info("backend %r answers again", self.backend)
            self._degraded = False

    async def _recover(self) -> None:
        """Probe a lease backend with back-off; once it answers, take over, catch up, claim again.

        Claims pause meanwhile, so the first answer after an outage is the
        catch-up's, not a new slot's that would move the mark past the missed
        ones. Runs that died during the outage are taken over first: a
        catch-up claim would otherwise abandon them as superseded, and the
        slots skipped for them would have run nothing.
        """
        delay = BACKOFF_MIN_MS
        while not self._stopping:
            await asyncio.sleep(delay / 1000 * random.uniform(0.8, 1.2))
            jobs = list(self._jobs.values())
            try:
                marks = await self.backend.marks(jobs)
            except Exception as exc:
                self._plugins.notify("anarchon_backend_error", scheduler=self, operation="marks", error=exc)
                delay = min(delay * 2, BACKOFF_MAX_MS)
                continue
            log.info("backend %r answers again; catching up", self.backend)
            if not await self._take_over(jobs):
                delay = min(delay * 2, BACKOFF_MAX_MS)
                continue
            self._claim_missed([j for j in jobs if j.options.catch_up_ms > 0], marks)
            self._degraded = False
            return
