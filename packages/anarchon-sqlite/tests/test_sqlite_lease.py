"""The lease rules of anarchon.backend, as MemoryStore applies them, on a shared file."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from anarchon.backend import Outcome
from anarchon.run import RunStatus

SLOT = 1_800_000_000_000
LEASE = 400  # short leases: expiry is on the host clock, so tests poll for it


async def test_overlap_skip_is_recorded_once_and_moves_the_mark(instances, make_job, make_claim):
    racers = await instances(4)
    job = make_job("overlap")
    (first,) = await racers[0].claim([make_claim(job, SLOT, "i0")])
    assert first.won
    answers = await asyncio.gather(
        *(b.claim([make_claim(job, SLOT + 1000, f"i{i}")]) for i, b in enumerate(racers[1:], 1))
    )
    outcomes = sorted(a[0].outcome.value for a in answers)
    assert outcomes == ["lost", "lost", "skipped"]
    (skip,) = [a[0] for a in answers if a[0].outcome is Outcome.SKIPPED]
    assert skip.record is not None
    assert skip.record.status is RunStatus.SKIPPED
    history = await racers[0].history("overlap")
    assert [(r.slot_ms, r.status) for r in history] == [(SLOT + 1000, RunStatus.SKIPPED), (SLOT, RunStatus.RUNNING)]
    assert history[0] == skip.record
    assert history[0].duration_ms == 0
    assert history[0].finished_at == history[0].started_at
    assert await racers[0].marks([job]) == {"overlap": SLOT + 1000}


async def test_manual_run_is_skipped_while_the_job_runs(instances, make_job, make_claim):
    (a,) = await instances(1)
    job = make_job("manual-skip")
    assert (await a.claim([make_claim(job, SLOT)]))[0].won
    (manual,) = await a.claim([make_claim(job, SLOT + 10, manual=True)])
    assert manual.outcome is Outcome.SKIPPED
    assert await a.marks([job]) == {"manual-skip": SLOT}


async def test_overlap_allow_runs_both(instances, make_job, make_claim):
    (a,) = await instances(1)
    job = make_job("allow", overlap="allow")
    results = await a.claim([make_claim(job, SLOT), make_claim(job, SLOT + 1000)])
    assert [r.outcome for r in results] == [Outcome.WON, Outcome.WON]
    tokens = [r.grant.fencing for r in results if r.grant]
    assert len(tokens) == 2 and tokens[1] == tokens[0] + 1


async def test_finish_writes_the_record_and_releases_the_lease(instances, make_job, make_claim):
    a, b = await instances(2)
    job = make_job("finish")
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    started = datetime(2027, 1, 15, 8, 0, 0, 123456, tzinfo=timezone.utc)
    run = (await a.history("finish"))[0].replace(
        status=RunStatus.FAILED,
        started_at=started,
        finished_at=started + timedelta(milliseconds=1500, microseconds=7),
        duration_ms=1500,
        error="ValueError: bad row 7",
    )
    assert await a.finish(won.grant, run)
    assert (await b.history("finish"))[0] == run  # microseconds survive the round trip
    # released: the next slot is not skipped, and nothing is left to take over
    assert (await b.claim([make_claim(job, SLOT + 1000, "b")]))[0].won
    assert await b.take_over([job], "b") == []


async def test_finishes_made_together_are_one_commit_and_answer_each(db_path, instances, make_job, make_claim):
    """One transaction for the runs that ended together: one lock turn, not one per run (SQLiteBackend.finish)."""
    (a,) = await instances(1)
    jobs = [make_job(f"f{i}", overlap="allow") for i in range(40)]
    grants = [r.grant for r in await a.claim([make_claim(j, SLOT, "a") for j in jobs])]
    stale = replace(grants[5], token="not-the-owner")
    runs = {g.job: (await a.history(g.job))[0] for g in grants}
    raw = sqlite3.connect(db_path, isolation_level=None)
    try:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL empty: what follows is these finishes alone
        answers = await asyncio.gather(
            *(a.finish(g, runs[g.job].replace(status=RunStatus.SUCCEEDED)) for g in grants[:5]),
            a.finish(stale, runs[stale.job].replace(status=RunStatus.SUCCEEDED)),
            *(a.finish(g, runs[g.job].replace(status=RunStatus.FAILED)) for g in grants[6:]),
        )
        # Each commit appends at least one frame (a page) to the WAL: forty commits, forty frames or more.
        _, frames, _ = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        raw.close()
    assert answers == [True] * 5 + [False] + [True] * 34
    assert frames < len(grants) / 4, f"{frames} WAL frames for {len(grants)} finishes: one commit each?"
    assert (await a.history("f0"))[0].status is RunStatus.SUCCEEDED
    assert (await a.history("f5"))[0].status is RunStatus.RUNNING  # the stale finish changed nothing
    assert (await a.history("f39"))[0].status is RunStatus.FAILED
    assert await a.finish(grants[5], runs["f5"].replace(status=RunStatus.SUCCEEDED))


async def test_renew_keeps_the_lease(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    lease = 900  # renewed every third of it: room for a busy machine's late wake-ups
    job = make_job("renew", lease_ms=lease)
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    for _ in range(5):  # well past the lease
        await asyncio.sleep(lease / 3000)
        assert await a.renew([won.grant]) == [True]
        assert await b.take_over([job], "b") == []
    # unrenewed, it expires
    taken = await wait_until(lambda: b.take_over([job], "b"))
    assert len(taken) == 1


async def test_take_over_grants_attempt_two_with_a_higher_fencing_token(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    job = make_job("takeover", lease_ms=LEASE)
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    assert await b.take_over([job], "b") == []  # still leased
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    grant = taken.grant
    assert taken.won
    assert grant is not None
    assert (grant.slot_ms, grant.attempt, grant.instance) == (SLOT, 2, "b")
    assert grant.fencing is not None
    assert won.grant.fencing is not None
    assert grant.fencing > won.grant.fencing
    assert grant.token != won.grant.token
    assert grant.lease_ms == LEASE
    (record,) = await a.history("takeover")
    assert (record.status, record.attempt, record.instance, record.fencing) == (
        RunStatus.RUNNING, 2, "b", grant.fencing,
    )  # fmt: skip

    # the stale owner is refused everywhere and changes nothing
    stale = record.replace(status=RunStatus.SUCCEEDED, instance="a", attempt=1)
    assert await a.renew([won.grant]) == [False]
    assert await a.hand_over(won.grant) is False
    assert await a.finish(won.grant, stale) is False
    assert (await a.history("takeover"))[0] == record
    # the new owner's calls work
    assert await b.renew([grant]) == [True]
    assert await b.finish(grant, record.replace(status=RunStatus.SUCCEEDED))


async def test_take_over_stops_at_max_attempts(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    job = make_job("attempts", lease_ms=LEASE, max_takeovers=1)
    assert (await a.claim([make_claim(job, SLOT, "a")]))[0].won
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert taken.grant is not None
    assert taken.grant.attempt == 2

    async def abandoned() -> bool:
        assert await a.take_over([job], "a") == []  # attempt 2 of 2: never a third
        return (await a.history("attempts"))[0].status is RunStatus.ABANDONED

    assert await wait_until(abandoned)
    (record,) = await a.history("attempts")
    assert (record.attempt, record.instance) == (2, "b")


async def test_hand_over_is_taken_over_at_once_even_past_max_attempts(instances, make_job, make_claim):
    a, b = await instances(2)
    job = make_job("handover", lease_ms=60_000, max_takeovers=0)
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    assert await a.hand_over(won.grant)
    assert await a.renew([won.grant]) == [False]  # handed over: no longer renewable
    (taken,) = await b.take_over([job], "b")
    assert taken.grant is not None
    assert taken.grant.attempt == 1  # a hand-over is no new attempt
    assert await b.renew([taken.grant]) == [True]


async def test_a_dead_run_of_an_older_slot_is_abandoned_by_the_next_claim(instances, make_job, make_claim):
    a, b = await instances(2)
    job = make_job("older", lease_ms=LEASE)
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    await asyncio.sleep(2 * LEASE / 1000)  # the runner died: its lease runs out on the host clock
    (result,) = await b.claim([make_claim(job, SLOT + 1000, "b")])
    assert result.won
    statuses = [(r.slot_ms, r.status) for r in await b.history("older")]
    assert statuses == [(SLOT + 1000, RunStatus.RUNNING), (SLOT, RunStatus.ABANDONED)]
    assert won.grant is not None
    assert await a.renew([won.grant]) == [False]


async def test_take_over_abandons_a_run_that_is_not_the_newest_slot(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    job = make_job("newest", lease_ms=LEASE, overlap="allow")
    await a.claim([make_claim(job, SLOT, "a"), make_claim(job, SLOT + 1000, "a")])
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert taken.grant is not None
    assert taken.grant.slot_ms == SLOT + 1000
    assert [(r.slot_ms, r.status) for r in await b.history("newest")] == [
        (SLOT + 1000, RunStatus.RUNNING),
        (SLOT, RunStatus.ABANDONED),
    ]


async def test_manual_run_is_taken_over_though_older_than_the_mark(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    job = make_job("manual-takeover", lease_ms=LEASE)
    (scheduled,) = await a.claim([make_claim(job, SLOT + 5000)])
    assert scheduled.grant is not None
    await a.finish(scheduled.grant, (await a.history("manual-takeover"))[0].replace(status=RunStatus.SUCCEEDED))
    (manual,) = await a.claim([make_claim(job, SLOT, manual=True)])
    assert manual.won
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert taken.grant is not None
    assert (taken.grant.slot_ms, taken.grant.manual, taken.grant.attempt) == (SLOT, True, 2)


async def test_fencing_counts_claims_and_take_overs_per_job(instances, make_job, make_claim, wait_until):
    a, b = await instances(2)
    job = make_job("fence", lease_ms=LEASE)
    (one,) = await a.claim([make_claim(job, SLOT, "a")])
    (two,) = await wait_until(lambda: b.take_over([job], "b"))
    assert two.grant is not None
    await b.finish(two.grant, (await b.history("fence"))[0].replace(status=RunStatus.SUCCEEDED))
    (three,) = await a.claim([make_claim(job, SLOT + 1000, "a")])
    tokens = [r.grant.fencing for r in (one, two, three) if r.grant]
    assert len(tokens) == 3 and tokens == list(range(tokens[0], tokens[0] + 3))


async def test_history_keeps_history_size_finished_runs(instances, make_job, make_claim):
    (a,) = await instances(1)
    job = make_job("size", history_size=5, overlap="allow")
    for n in range(12):
        (won,) = await a.claim([make_claim(job, SLOT + n * 1000)])
        assert won.grant is not None
        if n != 3:  # one run stays running: never trimmed
            record = (await a.history("size", 1))[0]
            assert await a.finish(won.grant, record.replace(status=RunStatus.SUCCEEDED))
    slots = [r.slot_ms for r in await a.history("size", 100)]
    assert slots == [SLOT + n * 1000 for n in (11, 10, 9, 8, 7, 3)]
    assert [r.slot_ms for r in await a.history("size", 2)] == slots[:2]


async def test_history_ttl_drops_old_finished_runs(instances, make_job, make_claim):
    (a,) = await instances(1)
    now = (await a.now_ms()) // 1000 * 1000
    job = make_job("ttl", history_ttl_ms=60_000, overlap="allow")
    old = [now - 3_600_000, now - 120_000]
    for slot in old:
        (won,) = await a.claim([make_claim(job, slot)])
        assert won.grant is not None
        await a.finish(won.grant, (await a.history("ttl", 1))[0].replace(status=RunStatus.SUCCEEDED))
    # a finished run older than the TTL went at the next claim; a running one stays
    assert [r.slot_ms for r in await a.history("ttl")] == [now - 120_000]
    (fresh,) = await a.claim([make_claim(job, now)])
    assert fresh.won
    assert [r.slot_ms for r in await a.history("ttl")] == [now]


async def test_history_of_an_unknown_job_is_empty(instances):
    (a,) = await instances(1)
    assert await a.history("nobody") == []
    assert await a.last_run("nobody") is None


async def test_take_over_touches_only_the_jobs_it_is_given(instances, make_job, make_claim, wait_until):
    """One read finds every expired lease in the file; runs of jobs not asked about stay as they are."""
    a, b = await instances(2)
    mine, theirs = make_job("mine", lease_ms=LEASE), make_job("theirs", lease_ms=LEASE)
    await a.claim([make_claim(mine, SLOT, "a"), make_claim(theirs, SLOT, "a")])
    (taken,) = await wait_until(lambda: b.take_over([mine, mine], "b"))  # named twice, taken over once
    assert taken.grant is not None
    assert (taken.grant.job, taken.grant.attempt) == ("mine", 2)
    (other,) = await b.history("theirs")
    assert (other.status, other.attempt, other.instance) == (RunStatus.RUNNING, 1, "a")
    (again,) = await b.take_over([theirs], "b")
    assert again.grant is not None
    assert (again.grant.job, again.grant.attempt) == ("theirs", 2)


async def test_a_take_over_poll_of_many_jobs_is_one_read(instances, make_job, make_claim):
    (a,) = await instances(1)
    jobs = [make_job(f"poll-{k}", lease_ms=60_000) for k in range(300)]
    await a.claim([make_claim(job, SLOT) for job in jobs[:5]])
    statements: list[str] = []
    assert a._conn is not None
    await a._conn.set_trace_callback(statements.append)
    assert await a.take_over(jobs, "a") == []  # every lease still held
    assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "COMMIT"]
