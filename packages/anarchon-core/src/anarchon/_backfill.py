"""Running a backfill plan: claim each missing slot as a backfill, run what is won, count.

``concurrency`` workers take the plan's slots in order. Each claim is one
backend call (:meth:`~anarchon.LeaseBackend.backfill`); a won slot runs
through the scheduler's own executor, so it gets a lease that is renewed,
a context, observers and a record like any run. No overlap check is made
between the backfill's own runs: ``concurrency`` is the bound the caller
chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from ._batcher import ClaimBatcher
from ._health import error_text
from ._identity import default_actor
from ._registry import JobRegistry
from ._runner import RunExecutor
from .audit import record_audit
from .backend import Backend, LeaseBackend, Outcome
from .backfill import BackfillPlan, BackfillSummary, plan_backfill, range_ms
from .errors import BackfillError
from .job import Job
from .run import RunStatus, ms_to_datetime

__all__ = ["Backfilling", "Progress", "run_backfill"]

log = logging.getLogger("anarchon.backfill")

#: Called once per slot decided: the slot and what became of it ("ran", "already_run", "skipped", "failed").
Progress = Callable[[int, str], None]


async def run_backfill(
    backend: LeaseBackend,
    batcher: ClaimBatcher,
    runner: RunExecutor,
    job: Job,
    plan: BackfillPlan,
    *,
    concurrency: int,
    progress: Progress | None = None,
) -> BackfillSummary:
    summary = BackfillSummary(plan.job, plan.start_ms, plan.end_ms)
    for slot in plan.recorded:
        summary.already_run.append(slot)
        if progress is not None:
            progress(slot, "already_run")
    queue = iter(plan.missing)

    def note(slot: int, what: str) -> None:
        getattr(summary, what).append(slot)
        if progress is not None:
            progress(slot, what)

    async def one(slot: int) -> None:
        claim = batcher.claim(job, slot)
        sent = batcher.clock.monotonic()
        try:
            (result,) = await backend.backfill([claim])
        except Exception as exc:
            log.warning(
                "backfill of job %s, slot %s: the claim failed: %s", job.name, ms_to_datetime(slot), error_text(exc)
            )
            note(slot, "skipped")
            return
        if result.outcome is Outcome.WON and result.grant is not None:
            run = await runner.execute(job, result.grant, sent)
            if run is not None:
                summary.runs[slot] = run
            note(slot, "ran" if run is not None and run.status is RunStatus.SUCCEEDED else "failed")
        elif result.outcome is Outcome.UNKNOWN:
            note(slot, "skipped")
        else:
            note(slot, "already_run")

    async def worker() -> None:
        for slot in queue:  # one shared iterator: each slot goes to one worker
            await one(slot)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(plan.missing) or 1)))))
    for name in ("ran", "already_run", "skipped", "failed"):
        getattr(summary, name).sort()
    return summary


class Backfilling:
    """``Scheduler.backfill``, mixed into :class:`~anarchon.Scheduler`."""

    backend: Backend
    _registry: JobRegistry
    _batcher: ClaimBatcher
    _runner: RunExecutor

    def _connected(self) -> contextlib.AbstractAsyncContextManager[Backend]:
        raise NotImplementedError

    async def backfill(
        self,
        name: str,
        start: datetime,
        end: datetime,
        *,
        concurrency: int = 1,
        dry_run: bool = False,
        progress: Progress | None = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> BackfillSummary:
        """Run every slot of ``[start, end]`` that has not run, on this instance, once across the fleet.

        Safe while the fleet runs and while other backfills of overlapping
        ranges run: each slot is decided by the backend, atomically
        (:mod:`anarchon.backfill`). Times without a zone are read in the job's
        timezone. ``dry_run`` reads history and returns what would run
        (``would_run``), changing nothing. Lease backends declaring the
        ``backfill`` capability only; elsewhere :class:`~anarchon.errors.BackfillError`.
        Once done, it is appended to the audit trail with ``by`` (default
        ``user@host``), ``reason`` and what it counted; a dry run is not.
        """
        job = self._registry.get(name)
        backend = self.backend
        if not isinstance(backend, LeaseBackend) or not backend.capabilities.backfill:
            raise BackfillError(
                f"backend {backend.name!r} cannot backfill: a backfill must know which past slots ran, which "
                "only a lease backend with the backfill capability keeps (Redis, PostgreSQL, SQLite, memory); "
                "see `anarchon backends`",
                option="--backend",
            )
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise BackfillError(
                f"concurrency={concurrency!r} must be a whole number of at least 1", option="--concurrency"
            )
        start_ms, end_ms = range_ms(job, start, "--from"), range_ms(job, end, "--to")
        async with self._connected():
            now_ms = await backend.now_ms()
            history = await backend.history(name, job.options.history_size)
            plan = plan_backfill(job, start_ms, end_ms, now_ms, history)
            if dry_run:
                return BackfillSummary(
                    name, start_ms, end_ms, dry_run=True, already_run=sorted(plan.recorded), would_run=plan.missing
                )
            log.info(
                "backfill of job %s from %s to %s: %d slots, %d without a record",
                name,
                ms_to_datetime(start_ms),
                ms_to_datetime(end_ms),
                plan.slots,
                len(plan.missing),
            )
            summary = await run_backfill(
                backend, self._batcher, self._runner, job, plan, concurrency=concurrency, progress=progress
            )
            detail = {"from_ms": start_ms, "to_ms": end_ms, **summary.counts()}
            await record_audit(backend, "backfill", name, by=by or default_actor(), reason=reason, detail=detail)
            return summary
