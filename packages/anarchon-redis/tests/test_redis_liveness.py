"""Liveness on Redis beyond the conformance suite: the heartbeat key, the sweep after a death, the limits."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from anarchon.backend import Outcome
from anarchon_redis import RedisBackend

TTL_MS = 300


async def test_the_first_take_over_after_a_death_checks_every_job(store, make_job, claim, wait_until):
    """The hint knows lease expiries, not owners: a dead owner's 30 s lease is not due there.

    ``b``'s take-over passes over 40 jobs check a slice of them besides the
    hint (one job per pass here); the run of the dead ``a`` sits in the 38th.
    """
    a, b = await store.backend(), await store.backend()
    jobs = [make_job(f"j{i:02d}") for i in range(40)]
    assert await b.take_over(jobs, "b") == []  # the first pass sweeps every job: nothing there yet
    heart_a, heart_b = a.heart(), b.heart()
    assert heart_a is not None and heart_b is not None
    await heart_a.open()
    await heart_b.open()
    try:
        await heart_a.beat("a", TTL_MS)
        (won,) = await a.claim([claim(jobs[37], 1000, "a")])
        assert won.won
        await heart_a.close()  # as after kill -9: no leave, the record expires by itself

        async def a_reported_dead() -> bool:
            return "a" in (await heart_b.beat("b", TTL_MS)).dead

        await wait_until(a_reported_dead, timeout_s=10)
        (result,) = await b.take_over(jobs, "b")
        assert result.outcome is Outcome.WON and result.grant is not None
        assert (result.grant.job, result.grant.instance, result.grant.attempt) == ("j37", "b", 2)
        assert await b.take_over(jobs, "b") == []
        # That pass ran with the death: the scripts are not sent it any more (see anarchon_redis._heart).
        assert b._unswept() == (frozenset(), ())
        assert "a" in (await heart_b.beat("b", TTL_MS)).dead
        assert b._unswept() == (frozenset(), ())
    finally:
        await heart_a.close()
        await heart_b.close()


async def test_a_slot_skipped_for_a_dead_owners_run_is_revived_before_its_lease_ends(
    store, make_job, claim, wait_until
):
    """The revive script judges live leases as the claim script does: a dead owner's 30 s lease holds nothing.

    ``c`` has no heartbeat, so no dead owners to pass: for it the lease still holds the job.
    """
    a, b, c = await store.backend(), await store.backend(), await store.backend()
    job = make_job("revived")
    heart_a, heart_b = a.heart(), b.heart()
    assert heart_a is not None and heart_b is not None
    await heart_a.open()
    await heart_b.open()
    try:
        await heart_a.beat("a", TTL_MS)
        (won,) = await a.claim([claim(job, 1000, "a")])
        assert won.won and won.grant is not None
        (skipped,) = await b.claim([claim(job, 2000, "b")])
        assert skipped.outcome is Outcome.SKIPPED
        (early,) = await b.revive([claim(job, 2000, "b", catch_up=True)])
        assert early.outcome is Outcome.SKIPPED and early.record is not None
        await heart_a.close()  # as after kill -9: no leave, the record expires by itself

        async def a_reported_dead() -> bool:
            return "a" in (await heart_b.beat("b", TTL_MS)).dead

        await wait_until(a_reported_dead, timeout_s=10)
        (blind,) = await c.revive([claim(job, 2000, "c", catch_up=True)])
        assert blind.outcome is Outcome.SKIPPED
        (revived,) = await b.revive([claim(job, 2000, "b", catch_up=True)])
        assert revived.outcome is Outcome.WON and revived.grant is not None
        assert (revived.grant.slot_ms, revived.grant.attempt) == (2000, 1)
        assert revived.grant.fencing == won.grant.fencing + 1
        assert (await c.revive([claim(job, 2000, "c", catch_up=True)]))[0].outcome is Outcome.LOST
        assert await a.marks([job]) == {"revived": 2000}
    finally:
        await heart_a.close()
        await heart_b.close()


async def test_the_heartbeat_is_one_sorted_set_under_the_prefix(store):
    backend = await store.backend()
    heart = backend.heart()
    assert heart is not None
    await heart.open()
    raw = store.raw()
    try:
        # The beat's server time lies between these two readings; a cluster client's first call can
        # take longer than the TTL (CI once read now 180 ms past the record), so bound it from both sides.
        before = await backend.now_ms()
        await heart.beat("a", TTL_MS)
        after = await backend.now_ms()
        key = f"{store.prefix}instances"
        assert await raw.type(key) == "zset"
        until = await raw.zscore(key, "a")
        assert before + TTL_MS <= until <= after + TTL_MS
        await heart.leave("a")
        assert await raw.zscore(key, "a") <= await backend.now_ms()
    finally:
        await heart.close()
        await raw.aclose()


async def test_a_heartbeat_key_of_another_type_is_named_in_the_error(single):
    backend = await single.backend()
    raw = single.raw()
    await raw.set(f"{single.prefix}instances", "junk")
    heart = backend.heart()
    assert heart is not None
    await heart.open()
    try:
        with pytest.raises(ResponseError, match=rf"{single.prefix}instances is not a sorted set.*delete it"):
            await heart.beat("a", TTL_MS)
    finally:
        await heart.close()
        await raw.aclose()


async def test_a_backend_on_a_passed_in_client_keeps_no_heartbeat(redis_url):
    """A passed-in client cannot be used from the heartbeat thread's loop: no record, the lease rule."""
    client = Redis.from_url(redis_url)
    try:
        assert RedisBackend(client=client).heart() is None
        assert RedisBackend(url=redis_url).heart() is not None
    finally:
        await client.aclose()
