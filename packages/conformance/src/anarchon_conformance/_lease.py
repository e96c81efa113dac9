"""The lease tier: renewal, take-over, fencing, stale owners, overlap, catch-up, hand-over, the mark.

Every test here needs ``capabilities.lease``. Leases are short (``LEASE_MS``)
and expiry is awaited on the backend's own clock (:meth:`Backend.now_ms`),
the clock that judges leases, never by sleeping a guessed time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from anarchon.backend import ClaimResult, Grant, Outcome, fencing_floor
from anarchon.job import Job
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import now_ms
from ._requires import gated

__all__ = ["LEASE_MS", "LeaseTests"]

#: The lease of the tests that wait for one to expire.
LEASE_MS = 300


async def _won(instance: Instance, job: Job, slot_ms: int, **kwargs: Any) -> Grant:
    result = await instance.claim(job, slot_ms, **kwargs)
    assert result.won, f"{instance.id} claiming {job.name}@{slot_ms}: {result.outcome}"
    assert result.grant is not None
    return result.grant


async def _expire(conformance: Conformance, lease_ms: int = LEASE_MS) -> None:
    """Wait until every lease granted or renewed before this call has expired."""
    await conformance.wait_past(await conformance.backend_now_ms() + lease_ms)


def _grows(before: int | None, after: int | None) -> bool:
    return isinstance(before, int) and isinstance(after, int) and after > before


def _taken(results: list[ClaimResult]) -> list[Grant]:
    grants = [r.grant for r in results if r.outcome is Outcome.WON and r.grant is not None]
    assert len(grants) == len(results), f"take_over() returned answers other than WON: {results!r}"
    return grants


@gated("lease")
class LeaseTests(SuiteBase):
    """What a lease gives: backups, fencing, overlap protection, catch-up, hand-over."""

    async def test_fencing_grows_with_every_grant(self, conformance: Conformance) -> None:
        job = conformance.job("fence", overlap="allow")
        a, b = await conformance.instances(2)
        tokens = [(await _won(x, job, slot)).fencing for x, slot in zip((a, b, a), conformance.slots(3), strict=True)]
        assert all(isinstance(t, int) for t in tokens), f"fencing tokens {tokens!r} are not integers"
        assert tokens == sorted(set(tokens)), f"fencing tokens {tokens!r} do not grow"  # type: ignore[type-var]

    async def test_a_new_jobs_tokens_start_at_the_referees_clock(self, conformance: Conformance) -> None:
        """A counter made again (a referee restarted empty) must start above every token the lost one gave."""
        (a,) = await conformance.instances(1)
        floor = fencing_floor(await conformance.backend_now_ms())
        manual, scheduled = conformance.job("floor-manual"), conformance.job("floor")
        first = await _won(a, scheduled, conformance.slots(1)[0])
        triggered = await _won(a, manual, conformance.slots(1)[0], manual=True)
        for grant in (first, triggered):
            assert isinstance(grant.fencing, int) and grant.fencing >= floor, (
                f"{grant.job}'s first token {grant.fencing!r} is below fencing_floor(now) = {floor}: start a job's "
                "counter there (anarchon.backend.fencing_floor), so that a referee restarted empty never "
                "hands out a lower token"
            )

    async def test_renewal_keeps_the_lease(self, conformance: Conformance) -> None:
        lease = 500
        job = conformance.job("renew", lease_ms=lease)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        grant = await _won(a, job, slot)
        until = time.monotonic() + 3 * lease / 1000
        while time.monotonic() < until:
            await asyncio.sleep(lease / 4 / 1000)
            assert await a.renew(grant), "the owner's renew() returned False"
            assert await b.take_over(job) == [], "a renewed lease was taken over"
        assert await a.finish(grant)
        run = await conformance.record(job, slot)
        assert (run.status, run.instance, run.attempt) == (RunStatus.SUCCEEDED, a.id, 1)

    async def _taken_over(self, conformance: Conformance, job: Job) -> tuple[Instance, Grant, Instance, Grant]:
        """``a`` wins a slot and stops renewing; after expiry one of 4 racing backups takes it over."""
        a, *backups = await conformance.instances(5)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        early = _taken(await backups[0].take_over(job))
        if early:  # a machine slow enough that the lease ran out before this call: right, if it had
            (second,) = early
            assert second.started_at_ms >= first.started_at_ms + job.options.lease_ms, (
                f"a lease was taken over before it expired: granted at {first.started_at_ms} for "
                f"{job.options.lease_ms} ms, taken over at {second.started_at_ms}"
            )
            return a, first, backups[0], second
        await _expire(conformance, job.options.lease_ms)
        answers = await asyncio.gather(*(x.take_over(job) for x in backups))
        taken = [(x, g) for x, results in zip(backups, answers, strict=True) for g in _taken(results)]
        assert len(taken) == 1, f"{len(taken)} backups took the expired run over: {taken!r}"
        (b, second) = taken[0]
        return a, first, b, second

    async def test_expired_lease_is_taken_over_with_a_higher_fencing_token(self, conformance: Conformance) -> None:
        job = conformance.job("takeover", lease_ms=LEASE_MS, max_takeovers=2)
        _, first, b, second = await self._taken_over(conformance, job)
        assert (second.job, second.slot_ms, second.instance, second.attempt) == (job.name, first.slot_ms, b.id, 2)
        assert _grows(first.fencing, second.fencing), (
            f"the take-over's fencing token {second.fencing!r} is not above the first grant's {first.fencing!r}"
        )
        assert second.token != first.token, "the take-over reused the stale owner's token"
        run = await conformance.record(job, first.slot_ms)
        assert (run.status, run.instance, run.attempt, run.fencing) == (RunStatus.RUNNING, b.id, 2, second.fencing)

    async def test_a_stale_owner_is_refused(self, conformance: Conformance) -> None:
        job = conformance.job("stale", lease_ms=LEASE_MS, max_takeovers=2)
        a, first, b, second = await self._taken_over(conformance, job)
        before = await conformance.record(job, first.slot_ms)
        assert not await a.renew(first), "renew() by a stale owner returned True"
        assert not await a.finish(first, RunStatus.FAILED, error="RuntimeError: stale"), (
            "finish() by a stale owner returned True"
        )
        assert not await a.leases.hand_over(first), "hand_over() by a stale owner returned True"
        assert await conformance.record(job, first.slot_ms) == before, "a stale owner's call changed the record"
        assert await b.renew(second), "the new owner's renew() returned False"
        assert await b.finish(second)
        run = await conformance.record(job, first.slot_ms)
        assert (run.status, run.instance, run.attempt) == (RunStatus.SUCCEEDED, b.id, 2)

    async def test_a_dead_runner_is_taken_over(self, conformance: Conformance) -> None:
        """A runner whose process died (connection closed, nothing released) is replaced after expiry."""
        job = conformance.job("dead", lease_ms=LEASE_MS)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        await _won(a, job, slot)
        await a.die()
        await _expire(conformance)
        (grant,) = _taken(await b.take_over(job))
        assert (grant.instance, grant.attempt) == (b.id, 2)
        assert await b.finish(grant)
        run = await conformance.record(job, slot)
        assert (run.status, run.instance, run.attempt) == (RunStatus.SUCCEEDED, b.id, 2)

    async def test_max_attempts_then_abandoned(self, conformance: Conformance) -> None:
        job = conformance.job("attempts", lease_ms=LEASE_MS, max_takeovers=1)
        a, b, c = await conformance.instances(3)
        (slot,) = conformance.slots(1)
        await _won(a, job, slot)
        await _expire(conformance)
        (second,) = _taken(await b.take_over(job))
        assert second.attempt == 2
        await _expire(conformance)
        assert await c.take_over(job) == [], "a run was taken over after max_takeovers=1 take-over"
        run = await conformance.record(job, slot)
        assert (run.status, run.attempt) == (RunStatus.ABANDONED, 2), f"after max_takeovers the record is {run!r}"

    @pytest.mark.parametrize("overlap", ["skip", "allow"])
    async def test_a_newer_slot_abandons_an_older_dead_run(self, conformance: Conformance, overlap: str) -> None:
        job = conformance.job(f"newer-{overlap}", lease_ms=LEASE_MS, overlap=overlap)
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        await _won(a, job, s1)
        await a.die()
        await _expire(conformance)
        grant = await _won(b, job, s2)
        assert (await conformance.record(job, s1)).status is RunStatus.ABANDONED
        assert await b.take_over(job) == [], "an older slot was taken over although a newer one runs"
        assert grant.supersedes == s1, "the grant must name the dead run it superseded (Grant.supersedes)"

    async def test_a_grant_names_the_dead_run_it_supersedes_past_skipped_slots(self, conformance: Conformance) -> None:
        # The dead run made the next slot skip; the slot after it abandons the dead run. Named in
        # the grant, the new run covers both slots that ran nothing (the scheduler counts them).
        lease_ms = 4 * LEASE_MS
        job = conformance.job("supersedes", lease_ms=lease_ms)
        a, b = await conformance.instances(2)
        s1, s2, s3 = conformance.slots(3)
        first = await _won(a, job, s1)
        assert first.supersedes is None
        await a.die()
        assert (await b.claim(job, s2)).outcome is Outcome.SKIPPED
        await _expire(conformance, lease_ms)
        grant = await _won(b, job, s3)
        assert grant.supersedes == s1, f"the grant of {s3} must name the dead run of {s1}, not {grant.supersedes}"
        assert (await conformance.record(job, s1)).status is RunStatus.ABANDONED

    async def test_a_dead_run_older_than_the_newest_won_is_not_named(self, conformance: Conformance) -> None:
        job = conformance.job("older-dead", lease_ms=LEASE_MS, overlap="allow")
        a, b = await conformance.instances(2)
        s1, s2, s3 = conformance.slots(3)
        await _won(a, job, s1)
        await a.die()
        second = await _won(b, job, s2)  # overlap allowed: s2 runs beside the dying s1 and is the newest won
        assert await b.finish(second)
        await _expire(conformance)
        grant = await _won(b, job, s3)
        assert grant.supersedes is None, "s2 ran, so the abandoned s1 is no gap for s3 to cover"

    @pytest.mark.parametrize("overlap", ["skip", "allow"])
    async def test_a_won_claim_names_the_mark_it_found(self, conformance: Conformance, overlap: str) -> None:
        # The slots between that mark and the claim were decided by nobody (their claims lost on cut
        # links): named in the grant, the new run covers them (the scheduler counts them in `missed`).
        job = conformance.job(f"prevmark-{overlap}", overlap=overlap)
        a, b = await conformance.instances(2)
        s1, s2, _, _, s5 = conformance.slots(5)
        first = await _won(a, job, s1)
        assert first.previous_mark is None, "the job never ran, so the first grant found no mark"
        assert await a.finish(first)
        second = await _won(b, job, s2)
        assert second.previous_mark == s1, f"the grant of {s2} must name the mark {s1}, not {second.previous_mark}"
        assert await b.finish(second)
        manual = await _won(a, job, s2, manual=True)
        assert manual.previous_mark is None, "a manual run neither reads nor moves the mark"
        assert await a.finish(manual)
        fifth = await _won(a, job, s5)
        assert fifth.previous_mark == s2, f"slots after {s2} were never claimed; the grant named {fifth.previous_mark}"

    async def test_claims_decided_together_each_name_the_mark_they_found(self, conformance: Conformance) -> None:
        jobs = [conformance.job(f"prevmark-batch{i}", overlap="allow" if i == 1 else "skip") for i in range(3)]
        a, b = await conformance.instances(2)
        s1, s2, s3 = conformance.slots(3)
        for job in jobs:
            assert await a.finish(await _won(a, job, s1))
        # One call: job 0 and job 1 at s2, then job 1 again at s3 (its mark is s2 by then), job 2 at s3.
        claims = [b.make_claim(jobs[0], s2), b.make_claim(jobs[1], s2)]
        claims += [b.make_claim(jobs[1], s3), b.make_claim(jobs[2], s3)]
        results = await b.claim_all(claims)
        assert [r.outcome for r in results] == [Outcome.WON] * 4, [r.outcome for r in results]
        found = [r.grant.previous_mark for r in results if r.grant is not None]
        assert found == [s1, s1, s2, s1], f"each grant must name the mark its own job had then, not {found}"

    async def test_take_over_abandons_a_dead_run_that_is_not_the_newest(self, conformance: Conformance) -> None:
        job = conformance.job("oldest", lease_ms=LEASE_MS, overlap="allow")
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        await _won(a, job, s1)
        await _won(a, job, s2)
        await a.die()
        await _expire(conformance)
        (grant,) = _taken(await b.take_over(job))
        assert (grant.slot_ms, grant.attempt) == (s2, 2), "take-over must go to the newest slot"
        assert (await conformance.record(job, s1)).status is RunStatus.ABANDONED

    async def test_slots_skipped_for_a_dead_run_do_not_abandon_it(self, conformance: Conformance) -> None:
        # A slot skipped for overlap did not run the job, so the dead run it skipped for is still
        # the newest run: it must be taken over, or neither slot runs while instances are alive.
        lease_ms = 4 * LEASE_MS  # the skip must land while the dead run's lease still holds
        job = conformance.job("skipped-for-dead", lease_ms=lease_ms)
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        await _won(a, job, s1)
        await a.die()
        assert (await b.claim(job, s2)).outcome is Outcome.SKIPPED
        await _expire(conformance, lease_ms)
        (grant,) = _taken(await b.take_over(job))
        assert (grant.slot_ms, grant.attempt) == (s1, 2), "the dead run must be taken over, not abandoned"
        assert (await conformance.record(job, s2)).status is RunStatus.SKIPPED

    async def test_overlap_skip_records_the_slot_once(self, conformance: Conformance) -> None:
        job = conformance.job("overlap")
        assert job.options.overlap == "skip"
        a, *racers = await conformance.instances(9)
        s1, s2, s3 = conformance.slots(3)
        running = await _won(a, job, s1)
        answers = await asyncio.gather(*(x.claim(job, s2) for x in racers))
        outcomes = Counter(r.outcome for r in answers)
        assert outcomes[Outcome.WON] == 0, f"a slot was won while the previous run held its lease: {outcomes}"
        assert outcomes[Outcome.SKIPPED] >= 1, f"no racer was told SKIPPED: {outcomes}"
        skipped = [r for r in await conformance.history(job) if r.slot_ms == s2]
        assert len(skipped) == 1, f"the skipped slot has {len(skipped)} history records: {skipped!r}"
        assert skipped[0].status is RunStatus.SKIPPED
        assert skipped[0].instance in {x.id for x in racers}
        assert await a.finish(running)
        assert (await racers[0].claim(job, s2)).outcome is not Outcome.WON, "a skipped slot was won afterwards"
        await _won(racers[0], job, s3)

    async def test_a_manual_run_while_the_job_runs_is_skipped(self, conformance: Conformance) -> None:
        job = conformance.job("manual-skip")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        running = await _won(a, job, slot)
        manual_slot = now_ms()
        result = await b.claim(job, manual_slot, manual=True)
        assert result.outcome is Outcome.SKIPPED, f"run now while the job runs was answered {result.outcome}"
        assert (await conformance.record(job, manual_slot, manual=True)).status is RunStatus.SKIPPED
        assert await a.finish(running)
        manual = await _won(b, job, manual_slot + 1, manual=True)
        assert manual.manual

    async def test_catch_up_has_one_winner(self, conformance: Conformance) -> None:
        """Instances return after missing 5 slots; one of them runs the newest, once, as a catch-up."""
        job = conformance.job("catchup")
        a, *returning = await conformance.instances(9)
        slots = conformance.slots(6)
        assert await a.leases.marks([job]) == {job.name: None}, "a job that never ran must have no mark"
        assert await a.finish(await _won(a, job, slots[0]))
        assert await a.leases.marks([job]) == {job.name: slots[0]}
        await a.die()
        newest, missed = slots[-1], len(slots) - 1
        answers = await asyncio.gather(*(x.claim(job, newest, catch_up=True, missed=missed) for x in returning))
        grants = [r.grant for r in answers if r.outcome is Outcome.WON and r.grant is not None]
        assert len(grants) == 1, f"{len(grants)} instances won the catch-up run"
        assert (grants[0].catch_up, grants[0].missed) == (True, missed)
        run = await conformance.record(job, newest)
        assert (run.catch_up, run.missed, run.status) == (True, missed, RunStatus.RUNNING), run
        for x in returning[:2]:
            assert await x.leases.marks([job]) == {job.name: newest}
        assert (await returning[0].claim(job, slots[2])).outcome is Outcome.LOST, "a missed slot ran after catch-up"

    async def test_hand_over_lets_a_backup_take_over_at_once(self, conformance: Conformance) -> None:
        """Hand-over on stop: no waiting for the (here 30 s) lease, even with no attempts left."""
        job = conformance.job("handover", lease_ms=30_000, max_takeovers=0)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        started = time.monotonic()
        assert await a.leases.hand_over(first), "hand_over() by the owner returned False"
        (second,) = _taken(await b.take_over(job))
        assert time.monotonic() - started < 10, "the take-over waited for the lease to expire"
        assert (second.instance, second.attempt, second.slot_ms) == (b.id, 1, slot), "a hand-over is no new attempt"
        assert _grows(first.fencing, second.fencing), f"fencing went from {first.fencing!r} to {second.fencing!r}"
        assert not await a.renew(first), "the instance that handed over could still renew"
        assert await b.finish(second)

    async def test_a_hand_over_does_not_use_up_an_attempt(self, conformance: Conformance) -> None:
        """``max_takeovers`` counts runners that died: a run handed over on stop goes on as the same attempt."""
        job = conformance.job("handed", lease_ms=LEASE_MS, max_takeovers=1)
        a, b, c, d = await conformance.instances(4)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        assert await a.leases.hand_over(first)
        (second,) = _taken(await b.take_over(job))
        assert second.attempt == 1
        await _expire(conformance)  # b dies: attempt 1 is used up
        (third,) = _taken(await c.take_over(job))
        assert (third.instance, third.attempt) == (c.id, 2)
        await _expire(conformance)  # c dies too: max_takeovers=1 is used up
        assert await d.take_over(job) == [], "a run was taken over after its max_takeovers=1 was used up"
        run = await conformance.record(job, slot)
        assert (run.status, run.attempt) == (RunStatus.ABANDONED, 2), f"after max_takeovers the record is {run!r}"

    async def test_an_older_slot_is_never_granted(self, conformance: Conformance) -> None:
        """The mark: a slot older than (or equal to) the newest granted one is LOST, even once trimmed."""
        job = conformance.job("mark", history_size=1)
        a, late = await conformance.instances(2)
        slots = conformance.slots(5)
        for slot in slots[1:4]:
            assert await a.finish(await _won(a, job, slot))
        for slot in slots[:4]:
            result = await late.claim(job, slot)
            assert result.outcome is Outcome.LOST, f"slot {slot} (mark {slots[3]}) was answered {result.outcome}"
        await _won(late, job, slots[4])

    async def test_a_claim_delayed_past_a_newer_slot_is_recorded_skipped_while_an_older_run_holds_the_lease(
        self, conformance: Conformance
    ) -> None:
        """A claim held up on its link reaches the store after a newer slot was decided.

        It is too late to run (the mark), but while an older run holds the lease
        it would have been skipped in time too: it is recorded skipped, so
        history has no hole. Without such a run, or under a newer run (a
        catch-up that covered it), it is LOST and leaves no record.
        """
        job = conformance.job("delayed", lease_ms=30_000)
        a, b, late = await conformance.instances(3)
        s0, s1, s2, s3, s4 = conformance.slots(5)
        first = await _won(a, job, s0)
        assert (await b.claim(job, s2)).outcome is Outcome.SKIPPED
        delayed = await late.claim(job, s1)
        assert delayed.outcome is Outcome.SKIPPED, f"the delayed claim of {s1} was answered {delayed.outcome}"
        assert (await conformance.record(job, s1)).status is RunStatus.SKIPPED
        assert await a.leases.marks([job]) == {job.name: s2}, "the delayed claim moved the mark back"
        assert (await b.claim(job, s1)).outcome is Outcome.LOST, "a second claim of the recorded slot"
        assert await a.finish(first)
        await _won(b, job, s4)  # no run holds a lease any more; then a newer one does
        assert (await late.claim(job, s3)).outcome is Outcome.LOST, "a slot older than the running run"
        assert [r.slot_ms for r in await conformance.history(job) if r.slot_ms == s3] == []

    async def test_manual_runs_do_not_move_the_mark(self, conformance: Conformance) -> None:
        job = conformance.job("manual-mark")
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        assert await a.finish(await _won(a, job, s1))
        manual = await _won(a, job, s2 + 60_000, manual=True)
        assert await a.finish(manual)
        assert await a.leases.marks([job]) == {job.name: s1}, "a manual run moved the mark"
        assert await b.finish(await _won(b, job, s2))
        assert await b.leases.marks([job]) == {job.name: s2}
        record = await conformance.record(job, s2 + 60_000, manual=True)
        assert record.manual
        assert record.status is RunStatus.SUCCEEDED

    async def test_lease_expiry_ignores_the_instances_clock(self, conformance: Conformance) -> None:
        """A claim from an instance whose clock is an hour off neither shortens nor stretches the lease."""
        behind = conformance.job("clock-behind", lease_ms=LEASE_MS)
        ahead = conformance.job("clock-ahead", lease_ms=LEASE_MS)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        await _won(a, behind, slot, clock_ms=now_ms() - 3_600_000)
        await _won(a, ahead, slot, clock_ms=now_ms() + 3_600_000)
        assert await b.take_over(behind) == [], "a lease claimed with a clock an hour behind expired at once"
        assert await b.take_over(ahead) == []
        await _expire(conformance)
        assert len(_taken(await b.take_over(ahead))) == 1, "a lease claimed with a clock an hour ahead did not expire"
        assert len(_taken(await b.take_over(behind))) == 1
