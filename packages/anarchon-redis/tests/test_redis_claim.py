"""Claims: one winner among racing instances, retried claims, the mark (single server and cluster)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from anarchon.backend import Outcome
from anarchon.run import RunStatus

INSTANCES = 8


async def test_one_winner_per_slot_among_eight_racing_instances(store, make_job, claim):
    backends = [await store.backend() for _ in range(INSTANCES)]
    jobs = [make_job(f"race-{i}", overlap="allow") for i in range(3)]
    slots = [1_700_000_000_000 + i * 1000 for i in range(60)]
    winners: Counter[tuple[str, int]] = Counter()
    fencings: dict[str, list[int]] = {j.name: [] for j in jobs}

    for slot in slots:
        batches = [[claim(j, slot, instance=f"i{n}") for j in jobs] for n in range(INSTANCES)]
        answers = await asyncio.gather(*(b.claim(batch) for b, batch in zip(backends, batches, strict=True)))
        for answer in answers:
            assert len(answer) == len(jobs)
            for result in answer:
                assert result.outcome in (Outcome.WON, Outcome.LOST)
                if result.won:
                    assert result.grant is not None
                    winners[(result.grant.job, slot)] += 1
                    fencings[result.grant.job].append(result.grant.fencing)

    assert set(winners.values()) == {1}
    assert len(winners) == len(jobs) * len(slots)
    for job in jobs:
        first = fencings[job.name][0]
        assert fencings[job.name] == list(range(first, first + len(slots))), "fencing grows by one per won claim"
        history = await backends[0].history(job.name, limit=1000)
        assert [r.slot_ms for r in history] == sorted(slots, reverse=True)


async def test_racing_instances_on_one_contended_slot_many_times(store, make_job, claim):
    backends = [await store.backend() for _ in range(INSTANCES)]
    job = make_job("hot", overlap="allow")
    for round_ in range(100):
        slot = 1_000_000 + round_
        results = await asyncio.gather(*(b.claim([claim(job, slot, f"i{n}")]) for n, b in enumerate(backends)))
        assert sum(r[0].won for r in results) == 1


async def test_retried_claim_gets_its_first_answer(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    job = make_job()
    first = claim(job, 5000, "a")
    (won,) = await a.claim([first])
    assert won.won
    (again,) = await a.claim([first])
    assert again.won
    assert again.grant == won.grant
    (other,) = await b.claim([claim(job, 5000, "b")])
    assert other.outcome is Outcome.LOST

    assert won.grant is not None
    run = (await a.history(job.name))[0].replace(status=RunStatus.SUCCEEDED)
    assert await a.finish(won.grant, run)
    (after_finish,) = await a.claim([first])
    assert after_finish.outcome is Outcome.LOST


async def test_mark_refuses_older_and_equal_scheduled_slots_but_not_manual_runs(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    job = make_job(overlap="allow")
    assert (await a.marks([job])) == {job.name: None}
    assert (await a.claim([claim(job, 20_000)]))[0].won
    assert (await b.claim([claim(job, 10_000, "b")]))[0].outcome is Outcome.LOST
    assert (await b.claim([claim(job, 20_000, "b")]))[0].outcome is Outcome.LOST
    manual = (await b.claim([claim(job, 10_000, "b", manual=True)]))[0]
    assert manual.won
    assert manual.grant is not None
    assert manual.grant.manual
    assert (await a.marks([job])) == {job.name: 20_000}, "manual runs do not move the mark"
    assert (await b.claim([claim(job, 30_000, "b")]))[0].won
    assert (await a.marks([job])) == {job.name: 30_000}


async def test_jobs_and_slots_are_independent_in_one_call(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    jobs = [make_job(f"j{i}") for i in range(20)]
    started = await a.now_ms()
    first = await a.claim([claim(j, 1000 * (i + 1)) for i, j in enumerate(jobs)])
    assert all(r.won for r in first)
    # One new counter per job, each started at the clock (fencing_floor), none counting the others' grants.
    assert all(r.grant and started <= (r.grant.fencing or 0) <= started + 1000 for r in first)
    marks = await b.marks(jobs)
    assert marks == {j.name: 1000 * (i + 1) for i, j in enumerate(jobs)}


async def test_manual_and_scheduled_run_of_one_slot_are_kept_apart(store, make_job, claim):
    a = await store.backend()
    job = make_job(overlap="allow")
    scheduled, manual = await a.claim([claim(job, 7000), claim(job, 7000, manual=True)])
    assert scheduled.won
    assert manual.won
    history = await a.history(job.name)
    assert [(r.slot_ms, r.manual) for r in history] == [(7000, True), (7000, False)]


async def test_tokens_are_never_shared_between_instances(store, make_job, claim):
    """A token names one claim: another instance reusing the slot never gets the first grant."""
    backends = [await store.backend() for _ in range(4)]
    job = make_job()
    token = uuid.uuid4().hex
    (first,) = await backends[0].claim([claim(job, 9000, "a", token)])
    assert first.won
    results = await asyncio.gather(*(b.claim([claim(job, 9000, f"i{n}")]) for n, b in enumerate(backends[1:])))
    assert all(r[0].outcome is Outcome.LOST for r in results)
