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
import logging
import time
from collections.abc import Callable

from ._batcher import ClaimBatcher
from ._health import error_text
from ._runner import RunExecutor
from .backend import LeaseBackend, Outcome
from .backfill import BackfillPlan, BackfillSummary
from .job import Job
from .run import RunStatus, ms_to_datetime

__all__ = ["Progress", "run_backfill"]

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
        sent = time.monotonic()
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
