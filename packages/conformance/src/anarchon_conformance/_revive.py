"""Reviving a slot skipped for a dead run (capability ``revive``): once, and never beside a live run.

A slot skipped for overlap while the run holding the job's lease was in fact
dead ran nothing. ``LeaseBackend.revive`` grants it again, once across
racing instances, with a higher fencing token, and only when no live run
holds the job; a slot that ran, or has no record, is not revived. Leases
are short (``LEASE_MS``) and their expiry is awaited on the backend's clock.
"""

from __future__ import annotations

import asyncio

from anarchon.backend import Grant, Outcome
from anarchon.job import Job
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._lease import LEASE_MS
from ._requires import gated

__all__ = ["ReviveTests"]


async def _skipped_behind(conformance: Conformance, job: Job) -> tuple[Instance, Grant, int, list[Instance]]:
    """``a`` wins slot 0 and goes silent; slot 1 is skipped for it. Returns a, its grant, slot 1, and 3 others."""
    a, *others = await conformance.instances(4)
    first, second = conformance.slots(2)
    won = await a.claim(job, first)
    assert won.outcome is Outcome.WON and won.grant is not None
    skipped = await others[0].claim(job, second)
    assert skipped.outcome is Outcome.SKIPPED, f"slot 1 was {skipped.outcome} with slot 0 running, not skipped"
    return a, won.grant, second, others


@gated("revive")
class ReviveTests(SuiteBase):
    """The contract of :meth:`~anarchon.backend.LeaseBackend.revive`."""

    async def test_a_slot_skipped_for_a_dead_run_is_revived_once(self, conformance: Conformance) -> None:
        job = conformance.job("revive", lease_ms=LEASE_MS)
        _, dead, slot, others = await _skipped_behind(conformance, job)
        await conformance.wait_past(await conformance.backend_now_ms() + LEASE_MS)
        claims = [(x, x.make_claim(job, slot, catch_up=True)) for x in others]
        results = await asyncio.gather(*(x.leases.revive([c]) for x, c in claims))
        won = [(x, r) for (x, _), (r,) in zip(claims, results, strict=True) if r.outcome is Outcome.WON]
        assert len(won) == 1, f"{len(won)} of 3 racing revives won slot {slot}: {results!r}"
        assert all(r.outcome is Outcome.LOST for (r,) in results if r.outcome is not Outcome.WON), results
        winner, result = won[0]
        grant = result.grant
        assert grant is not None and grant.slot_ms == slot and not grant.manual and grant.attempt == 1
        assert grant.fencing is not None and dead.fencing is not None
        assert grant.fencing > dead.fencing, f"fencing {grant.fencing} is not above the dead run's {dead.fencing}"
        record = await conformance.record(job, slot)
        assert (record.status, record.instance) == (RunStatus.RUNNING, winner.id)
        assert await winner.finish(grant)
        assert (await conformance.record(job, slot)).status is RunStatus.SUCCEEDED

    async def test_a_retried_revive_gets_its_grant_back(self, conformance: Conformance) -> None:
        job = conformance.job("revive-retry", lease_ms=LEASE_MS)
        _, _, slot, (b, *_) = await _skipped_behind(conformance, job)
        await conformance.wait_past(await conformance.backend_now_ms() + LEASE_MS)
        claim = b.make_claim(job, slot, catch_up=True)
        (first,) = await b.leases.revive([claim])
        (again,) = await b.leases.revive([claim])
        assert first.outcome is again.outcome is Outcome.WON
        assert first.grant is not None and again.grant is not None
        assert (again.grant.token, again.grant.fencing) == (first.grant.token, first.grant.fencing)

    async def test_a_live_run_keeps_the_slot_skipped(self, conformance: Conformance) -> None:
        job = conformance.job("revive-live", lease_ms=30_000)
        _, _, slot, (b, *_) = await _skipped_behind(conformance, job)
        (answer,) = await b.leases.revive([b.make_claim(job, slot, catch_up=True)])
        assert answer.outcome is Outcome.SKIPPED, f"revived beside a live run: {answer!r}"
        assert (await conformance.record(job, slot)).status is RunStatus.SKIPPED

    async def test_only_a_skipped_slot_is_revived(self, conformance: Conformance) -> None:
        job = conformance.job("revive-only", lease_ms=LEASE_MS)
        a, b = await conformance.instances(2)
        ran, never = conformance.slots(2)
        won = await a.claim(job, ran)
        assert won.outcome is Outcome.WON and won.grant is not None
        assert await a.finish(won.grant)
        for slot in (ran, never):
            (answer,) = await b.leases.revive([b.make_claim(job, slot, catch_up=True)])
            assert answer.outcome is Outcome.LOST, f"slot {slot} was revived: {answer!r}"
        assert [r.slot_ms for r in await conformance.history(job)] == [ran]
