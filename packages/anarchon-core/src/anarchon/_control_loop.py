"""The control poll: every instance reads the pauses and the run requests, twice a second.

With ``capabilities.control_notify`` the backend tells each instance when a
pause, a resume or a request was written, so it reads them then, and every
:data:`~anarchon.control.CONTROL_NOTIFIED_POLL_MS` in case a notice was lost:
two reads every 10 s instead of four a second per instance.

Each pass reads the namespace's pauses into the :class:`PauseGate` the claim
path consults, then the run requests (``trigger``) for jobs this instance
has. Every instance that sees a request claims it as a manual run of the
request's slot; the lease rules decide that claim once, so exactly one live
instance runs it, and a request whose claim was decided (won or lost) is
forgotten. A winner that dies is a run like any other: its lease expires and
a backup takes it over.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from ._batcher import ClaimBatcher
from ._health import BackendHealth
from ._pausegate import PauseGate
from ._registry import JobRegistry
from ._tasks import Tasks
from ._waits import at_most
from .backend import Backend, Grant, Outcome
from .clock import Clock
from .control import CONTROL_NOTIFIED_POLL_MS, CONTROL_POLL_MS, RunRequest
from .errortext import error_text
from .job import Job

__all__ = ["ControlLoop"]

log = logging.getLogger("anarchon.control")


class ControlLoop:
    def __init__(
        self,
        backend: Backend,
        gate: PauseGate,
        registry: JobRegistry,
        health: BackendHealth,
        tasks: Tasks,
        batcher: ClaimBatcher,
        instance_id: str,
        clock: Clock,
        *,
        run: Callable[[Job, Grant, float, int | None], Awaitable[object]],
        stopping: Callable[[], bool],
    ) -> None:
        self._backend = backend
        self._gate = gate
        self._registry = registry
        self._health = health
        self._tasks = tasks
        self._batcher = batcher
        self._instance_id = instance_id
        self._clock = clock
        self._run = run
        self._stopping = stopping

    async def run_forever(self) -> None:
        """Poll twice a second; with ``capabilities.control_notify``, when told and every 10 s.

        A watch that ended (it should not: it subscribes again by itself)
        leaves the instance polling twice a second, as without notices.
        """
        changed = asyncio.Event()
        watch = None
        if self._backend.capabilities.control_notify:
            watch = asyncio.ensure_future(self._backend.watch_control(changed.set))
            watch.add_done_callback(_ended)
        try:
            while not self._stopping():
                every = CONTROL_NOTIFIED_POLL_MS if watch is not None and not watch.done() else CONTROL_POLL_MS
                await at_most(changed.wait(), every / 1000 * random.uniform(0.75, 1.25))
                changed.clear()  # before the poll: a notice during it makes another
                if not self._stopping():
                    await self.poll()
        finally:
            if watch is not None:
                watch.cancel()
                await asyncio.wait([watch])

    async def refresh_pauses(self) -> bool:
        """Read the pauses; at start this comes before the first claim, so a restart never runs a paused slot."""
        if not self._backend.capabilities.pause:
            return True
        try:
            pauses = await self._backend.pauses()
        except Exception as exc:
            self._health.failed("pauses", exc)
            return False
        self._gate.update(pauses)
        return True

    async def poll(self) -> None:
        if not await self.refresh_pauses() or not self._backend.capabilities.trigger:
            return
        try:
            requests = await self._backend.run_requests()
        except Exception as exc:
            self._health.failed("run_requests", exc)
            return
        mine = [(r, job) for r in requests if (job := self._registry.find(r.job)) is not None]
        if mine and not self._stopping():
            await self._take(mine)

    async def _take(self, requests: list[tuple[RunRequest, Job]]) -> None:
        claims = self._batcher.claims([(job, r.slot_ms) for r, job in requests], manual=True)
        sent = self._clock.monotonic()
        try:
            results = await self._backend.claim(claims)
        except Exception as exc:
            self._health.failed("claim", exc)
            return
        self._health.ok()
        done: list[RunRequest] = []
        for (request, job), result in zip(requests, results, strict=True):
            if result.outcome is Outcome.UNKNOWN:
                continue
            done.append(request)
            if result.outcome is Outcome.WON and result.grant is not None:
                log.info(
                    "job %s: run requested by %s taken by %s",
                    job.name,
                    request.by or "?",
                    self._instance_id,
                    extra={"job": job.name, "slot_ms": request.slot_ms, "instance": self._instance_id},
                )
                self._tasks.spawn(self._run(job, result.grant, sent, None))
        if done:
            try:
                await self._backend.run_requests_done(done)
            except Exception as exc:  # taken again on the next poll: its claim is then lost, and forgotten
                self._health.failed("run_requests_done", exc)


def _ended(watch: asyncio.Future[None]) -> None:
    error = None if watch.cancelled() else watch.exception()
    if error is not None:
        log.warning("control notices stopped (%s): pauses and run requests are read twice a second", error_text(error))
