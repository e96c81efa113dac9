"""Claim: exactly one winner per slot, a retry recognised, slots and jobs independent.

These run on every backend. Jobs here use ``overlap="allow"`` (which a claim
backend has anyway) so that on a lease backend a slot still running does not
turn the next slot into a skip: these tests are about who wins, not overlap.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from anarchon.backend import Claim, ClaimResult, Outcome

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import now_ms
from ._requires import requires

__all__ = ["ClaimTests"]

#: Instances racing for every slot, and slots raced, in the race tests.
RACERS = 8
RACED_SLOTS = 200


def _not_won(result: ClaimResult) -> bool:
    return result.outcome in (Outcome.LOST, Outcome.UNKNOWN) and result.grant is None


class ClaimTests(SuiteBase):
    """Who wins a slot. Every backend, both tiers."""

    @pytest.mark.asyncio
    async def test_one_winner_per_slot_among_racing_instances(self, conformance: Conformance) -> None:
        """8 instances race for each of 200 slots; each walks the slots in order, concurrently."""
        job = conformance.job("race", overlap="allow")
        racers = await conformance.instances(RACERS)
        slots = conformance.slots(RACED_SLOTS)

        async def walk(instance: Instance) -> list[tuple[Claim, ClaimResult]]:
            answers = []
            for slot in slots:
                claim = instance.make_claim(job, slot)
                (result,) = await instance.claim_all([claim])
                answers.append((claim, result))
            return answers

        walks = await asyncio.gather(*(walk(r) for r in racers))
        winners: dict[int, list[Claim]] = {slot: [] for slot in slots}
        for answers in walks:
            for claim, result in answers:
                if result.outcome is Outcome.WON:
                    assert result.grant is not None, f"a WON answer for slot {claim.slot_ms} carries no grant"
                    assert (result.grant.instance, result.grant.token) == (claim.instance, claim.token), (
                        f"slot {claim.slot_ms}: the grant names {result.grant.instance!r} but "
                        f"{claim.instance!r} asked for it"
                    )
                    assert result.grant.attempt == 1
                    winners[claim.slot_ms].append(claim)
                else:
                    assert _not_won(result), f"slot {claim.slot_ms}: unexpected answer {result!r}"
        doubled = {s: [c.instance for c in w] for s, w in winners.items() if len(w) > 1}
        unclaimed = [s for s, w in winners.items() if not w]
        assert not doubled, (
            f"{len(doubled)} of {len(slots)} slots had several winners, e.g. {next(iter(doubled.items()))}"
        )
        assert not unclaimed, f"{len(unclaimed)} of {len(slots)} slots had no winner, e.g. slot {unclaimed[0]}"

        records = await conformance.history(job)
        per_slot = Counter(run.slot_ms for run in records)
        repeated = {slot: n for slot, n in per_slot.items() if n > 1}
        assert not repeated, f"slots with several history records (one per slot is the rule): {repeated}"
        history = {run.slot_ms: run for run in records}
        for slot, (claim,) in winners.items():
            assert slot in history, f"slot {slot} was won but has no history record"
            assert history[slot].instance == claim.instance, (
                f"slot {slot}: history says {history[slot].instance!r} runs it, the winner was {claim.instance!r}"
            )

    @pytest.mark.asyncio
    async def test_one_winner_per_slot_in_batched_claims(self, conformance: Conformance) -> None:
        """Claims due together arrive in one ``claim()`` call; 8 instances race batches of 12."""
        jobs = [conformance.job(f"batch{i}", overlap="allow") for i in range(4)]
        racers = await conformance.instances(RACERS)
        slots = conformance.slots(60)
        rounds = [slots[i : i + 3] for i in range(0, len(slots), 3)]

        async def walk(instance: Instance) -> list[tuple[Claim, ClaimResult]]:
            order = random.sample(jobs, len(jobs))  # each instance lists the jobs in its own order
            answers: list[tuple[Claim, ClaimResult]] = []
            for batch_slots in rounds:
                claims = [instance.make_claim(job, slot) for job in order for slot in batch_slots]
                answers.extend(zip(claims, await instance.claim_all(claims), strict=True))
            return answers

        walks = await asyncio.gather(*(walk(r) for r in racers))
        wins: Counter[tuple[str, int]] = Counter()
        for answers in walks:
            for claim, result in answers:
                if result.outcome is Outcome.WON:
                    assert result.grant is not None
                    assert result.grant.token == claim.token
                    wins[(claim.job, claim.slot_ms)] += 1
                else:
                    assert _not_won(result), f"{claim.job}@{claim.slot_ms}: unexpected answer {result!r}"
        expected = {(job.name, slot) for job in jobs for slot in slots}
        doubled = {key: n for key, n in wins.items() if n > 1}
        assert not doubled, (
            f"{len(doubled)} of {len(expected)} slots had several winners, e.g. {next(iter(doubled.items()))}"
        )
        missing = expected - set(wins)
        assert not missing, f"{len(missing)} of {len(expected)} slots had no winner, e.g. {sorted(missing)[0]}"

    @pytest.mark.asyncio
    async def test_a_new_claim_of_a_won_slot_loses(self, conformance: Conformance) -> None:
        """A second claim (a new token), even from the winner's own instance, never wins again."""
        job = conformance.job("again", overlap="allow")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        assert (await a.claim(job, slot)).won
        assert _not_won(await b.claim(job, slot))
        assert _not_won(await a.claim(job, slot)), "the winner's second claim (a new token) won the slot again"

    @pytest.mark.asyncio
    @requires("idempotent_claim")
    async def test_retried_claim_is_recognised_as_own(self, conformance: Conformance) -> None:
        """A client that lost the answer retries with the same token and gets its first answer back."""
        job = conformance.job("retry", overlap="allow")
        a, b = await conformance.instances(2)
        s1, s2, s3 = conformance.slots(3)
        first = a.make_claim(job, s1)
        (won,) = await a.claim_all([first])
        assert won.won
        assert won.grant is not None
        lost_claim = b.make_claim(job, s1)
        assert _not_won((await b.claim_all([lost_claim]))[0])

        (again,) = await a.claim_all([first])
        assert again.won, f"a retry with the winner's token was answered {again.outcome}; expected WON"
        assert again.grant is not None
        for field in ("job", "slot_ms", "instance", "token", "attempt", "fencing"):
            assert getattr(again.grant, field) == getattr(won.grant, field), (
                f"the retried claim's grant differs in {field}: {getattr(again.grant, field)!r} "
                f"!= {getattr(won.grant, field)!r}"
            )
        assert _not_won((await b.claim_all([lost_claim]))[0]), "a retry of a lost claim won"

        batch = [a.make_claim(job, s2), a.make_claim(job, s3)]
        firsts = await a.claim_all(batch)
        assert [r.outcome for r in firsts] == [Outcome.WON, Outcome.WON]
        assert _not_won(await b.claim(job, s3))
        retried = await a.claim_all(batch)
        assert [r.outcome for r in retried] == [Outcome.WON, Outcome.WON], (
            f"a retried batch was answered {[str(r.outcome) for r in retried]}; expected its first answers"
        )
        assert (await conformance.record(job, s1)).instance == a.id

    @pytest.mark.asyncio
    @requires(idempotent_claim=False)
    async def test_repeated_claim_never_wins_twice(self, conformance: Conformance) -> None:
        """Without idempotent claims a retry cannot be recognised, so it must never be a second WON."""
        job = conformance.job("repeat", overlap="allow")
        (a,) = await conformance.instances(1)
        (slot,) = conformance.slots(1)
        claim = a.make_claim(job, slot)
        (first,) = await a.claim_all([claim])
        assert first.won
        (second,) = await a.claim_all([claim])
        assert second.outcome is not Outcome.WON, "the same claim repeated won a second time"

    @pytest.mark.asyncio
    async def test_slots_and_jobs_are_independent(self, conformance: Conformance) -> None:
        """Winning slot s of one job says nothing about job B (even a name sharing a prefix) or slot s+1."""
        base = conformance.job("indep", overlap="allow")
        others = [conformance.make_job(base.name + suffix, overlap="allow") for suffix in ("-1", "_", "1")]
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        assert (await a.claim(base, s1)).won
        for other in others:
            result = await b.claim(other, s1)
            assert result.won, f"{other.name}@{s1} was answered {result.outcome} after {base.name}@{s1} was won"
        result = await b.claim(base, s2)
        assert result.won, f"{base.name}@{s2} was answered {result.outcome} after {base.name}@{s1} was won"
        assert {r.slot_ms for r in await conformance.history(base)} == {s1, s2}
        for other in others:
            assert [(r.job, r.slot_ms) for r in await conformance.history(other)] == [(other.name, s1)]

    @pytest.mark.asyncio
    async def test_now_ms_is_epoch_milliseconds(self, conformance: Conformance) -> None:
        """``now_ms()`` is epoch milliseconds (a backend's server clock is near ours on loopback)."""
        (a,) = await conformance.instances(1)
        backend_ms = await a.backend.now_ms()
        assert isinstance(backend_ms, int)
        assert abs(backend_ms - now_ms()) < 60_000, f"now_ms() says {backend_ms}, this host {now_ms()}"
