"""Running one granted slot to its end: context, lease watch, the call, the record.

The executor owns the table of runs in progress (:class:`ActiveRuns`). A run
is handed to the lease keeper while it holds a lease; once its job returned,
its record is written with retries until the backend answers, even past a
lease lost meanwhile (so a success is never run again: the run's token makes
the backend refuse the record after a take-over); and on ``stop()`` a run of a
job with ``hand_over`` is released to a backup.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from ._active import ActiveRun, ActiveRuns
from ._health import BackendHealth, error_text
from ._invoke import JobInvoker
from ._keeper import LeaseKeeper, held_until, lose_lease
from ._notrun import report_not_run
from ._places import CANCELLED, Places
from ._retry import invoke_with_retries
from ._revive import Reviver
from ._runlog import RunLog
from .backend import Backend, Grant, LeaseBackend
from .clock import Clock
from .context import RunContext
from .heartbeat import Heartbeat
from .job import Job
from .observers import Observers
from .run import Run, RunStatus, ms_to_datetime

__all__ = ["RunExecutor", "covering"]

log = logging.getLogger("anarchon.runs")

#: Back-off after a failed write of a run's record, doubling up to 2 s.
FINISH_BACKOFF_S = 0.2
#: The back-off's bound once the lease is lost: the record must reach a recovered backend before
#: the fleet, which may take the run over as soon as it sees this instance's heartbeat expired.
FINISH_BACKOFF_LOST_S = 0.5
#: Tries to write a record on a claim backend, which has no lease to bound them.
CLAIM_FINISH_TRIES = 5
#: After the grace and the cancel, how long stop() still waits for runs that ignore cancellation.
STOP_BOUND_S = 5.0


def covering(job: Job, grant: Grant) -> Grant:
    """The grant with ``missed`` counting the slots it covers, as a catch-up would.

    Those are the dead run's slot and the slots skipped for it
    (``supersedes``), and the slots nobody decided since the mark it found
    (``previous_mark``, when catch-up is on).
    """
    after = grant.slot_ms
    if grant.supersedes is not None:
        after = grant.supersedes - 1
    if grant.previous_mark is not None and job.options.catches_up:
        after = min(after, grant.previous_mark)
    covered, _ = job.schedule.count_between(after, grant.slot_ms)
    if covered <= 1 and grant.supersedes is None:
        return grant
    return dataclasses.replace(grant, missed=max(grant.missed, covered))


class RunExecutor:
    def __init__(
        self,
        backend: Backend,
        clock: Clock,
        instance_id: str,
        health: BackendHealth,
        observers: Observers,
        keeper: LeaseKeeper | None,
        active: ActiveRuns,
    ) -> None:
        self._backend = backend
        #: The same backend when it holds leases (hand-over needs one).
        self._leases = backend if isinstance(backend, LeaseBackend) else None
        self._clock = clock
        self._instance_id = instance_id
        self._health = health
        self._observers = observers
        self._keeper = keeper
        self.active = active
        self.runlog = RunLog()
        #: This instance's heartbeat, on a backend with liveness: a grant is run only while it holds.
        self.heartbeat: Heartbeat | None = None
        self.invoker = JobInvoker(self.runlog)
        #: Places in concurrency groups, on a backend that holds them.
        self.places = Places(backend, clock, instance_id, health) if backend.capabilities.groups else None
        self._stopping = False
        #: stop() ended the grace: records still unwritten are given up.
        self._forced = False
        revives = self._leases is not None and backend.capabilities.revive
        self._reviver = (
            Reviver(self._leases, clock, instance_id, health, lambda: self._stopping)
            if revives and self._leases is not None
            else None
        )

    async def execute(self, job: Job, grant: Grant, sent: float, due_ms: int | None = None) -> Run | None:
        """Run one granted slot to its end (see :meth:`_execute`); then, if it found a run dead, revive.

        A take-over or a grant superseding a dead run learned that a run was dead: the slots skipped
        for it meanwhile are revived and run here, one after another, after this run (``_revive``).
        """
        known_ms = self._clock.now_ms()
        run = await self._execute(job, grant, sent, due_ms)
        if run is not None and self._reviver is not None:
            await self._reviver.after(job, grant, known_ms, self._execute)
        return run

    async def _execute(self, job: Job, grant: Grant, sent: float, due_ms: int | None = None) -> Run | None:
        """Run one granted slot to its end; the finished record, or None if the lease was lost.

        ``due_ms`` is when its claim was due (slot plus jitter), for a plain
        scheduled claim: the run's start delay is counted from it.

        ``sent`` is when (monotonic) the claim or take-over that granted it was
        sent: the backend started the lease no earlier, so an answer that took
        longer than the lease may come after another instance took the run over.
        Such a grant is not run here but handed over, so that if the backend
        started the lease late (a store that was locked), a backup takes the
        run over at once instead of the slot waiting out a lease nobody uses.
        """
        late = self._clock.monotonic() >= held_until(sent, grant.lease_ms)
        if self._leases is not None and (late or (self.heartbeat is not None and not self.heartbeat.held(sent))):
            log.warning(
                "job %s, slot %s: %s; handing it over",
                job.name,
                ms_to_datetime(grant.slot_ms),
                "the grant arrived after its lease could have run out"
                if late
                else "this instance's heartbeat lapsed since the claim was sent",
            )
            self._observers.claim_lost(job, grant.slot_ms, "stale")
            try:
                await self._leases.hand_over(grant)
            except Exception as exc:
                self._health.failed("hand_over", exc)
            return None
        if not grant.manual:
            report_not_run(job, grant, self._observers)
            grant = covering(job, grant)
        ctx = RunContext(
            job=job,
            slot_ms=grant.slot_ms,
            instance=self._instance_id,
            attempt=grant.attempt,
            fencing=grant.fencing,
            manual=grant.manual,
            catch_up=grant.catch_up,
            missed=grant.missed,
        )
        previous = self.active.get(grant.id)
        if previous is not None:
            # The backend granted this run again, so this instance's earlier attempt lost it there.
            lose_lease(previous, "the backend granted the run again (take-over)", self._observers)
            await previous.wait_job_returned()
        active = ActiveRun(job, grant, ctx, lease_deadline=held_until(sent, grant.lease_ms), sent=sent)
        self.active[active.key] = active
        if self._keeper is not None:
            self._keeper.watch(active, sent + grant.lease_ms / 3000)
        if self.places is not None and job.options.group is not None:
            try:
                not_placed = await self.places.wait(active)
            except BaseException:
                self.active.discard(active)
                active.ended.set()
                raise
            if not_placed is not None:
                return await self._not_placed(active, not_placed)
        started_ms = self._clock.now_ms()
        delay_ms = started_ms - due_ms if due_ms is not None and grant.attempt == 1 else None
        self._observers.run_started(job, ctx, delay_ms)
        self.runlog.started(ctx)
        recorded: str | None = None
        try:
            status, error = await invoke_with_retries(self.invoker, job, active)
            # Read before any await: a lease lost from here on leaves the result standing (lose_lease).
            cut_short = ctx.lease_lost
            active.finishing = True
            # Other runs due now start before this one's record is written.
            await asyncio.sleep(0)
            stopped = status is RunStatus.CANCELLED and active.cancelled_by_stop
            if stopped and job.options.hand_over and self._leases is not None:
                await self._hand_over(self._leases, active)
                return None
            if cut_short and not active.cancelled_by_stop:
                self._observers.claim_lost(job, grant.slot_ms, "stale")
                return None
            finished_ms = self._clock.now_ms()
            run = grant.finished(status, started_ms=started_ms, finished_ms=finished_ms, error=error)
            if not await self._finish(active, run):
                return None
            recorded = run.status.value
            self.runlog.ended(ctx, recorded, run.duration_ms or 0, error)
            self._observers.run_finished(job, run)
            return run
        finally:
            self.active.discard(active)  # a later attempt of this run may hold the key by now
            active.ended.set()
            self._observers.run_ended(job, ctx, recorded)
            if self.places is not None and job.options.group is not None:
                self.places.leave(self.places.place_of(active))

    async def _not_placed(self, active: ActiveRun, why: str) -> Run | None:
        """A run of a group that got no place: handed over (a stop), given up (lease lost), or skipped.

        Skipped when its wait passed ``max_wait_ms``: the record says so, with the group, so the slot
        shows in history and metrics instead of vanishing.
        """
        job, grant = active.job, active.grant
        try:
            if why == CANCELLED:
                if active.cancelled_by_stop and job.options.hand_over and self._leases is not None:
                    await self._hand_over(self._leases, active)
                else:
                    self._observers.claim_lost(job, grant.slot_ms, "stale")
                return None
            log.warning("job %s, slot %s: %s", job.name, active.context.slot, why)
            now = self._clock.now_ms()
            run = grant.finished(RunStatus.SKIPPED, started_ms=now, finished_ms=now, error=why)
            if not await self._finish(active, run):
                return None
            self._observers.slot_skipped(job, grant.slot_ms, "group")
            return run
        finally:
            self.active.discard(active)
            active.ended.set()

    async def _finish(self, active: ActiveRun, run: Run) -> bool:
        """Record the run; keep trying until the backend answers, so a success is not run again.

        A lease lost meanwhile (the backend unreachable past it, a heartbeat lapse) does not end
        the tries: the backend refuses the record only once another instance took the run over
        (its token), and until then a recorded run is one the fleet does not run again. Measured
        across a Sentinel failover, giving up at the local lease loss ran such slots twice. The
        tries end at a forced stop; on a claim backend after ``CLAIM_FINISH_TRIES``.
        """
        delay = FINISH_BACKOFF_S
        lease = self._leases is not None
        attempts = 0
        while True:
            try:
                ok = await self._backend.finish(active.grant, run)
            except Exception as exc:
                self._health.failed("finish", exc)
                attempts += 1
                if (lease and self._forced) or (not lease and attempts >= CLAIM_FINISH_TRIES):
                    log.error("job %s, slot %s: could not record the run: %s", run.job, run.slot, error_text(exc))
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, FINISH_BACKOFF_LOST_S if active.context.lease_lost else 2.0)
                continue
            self._health.ok()
            if not ok:
                active.context.lease_lost = True
                self._observers.claim_lost(active.job, run.slot_ms, "stale")
            return bool(ok)

    async def _hand_over(self, backend: LeaseBackend, active: ActiveRun) -> None:
        try:
            await backend.hand_over(active.grant)
            log.info(
                "job %s, slot %s: handed over on stop",
                active.job.name,
                active.context.slot,
                extra={"job": active.job.name, "slot_ms": active.context.slot_ms, "status": "handed-over"},
            )
            self._observers.run_handed_over(active.job, active.context.slot_ms)
        except Exception as exc:
            self._health.failed("hand_over", exc)

    def cancel_all(self) -> None:
        """Cancel every job now (a forced stop), as the end of the grace would."""
        self._stopping = True
        self._forced = True
        for active in list(self.active.values()):
            if active.cancel_job():
                active.cancelled_by_stop = True
                active.context.lease_lost = True

    async def stop(self, grace_ms: int) -> None:
        """Give running jobs ``grace_ms`` to finish, then cancel them, and wait for their bookkeeping.

        Runs waiting for a place in a group do not wait out the grace: they are handed over at once.
        """
        self._stopping = True  # no revival starts during a stop
        if self.places is not None:
            self.places.stop_waiting()
        waiters = [asyncio.ensure_future(a.ended.wait()) for a in self.active.values()]
        if waiters:
            _, late = await asyncio.wait(waiters, timeout=grace_ms / 1000)
            for waiter in late:
                waiter.cancel()
        self.cancel_all()
        enders = [asyncio.ensure_future(a.ended.wait()) for a in self.active.values()]
        if enders:
            _, stuck = await asyncio.wait(enders, timeout=STOP_BOUND_S)
            for waiter in stuck:
                waiter.cancel()
            if stuck:
                names = sorted({a.job.name for a in self.active.values() if not a.ended.is_set})
                log.warning(
                    "stop: %d run(s) ignored cancellation for %.0f s after the grace and are left behind: %s; "
                    "their records stay running and, on a lease backend, are taken over when the lease expires",
                    len(stuck),
                    STOP_BOUND_S,
                    ", ".join(names),
                )
        if self.places is not None:
            await self.places.close()
        self.invoker.shutdown()

    def runs_in(self, task: asyncio.Task[object] | None) -> bool:
        """Whether ``task`` is one of this instance's runs (a job calling ``stop()`` from inside)."""
        return task is not None and any(a.task is task for a in self.active.values())
