"""Retries and catch-up policies on this backend.

Retries are the scheduler's, on every tier, but their count rides in the
record's error text, so every backend must store and give back that text
unchanged; on a lease backend the lease must also hold through a retry's
delay (the keeper renews it), so no backup starts a second run of the slot.
``catch_up="each"`` claims the missed slots oldest first in one ``claim()``
call, so a lease backend must decide the claims of one job in one call in
order, moving the mark after each.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from anarchon.backend import Outcome
from anarchon.context import RunContext
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import EVERY_SECOND, now_ms, unique_name
from ._lease import _won
from ._requires import requires
from .testing import eventually

__all__ = ["PolicyTests"]

#: A schedule that never comes due while a test runs, for jobs only run by hand.
_NEVER = "0 0 1 1 *"


class PolicyTests(SuiteBase):
    """Retries recorded on every backend and kept under the lease; catch-up of each missed slot."""

    @pytest.mark.asyncio
    async def test_a_failing_job_retries_as_configured_and_stops(self, conformance: Conformance) -> None:
        tries: list[int] = []

        def job(ctx: RunContext) -> None:
            tries.append(ctx.retry)
            raise ValueError(f"try {ctx.retry}: the ledger was empty")

        name = unique_name("retry-fail")
        runner, reader = await conformance.scheduler(), await conformance.scheduler()
        for scheduler in (runner, reader):
            scheduler.add(name, _NEVER, job, retries=2, retry_delay_ms=10, retry_jitter=False)
        run = await runner.run_now(name)
        assert tries == [0, 1, 2], f"tries {tries}: the first and two retries, then stop"
        last = await reader.last_run(name)
        assert last is not None
        expected = (RunStatus.FAILED, 1, 2, "[2 retries] ValueError: try 2: the ledger was empty")
        for record in (run, last):
            assert (record.status, record.attempt, record.retries, record.error) == expected, record

    @pytest.mark.asyncio
    async def test_a_retry_that_succeeds_is_recorded_with_the_last_error(self, conformance: Conformance) -> None:
        def job(ctx: RunContext) -> None:
            if ctx.retry == 0:
                raise ConnectionError("refused")

        name = unique_name("retry-ok")
        scheduler = await conformance.scheduler()
        scheduler.add(name, _NEVER, job, retries=3, retry_delay_ms=0)
        await scheduler.run_now(name)
        last = await scheduler.last_run(name)
        assert last is not None
        assert (last.status, last.retries, last.error) == (RunStatus.SUCCEEDED, 1, "[1 retry] ConnectionError: refused")

    @pytest.mark.asyncio
    @requires("lease")
    async def test_a_retry_keeps_the_lease(self, conformance: Conformance) -> None:
        """The delay before the retry is four leases long; a backup polling for expired runs never gets it."""
        tries: list[tuple[str, int, int]] = []

        def job(ctx: RunContext) -> None:
            tries.append((ctx.instance, ctx.attempt, ctx.retry))
            if ctx.retry == 0:
                raise RuntimeError("flaky")

        name = unique_name("retry-lease")
        runner, backup = await conformance.scheduler(), await conformance.scheduler()
        for scheduler in (runner, backup):
            # 600 ms leases: a 300 ms one lost its renewal once on a loaded CI machine, which is not what this tests.
            scheduler.add(name, _NEVER, job, lease_ms=600, retries=1, retry_delay_ms=2400, retry_jitter=False)
        run = await runner.run_now(name)
        assert tries == [(runner.instance_id, 1, 0), (runner.instance_id, 1, 1)], f"tries: {tries}"
        assert (run.status, run.attempt, run.retries, run.instance) == (RunStatus.SUCCEEDED, 1, 1, runner.instance_id)
        last = await backup.last_run(name)
        assert last is not None and (last.status, last.retries) == (RunStatus.SUCCEEDED, 1), last

    @pytest.mark.asyncio
    @requires("lease")
    async def test_catch_up_each_claims_the_missed_slots_oldest_first_in_one_call(
        self, conformance: Conformance
    ) -> None:
        """Two returning instances send the same batch: every missed slot is won once, none is lost."""
        job = conformance.job("each", overlap="allow", catch_up="each")
        a, *returning = await conformance.instances(3)
        first, *missed = conformance.slots(6)
        assert await a.finish(await _won(a, job, first))
        await a.die()
        batches = [[x.make_claim(job, slot, catch_up=True, missed=1) for slot in missed] for x in returning]
        answers = await asyncio.gather(*(x.claim_all(b) for x, b in zip(returning, batches, strict=True)))
        won = [r.grant for results in answers for r in results if r.outcome is Outcome.WON and r.grant is not None]
        assert Counter(g.slot_ms for g in won) == Counter(missed), f"slots won: {sorted(g.slot_ms for g in won)}"
        assert all(g.catch_up and g.missed == 1 for g in won)
        by_slot = {g.slot_ms: g for g in won}
        assert by_slot[missed[0]].previous_mark == first, "the oldest claim found the mark of the last run"
        assert by_slot[missed[1]].previous_mark == missed[0], "each claim found the mark its predecessor set"
        assert await returning[0].leases.marks([job]) == {job.name: missed[-1]}
        for slot in missed:
            record = await conformance.record(job, slot)
            assert (record.status, record.catch_up) == (RunStatus.RUNNING, True), record

    @pytest.mark.asyncio
    @requires("lease")
    async def test_catch_up_each_runs_every_missed_slot_once_through_the_scheduler(
        self, conformance: Conformance
    ) -> None:
        """An every-second job last ran 6 s ago; two instances start and run each slot since, once, oldest first."""
        name = unique_name("each-sched")
        (seed,) = await conformance.instances(1)
        seed_job = conformance.make_job(name, overlap="allow", catch_up="each")
        last = (now_ms() // 1000 - 6) * 1000
        assert await seed.finish(await _won(seed, seed_job, last))
        runs: list[tuple[int, bool, str]] = []

        def record(ctx: RunContext) -> None:
            runs.append((ctx.slot_ms, ctx.catch_up, ctx.instance))

        schedulers = [await conformance.scheduler(start=False) for _ in range(2)]
        for scheduler in schedulers:
            scheduler.add(name, EVERY_SECOND, record, jitter_ms=0, overlap="allow", catch_up="each")
        await asyncio.gather(*(s.start() for s in schedulers))

        async def ran_past_the_gap() -> bool:
            return any(slot >= last + 7000 for slot, _, _ in runs)

        await eventually(ran_past_the_gap, timeout_s=15, what="the missed slots and the next ones run")
        await asyncio.gather(*(s.stop(grace_ms=1000) for s in schedulers))
        counts = Counter(slot for slot, _, _ in runs)
        assert not [s for s, n in counts.items() if n > 1], f"slots run twice: {counts}"
        gap = [last + 1000 * i for i in range(1, 5)]  # surely missed: due before either instance started
        assert all(counts[s] == 1 for s in gap), f"missed slots not each run once: {sorted(counts)}"
        caught = [slot for slot, catch_up, _ in runs if catch_up]
        assert caught == sorted(caught) and set(gap) <= set(caught), f"catch-up runs {caught}, started in this order"
