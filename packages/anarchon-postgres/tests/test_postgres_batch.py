"""Batches of scheduled claims (claim_batch) and finishes gathered into one statement."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import asyncpg
import pytest

from anarchon.backend import Outcome
from anarchon.run import Run, RunStatus, ms_to_datetime

pytestmark = pytest.mark.postgres

SLOT = 1_800_000_000_000


def _finished(grant, status=RunStatus.SUCCEEDED) -> Run:
    start = ms_to_datetime(grant.started_at_ms)
    return Run(
        job=grant.job,
        slot_ms=grant.slot_ms,
        status=status,
        instance=grant.instance,
        attempt=grant.attempt,
        fencing=grant.fencing,
        started_at=start,
        finished_at=start,
        duration_ms=0,
    )


async def test_a_batch_decides_what_it_can_while_another_transaction_holds_a_job_row(
    make_backend, make_job, make_claim, pg_dsn, schema, wait_until
):
    """The free job is decided and committed at once; the held one waits for its holder, then is lost."""
    backend = await make_backend()
    held, free = make_job("held", overlap="allow"), make_job("free", overlap="allow")
    assert all(r.won for r in await backend.claim([make_claim(held, SLOT), make_claim(free, SLOT)]))
    holder = await asyncpg.connect(pg_dsn)
    watcher = await asyncpg.connect(pg_dsn)
    try:
        tx = holder.transaction()
        await tx.start()
        # Another instance deciding `held` for the next slot: it holds the row and moves the mark.
        await holder.execute(f'UPDATE "{schema}".jobs SET mark = $1 WHERE name = $2', SLOT + 1000, "held")
        claim = asyncio.ensure_future(
            backend.claim([make_claim(held, SLOT + 1000, "i2"), make_claim(free, SLOT + 1000, "i2")])
        )

        async def free_recorded() -> bool:
            n = await watcher.fetchval(
                f'SELECT count(*) FROM "{schema}".runs WHERE job = $1 AND slot_ms = $2', "free", SLOT + 1000
            )
            return bool(n)

        async def claim_waits_for_the_holder() -> bool:
            return bool(
                await watcher.fetchval(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE NOT l.granted AND a.query LIKE '%claim_batch%'"
                )
            )

        await wait_until(free_recorded)
        await wait_until(claim_waits_for_the_holder)
        assert not claim.done()
        await tx.commit()
        held_result, free_result = await claim
    finally:
        await holder.close()
        await watcher.close()
    assert held_result.outcome is Outcome.LOST
    assert free_result.won and free_result.grant is not None
    assert free_result.grant.previous_mark == SLOT


async def test_a_batch_of_overlap_skip_jobs_skips_the_busy_one_and_names_the_mark(make_backend, make_job, make_claim):
    backend = await make_backend()
    busy, idle = make_job("busy", overlap="skip"), make_job("idle", overlap="skip")
    first = await backend.claim([make_claim(busy, SLOT), make_claim(idle, SLOT)])
    assert all(r.won for r in first)
    assert await backend.finish(first[1].grant, _finished(first[1].grant))
    second = await backend.claim([make_claim(busy, SLOT + 1000), make_claim(idle, SLOT + 1000)])
    assert [r.outcome for r in second] == [Outcome.SKIPPED, Outcome.WON]
    assert second[0].record is not None and second[0].record.status is RunStatus.SKIPPED
    assert second[1].grant.previous_mark == SLOT and second[1].grant.fencing == first[1].grant.fencing + 1
    # A claim of the skipped slot arriving late is lost; the mark moved with the skip.
    late = await backend.claim([make_claim(busy, SLOT + 1000, "i2"), make_claim(idle, SLOT + 1000, "i2")])
    assert [r.outcome for r in late] == [Outcome.LOST, Outcome.LOST]


async def test_a_retried_batch_gets_its_first_answers(make_backend, make_job, make_claim):
    backend = await make_backend()
    jobs = [make_job(f"r{i}", overlap="allow") for i in range(3)]
    claims = [make_claim(j, SLOT, "i1", f"tok-{j.name}") for j in jobs]
    first = await backend.claim(claims)
    again = await backend.claim(claims)
    assert [r.outcome for r in again] == [Outcome.WON] * 3
    assert [r.grant.fencing for r in again] == [r.grant.fencing for r in first]
    other = await backend.claim([make_claim(j, SLOT, "i2") for j in jobs])
    assert [r.outcome for r in other] == [Outcome.LOST] * 3


async def test_finishes_made_together_share_one_statement_and_answer_each(make_backend, make_job, make_claim):
    backend = await make_backend()
    jobs = [make_job(f"f{i}", overlap="allow") for i in range(20)]
    grants = [r.grant for r in await backend.claim([make_claim(j, SLOT) for j in jobs])]
    stale = replace(grants[5], token="not-the-owner")
    answers = await asyncio.gather(
        *(backend.finish(g, _finished(g)) for g in grants[:5]),
        backend.finish(stale, _finished(stale)),
        *(backend.finish(g, _finished(g, RunStatus.FAILED)) for g in grants[6:]),
    )
    assert answers == [True] * 5 + [False] + [True] * 14
    assert (await backend.last_run("f0")).status is RunStatus.SUCCEEDED
    assert (await backend.last_run("f5")).status is RunStatus.RUNNING
    assert (await backend.last_run("f19")).status is RunStatus.FAILED
    # The stale finish changed nothing; the owner's own finish still goes through.
    assert await backend.finish(grants[5], _finished(grants[5]))


async def test_a_long_batch_is_claimed_in_parts_whose_answers_line_up(make_backend, make_job, make_claim):
    instances = [await make_backend() for _ in range(3)]
    for b in instances:
        b._chunk = 2  # parts of two claims, two at a time, racing the other instances' parts
    jobs = [make_job(f"p{i}", overlap="allow") for i in range(7)]
    firsts: dict[str, int] = {}
    for n in range(3):
        slot = SLOT + n * 1000
        answers = await asyncio.gather(
            *(b.claim([make_claim(j, slot, f"i{k}") for j in jobs]) for k, b in enumerate(instances))
        )
        for i, job in enumerate(jobs):
            won = [a[i] for a in answers if a[i].won]
            assert len(won) == 1, (job.name, slot)
            fencing = won[0].grant.fencing
            assert won[0].grant.job == job.name and fencing == firsts.setdefault(job.name, fencing) + n
            assert won[0].grant.previous_mark == (slot - 1000 if n else None)


async def test_a_finish_batch_sent_again_after_a_lost_answer_counts_what_it_wrote(make_backend, make_job, make_claim):
    """finish_many(p_retry): the same batch again finds its own records; another record is still refused."""
    from anarchon_postgres._records import finish_args as _finish_args

    backend = await make_backend()
    jobs = [make_job(f"r{i}", overlap="allow") for i in range(3)]
    grants = [r.grant for r in await backend.claim([make_claim(j, SLOT) for j in jobs])]
    items = [_finish_args(g, _finished(g)) for g in grants[:2]]
    args = tuple(zip(*items, strict=True))
    async with backend._pool.acquire() as conn:
        assert len(await conn.fetch(backend._sql.finish_many, *args)) == 2
        # Sent again as it is (the answer was lost): not as a first try, but as the retry it is.
        assert await conn.fetch(backend._sql.finish_many, *args) == []
        assert {tuple(r) for r in await conn.fetch(backend._sql.finish_many_retry, *args)} == {i[:4] for i in items}
        # A retry carrying a different record (another status) is not that batch's: refused.
        other = tuple(zip(*[_finish_args(g, _finished(g, RunStatus.FAILED)) for g in grants[:2]], strict=True))
        assert await conn.fetch(backend._sql.finish_many_retry, *other) == []
    assert (await backend.last_run("r0")).status is RunStatus.SUCCEEDED
    assert (await backend.last_run("r2")).status is RunStatus.RUNNING


async def test_leases_renewed_together_come_back_only_where_still_ours(make_backend, make_job, make_claim):
    backend = await make_backend()
    jobs = [make_job(f"n{i}", overlap="allow") for i in range(3)]
    grants = [r.grant for r in await backend.claim([make_claim(j, SLOT) for j in jobs])]
    stale = replace(grants[1], token="not-the-owner")
    assert await backend.finish(grants[2], _finished(grants[2]))
    assert await backend.renew([grants[0], stale, grants[2]]) == [True, False, False]
