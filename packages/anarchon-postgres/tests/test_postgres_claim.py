"""Claims against a real server: racing instances, marks, fencing, overlap, history."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from anarchon.backend import Outcome
from anarchon.run import RunStatus

pytestmark = pytest.mark.postgres

SLOT = 1_800_000_000_000


async def test_one_winner_per_slot_among_racing_instances(make_backend, make_job, make_claim):
    instances = [await make_backend() for _ in range(10)]
    jobs = [make_job(f"race-{i}", overlap="allow") for i in range(4)]
    winners: dict[tuple[str, int], list[int]] = {}
    firsts: dict[str, int] = {}  # each job's counter starts at the clock (fencing_floor), then counts on
    for n in range(40):
        slot = SLOT + n * 1000

        async def claim_all(k: int, backend, slot=slot):
            # Every instance sends all jobs in one call, each in its own order.
            order = random.sample(jobs, len(jobs))
            results = await backend.claim([make_claim(j, slot, f"i{k}") for j in order])
            return [(j.name, r) for j, r in zip(order, results, strict=True)]

        answers = await asyncio.gather(*(claim_all(k, b) for k, b in enumerate(instances)))
        for k, per_instance in enumerate(answers):
            for name, result in per_instance:
                assert result.outcome in (Outcome.WON, Outcome.LOST)
                if result.won:
                    winners.setdefault((name, slot), []).append(k)
                    assert result.grant.fencing == firsts.setdefault(name, result.grant.fencing) + n
    assert len(winners) == 4 * 40
    assert all(len(w) == 1 for w in winners.values()), {k: v for k, v in winners.items() if len(v) > 1}
    history = await instances[0].history("race-0", limit=100)
    assert [r.slot_ms for r in history] == [SLOT + n * 1000 for n in reversed(range(40))]


@pytest.mark.parametrize("overlap", ["allow", "skip"])
async def test_one_winner_per_slot_among_instances_racing_with_one_claim_each(
    overlap, make_backend, make_job, make_claim
):
    # A lone claim of an overlap-"allow" job is decided by a single conditional update: race it too.
    instances = [await make_backend() for _ in range(8)]
    job = make_job(f"lone-{overlap}", overlap=overlap)
    first: int | None = None
    for n in range(30):
        slot = SLOT + n * 1000
        answers = await asyncio.gather(*(b.claim([make_claim(job, slot, f"i{k}")]) for k, b in enumerate(instances)))
        winners = [k for k, (r,) in enumerate(answers) if r.won]
        assert len(winners) == 1, (slot, winners)
        (grant,) = [r.grant for (r,) in answers if r.won]
        first = grant.fencing if first is None else first
        assert grant.fencing == first + n
        assert await instances[winners[0]].finish(grant, _finished(grant))
        assert all(r.outcome is Outcome.LOST for (r,) in answers if not r.won)


async def test_answers_line_up_with_the_claims_of_one_call(backend, make_job, make_claim):
    a, b = make_job("a", overlap="allow"), make_job("b", overlap="allow")
    results = await backend.claim(
        [make_claim(b, SLOT), make_claim(a, SLOT), make_claim(a, SLOT - 1000), make_claim(b, SLOT + 1000)]
    )
    assert [r.outcome for r in results] == [Outcome.WON, Outcome.WON, Outcome.LOST, Outcome.WON]
    assert [(r.grant.job, r.grant.slot_ms) for r in results if r.grant] == [
        ("b", SLOT),
        ("a", SLOT),
        ("b", SLOT + 1000),
    ]
    assert await backend.claim([]) == []


async def test_a_retried_claim_gets_its_first_answer(make_backend, make_job, make_claim):
    first, second = await make_backend(), await make_backend()
    job = make_job("retry")
    won = make_claim(job, SLOT, "i1", "tok-won")
    r1 = (await first.claim([won]))[0]
    assert r1.won
    assert (await first.claim([won]))[0] == r1
    assert (await second.claim([won]))[0] == r1  # the answer lives on the server, not in the client

    skipped = make_claim(job, SLOT + 1000, "i2", "tok-skip")
    s1 = (await second.claim([skipped]))[0]
    assert s1.outcome is Outcome.SKIPPED
    assert (await second.claim([skipped]))[0] == s1

    assert (await first.claim([make_claim(job, SLOT + 1000, "i1", "other")]))[0].outcome is Outcome.LOST
    assert await first.finish(r1.grant, _finished(r1.grant))
    assert (await first.claim([won]))[0].outcome is Outcome.LOST


def _finished(grant, status=RunStatus.SUCCEEDED, error=None):
    from anarchon.run import Run, ms_to_datetime

    start = ms_to_datetime(grant.started_at_ms)
    return Run(
        job=grant.job,
        slot_ms=grant.slot_ms,
        status=status,
        instance=grant.instance,
        attempt=grant.attempt,
        fencing=grant.fencing,
        manual=grant.manual,
        catch_up=grant.catch_up,
        started_at=start,
        finished_at=start + timedelta(milliseconds=1234, microseconds=567),
        duration_ms=1234,
        error=error,
        missed=grant.missed,
    )


async def test_the_mark_refuses_older_and_equal_slots_and_ignores_manual_runs(backend, make_job, make_claim):
    job = make_job("mark", overlap="allow")
    assert await backend.marks([job]) == {"mark": None}
    assert (await backend.claim([make_claim(job, SLOT)]))[0].won
    assert (await backend.claim([make_claim(job, SLOT - 1000)]))[0].outcome is Outcome.LOST
    assert (await backend.claim([make_claim(job, SLOT)]))[0].outcome is Outcome.LOST
    manual = (await backend.claim([make_claim(job, SLOT - 5000, manual=True)]))[0]
    assert manual.won
    assert manual.grant.manual
    manual_later = (await backend.claim([make_claim(job, SLOT + 5000, manual=True)]))[0]
    assert manual_later.won
    assert await backend.marks([job, make_job("never")]) == {"mark": SLOT, "never": None}
    assert (await backend.claim([make_claim(job, SLOT + 1000)]))[0].won
    assert await backend.marks([job]) == {"mark": SLOT + 1000}


async def test_fencing_grows_per_job_with_every_grant(backend, make_job, make_claim):
    a, b = make_job("fa", overlap="allow"), make_job("fb", overlap="allow")
    got = [
        (await backend.claim([make_claim(a, SLOT)]))[0].grant.fencing,
        (await backend.claim([make_claim(a, SLOT + 1000)]))[0].grant.fencing,
        (await backend.claim([make_claim(b, SLOT)]))[0].grant.fencing,
        (await backend.claim([make_claim(a, SLOT + 5000, manual=True)]))[0].grant.fencing,
    ]
    # Each job's counter starts at the server's clock (fencing_floor) and counts its own grants.
    assert got[1:] == [got[0] + 1, got[2], got[0] + 2] and got[2] >= got[0] and got[0] > 1_700_000_000_000


async def test_overlap_skip_is_answered_once_and_recorded_once(make_backend, make_job, make_claim):
    instances = [await make_backend() for _ in range(8)]
    job = make_job("overlap", lease_ms=60_000)
    assert (await instances[0].claim([make_claim(job, SLOT, "i0")]))[0].won
    answers = await asyncio.gather(*(b.claim([make_claim(job, SLOT + 1000, f"i{k}")]) for k, b in enumerate(instances)))
    outcomes = [a[0].outcome for a in answers]
    assert outcomes.count(Outcome.SKIPPED) == 1
    assert outcomes.count(Outcome.LOST) == 7
    record = next(a[0].record for a in answers if a[0].outcome is Outcome.SKIPPED)
    assert record.status is RunStatus.SKIPPED
    assert record.fencing is None
    assert record.duration_ms == 0
    history = await instances[0].history("overlap")
    assert [(r.slot_ms, r.status) for r in history] == [
        (SLOT + 1000, RunStatus.SKIPPED),
        (SLOT, RunStatus.RUNNING),
    ]
    assert history[0] == record
    assert await instances[0].marks([job]) == {"overlap": SLOT + 1000}
    # A manual run is skipped too while the lease is held.
    assert (await instances[1].claim([make_claim(job, SLOT + 1500, manual=True)]))[0].outcome is Outcome.SKIPPED


async def test_overlap_allow_grants_while_a_run_holds_the_lease(backend, make_job, make_claim):
    job = make_job("allow", overlap="allow", lease_ms=60_000)
    assert (await backend.claim([make_claim(job, SLOT)]))[0].won
    assert (await backend.claim([make_claim(job, SLOT + 1000)]))[0].won


async def test_older_dead_runs_are_abandoned_by_the_next_slot(backend, make_job, make_claim, wait_until):
    job = make_job("dead", lease_ms=100)
    first = (await backend.claim([make_claim(job, SLOT)]))[0]
    expires = await backend.now_ms() + 100

    async def expired() -> bool:
        return await backend.now_ms() > expires

    await wait_until(expired)
    nxt = (await backend.claim([make_claim(job, SLOT + 1000)]))[0]
    assert nxt.won  # the dead run no longer holds the lease, so no overlap skip
    runs = {r.slot_ms: r.status for r in await backend.history("dead")}
    assert runs == {SLOT: RunStatus.ABANDONED, SLOT + 1000: RunStatus.RUNNING}
    assert not await backend.finish(first.grant, _finished(first.grant))


async def test_finish_records_the_run_as_given(backend, make_job, make_claim):
    job = make_job("fields")
    grant = (await backend.claim([make_claim(job, SLOT, "host-1")]))[0].grant
    run = _finished(grant, RunStatus.FAILED, "ValueError: bad input 'x'; DROP TABLE runs")
    assert await backend.finish(grant, run)
    assert await backend.history("fields") == [run]
    assert await backend.last_run("fields") == run
    assert await backend.last_run("unknown-job") is None
    assert not await backend.finish(grant, run)  # finished already: no longer the owner


async def test_history_keeps_history_size_newest_and_every_running_record(backend, make_job, make_claim):
    job = make_job("size", history_size=5, overlap="allow", lease_ms=60_000)
    await backend.claim([make_claim(job, SLOT)])  # stays running
    for n in range(1, 12):
        grant = (await backend.claim([make_claim(job, SLOT + n * 1000)]))[0].grant
        assert await backend.finish(grant, _finished(grant))
    history = await backend.history("size", limit=100)
    assert [r.slot_ms for r in history] == [SLOT + n * 1000 for n in (11, 10, 9, 8, 7)] + [SLOT]
    assert [r.slot_ms for r in await backend.history("size", limit=2)] == [SLOT + 11_000, SLOT + 10_000]


async def test_a_large_history_is_cut_in_batches_and_never_below_its_size(backend, make_job, make_claim):
    job = make_job("batched", history_size=32, overlap="allow", lease_ms=60_000)  # cut once 32 + 32 // 16 is passed
    lengths = []
    for n in range(80):
        grant = (await backend.claim([make_claim(job, SLOT + n * 1000)]))[0].grant
        assert await backend.finish(grant, _finished(grant))
        lengths.append(len(await backend.history("batched", limit=1000)))
    assert lengths[:32] == list(range(1, 33))
    assert min(lengths[32:]) == 32 and max(lengths) == 34  # at least the size, and bounded
    newest = [r.slot_ms for r in await backend.history("batched", limit=32)]
    assert newest == [SLOT + n * 1000 for n in range(79, 47, -1)]


async def test_history_drops_finished_runs_older_than_the_ttl(backend, make_job, make_claim):
    job = make_job("ttl", history_ttl_ms=60_000, overlap="allow")
    now = await backend.now_ms()
    old = (await backend.claim([make_claim(job, now - 120_000)]))[0].grant
    await backend.finish(old, _finished(old))
    running_old = (await backend.claim([make_claim(job, now - 90_000)]))[0].grant
    recent = (await backend.claim([make_claim(job, now - 1000)]))[0].grant
    assert [r.slot_ms for r in await backend.history("ttl")] == [recent.slot_ms, running_old.slot_ms]


async def test_jobs_are_independent(backend, make_job, make_claim):
    a, b = make_job("ind-a"), make_job("ind-b")
    assert (await backend.claim([make_claim(a, SLOT)]))[0].won
    assert (await backend.claim([make_claim(b, SLOT)]))[0].won
    assert (await backend.claim([make_claim(b, SLOT + 1000)]))[0].outcome is Outcome.SKIPPED
    assert await backend.history("ind-a") == [(await backend.history("ind-a"))[0]]


async def test_instance_clock_does_not_move_lease_expiry(backend, make_backend, make_job, make_claim):
    other = await make_backend()
    job = make_job("skew", lease_ms=2000)
    far_future = datetime.now(timezone.utc) + timedelta(days=1)
    claim = make_claim(job, SLOT, now_ms=int(far_future.timestamp() * 1000))
    grant = (await backend.claim([claim]))[0].grant
    assert grant.started_at_ms == claim.now_ms  # the runner's clock is what history shows
    assert await other.take_over([job], "i2") == []  # expiry is the server's now() + lease_ms
    assert abs(await backend.now_ms() - int(datetime.now(timezone.utc).timestamp() * 1000)) < 5000


async def test_instances_claiming_overlapping_sets_of_new_jobs_at_once_never_deadlock(
    make_backend, make_job, make_claim
):
    """A fleet's first claims of jobs nobody claimed yet: each instance a different subset, all at once.

    The claim function used to lock the job rows that existed, then create the
    missing ones: three such claims could wait on one another, and PostgreSQL
    broke the cycle by failing one (a deadlock, a claim that answered nothing,
    a slot not run). Rows are now created first, then locked in name order.
    """
    backends = [await make_backend() for _ in range(6)]
    rng = random.Random(37)
    for round_ in range(20):  # before the fix, 2 runs in 3 deadlocked within 8 rounds
        names = [f"new-{round_}-{i:02d}" for i in range(60)]
        jobs = {n: make_job(n, overlap="allow") for n in names}
        subsets = [sorted(rng.sample(names, 30)) for _ in backends]
        calls = [
            b.claim([make_claim(jobs[n], SLOT, f"i{k}") for n in subset])
            for k, (b, subset) in enumerate(zip(backends, subsets, strict=True))
        ]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        failed = [a for a in answers if isinstance(a, BaseException)]
        assert not failed, f"round {round_}: {failed[:3]}"
        won = Counter(r.grant.job for results in answers for r in results if r.won)
        unknown = [r for results in answers for r in results if r.outcome is Outcome.UNKNOWN]
        assert not unknown, f"round {round_}: {len(unknown)} claims answered nothing"
        claimed = {n for subset in subsets for n in subset}
        assert won == dict.fromkeys(claimed, 1), f"round {round_}: not one winner per job"
