"""Backfill: a past slot runs once across the fleet and every backfill, or the backend refuses to try.

The claim-level tests call :meth:`LeaseBackend.backfill` directly and need
the ``backfill`` capability; the scheduler-level ones race whole backfills.
A backend without the capability must make ``Scheduler.backfill()`` refuse
with :class:`~anarchon.errors.BackfillError` before anything is claimed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest

from anarchon.backend import ClaimResult, Outcome
from anarchon.context import RunContext
from anarchon.errors import BackfillError
from anarchon.job import Job
from anarchon.run import RunStatus, ms_to_datetime

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import unique_name
from ._requires import gated, requires

__all__ = ["BackfillRefusalTests", "BackfillTests"]

#: Slots of the claim-level tests: whole seconds well in the past.
_PAST_MS = 60_000


async def _backfill(instance: Instance, job: Job, slot_ms: int, token: str | None = None) -> ClaimResult:
    await instance.prepare([job])
    claim = instance.make_claim(job, slot_ms, token=token)
    answers = list(await instance.leases.backfill([claim]))
    assert len(answers) == 1, f"backfill() got one claim and answered {answers!r}"
    return answers[0]


def _past(conformance: Conformance, count: int) -> list[int]:
    first = conformance.slots(1)[0] - _PAST_MS
    return conformance.slots(count, start_ms=first)


@gated("backfill")
class BackfillTests(SuiteBase):
    """``LeaseBackend.backfill``: granted only to a slot without a record, atomically; mark only moves up."""

    async def test_one_backfill_claim_wins_each_slot(self, conformance: Conformance) -> None:
        job = conformance.job("bf-race")
        fleet = await conformance.instances(4)
        slots = _past(conformance, 10)
        answers = await asyncio.gather(*(_backfill(x, job, s) for s in slots for x in fleet))
        won = Counter(r.grant.slot_ms for r in answers if r.outcome is Outcome.WON and r.grant is not None)
        assert won == Counter(slots), f"backfill winners per slot: {dict(won)}"
        assert all(r.outcome in (Outcome.WON, Outcome.LOST) for r in answers), [r.outcome for r in answers]
        lost = [r for r in answers if r.outcome is Outcome.LOST]
        assert all(r.record is not None and r.record.status is RunStatus.RUNNING for r in lost), lost
        history = await conformance.history(job)
        assert sorted(r.slot_ms for r in history) == slots
        assert all(not r.manual and r.status is RunStatus.RUNNING for r in history), history

    async def test_a_recorded_slot_is_already_run(self, conformance: Conformance) -> None:
        job = conformance.job("bf-recorded")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        grant = (await a.claim(job, slot)).grant
        assert grant is not None
        assert await a.finish(grant, RunStatus.FAILED, error="ValueError: no")
        answer = await _backfill(b, job, slot)
        assert answer.outcome is Outcome.LOST, answer
        assert answer.record is not None and answer.record.status is RunStatus.FAILED, answer.record
        assert (await conformance.record(job, slot)).instance == a.id

    async def test_a_backfilled_slot_is_lost_to_the_fleet(self, conformance: Conformance) -> None:
        job = conformance.job("bf-fleet")
        a, b = await conformance.instances(2)
        before, slot = conformance.slots(2)
        assert (await a.claim(job, before)).won
        answer = await _backfill(b, job, slot)  # a slot above the mark: the fleet may be about to claim it
        assert answer.won and answer.grant is not None
        assert (await a.claim(job, slot)).outcome is Outcome.LOST, "the fleet claimed a slot a backfill holds"
        assert await b.finish(answer.grant)
        assert (await conformance.record(job, slot)).instance == b.id

    async def test_backfill_moves_the_mark_only_up(self, conformance: Conformance) -> None:
        job = conformance.job("bf-mark", overlap="allow")
        (a,) = await conformance.instances(1)
        old, newest, between, later = conformance.slots(4)
        assert (await a.claim(job, newest)).won
        assert (await _backfill(a, job, old)).won
        assert await a.leases.marks([job]) == {job.name: newest}, "a backfill of an old slot moved the mark"
        assert (await _backfill(a, job, later)).won
        assert await a.leases.marks([job]) == {job.name: later}, "a backfilled slot above the mark left it"
        assert (await a.claim(job, between)).outcome is Outcome.LOST, "a slot below the new mark was granted"
        assert (await _backfill(a, job, between)).won, "a backfill is refused by the mark"

    async def test_fencing_grows_and_overlap_is_not_checked(self, conformance: Conformance) -> None:
        job = conformance.job("bf-fence", overlap="skip")
        (a,) = await conformance.instances(1)
        s1, s2, s3 = _past(conformance, 3)
        live = (await a.claim(job, conformance.slots(1)[0])).grant
        assert live is not None and live.fencing is not None
        first, second = await _backfill(a, job, s1), await _backfill(a, job, s2)
        assert first.won and second.won, "a backfill claim was refused while a run held the lease"
        assert first.grant is not None and second.grant is not None
        assert live.fencing < first.grant.fencing < second.grant.fencing  # type: ignore[operator]
        assert (await _backfill(a, job, s3)).won

    async def test_a_retried_backfill_claim_gets_its_grant_back(self, conformance: Conformance) -> None:
        job = conformance.job("bf-retry")
        a, b = await conformance.instances(2)
        (slot,) = _past(conformance, 1)
        first = await _backfill(a, job, slot, token="t" * 32)
        again = await _backfill(a, job, slot, token="t" * 32)
        assert first.won and again.won and first.grant is not None and again.grant is not None
        assert again.grant.fencing == first.grant.fencing
        assert (await _backfill(b, job, slot)).outcome is Outcome.LOST
        assert await a.finish(first.grant)
        assert (await _backfill(a, job, slot, token="t" * 32)).outcome is Outcome.LOST, "a finished slot ran again"

    async def test_overlapping_backfills_run_each_slot_once(self, conformance: Conformance) -> None:
        ledger: Counter[int] = Counter()

        async def job(ctx: RunContext) -> None:
            ledger[ctx.slot_ms] += 1
            await asyncio.sleep(0.01)

        name = unique_name("bf-sched")
        schedulers = [await conformance.scheduler() for _ in range(3)]
        for scheduler in schedulers:
            scheduler.add(name, "* * * * *", job)
        end = ms_to_datetime(conformance.slots(1)[0] // 60_000 * 60_000 - 60_000)
        ranges = [(end - timedelta(minutes=20), end - timedelta(minutes=5)), (end - timedelta(minutes=12), end)]
        dry = await schedulers[0].backfill(name, *ranges[0], dry_run=True)
        assert (dry.dry_run, len(dry.would_run), dry.ran) == (True, 16, [])
        assert await conformance.history(name) == [], "a dry run changed history"
        a, b, c = await asyncio.gather(
            schedulers[0].backfill(name, *ranges[0], concurrency=3),
            schedulers[1].backfill(name, *ranges[1], concurrency=2),
            schedulers[2].backfill(name, *ranges[1]),
        )
        first = int(ranges[0][0].timestamp()) * 1000
        wanted = {first + i * 60_000 for i in range(21)}  # the union of the two ranges
        assert ledger == Counter(wanted), f"runs per slot: {dict(ledger)}"
        assert sorted(a.ran + b.ran + c.ran) == sorted(wanted)
        assert (len(a.ran) + len(a.already_run), len(b.ran) + len(b.already_run)) == (16, 13)
        runs = [r for r in await conformance.history(name) if r.slot_ms in wanted]
        assert sorted(r.slot_ms for r in runs) == sorted(wanted)
        assert all(r.status is RunStatus.SUCCEEDED and not r.manual for r in runs), runs
        again = await schedulers[1].backfill(name, *ranges[0])
        assert (again.ran, len(again.already_run)) == ([], 16)


class BackfillRefusalTests(SuiteBase):
    """A backend without the capability: ``Scheduler.backfill()`` refuses, naming it, and claims nothing."""

    @pytest.mark.asyncio
    @requires(backfill=False)
    async def test_backfill_is_refused_without_the_capability(self, conformance: Conformance) -> None:
        scheduler = await conformance.scheduler()
        name = unique_name("bf-refused")
        scheduler.add(name, "* * * * *", lambda: None)
        end = ms_to_datetime(conformance.slots(1)[0] - 120_000)
        with pytest.raises(BackfillError, match=f"backend {conformance.name!r} cannot backfill"):
            await scheduler.backfill(name, end - timedelta(minutes=5), end)
        assert [r for r in await scheduler.history(name) if r.slot_ms <= end.timestamp() * 1000] == []
