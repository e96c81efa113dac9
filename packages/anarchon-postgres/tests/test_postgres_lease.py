"""The lease tier: renewal, take-over, stale owners, hand-over, abandonment."""

from __future__ import annotations

import asyncio

import pytest

from anarchon.backend import Outcome
from anarchon.run import Run, RunStatus, ms_to_datetime

pytestmark = pytest.mark.postgres

SLOT = 1_800_000_000_000


def _done(grant) -> Run:
    return Run(
        job=grant.job,
        slot_ms=grant.slot_ms,
        status=RunStatus.SUCCEEDED,
        instance=grant.instance,
        attempt=grant.attempt,
        fencing=grant.fencing,
        manual=grant.manual,
        started_at=ms_to_datetime(grant.started_at_ms),
        finished_at=ms_to_datetime(grant.started_at_ms + 5),
        duration_ms=5,
    )


async def _expire(backend, wait_until, ms: int) -> None:
    deadline = await backend.now_ms() + ms

    async def passed() -> bool:
        return await backend.now_ms() > deadline

    await wait_until(passed)


async def test_renewal_keeps_the_lease_and_take_over_follows_when_it_stops(
    make_backend, make_job, make_claim, wait_until
):
    owner, backup = await make_backend(), await make_backend()
    job = make_job("renew", lease_ms=300)
    grant = (await owner.claim([make_claim(job, SLOT, "owner")]))[0].grant
    for _ in range(8):  # 800 ms, well past one lease
        await asyncio.sleep(0.1)
        assert await owner.renew([grant]) == [True]
        assert await backup.take_over([job], "backup") == []

    async def taken() -> bool:
        taken.results = await backup.take_over([job], "backup")  # type: ignore[attr-defined]
        return bool(taken.results)  # type: ignore[attr-defined]

    await wait_until(taken)
    (result,) = taken.results  # type: ignore[attr-defined]
    new = result.grant
    assert result.outcome is Outcome.WON
    assert (new.slot_ms, new.instance, new.attempt) == (SLOT, "backup", 2)
    assert new.fencing > grant.fencing
    assert new.token != grant.token
    assert new.lease_ms == 300
    # The stale owner is refused everywhere and changes nothing.
    assert await owner.renew([grant, new]) == [False, True]
    assert not await owner.hand_over(grant)
    assert not await owner.finish(grant, _done(grant))
    assert (await backup.history("renew"))[0].instance == "backup"
    assert await backup.finish(new, _done(new))
    assert (await backup.history("renew"))[0].status is RunStatus.SUCCEEDED


async def test_racing_take_overs_have_one_winner(make_backend, make_job, make_claim, wait_until):
    owner = await make_backend()
    backups = [await make_backend() for _ in range(8)]
    jobs = [make_job(f"to-{i}", lease_ms=100, max_takeovers=4) for i in range(5)]
    await owner.claim([make_claim(j, SLOT, "owner") for j in jobs])
    await _expire(owner, wait_until, 100)
    # The backups grant with a long lease: with the owner's 100 ms, a take-over answered more than
    # 100 ms after another (8 racers on a loaded machine, as under docker in CI) found that new
    # lease expired and rightly took it over again, as attempt 3.
    jobs = [make_job(f"to-{i}", lease_ms=30_000, max_takeovers=4) for i in range(5)]
    answers = await asyncio.gather(*(b.take_over(jobs, f"b{k}") for k, b in enumerate(backups)))
    won = [(r.grant.job, r.grant.instance) for rs in answers for r in rs]
    assert sorted(j for j, _ in won) == sorted(j.name for j in jobs)
    assert all(r.grant.attempt == 2 for rs in answers for r in rs)


async def test_a_run_out_of_attempts_is_abandoned(backend, make_backend, make_job, make_claim, wait_until):
    backup = await make_backend()
    job = make_job("attempts", lease_ms=100, max_takeovers=1)
    await backend.claim([make_claim(job, SLOT)])
    await _expire(backend, wait_until, 100)
    (second,) = await backup.take_over([job], "backup")
    assert second.grant.attempt == 2
    await _expire(backend, wait_until, 100)
    assert await backup.take_over([job], "third") == []
    assert (await backend.history("attempts"))[0].status is RunStatus.ABANDONED
    assert await backend.renew([second.grant]) == [False]


async def test_only_the_newest_scheduled_slot_is_taken_over(backend, make_job, make_claim, wait_until):
    job = make_job("newest", lease_ms=150, overlap="allow")
    await backend.claim([make_claim(job, SLOT), make_claim(job, SLOT + 1000)])
    manual = (await backend.claim([make_claim(job, SLOT - 7000, manual=True)]))[0].grant
    await _expire(backend, wait_until, 150)
    taken = await backend.take_over([job, job], "backup")  # a job named twice is judged once
    assert sorted((r.grant.slot_ms, r.grant.manual) for r in taken) == [(SLOT - 7000, True), (SLOT + 1000, False)]
    status = {(r.slot_ms, r.manual): r.status for r in await backend.history("newest")}
    assert status[(SLOT, False)] is RunStatus.ABANDONED
    assert status[(SLOT + 1000, False)] is RunStatus.RUNNING
    assert not await backend.finish(manual, _done(manual))


async def test_hand_over_lets_a_backup_take_over_at_once(make_backend, make_job, make_claim):
    owner, backup = await make_backend(), await make_backend()
    job = make_job("handover", lease_ms=60_000, max_takeovers=0)
    grant = (await owner.claim([make_claim(job, SLOT, "owner")]))[0].grant
    assert await backup.take_over([job], "backup") == []
    assert await owner.hand_over(grant)
    assert await owner.renew([grant]) == [False]  # handed over: the owner may not keep it
    (taken,) = await backup.take_over([job], "backup")  # even with max_attempts=1
    assert taken.grant.attempt == 1  # a hand-over is no new attempt
    assert taken.grant.instance == "backup"
    assert not await owner.finish(grant, _done(grant))
    assert await backup.renew([taken.grant]) == [True]


async def test_a_handed_over_run_can_still_be_finished_before_anyone_takes_it(backend, make_job, make_claim):
    job = make_job("handover-finish", lease_ms=60_000)
    grant = (await backend.claim([make_claim(job, SLOT)]))[0].grant
    assert await backend.hand_over(grant)
    assert await backend.hand_over(grant)  # repeated: still the owner
    assert await backend.finish(grant, _done(grant))
    assert await backend.take_over([job], "backup") == []


async def test_renew_answers_each_grant(backend, make_job, make_claim):
    job = make_job("multi", overlap="allow", lease_ms=60_000)
    a, b = (r.grant for r in await backend.claim([make_claim(job, SLOT), make_claim(job, SLOT + 1000)]))
    await backend.finish(a, _done(a))
    assert await backend.renew([a, b, b]) == [False, True, True]
    assert await backend.renew([]) == []
    assert await backend.take_over([], "x") == []
