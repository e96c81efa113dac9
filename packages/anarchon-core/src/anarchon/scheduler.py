"""The scheduler: a thin front over the parts that schedule, claim and run.

It owns the job registry, the lifecycle, history and ``run_now``, and wires
the parts, each a module of its own (see ``ARCHITECTURE.md`` beside the
package's README)::

    SlotTimer (_timer) ──due slots──▶ ClaimBatcher (_batcher) ──grants──▶ RunExecutor (_runner)
                                                                            │   └─ JobInvoker (_invoke)
    Recovery (_recovery): take-over, catch-up ──grants──▶ RunExecutor       └─ LeaseKeeper (_keeper)
    BackendHealth (_health) ◀── every failed backend call; starts Recovery on an outage
    watch_skew (_skew), Observers (observers), Tasks (_tasks), JobRegistry (_registry)

A backend that fails never raises into the application: the slot is not run
here (an unknown answer is never a win), the scheduler backs off, and on a
lease backend catches up once the backend answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from ._active import ActiveRuns
from ._backfill import Backfilling
from ._batcher import ClaimBatcher
from ._build import build_job
from ._control_loop import ControlLoop
from ._fleetwatch import FleetWatch
from ._health import BackendHealth, error_text
from ._identity import check_instance_id, default_instance_id
from ._keeper import LeaseKeeper
from ._pausegate import PauseGate
from ._rank import Ranker
from ._reading import Reading
from ._recovery import Recovery
from ._registry import JobRegistry
from ._runner import RunExecutor
from ._runnow import RunNow
from ._serve import serve
from ._skew import watch_skew
from ._steer import Steering
from ._storedwatch import StoredWatch
from ._taskbook import TaskBook
from ._tasks import Tasks
from ._timer import SlotTimer
from ._version import app_version, check_drift
from ._watchdog import watch_loop
from .backend import Backend, LeaseBackend
from .clock import Clock, SystemClock
from .context import JobFunc
from .errors import BackendUnavailableError
from .every_instance import fit
from .fleet import DriftPolicy
from .groups import refuse_groups
from .guarantees import log_guarantees
from .heartbeat import Heartbeat
from .job import Job
from .observers import Observers
from .options import check_job_name
from .plugins import PluginManager

__all__ = ["Scheduler"]

log = logging.getLogger("anarchon")

F = TypeVar("F", bound=Callable[..., Any])

#: How long stop() waits for its own tasks (timer, keeper, loops) once cancelled.
TASKS_BOUND_S = 1.0
#: Back-off between connection attempts of start(wait=False).
CONNECT_BACKOFF_MIN_S, CONNECT_BACKOFF_MAX_S = 0.2, 30.0
#: How long start() waits for the first heartbeat to be acknowledged (backends with liveness).
FIRST_BEAT_TIMEOUT_S = 10.0


class Scheduler(Steering, Backfilling, Reading, RunNow, TaskBook):
    """Runs each slot of each job on exactly one instance.

    ``backend`` is a :class:`~anarchon.backend.Backend`, a URL whose scheme
    names one (``"redis://cache:6379/0"``), or ``None`` for the
    ``ANARCHON_BACKEND`` environment variable, else ``sqlite:///anarchon.sqlite3``.
    ``clock`` exists for tests and the fault harness. ``version`` (shown in
    the fleet registry) and ``drift`` (which definition of a job runs when
    live instances differ: ``"newest"``, ``"oldest"`` or ``"each"``) are on
    the docs page "Rolling deploys and the fleet".
    """

    def __init__(
        self,
        backend: Backend | str | None = None,
        *,
        instance_id: str | None = None,
        plugins: Iterable[object] = (),
        clock: Clock | None = None,
        liveness: bool = True,
        version: str | None = None,
        drift: DriftPolicy = "newest",
    ) -> None:
        if not isinstance(liveness, bool):
            raise TypeError(f"liveness={liveness!r} must be True (the default) or False")
        #: This application's version, shown in the fleet registry (see anarchon._version).
        self.version = app_version(version)
        #: Which definition of a job runs when live instances differ (see anarchon._fleetwatch).
        self.drift = check_drift(drift)
        #: Keep a heartbeat where the backend offers one (see anarchon.liveness). Without it this
        #: instance's runs survive a backend outage up to 0.9 x lease_ms, and wait for their lease
        #: when it dies.
        self.liveness = liveness
        self._plugins = PluginManager(plugins)
        self.backend = self._plugins.resolve(backend)
        self.instance_id = check_instance_id(instance_id) if instance_id is not None else default_instance_id()
        self.clock: Clock = clock or SystemClock()
        self._registry = JobRegistry()
        self._task_funcs: dict[str, Callable[..., Any]] = {}
        self._observers = Observers(self._plugins, self)
        self._started = False
        #: Connected and scheduling; False while start(wait=False) waits for the backend.
        self._ready = False
        self._stopping = False
        self._backend_open = False
        self._stopper: asyncio.Future[None] | None = None
        self._wire()

    def _wire(self) -> None:
        """Build the parts around the current backend (again after :meth:`use_backend`)."""
        backend, clock, instance = self.backend, self.clock, self.instance_id
        leases = backend if isinstance(backend, LeaseBackend) else None
        self._tasks = Tasks()
        self._health = BackendHealth(backend, self._observers)
        self._health.on_outage = self._on_outage
        active = ActiveRuns()
        observers = self._observers
        self._keeper = (
            LeaseKeeper(leases, clock, active, self._health, observers, self._tasks) if leases is not None else None
        )
        self._runner = RunExecutor(backend, clock, instance, self._health, self._observers, self._keeper, active)
        run = self._runner.execute
        #: The batcher claims through the pause gate: a paused job's slots are recorded paused.
        self._gate = PauseGate(backend)
        self._batcher = ClaimBatcher(
            self._gate,
            clock,
            instance,
            self._health,
            observers,
            self._tasks,
            run=run,
            runlog=self._runner.runlog,
            stopping=self._is_stopping,
        )
        self._fleetwatch = FleetWatch(
            backend, self._registry, instance, self.version, self.drift, clock, self._health, observers,
            stopping=self._is_stopping, tasks=self._task_funcs,
            beating=lambda: self._heartbeat is not None and self._heartbeat.beating(),
        )  # fmt: skip
        registry = self._registry
        self._stored = StoredWatch(
            backend, self._task_funcs, clock, self._health, install=self._install_stored, uninstall=self.remove,
            is_code_job=lambda name: name in registry and not registry.is_stored(name),
            fleet=lambda: self._fleetwatch.fleet, stopping=self._is_stopping,
        )  # fmt: skip
        self._ranker = Ranker(instance, lambda: self._fleetwatch.fleet, observers, clock.now_ms, registry.snapshot)
        self._timer = SlotTimer(
            self._registry, clock, self._health, observers, lease=leases is not None, on_due=self._on_due,
            delay=self._ranker.delay_ms,
        )  # fmt: skip
        self._heartbeat: Heartbeat | None = None
        self._control = ControlLoop(
            backend, self._gate, self._registry, self._health, self._tasks, self._batcher, instance, clock,
            run=run, stopping=self._is_stopping,
        )  # fmt: skip
        self._recovery = None if leases is None else Recovery(
            leases, clock, instance, self._registry, self._health, self._observers, self._tasks, self._batcher,
            self._timer, run=run, stopping=self._is_stopping, beating=self._beating,
            reports_dead=lambda: self._heartbeat is not None, claims=self._fleetwatch.runs,
        )  # fmt: skip

    def _on_due(self, due: list[tuple[Job, int, int]]) -> None:
        """Slots came due: claim those of jobs whose definition here runs, unless heard decided (anarchon._rank)."""
        self._batcher.submit_due(self._ranker.undecided(due, self._fleetwatch.runs))

    def _is_stopping(self) -> bool:
        return self._stopping

    def _beating(self) -> bool:
        return self._heartbeat is None or self._heartbeat.beating()

    def _on_outage(self) -> None:
        if self._recovery is not None and self._ready and not self._stopping:
            self._tasks.spawn(self._recovery.recover())

    def __repr__(self) -> str:
        return f"Scheduler(backend={self.backend!r}, instance_id={self.instance_id!r}, jobs={len(self._registry)})"

    # -- jobs ------------------------------------------------------------------

    @property
    def jobs(self) -> Mapping[str, Job]:
        return self._registry.view

    @property
    def superseded(self) -> frozenset[str]:
        """Jobs whose slots this instance does not claim: live instances hold another definition that runs.

        Empty unless definitions drift and the ``drift`` policy is ``"newest"`` or ``"oldest"``.
        """
        return self._fleetwatch.superseded

    @property
    def plugins(self) -> PluginManager:
        return self._plugins

    @property
    def started(self) -> bool:
        """Whether :meth:`start` ran and :meth:`stop` has not finished."""
        return self._started

    def build_job(self, name: str, cron: str, func: JobFunc, **options: Any) -> Job:
        """Check a job against this scheduler's backend without adding it."""
        return fit(build_job(self.backend, name, cron, func, **options), self.liveness, self.instance_id)

    def add(self, name: str, cron: str, func: JobFunc, **options: Any) -> Job:
        """Register a job; every option is checked here, before anything runs."""
        check_job_name(name)
        if name in self._registry and not self._registry.is_stored(name):
            raise ValueError(f"a job named {name!r} is already added; remove() it first or pick another name")
        job = self.build_job(name, cron, func, **options)
        if name in self._registry:  # a stored schedule of that name ran here: the code job wins
            self._stored.yield_to_code(name)
        return self._install(job, options, stored=False)

    def _install(self, job: Job, options: dict[str, Any], *, stored: bool) -> Job:
        self._registry.add(job, options, stored=stored)
        if self._ready and not self._stopping:
            self._timer.schedule(job, self.clock.now_ms())
            self._tasks.spawn(self._prepare([job]))
            self._timer.wake()
        return job

    def job(self, cron: str, name: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add`; the name defaults to the function's."""

        def register(func: F) -> F:
            self.add(name or func.__name__, cron, func, **options)
            return func

        return register

    def remove(self, name: str) -> Job:
        """Unregister a job; a run already started finishes normally."""
        return self._registry.remove(name)

    def use_backend(self, backend: Backend | str) -> None:
        """Point a scheduler that is not started at another backend.

        Every job is checked again against the new backend's tier, and none is
        kept unless all pass (``anarchon --backend`` relies on this).
        """
        if self._started:
            raise RuntimeError("use_backend() needs a stopped scheduler; stop() it first")
        resolved = self._plugins.resolve(backend)
        self._registry.rebuild(lambda name, cron, func, **options: build_job(resolved, name, cron, func, **options))
        self.backend = resolved
        self._wire()

    def next_slot(self, name: str) -> datetime | None:
        """The job's next slot after now, in UTC; None when it has no more (an ``@at`` that has passed)."""
        return self._registry.get(name).next_slot(self.clock.now_ms())

    # -- lifecycle -----------------------------------------------------------

    async def start(self, *, wait: bool = True) -> None:
        """Connect to the backend and begin scheduling every job.

        With ``wait=True`` (the default) an unreachable backend raises here,
        so a deploy fails fast. With ``wait=False`` the scheduler starts
        degraded instead: ``start()`` returns at once, the backend is tried
        again with back-off (0.2 s doubling to 30 s), and jobs are claimed
        once it answers; :attr:`ready` and the ``anarchon_scheduler_started``
        hook say when. A job the backend refuses is not a blip: that error is
        logged on every try, never swallowed silently.
        """
        if self._started:
            return
        if wait:
            await self._connect()
            self._started, self._stopping = True, False
            await self._begin()
            return
        self._started, self._stopping = True, False
        self._tasks.spawn(self._connect_later())

    @property
    def ready(self) -> bool:
        """Connected and scheduling (false while a ``start(wait=False)`` still waits for the backend)."""
        return self._ready

    async def _connect(self) -> None:
        await self._open_backend()
        try:
            await self._prepare(self._registry.all(), raise_errors=True)
            await self._fleetwatch.check_id()  # before the first beat: never beat under a live instance's id
            await self._start_heartbeat()
            await self._fleetwatch.join()  # before the first claim: a superseded definition never claims
            await self._load_stored()
        except BaseException:
            await self._stop_heartbeat()
            await self._close_backend()
            raise

    async def _load_stored(self) -> None:
        """Read the stored schedules before the first claim; one unread does not stop the start (the poll retries)."""
        try:
            await self._stored.load()
        except Exception as exc:
            log.warning("stored schedules: not read yet: %s; trying again every second", error_text(exc))
            self._health.failed("schedules", exc)

    async def _start_heartbeat(self) -> None:
        """Beat once before the first claim: a run claimed without a record would wait out its lease if we died."""
        heart = self.backend.heart() if isinstance(self.backend, LeaseBackend) and self.liveness else None
        if heart is None:
            return refuse_groups(self._registry.snapshot(), repr(self.backend), self.backend.capabilities.groups)
        active = self._runner.active
        beat = Heartbeat(heart, self.instance_id, on_dead=self._on_dead, busy=lambda: bool(active))
        if not await beat.start(FIRST_BEAT_TIMEOUT_S):
            await beat.stop(leave=False)
            raise BackendUnavailableError(
                f"backend {self.backend!r} answered, but this instance's first heartbeat was not acknowledged "
                f"within {FIRST_BEAT_TIMEOUT_S:.0f} s (the log of 'anarchon.liveness' says why); "
                "check that the backend accepts one more connection per instance"
            )
        self._heartbeat = self._runner.heartbeat = beat

    async def _stop_heartbeat(self) -> None:
        beat, self._heartbeat = self._heartbeat, None
        self._runner.heartbeat = None
        if beat is not None:
            await beat.stop(leave=True)

    def _on_dead(self, dead: Mapping[str, int]) -> None:
        """Another instance's heartbeat expired: take its runs over now rather than at their lease."""
        if self._recovery is None or self._stopping or not self._ready:
            return
        log.info(
            "instance(s) %s stopped beating; taking their runs over",
            ", ".join(sorted(dead)),
            extra={"instance": self.instance_id, "dead": sorted(dead)},
        )
        self._tasks.spawn(self._recovery.take_over(self._registry.all()))

    async def _connect_later(self) -> None:
        delay = CONNECT_BACKOFF_MIN_S
        while not self._stopping:
            try:
                await self._connect()
            except Exception as exc:
                log.warning(
                    "backend %r not ready: %s; trying again in %.1f s (start(wait=False))",
                    self.backend,
                    error_text(exc),
                    delay,
                )
                self._observers.backend_error("start", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, CONNECT_BACKOFF_MAX_S)
                continue
            await self._begin()
            return

    async def _begin(self) -> None:
        """Schedule every job: the timer, and on a lease backend catch-up and take-over."""
        jobs = self._registry.all()
        caps = self.backend.capabilities
        if caps.pause or caps.trigger:
            await self._control.refresh_pauses()  # before the first claim: a restart never runs a paused slot
            self._tasks.spawn(self._control.run_forever())
        self._tasks.spawn(self._fleetwatch.run_forever())
        self._tasks.spawn(self._stored.run_forever())
        self._batcher.start()
        start_ms = self.clock.now_ms()
        if self._recovery is not None:
            # Marks read and catch-up claims sent before this instance's first plain claim, which would
            # move the mark past the gap (the timer then skips the slots the catch-up claimed).
            await self._recovery.catch_up()
        self._timer.start(jobs, start_ms)
        self._ready = True
        self._tasks.spawn(self._timer.run())
        self._tasks.spawn(self._ranker.watch(self.backend, self._is_stopping))
        if self._recovery is not None:
            self._tasks.spawn(self._recovery.take_over_loop())
        self._tasks.spawn(
            watch_skew(self.backend, self.clock, self._registry, self._health, self._observers, self._is_stopping)
        )
        self._tasks.spawn(watch_loop(self._runner.active, self._runner.invoker, self._is_stopping))
        if self._heartbeat is not None:
            assert isinstance(self.backend, LeaseBackend)
            watch = self._heartbeat.watch(
                self._runner.active, self.backend, self._observers, self._health, self._is_stopping
            )
            self._tasks.spawn(watch)
        self._tasks.spawn(log_guarantees(self.backend))  # what the referee promises, once, off the claim path
        log.info("anarchon started: instance %s, %d jobs, backend %r", self.instance_id, len(jobs), self.backend)
        self._observers.scheduler_started()

    async def stop(self, grace_ms: int = 10_000) -> None:
        """Stop claiming; give running jobs ``grace_ms`` to finish, then cancel.

        On a lease backend, runs of jobs with ``hand_over`` are released so a
        backup instance takes them over at once.
        """
        if not self._started or self._stopping:
            return
        if self._runner.runs_in(asyncio.current_task()):
            # A job stopping its own scheduler: waiting here would wait for that very job. Stop in a
            # task of its own (the job is cancelled after the grace like any other) and return.
            self._stopper = asyncio.ensure_future(self.stop(grace_ms))
            await asyncio.sleep(0)
            return
        self._stopping = True
        self._timer.stop()
        began = time.monotonic()
        await self._batcher.drain(grace_ms / 1000)  # grants answered now are run, not dropped
        await self._runner.stop(max(0, grace_ms - round((time.monotonic() - began) * 1000)))
        left = await self._tasks.cancel_all(TASKS_BOUND_S)  # runs that ignore cancellation were waited for above
        if left:
            log.warning("stop: %d task(s) did not end within %.0f s of their cancel; left behind", left, TASKS_BOUND_S)
        self._timer.clear()
        if self._keeper is not None:
            self._keeper.clear()
        await self._fleetwatch.leave()
        await self._stop_heartbeat()
        await self._close_backend()
        self._started = self._ready = False
        log.info("anarchon stopped: instance %s", self.instance_id)
        self._observers.scheduler_stopped()

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def run(self, grace_ms: int = 10_000) -> None:
        """Run until SIGINT or SIGTERM, then stop gracefully (a second signal cancels runs now). Blocks."""
        asyncio.run(serve(self, self._runner.cancel_all, grace_ms))

    async def _open_backend(self) -> None:
        if not self._backend_open:
            await self.backend.start()
            self._backend_open = True

    async def _close_backend(self) -> None:
        if self._backend_open:
            self._backend_open = False
            await self.backend.close()

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Backend]:
        """The backend, opened for this call when the scheduler is not started."""
        if self._backend_open:
            yield self.backend
            return
        await self._open_backend()
        try:
            yield self.backend
        finally:
            await self._close_backend()

    async def _prepare(self, jobs: list[Job], *, raise_errors: bool = False) -> None:
        if not jobs:
            return
        try:
            await self.backend.prepare(jobs)
        except Exception as exc:
            if raise_errors:
                raise
            self._health.failed("prepare", exc)
