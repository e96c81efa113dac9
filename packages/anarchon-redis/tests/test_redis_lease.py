"""The lease rules of anarchon.backend, each on its own (single server and cluster)."""

from __future__ import annotations

import asyncio
import json
import time

from anarchon.backend import Outcome
from anarchon.run import Attempt, RunStatus, ms_to_datetime
from anarchon_redis._records import history_run

SHORT = 150  # ms: a lease that expires within a test


def finished(run, status=RunStatus.SUCCEEDED):
    return run.replace(status=status, finished_at=run.started_at, duration_ms=1)


async def test_overlap_skip_records_the_slot_once_and_moves_the_mark(store, make_job, claim):
    a, b, c = await store.backend(), await store.backend(), await store.backend()
    job = make_job(overlap="skip")
    assert (await a.claim([claim(job, 1000)]))[0].won
    retry = claim(job, 2000, "b")
    (skipped,) = await b.claim([retry])
    assert skipped.outcome is Outcome.SKIPPED
    assert skipped.grant is None
    assert skipped.record is not None
    assert skipped.record.status is RunStatus.SKIPPED
    (again,) = await b.claim([retry])
    assert again.outcome is Outcome.SKIPPED
    assert again.record == skipped.record
    (other,) = await c.claim([claim(job, 2000, "c")])
    assert other.outcome is Outcome.LOST
    history = await a.history(job.name)
    assert [(r.slot_ms, r.status) for r in history] == [(2000, RunStatus.SKIPPED), (1000, RunStatus.RUNNING)]
    assert (await a.marks([job]))[job.name] == 2000


async def test_overlap_skip_applies_to_manual_runs_and_allow_runs_both(store, make_job, claim):
    a = await store.backend()
    skip, allow = make_job("skipper"), make_job("allower", overlap="allow")
    assert all(r.won for r in await a.claim([claim(skip, 1000), claim(allow, 1000)]))
    manual_skip, manual_allow = await a.claim([claim(skip, 1500, manual=True), claim(allow, 1500, manual=True)])
    assert manual_skip.outcome is Outcome.SKIPPED
    assert manual_allow.won
    assert (await a.claim([claim(allow, 2000)]))[0].won


async def test_a_finished_run_no_longer_blocks_the_next_slot(store, make_job, claim):
    a = await store.backend()
    job = make_job()
    (won,) = await a.claim([claim(job, 1000)])
    assert won.grant is not None
    (record,) = await a.history(job.name)
    assert await a.finish(won.grant, finished(record))
    assert (await a.claim([claim(job, 2000)]))[0].won


async def test_fencing_grows_with_claims_and_take_overs(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=SHORT, max_takeovers=4)
    (first,) = await a.claim([claim(job, 1000)])
    assert first.grant is not None
    one = first.grant.fencing
    taken = await wait_until(lambda: b.take_over([job], "b"))
    (result,) = taken
    assert result.won
    assert result.grant is not None
    assert (result.grant.fencing, result.grant.attempt, result.grant.instance) == (one + 1, 2, "b")
    assert result.grant.token != first.grant.token
    (record,) = await b.history(job.name)
    assert (record.attempt, record.fencing, record.instance, record.status) == (2, one + 1, "b", RunStatus.RUNNING)
    assert await b.finish(result.grant, finished(record))
    (third,) = await a.claim([claim(job, 2000)])
    assert third.grant is not None
    assert third.grant.fencing == one + 2


async def test_stale_owner_cannot_renew_finish_or_hand_over(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=SHORT)
    (first,) = await a.claim([claim(job, 1000)])
    assert first.grant is not None
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert await a.renew([first.grant]) == [False]
    (record,) = await a.history(job.name)
    assert not await a.finish(first.grant, finished(record, RunStatus.FAILED))
    assert not await a.hand_over(first.grant)
    (still,) = await b.history(job.name)
    assert (still.status, still.instance) == (RunStatus.RUNNING, "b"), "a stale owner changed nothing"
    assert taken.grant is not None
    assert await b.renew([taken.grant]) == [True]


async def test_renewal_keeps_the_lease_from_being_taken_over(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=300)
    (won,) = await a.claim([claim(job, 1000)])
    assert won.grant is not None
    for _ in range(6):  # 6 x 100 ms: twice the lease, renewed every third of it
        await asyncio.sleep(0.1)
        assert await a.renew([won.grant]) == [True]
        assert await b.take_over([job], "b") == []
    (record,) = await a.history(job.name)
    assert record.instance == "a"
    assert record.status is RunStatus.RUNNING


async def test_take_over_stops_after_max_attempts_and_abandons(store, make_job, claim, wait_until):
    backends = [await store.backend() for _ in range(3)]
    job = make_job(lease_ms=SHORT, max_takeovers=1)
    assert (await backends[0].claim([claim(job, 1000)]))[0].won
    (second,) = await wait_until(lambda: backends[1].take_over([job], "b"))
    assert second.grant is not None
    assert second.grant.attempt == 2

    async def abandoned():
        assert await backends[2].take_over([job], "c") == []
        (record,) = await backends[2].history(job.name)
        return record.status is RunStatus.ABANDONED

    await wait_until(abandoned)
    (record,) = await backends[0].history(job.name)
    assert (record.attempt, record.instance) == (2, "b")


async def test_dead_run_of_an_older_slot_is_abandoned_not_taken_over(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=SHORT, overlap="allow")
    assert (await a.claim([claim(job, 1000)]))[0].won
    assert (await a.claim([claim(job, 2000)]))[0].won
    await asyncio.sleep(SHORT / 1000 + 0.05)
    taken = await b.take_over([job], "b")
    assert [r.grant.slot_ms for r in taken if r.grant] == [2000], "only the newest slot is run again"
    statuses = {r.slot_ms: r.status for r in await b.history(job.name)}
    assert statuses == {2000: RunStatus.RUNNING, 1000: RunStatus.ABANDONED}


async def test_slots_skipped_for_a_dead_run_leave_it_the_newest_run(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=4 * SHORT)
    assert (await a.claim([claim(job, 1000)]))[0].won
    for slot in (2000, 3000):
        assert (await b.claim([claim(job, slot, "b")]))[0].outcome is Outcome.SKIPPED
    assert await b.marks([job]) == {job.name: 3000}, "a skipped slot still moves the mark"
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert taken.grant is not None
    assert (taken.grant.slot_ms, taken.grant.attempt) == (1000, 2), "the dead run was the newest run won"
    statuses = {r.slot_ms: r.status for r in await b.history(job.name)}
    assert statuses == {3000: RunStatus.SKIPPED, 2000: RunStatus.SKIPPED, 1000: RunStatus.RUNNING}


async def test_a_newer_claim_abandons_older_dead_runs(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=SHORT)
    assert (await a.claim([claim(job, 1000)]))[0].won
    await asyncio.sleep(SHORT / 1000 + 0.05)
    (won,) = await b.claim([claim(job, 2000, "b")])
    assert won.won, "an expired lease does not make the next slot skip"
    statuses = {r.slot_ms: r.status for r in await b.history(job.name)}
    assert statuses == {2000: RunStatus.RUNNING, 1000: RunStatus.ABANDONED}


async def test_dead_manual_run_is_taken_over(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=SHORT)
    assert (await a.claim([claim(job, 5000)]))[0].won
    (grant_result,) = await a.claim([claim(job, 1000, manual=True, token="m1")])
    assert grant_result.outcome is Outcome.SKIPPED, "overlap skip holds for manual runs"
    other = make_job("manual-only", lease_ms=SHORT)
    assert (await a.claim([claim(other, 1000, manual=True)]))[0].won
    (taken,) = await wait_until(lambda: b.take_over([other], "b"))
    assert taken.grant is not None
    assert taken.grant.manual
    assert taken.grant.attempt == 2


async def test_hand_over_lets_a_backup_take_over_at_once_even_past_max_attempts(store, make_job, claim):
    a, b = await store.backend(), await store.backend()
    job = make_job(lease_ms=60_000, max_takeovers=0)
    (won,) = await a.claim([claim(job, 1000)])
    assert won.grant is not None
    assert await b.take_over([job], "b") == []
    assert await a.hand_over(won.grant)
    assert await a.hand_over(won.grant), "a repeated hand-over by the owner is harmless"
    assert await a.renew([won.grant]) == [False], "a handed-over lease is not renewed"
    started = time.monotonic()
    (taken,) = await b.take_over([job], "b")
    assert time.monotonic() - started < 5, "no waiting for the 60 s lease"
    assert taken.grant is not None
    assert (taken.grant.attempt, taken.grant.instance) == (1, "b")  # a hand-over is no new attempt


async def test_owner_may_finish_after_hand_over_until_taken_over(store, make_job, claim):
    a = await store.backend()
    job = make_job()
    (won,) = await a.claim([claim(job, 1000)])
    assert won.grant is not None
    assert await a.hand_over(won.grant)
    (record,) = await a.history(job.name)
    assert await a.finish(won.grant, finished(record, RunStatus.CANCELLED))
    assert (await a.history(job.name))[0].status is RunStatus.CANCELLED


async def test_expiry_is_judged_on_the_server_clock_not_the_instance_clock(store, make_job, claim, wait_until):
    a, b = await store.backend(), await store.backend()
    behind, ahead = make_job("behind", lease_ms=30_000), make_job("ahead", lease_ms=SHORT)
    year = 365 * 86_400_000
    server_now = await a.now_ms()
    assert abs(server_now - time.time() * 1000) < 60_000
    assert (await a.claim([claim(behind, 1000, now_ms=server_now - year)]))[0].won
    assert (await a.claim([claim(ahead, 1000, now_ms=server_now + year)]))[0].won
    taken = await wait_until(lambda: b.take_over([behind, ahead], "b"))
    assert [r.grant.job for r in taken if r.grant] == ["ahead"]
    assert await b.take_over([behind], "b") == []


async def test_retried_take_over_is_answered_as_the_first_time(single, make_job, claim, monkeypatch, wait_until):
    """A take-over whose answer was lost is sent again with the same nonce and gets the same runs."""
    a, b = await single.backend(), await single.backend()
    job = make_job(lease_ms=SHORT)
    assert (await a.claim([claim(job, 1000)]))[0].won
    await asyncio.sleep(SHORT / 1000 + 0.05)
    import anarchon_redis.backend as module

    monkeypatch.setattr(module.uuid, "uuid4", lambda: type("U", (), {"hex": "fixednonce"})())
    (first,) = await b.take_over([job], "b")
    b._last_sweep = None  # check every job again, as a retry after a lost answer would
    (second,) = await b.take_over([job], "b")
    assert first.grant == second.grant


async def test_history_is_bounded_by_size_and_keeps_running_runs(store, make_job, claim):
    a = await store.backend()
    job = make_job(history_size=3, overlap="allow", lease_ms=60_000)
    results = await a.claim([claim(job, 1000 * i) for i in range(1, 8)])
    history = await a.history(job.name, limit=100)
    assert len(history) == 7, "running runs are never trimmed"
    for result, record in zip(results, sorted(history, key=lambda r: r.slot_ms), strict=True):
        assert result.grant is not None
        await a.finish(result.grant, finished(record))
    await a.claim([claim(job, 9000)])
    assert [r.slot_ms for r in await a.history(job.name)] == [9000, 7000, 6000]
    assert [r.slot_ms for r in await a.history(job.name, limit=2)] == [9000, 7000]


async def test_history_ttl_drops_old_finished_runs(store, make_job, claim):
    a = await store.backend()
    now = await a.now_ms()
    job = make_job(history_ttl_ms=60_000, overlap="allow")
    old, recent = await a.claim([claim(job, now - 120_000), claim(job, now - 1000)])
    for result in (old, recent):
        assert result.grant is not None
        record = next(r for r in await a.history(job.name) if r.slot_ms == result.grant.slot_ms)
        assert await a.finish(result.grant, finished(record))
    await a.claim([claim(job, now + 1000)])
    assert [r.slot_ms for r in await a.history(job.name)] == [now + 1000, now - 1000]


async def test_finish_writes_the_record_and_a_retried_finish_agrees(store, make_job, claim):
    a = await store.backend()
    job = make_job()
    (won,) = await a.claim([claim(job, 1000, catch_up=True, missed=3)])
    assert won.grant is not None
    assert won.grant.catch_up
    assert won.grant.missed == 3
    (record,) = await a.history(job.name)
    assert (record.catch_up, record.missed, record.fencing) == (True, 3, won.grant.fencing)
    done = finished(record, RunStatus.FAILED).replace(error="ValueError: boom")
    assert await a.finish(won.grant, done)
    assert await a.finish(won.grant, done), "the same owner finishing again (a retry) is not refused"
    assert await a.last_run(job.name) == done
    assert await a.renew([won.grant]) == [False]


async def test_many_finishes_at_once_each_get_their_own_answer(store, make_job, claim, wait_until):
    """More finishes at once than redis-py's pool has connections (100), as 1,000 jobs due together make."""
    a, b = await store.backend(), await store.backend()
    jobs = [make_job(f"many-{i}", lease_ms=SHORT, max_takeovers=1) for i in range(300)]
    grants = [r.grant for r in await a.claim([claim(j, 1000) for j in jobs])]
    assert all(g is not None for g in grants)
    stale = grants[7]
    await wait_until(lambda: b.take_over([jobs[7]], "b"))
    records = {r.job: r for j in jobs for r in await a.history(j.name, limit=1)}
    answers = await asyncio.gather(*(a.finish(g, finished(records[g.job])) for g in grants))
    assert answers == [g is not stale for g in grants]
    assert (await a.history(jobs[7].name))[0].status is RunStatus.RUNNING, "the stale finish wrote nothing"
    assert {(await a.last_run(j.name)).status for j in jobs if j is not jobs[7]} == {RunStatus.SUCCEEDED}


def test_earlier_attempts_are_read_with_the_scripts_names_and_cjsons_empty_list():
    """take_over.lua stores ``started`` (ms) in each earlier attempt; cjson writes an empty Lua table as ``{}``."""
    record = {"job": "j", "slot": 1000, "status": "running", "instance": "b", "attempt": 2, "fencing": 8,
              "token": "t", "lease": 150, "handed": False, "manual": False, "started": 3000}  # fmt: skip
    earlier = [{"attempt": 1, "instance": "a", "fencing": 7, "started": 2000}]
    run = history_run(json.dumps({**record, "earlier": earlier}), "j")
    assert run is not None
    assert run.earlier == (Attempt(1, "a", 7, ms_to_datetime(2000)),)
    empty = history_run(json.dumps({**record, "earlier": {}}), "j")
    assert empty is not None and empty.earlier == ()
