"""Liveness: a run whose owner's heartbeat expired is taken over at once, not at its lease.

Every test here needs ``capabilities.liveness``. Runs keep the default lease
(30 s), so a test that passes could only pass through the heartbeat rule;
the heartbeat's TTL is short (``TTL_MS``) and its expiry is awaited through
the backend's own answers (a beat that reports the owner dead), never by
sleeping a guessed time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from anarchon.backend import Grant, Outcome
from anarchon.job import Job
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._requires import gated
from .testing import eventually

__all__ = ["TTL_MS", "LivenessTests"]

#: The heartbeat TTL of these tests.
TTL_MS = 400


async def _won(instance: Instance, job: Job, slot_ms: int) -> Grant:
    result = await instance.claim(job, slot_ms)
    assert result.won and result.grant is not None, f"{instance.id} claiming {job.name}@{slot_ms}: {result.outcome}"
    return result.grant


async def _seen_dead(watcher: Instance, dead: Instance) -> None:
    """Beat as ``watcher`` until its beat reports ``dead`` dead, as the scheduler's heartbeat would."""

    async def reported() -> bool:
        return dead.id in (await watcher.beat(TTL_MS)).dead

    await eventually(reported, timeout_s=10, what=f"{watcher.id}'s heartbeat to report {dead.id} dead")


@contextlib.asynccontextmanager
async def _beating(instance: Instance) -> AsyncIterator[None]:
    """``instance`` beats every quarter of the TTL in the background, as a live scheduler does."""
    await instance.beat(TTL_MS)

    async def loop() -> None:
        while True:
            await asyncio.sleep(TTL_MS / 4000)
            await instance.beat(TTL_MS)

    task = asyncio.ensure_future(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@gated("liveness")
class LivenessTests(SuiteBase):
    """An instance's heartbeat: its death is noticed in a TTL, not a lease."""

    async def test_a_dead_owners_run_is_taken_over_before_its_lease(self, conformance: Conformance) -> None:
        job = conformance.job("hb-dead")  # the default lease: 30 s
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        await a.beat(TTL_MS)
        first = await _won(a, job, slot)
        await a.stop_beating()
        await _seen_dead(b, a)
        results = await b.take_over(job)
        grants = [r.grant for r in results if r.outcome is Outcome.WON and r.grant is not None]
        assert len(grants) == 1, f"the run of an instance whose heartbeat expired was not taken over: {results!r}"
        (second,) = grants
        assert (second.instance, second.attempt) == (b.id, 2)
        assert isinstance(first.fencing, int) and isinstance(second.fencing, int) and second.fencing > first.fencing
        assert not await a.finish(first), "the dead owner's finish() was accepted after the take-over"
        assert await b.finish(second)
        run = await conformance.record(job, slot)
        assert (run.status, run.instance, run.attempt) == (RunStatus.SUCCEEDED, b.id, 2)

    async def test_a_live_owners_run_is_not_taken_over(self, conformance: Conformance) -> None:
        job = conformance.job("hb-live")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        async with _beating(a):
            grant = await _won(a, job, slot)
            until = await conformance.backend_now_ms() + 3 * TTL_MS
            while await conformance.backend_now_ms() < until:
                beat = await b.beat(TTL_MS)
                assert a.id not in beat.dead, f"a beating instance was reported dead: {beat!r}"
                assert await b.take_over(job) == [], "the run of a live, beating owner was taken over"
                await asyncio.sleep(TTL_MS / 4000)
            assert await a.finish(grant)

    async def test_the_slot_after_a_dead_run_is_not_skipped_for_overlap(self, conformance: Conformance) -> None:
        job = conformance.job("hb-next", overlap="skip")
        a, b = await conformance.instances(2)
        first_slot, next_slot = conformance.slots(2)
        await a.beat(TTL_MS)
        await _won(a, job, first_slot)
        await a.stop_beating()
        await _seen_dead(b, a)
        result = await b.claim(job, next_slot)
        assert result.outcome is Outcome.WON, f"the slot after a dead run was {result.outcome.name}, not WON"
        assert result.grant is not None and result.grant.supersedes == first_slot
        dead = await conformance.record(job, first_slot)
        assert dead.status is RunStatus.ABANDONED, f"the dead run's record is {dead.status.value}"

    async def test_a_batch_of_claims_after_dead_runs_is_not_skipped(self, conformance: Conformance) -> None:
        """The same rule when the next slots of several jobs are claimed together (one script, one statement)."""
        jobs = [conformance.job(f"hb-batch{i}", overlap="skip") for i in range(3)]
        a, b = await conformance.instances(2)
        first_slot, next_slot = conformance.slots(2)
        await a.beat(TTL_MS)
        for job in jobs:
            await _won(a, job, first_slot)
        await a.stop_beating()
        await _seen_dead(b, a)
        results = await b.claim_all([b.make_claim(job, next_slot) for job in jobs])
        assert [r.outcome for r in results] == [Outcome.WON] * len(jobs), (
            f"a batch of claims after dead runs answered {[r.outcome.name for r in results]}"
        )
        assert all(r.grant is not None and r.grant.supersedes == first_slot for r in results)

    async def test_an_owner_without_a_heartbeat_keeps_its_lease(self, conformance: Conformance) -> None:
        """No record is not a dead record: an instance that never beat (an older version) keeps the lease rule."""
        job = conformance.job("hb-none", overlap="skip")
        a, b = await conformance.instances(2)
        first_slot, next_slot = conformance.slots(2)
        grant = await _won(a, job, first_slot)
        await b.beat(TTL_MS)
        await conformance.wait_past(await conformance.backend_now_ms() + 2 * TTL_MS)
        assert a.id not in (await b.beat(TTL_MS)).dead
        assert await b.take_over(job) == [], "a run whose owner never beat was taken over before its lease"
        result = await b.claim(job, next_slot)
        assert result.outcome is Outcome.SKIPPED, f"a claim overlapping a leased run was {result.outcome.name}"
        assert await a.finish(grant)

    async def test_leaving_hands_every_leftover_run_over_at_once(self, conformance: Conformance) -> None:
        job = conformance.job("hb-leave")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        await a.beat(TTL_MS)
        await _won(a, job, slot)
        await a.leave()
        await _seen_dead(b, a)
        (result,) = await b.take_over(job)
        assert result.grant is not None and (result.grant.instance, result.grant.attempt) == (b.id, 2)

    async def test_a_stale_report_does_not_condemn_a_run_taken_after_revival(self, conformance: Conformance) -> None:
        """``a``'s record expires, ``b`` sees it dead, ``a`` beats again and wins a slot: that run is ``a``'s.

        ``b`` does not beat again before its take-over: a store that passes
        the dead list of the latest beat into its scripts must not take a run
        granted after the owner came back (see :class:`anarchon.liveness.Beat`).
        """
        job = conformance.job("hb-revive", overlap="allow")
        a, b = await conformance.instances(2)
        old_slot, new_slot = conformance.slots(2)
        await a.beat(TTL_MS)
        await _won(a, job, old_slot)
        await a.stop_beating()
        await _seen_dead(b, a)
        async with _beating(a):
            fresh = await _won(a, job, new_slot)
            taken = [r.grant.slot_ms for r in await b.take_over(job) if r.grant is not None]
            assert new_slot not in taken, "a run granted after its owner's heartbeat came back was taken over"
            assert a.id not in (await b.beat(TTL_MS)).dead, "a revived record is still reported dead"
            assert await a.finish(fresh)

    async def test_a_beat_reports_dead_records_on_the_store_clock(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        await a.beat(TTL_MS)
        await a.stop_beating()
        await _seen_dead(b, a)
        beat = await b.beat(TTL_MS)
        until = beat.dead[a.id]
        assert isinstance(until, int), f"Beat.dead values are epoch ms (int), not {until!r}"
        assert until <= await conformance.backend_now_ms(), "a record reported dead has not expired"
        assert b.id not in beat.dead

    async def test_a_beat_tells_when_the_next_other_record_expires(self, conformance: Conformance) -> None:
        """``Beat.next_expiry_ms``: how long the first other live record has left, on the store's clock.

        An idle instance beats slowly and aims a beat just after that expiry, so a
        death is still reported at once (:mod:`anarchon.heartbeat`); a wrong answer
        would report it late (too long) or spend beats (too short). Only for a heart
        whose ``tells_next_expiry`` says it fills the field.
        """
        a, b, c = await conformance.instances(3)
        heart = a.leases.heart()
        assert heart is not None
        if not heart.tells_next_expiry:
            assert (await a.beat(TTL_MS)).next_expiry_ms is None, "a heart that does not tell filled next_expiry_ms"
            return
        assert (await a.beat(TTL_MS)).next_expiry_ms is None, "no other instance beats, yet a next expiry was told"
        before = await conformance.backend_now_ms()
        await b.beat(TTL_MS * 4)
        await c.beat(TTL_MS * 8)
        told = (await a.beat(TTL_MS)).next_expiry_ms
        after = await conformance.backend_now_ms()
        assert told is not None, "two other instances are alive, yet no next expiry was told"
        # b's record: alive until (its beat's now) + 4 TTL; a's own shorter record is not counted.
        assert before + TTL_MS * 4 - after <= told <= TTL_MS * 4, f"next_expiry_ms={told}, b has about {TTL_MS * 4} ms"
        await b.stop_beating()
        await c.stop_beating()
        await _seen_dead(a, b)
        left = (await a.beat(TTL_MS)).next_expiry_ms
        assert left is not None and left < TTL_MS * 8, f"next_expiry_ms={left}: b is dead, c's record is the next"
        await _seen_dead(a, c)
        assert (await a.beat(TTL_MS)).next_expiry_ms is None, "every other record expired, yet a next expiry was told"

    async def test_a_silent_store_condemns_nobody(self, conformance: Conformance) -> None:
        """After a silence no beat crossed, the records alive at the last beat are renewed, not reported dead.

        The referee was out (a failover, a restart, the fleet cut off): every
        owner's record expired together, and the first beat to arrive must not
        hand the others' runs over (:func:`anarchon.liveness.after_silence`).
        A record that had expired before the silence stays dead, and a renewed
        one expires in its turn when its owner does not come back.
        """
        early, quiet, first = await conformance.instances(3)
        await early.beat(TTL_MS)
        await early.stop_beating()
        await quiet.beat(TTL_MS)
        await _seen_dead(first, early)  # ``first`` beats until ``early`` is dead: no silence so far
        await quiet.beat(TTL_MS)
        await first.beat(TTL_MS)
        await asyncio.sleep(TTL_MS * 1.5 / 1000)  # nobody beats: the silence itself is what is tested
        beat = await first.beat(TTL_MS)
        assert quiet.id not in beat.dead, f"after a silence of 1.5 TTL the first beat condemned {quiet.id}"
        assert early.id in beat.dead, f"{early.id} was dead before the silence and was revived by it"
        await _seen_dead(first, quiet)

    async def test_a_claim_after_a_silence_condemns_nobody(self, conformance: Conformance) -> None:
        """A claim and a take-over that reach the store before any beat after a silence take nothing over.

        Every record expired together (the store was out); the owner of the
        running run is alive and will beat and record its run once it finds
        the store again.
        """
        job = conformance.job("hb-silent-claim", overlap="skip")
        a, b = await conformance.instances(2)
        first_slot, next_slot = conformance.slots(2)
        await a.beat(TTL_MS)
        await b.beat(TTL_MS)
        grant = await _won(a, job, first_slot)
        await a.stop_beating()
        await b.stop_beating()
        await asyncio.sleep(TTL_MS * 1.5 / 1000)  # nobody beats: the silence itself is what is tested
        assert [r for r in await b.take_over(job) if r.grant is not None] == [], "a take-over after a silence"
        result = await b.claim(job, next_slot)
        assert result.outcome is not Outcome.WON, "the next slot's claim after a silence counted the run as dead"
        await a.beat(TTL_MS)
        assert await a.finish(grant), "the owner's record was refused after a silence"
