"""Take-over over many jobs: the hint keeps it cheap, and correctness never rests on it."""

from __future__ import annotations

import asyncio

from anarchon_redis import _scripts as S

SHORT = 150


def count_scripts(backend, monkeypatch) -> list[str]:
    """Record the name of every script the backend sends, alone or in a pipeline."""
    names = {}
    for script in vars(S).values():
        if isinstance(script, S.Script):
            names[script.sha] = names[script.source] = script.name
    sent: list[str] = []
    call, pipeline = backend._call, backend._pipeline

    async def one(script, keys, args):
        sent.append(script.name)
        return await call(script, keys, args)

    async def many(commands, *wait):
        sent.extend(names[body] for body, _, _, _ in commands)
        return await pipeline(commands, *wait)

    monkeypatch.setattr(backend, "_call", one)
    monkeypatch.setattr(backend, "_pipeline", many)
    return sent


async def test_take_over_checks_only_jobs_whose_lease_expired(store, make_job, claim, monkeypatch):
    a, b = await store.backend(), await store.backend(sweep_ms=3_600_000)
    jobs = [make_job(f"many-{i}", lease_ms=60_000) for i in range(300)]
    dying = make_job("dying", lease_ms=SHORT)
    assert all(r.won for r in await a.claim([claim(j, 1000) for j in jobs]))
    assert await b.take_over([*jobs, dying], "b") == [], "the first call sweeps every job"
    # Claimed after the sweep: 301 claims and a sweep on a loaded cluster can outlast its short lease.
    assert (await a.claim([claim(dying, 1000)]))[0].won
    sent = count_scripts(b, monkeypatch)
    await asyncio.sleep(SHORT / 1000 + 0.05)
    (taken,) = await b.take_over([*jobs, dying], "b")
    assert taken.grant is not None
    assert taken.grant.job == "dying"
    assert sent.count("take_over") <= 2, "the expired job and a one-job sweep slice, not all 301"
    assert sent.count("peek") <= 1
    sent.clear()
    assert await b.take_over([*jobs, dying], "b") == []
    assert sent.count("take_over") <= 1, "nothing due: at most the sweep slice"


async def test_a_lost_hint_is_repaired_by_the_sweep(store, make_job, claim, wait_until):
    a = await store.backend()
    b = await store.backend(sweep_ms=300)
    job = make_job(lease_ms=SHORT)
    assert await b.take_over([job], "b") == []
    assert (await a.claim([claim(job, 1000)]))[0].won
    raw = store.raw()
    try:
        await raw.delete(a._keys.hint)
    finally:
        await raw.aclose()
    await asyncio.sleep(SHORT / 1000 + 0.05)
    (taken,) = await wait_until(lambda: b.take_over([job], "b"), timeout_s=5)
    assert taken.grant is not None
    assert taken.grant.attempt == 2


async def test_the_hint_follows_leases_on_one_server(single, make_job, claim, wait_until):
    a = await single.backend()
    job = make_job(lease_ms=SHORT)
    raw = single.raw()
    try:
        (won,) = await a.claim([claim(job, 1000)])
        assert won.grant is not None
        expiry = await raw.zscore(a._keys.hint, job.name)
        assert expiry is not None
        assert await a.renew([won.grant]) == [True]
        assert await raw.zscore(a._keys.hint, job.name) >= expiry
        (record,) = await a.history(job.name)
        assert await a.finish(won.grant, record.replace(status="succeeded"))
        assert await raw.zscore(a._keys.hint, job.name) is None, "no running run, no entry"
    finally:
        await raw.aclose()


async def test_cluster_settle_never_drops_an_entry_a_claim_touched(cluster_url, make_job):
    from anarchon_redis import RedisBackend

    backend = RedisBackend(url=cluster_url, prefix="t:settle:")
    await backend.start()
    hint = backend._keys.hint
    try:
        client = backend._redis()
        await client.zadd(hint, {"job": 1})  # due long ago, as a take-over pass reads it
        await backend._call(S.TOUCH, [hint], ["job", 60_000])  # a claim meanwhile
        touched = await client.zscore(hint, "job")
        assert touched > 1
        await backend._call(S.SETTLE, [hint], ["job", "1", ""])  # the pass found nothing running
        assert await client.zscore(hint, "job") == touched, "the claim's entry stays"
        await backend._call(S.SETTLE, [hint], ["job", str(int(touched)), ""])
        assert await client.zscore(hint, "job") is None
        await backend._call(S.SETTLE, [hint], ["job", "", "5000"])  # a sweep found a running run
        assert await client.zscore(hint, "job") == 5000
    finally:
        await backend._redis().delete(hint)
        await backend.close()
