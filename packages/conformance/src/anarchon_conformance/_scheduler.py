"""Through the scheduler: ``run_now``, ``history()`` and ``last_run()``, and scheduled slots run once.

These drive :class:`anarchon.Scheduler` objects (each on a fresh backend
object from the factory), so they check that a backend works with the real
caller, not only with the suite's direct calls.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from anarchon.context import RunContext
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import unique_name
from ._requires import requires
from .testing import eventually

__all__ = ["SchedulerTests"]

#: A schedule that never comes due while a test runs, for jobs only run by hand.
_NEVER = "0 0 1 1 *"


class SchedulerTests(SuiteBase):
    """The scheduler's own calls on this backend. Every backend; overlap per capability."""

    @pytest.mark.asyncio
    async def test_run_now_is_recorded_as_manual(self, conformance: Conformance) -> None:
        seen: list[RunContext] = []

        async def job(ctx: RunContext) -> None:
            seen.append(ctx)

        name = unique_name("run-now")
        first, other = await conformance.scheduler(), await conformance.scheduler()
        for scheduler in (first, other):
            scheduler.add(name, _NEVER, job)
        run = await first.run_now(name)
        assert (run.job, run.status, run.manual, run.instance) == (name, RunStatus.SUCCEEDED, True, first.instance_id)
        assert run.finished_at is not None
        assert len(seen) == 1
        assert seen[0].manual
        for scheduler in (first, other):  # every instance reads the same history
            history = await scheduler.history(name)
            assert [(r.slot_ms, r.status, r.manual) for r in history] == [(run.slot_ms, RunStatus.SUCCEEDED, True)]
            last = await scheduler.last_run(name)
            assert last is not None
            assert (last.slot_ms, last.instance, last.manual) == (run.slot_ms, first.instance_id, True)

    @pytest.mark.asyncio
    async def test_run_now_of_a_failing_job_is_recorded_failed(self, conformance: Conformance) -> None:
        def job() -> None:
            raise ValueError("the ledger was empty")

        name = unique_name("run-fail")
        scheduler = await conformance.scheduler()
        scheduler.add(name, _NEVER, job)
        run = await scheduler.run_now(name)
        assert (run.status, run.error) == (RunStatus.FAILED, "ValueError: the ledger was empty")
        last = await scheduler.last_run(name)
        assert last is not None
        assert (last.status, last.error) == (RunStatus.FAILED, "ValueError: the ledger was empty")

    @pytest.mark.asyncio
    @requires("lease")
    async def test_run_now_while_the_job_runs_is_skipped(self, conformance: Conformance) -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def job() -> None:
            started.set()
            await release.wait()

        name = unique_name("run-busy")
        busy, other = await conformance.scheduler(), await conformance.scheduler()
        for scheduler in (busy, other):
            scheduler.add(name, _NEVER, job)
        running = asyncio.ensure_future(busy.run_now(name))
        try:
            await asyncio.wait_for(started.wait(), 10)
            skipped = await other.run_now(name)
            assert (skipped.status, skipped.manual) == (RunStatus.SKIPPED, True), skipped
        finally:
            release.set()
            finished = await running
        assert finished.status is RunStatus.SUCCEEDED
        statuses = {r.status for r in await other.history(name)}
        assert statuses == {RunStatus.SUCCEEDED, RunStatus.SKIPPED}

    @pytest.mark.asyncio
    async def test_scheduled_slots_run_once_across_instances(self, conformance: Conformance) -> None:
        """Three schedulers share an every-second job for a few seconds: each slot runs on one of them."""
        runs: defaultdict[int, list[str]] = defaultdict(list)

        def record(ctx: RunContext) -> None:
            runs[ctx.slot_ms].append(ctx.instance)

        name = unique_name("fleet")
        schedulers = [await conformance.scheduler() for _ in range(3)]
        for scheduler in schedulers:
            scheduler.add(name, "* * * * * *", record, jitter_ms=0, max_late_ms=2000)

        async def ran_three_slots() -> bool:
            return len(runs) >= 3

        await eventually(ran_three_slots, timeout_s=10, what="three slots of an every-second job run")
        await asyncio.gather(*(s.stop(grace_ms=1000) for s in schedulers))
        doubled = {slot: who for slot, who in runs.items() if len(who) > 1}
        assert not doubled, f"slots run more than once: {doubled}"
        history = await conformance.history(name)
        for slot, (who,) in runs.items():
            matching = [r for r in history if r.slot_ms == slot and not r.manual]
            assert len(matching) == 1, f"slot {slot}: {matching!r}"
            assert (matching[0].instance, matching[0].status) == (who, RunStatus.SUCCEEDED)
