"""history(), last_run() and run_now(): claims and results joined into runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from nats_helpers import make_job, now_ms, stored_on, token

from anarchon import Scheduler
from anarchon.backend import Claim, Outcome
from anarchon.errors import InvalidJobError
from anarchon.run import RunStatus
from anarchon_nats import NatsBackend

pytestmark = pytest.mark.nats


async def test_history_joins_claims_and_results_newest_first(backends, names, client) -> None:
    a, b = await backends(2)
    job = make_job()
    t0 = now_ms()
    grants = {}
    for slot in (1000, 2000, 3000):
        (r,) = await a.claim([Claim(job, slot, "inst-a", token(), t0 + slot)])
        grants[slot] = r.grant
    running = (await b.history("sync"))[0]
    ok = running.replace(
        slot_ms=1000,
        status=RunStatus.SUCCEEDED,
        finished_at=running.started_at + timedelta(seconds=1),
        duration_ms=1000,
    )
    await a.finish(grants[1000], ok.replace(started_at=running.started_at - timedelta(seconds=2)))
    failed = ok.replace(slot_ms=2000, status=RunStatus.FAILED, error="ValueError: boom")
    await a.finish(grants[2000], failed)

    runs = await b.history("sync")
    assert [r.slot_ms for r in runs] == [3000, 2000, 1000]
    assert [r.status for r in runs] == [RunStatus.RUNNING, RunStatus.FAILED, RunStatus.SUCCEEDED]
    assert runs[1].error == "ValueError: boom"
    assert runs[2].duration_ms == 1000
    assert all(r.instance == "inst-a" and r.fencing is None and r.attempt == 1 for r in runs)
    assert runs[0].started_at is not None
    assert round(runs[0].started_at.timestamp() * 1000) == t0 + 3000
    assert [r.slot_ms for r in await b.history("sync", limit=2)] == [3000, 2000]
    assert await b.history("sync", limit=0) == []
    last = await b.last_run("sync")
    assert last is not None
    assert last.slot_ms == 3000


async def test_results_go_to_the_results_subject(backends, names, client) -> None:
    (a,) = await backends()
    job = make_job()
    (r,) = await a.claim([Claim(job, 1000, "a", token(), now_ms())])
    assert r.grant is not None
    run = (await a.history("sync"))[0].replace(status=RunStatus.SUCCEEDED)
    assert await a.finish(r.grant, run) is True
    stored = await client.jetstream().get_last_msg(names.stream, f"{names.prefix}sync.results")
    assert stored.data is not None
    assert b'"status":"succeeded"' in stored.data


async def test_a_finished_run_has_one_result_message_even_when_finish_is_repeated(backends, names, client) -> None:
    """A retried finish() (its first answer lost) is de-duplicated by the result's Nats-Msg-Id."""
    a, other = await backends(2)
    job = make_job()
    (r,) = await a.claim([Claim(job, 1000, "a", token(), now_ms())])
    assert r.grant is not None
    run = (await a.history("sync"))[0].replace(status=RunStatus.SUCCEEDED)
    assert await a.finish(r.grant, run) is True
    assert await a.finish(r.grant, run) is True
    assert await other.finish(r.grant, run) is True  # the same grant finished through another connection
    js = client.jetstream()
    assert await stored_on(js, names.stream, f"{names.prefix}sync.results") == 1
    last = await js.get_last_msg(names.stream, f"{names.prefix}sync.results")
    assert last.headers is not None
    assert last.headers["Nats-Msg-Id"] == "sync:1000:result"
    (only,) = await other.history("sync")
    assert (only.slot_ms, only.status) == (1000, RunStatus.SUCCEEDED)

    (m,) = await a.claim([Claim(job, 1000, "a", token(), now_ms(), manual=True)])  # same slot, manual: its own run
    assert m.grant is not None
    await a.finish(m.grant, run.replace(manual=True))
    await a.finish(m.grant, run.replace(manual=True))
    assert await stored_on(js, names.stream, f"{names.prefix}sync.results") == 2
    assert sorted((x.slot_ms, x.manual, x.status) for x in await other.history("sync")) == [
        (1000, False, RunStatus.SUCCEEDED),
        (1000, True, RunStatus.SUCCEEDED),
    ]


async def test_a_run_whose_runner_died_keeps_running(backends) -> None:
    dead, alive = await backends(2)
    job = make_job()
    (r,) = await dead.claim([Claim(job, 7000, "dead", token(), now_ms())])
    assert r.outcome is Outcome.WON
    await dead.close()  # the runner is gone before it could publish a result
    (lost,) = await alive.claim([Claim(job, 7000, "alive", token(), now_ms())])
    assert lost.outcome is Outcome.LOST  # no backup runner on a claim backend
    run = await alive.last_run("sync")
    assert run is not None
    assert (run.status, run.instance) == (RunStatus.RUNNING, "dead")


async def test_a_result_outlives_its_trimmed_claim(backends) -> None:
    (a,) = await backends(history_size=2)
    job = make_job(history_size=2)
    (r,) = await a.claim([Claim(job, 1, "a", token(), now_ms())])
    assert r.grant is not None
    await a.finish(r.grant, (await a.history("sync"))[0].replace(status=RunStatus.SUCCEEDED))
    await a.claim([Claim(job, s, "a", token(), now_ms()) for s in (2, 3)])
    runs = await a.history("sync")
    assert [(r.slot_ms, r.status) for r in runs] == [
        (3, RunStatus.RUNNING),
        (2, RunStatus.RUNNING),
        (1, RunStatus.SUCCEEDED),
    ]


async def test_no_runs_yet(backends) -> None:
    (a,) = await backends()
    assert await a.history("never") == []
    assert await a.last_run("never") is None


@pytest.mark.parametrize("name", ["a.*", ">", "a b", ""])
async def test_history_refuses_names_that_would_become_wildcards(backends, name: str) -> None:
    (a,) = await backends()
    with pytest.raises(InvalidJobError):
        await a.history(name)


async def test_run_now_publishes_a_manual_claim_and_its_result(names, nats_url) -> None:
    ran: list[bool] = []

    def job(ctx) -> None:  # type: ignore[no-untyped-def]
        ran.append(ctx.manual)

    scheduler = Scheduler(backend=NatsBackend(nats_url, stream=names.stream, prefix=names.prefix))
    scheduler.add("report", "0 0 1 1 *", job)
    run = await scheduler.run_now("report")
    assert ran == [True]
    assert (run.status, run.manual) == (RunStatus.SUCCEEDED, True)
    last = await scheduler.last_run("report")
    assert last is not None
    assert (last.status, last.manual, last.slot_ms) == (RunStatus.SUCCEEDED, True, run.slot_ms)


@pytest.mark.slow
async def test_a_scheduler_runs_every_second_slot_once_and_history_shows_them(names, nats_url) -> None:
    runs: list[int] = []
    schedulers = [Scheduler(backend=NatsBackend(nats_url, stream=names.stream, prefix=names.prefix)) for _ in range(3)]
    for s in schedulers:
        s.add("tick", "* * * * * *", lambda ctx: runs.append(ctx.slot_ms), jitter_ms=100)
    for s in schedulers:
        await s.start()
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while len(set(runs)) < 3:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
    finally:
        for s in schedulers:
            await s.stop()
    assert len(runs) == len(set(runs))
    history = await schedulers[0].history("tick")
    assert {r.slot_ms for r in history} == set(runs)
    assert all(r.status is RunStatus.SUCCEEDED for r in history)


async def test_history_read_message_by_message_matches_the_consumer_read(backends, monkeypatch, caplog) -> None:
    """The fallback used when a degraded cluster does not answer the history consumer."""
    (a,) = await backends()
    job = make_job()
    (r,) = await a.claim([Claim(job, 1, "a", token(), now_ms())])
    assert r.grant is not None
    await a.finish(r.grant, (await a.history("sync"))[0].replace(status=RunStatus.SUCCEEDED))
    await a.claim([Claim(job, s, "a", token(), now_ms()) for s in (2, 3)])
    await a.claim([Claim(make_job("other"), 9, "a", token(), now_ms())])
    by_consumer = await a.history("sync")

    async def no_answer(*args: object) -> None:
        raise asyncio.TimeoutError

    monkeypatch.setattr(a, "_read_by_consumer", no_answer)
    caplog.set_level("INFO", logger="anarchon.nats")
    assert await a.history("sync") == by_consumer
    assert [r.slot_ms for r in by_consumer] == [3, 2, 1]
    assert "reading message by message" in caplog.text
