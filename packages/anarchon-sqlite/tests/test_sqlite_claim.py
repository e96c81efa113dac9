"""Claims: one winner per slot among racing instances, retries, the mark, batches."""

from __future__ import annotations

import asyncio
import time

from anarchon.backend import Outcome, fencing_floor
from anarchon.run import RunStatus

SLOT = 1_800_000_000_000


async def test_eight_instances_one_winner_per_slot(instances, make_job, make_claim):
    racers = await instances(8)
    job = make_job("race", overlap="allow", history_size=10_000)
    winners: dict[int, list[str]] = {}
    for n in range(150):
        slot = SLOT + n * 1000
        answers = await asyncio.gather(*(b.claim([make_claim(job, slot, f"i{i}")]) for i, b in enumerate(racers)))
        outcomes = [a[0].outcome for a in answers]
        assert set(outcomes) <= {Outcome.WON, Outcome.LOST}
        winners[slot] = [f"i{i}" for i, a in enumerate(answers) if a[0].won]
    assert all(len(w) == 1 for w in winners.values()), {s: w for s, w in winners.items() if len(w) != 1}
    history = await racers[3].history("race", limit=1000)
    assert [r.slot_ms for r in history] == sorted(winners, reverse=True)
    assert all(r.instance == winners[r.slot_ms][0] for r in history)
    # fencing grows with every grant, in slot order
    first = history[-1].fencing
    assert first is not None and [r.fencing for r in reversed(history)] == list(range(first, first + 150))


async def test_batches_race_and_each_job_has_one_winner(instances, make_job, make_claim):
    racers = await instances(8)
    jobs = [make_job(f"j{k}", overlap="allow") for k in range(25)]
    for n in range(10):
        slot = SLOT + n * 1000
        answers = await asyncio.gather(
            *(b.claim([make_claim(job, slot, f"i{i}") for job in jobs]) for i, b in enumerate(racers))
        )
        for k in range(len(jobs)):
            assert sum(a[k].won for a in answers) == 1


async def test_a_batch_is_one_transaction(instances, make_job, make_claim):
    (backend,) = await instances(1)
    statements: list[str] = []
    assert backend._conn is not None
    await backend._conn.set_trace_callback(statements.append)
    jobs = [make_job(f"j{k}") for k in range(40)]
    results = await backend.claim([make_claim(job, SLOT) for job in jobs])
    assert all(r.won for r in results)
    assert statements.count("BEGIN IMMEDIATE") == 1  # the write
    assert statements.count("BEGIN") == 1  # the read before it: which slots another claim decided
    assert statements.count("COMMIT") == 2


async def test_a_batch_another_instance_decided_takes_no_write_lock(instances, make_job, make_claim):
    """The later ranks' claims (ranked claims): answered LOST from one read, no write transaction."""
    a, b = await instances(2)
    jobs = [make_job(f"d{k}") for k in range(40)]
    assert all(r.won for r in await a.claim([make_claim(job, SLOT, "a") for job in jobs]))
    statements: list[str] = []
    assert b._conn is not None
    await b._conn.set_trace_callback(statements.append)
    extra = make_job("undecided")
    results = await b.claim([make_claim(job, SLOT, "b") for job in jobs] + [make_claim(extra, SLOT, "b")])
    assert [r.outcome for r in results] == [Outcome.LOST] * 40 + [Outcome.WON]
    assert statements.count("BEGIN IMMEDIATE") == 1, "the one undecided slot is decided in a write"
    statements.clear()
    assert all(r.outcome is Outcome.LOST for r in await b.claim([make_claim(job, SLOT, "b") for job in jobs]))
    assert "BEGIN IMMEDIATE" not in statements, "a batch of decided slots took the write lock"


async def test_retried_claim_gets_its_first_answer(instances, make_job, make_claim):
    a, b = await instances(2)
    job = make_job("retry")
    first = make_claim(job, SLOT, "a", token="tok-a")
    (won,) = await a.claim([first])
    (again,) = await a.claim([first])
    assert won.won
    assert again.won
    assert again.grant == won.grant
    (other,) = await b.claim([make_claim(job, SLOT, "b")])
    assert other.outcome is Outcome.LOST

    # a skipped answer is repeated with the same record
    skip = make_claim(job, SLOT + 1000, "b", token="tok-b")
    (skipped,) = await b.claim([skip])
    (skipped_again,) = await b.claim([skip])
    assert skipped.outcome is skipped_again.outcome is Outcome.SKIPPED
    assert skipped.record == skipped_again.record

    # once the run finished, the retry no longer wins
    assert won.grant is not None
    done = (await a.history("retry", 10))[-1].replace(status=RunStatus.SUCCEEDED, duration_ms=5)
    assert await a.finish(won.grant, done)
    (late,) = await a.claim([first])
    assert late.outcome is Outcome.LOST


async def test_mark_refuses_old_and_equal_slots(instances, make_job, make_claim):
    a, b = await instances(2)
    job = make_job("mark", overlap="allow")
    assert (await a.claim([make_claim(job, SLOT + 5000, "a")]))[0].won
    assert (await b.claim([make_claim(job, SLOT + 1000, "b")]))[0].outcome is Outcome.LOST
    assert (await b.claim([make_claim(job, SLOT + 5000, "b")]))[0].outcome is Outcome.LOST
    assert (await a.marks([job])) == {"mark": SLOT + 5000}
    # nothing was recorded for the refused slot
    assert [r.slot_ms for r in await a.history("mark")] == [SLOT + 5000]


async def test_manual_runs_neither_check_nor_move_the_mark(instances, make_job, make_claim):
    (a,) = await instances(1)
    job = make_job("manual", overlap="allow")
    assert (await a.claim([make_claim(job, SLOT + 9000)]))[0].won
    (manual,) = await a.claim([make_claim(job, SLOT, manual=True)])
    assert manual.won
    assert manual.grant is not None
    assert manual.grant.manual
    assert await a.marks([job]) == {"manual": SLOT + 9000}
    # the same slot, scheduled and manual, are two records; manual listed first
    (both,) = await a.claim([make_claim(job, SLOT + 9000, manual=True)])
    assert both.won
    history = await a.history("manual")
    assert [(r.slot_ms, r.manual) for r in history] == [(SLOT + 9000, True), (SLOT + 9000, False), (SLOT, True)]


async def test_jobs_and_slots_are_independent(instances, make_job, make_claim):
    a, b = await instances(2)
    one, two = make_job("one"), make_job("two")
    floor = fencing_floor(time.time_ns() // 1_000_000)  # each new counter starts at the clock
    (r1,) = await a.claim([make_claim(one, SLOT, "a")])
    (r2,) = await b.claim([make_claim(two, SLOT, "b")])
    assert r1.won
    assert r2.won
    assert r1.grant is not None
    assert r2.grant is not None
    assert r1.grant.fencing > floor and r2.grant.fencing > floor  # one counter per job
    assert await a.marks([one, two, make_job("never")]) == {"one": SLOT, "two": SLOT, "never": None}


async def test_claim_records_the_instance_clock_but_leases_use_the_host_clock(instances, make_job, make_claim):
    """An instance whose clock is years behind still holds a full lease on the host's clock."""
    a, b = await instances(2)
    job = make_job("skewed", lease_ms=60_000)
    (won,) = await a.claim([make_claim(job, SLOT, "a", now_ms=1_000)])
    assert won.won
    assert won.grant is not None
    assert won.grant.started_at_ms == 1_000
    assert await b.take_over([job], "b") == []
    (run,) = await b.history("skewed")
    assert run.started_at is not None
    assert run.started_at.year == 1970
    assert run.status is RunStatus.RUNNING


async def test_empty_batches_cost_nothing(instances):
    (a,) = await instances(1)
    assert await a.claim([]) == []
    assert await a.renew([]) == []
    assert await a.take_over([], "a") == []
    assert await a.marks([]) == {}


async def test_marks_of_more_jobs_than_one_statement_reads(instances, make_job, make_claim):
    (a,) = await instances(1)
    jobs = [make_job(f"many-{k:03d}") for k in range(450)]
    won = jobs[::7]
    assert all(r.won for r in await a.claim([make_claim(job, SLOT + k, "a") for k, job in enumerate(won)]))
    expected = {job.name: None for job in jobs} | {job.name: SLOT + k for k, job in enumerate(won)}
    assert await a.marks(jobs) == expected
    assert await a.marks(jobs[-3:] + jobs[-3:]) == {job.name: expected[job.name] for job in jobs[-3:]}


async def test_a_claim_reads_once_and_writes_the_record_and_the_book(instances, make_job, make_claim):
    """The job's book, the slot's record and the live leases come from one read; nothing else is asked.

    Before the write, one read without the lock asks whether another claim decided the slot (ranked claims).
    """
    (a,) = await instances(1)
    job = make_job("lean")
    (first,) = await a.claim([make_claim(job, SLOT)])
    assert first.grant is not None
    await a.finish(first.grant, (await a.history("lean"))[0].replace(status=RunStatus.SUCCEEDED))
    statements: list[str] = []
    assert a._conn is not None
    await a._conn.set_trace_callback(statements.append)
    (second,) = await a.claim([make_claim(job, SLOT + 1000)])
    assert second.won
    read = ["BEGIN", "WITH", "COMMIT"]  # decided elsewhere? (ranked claims)
    assert [s.split()[0] for s in statements] == [*read, "BEGIN", "SELECT", "INSERT", "UPDATE", "COMMIT"]
