"""How one instance wins: de-duplication on Nats-Msg-Id, tokens, batches, races."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from typing import Any

import nats.js.errors
import pytest
from nats_helpers import make_job, now_ms, stored_on, token

from anarchon import Scheduler
from anarchon.backend import Claim, Outcome
from anarchon_nats import NatsBackend

pytestmark = pytest.mark.nats


async def test_claim_is_published_on_the_claims_subject_with_the_slot_msg_id(backends, names, client) -> None:
    (b,) = await backends()
    job = make_job("sync")
    slot = 1_791_633_610_000
    (result,) = await b.claim([Claim(job, slot, "a", token(), now_ms())])
    assert result.outcome is Outcome.WON
    stored = await client.jetstream().get_last_msg(names.stream, f"{names.prefix}sync.claims")
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"] == f"sync:{slot}"


async def test_first_claim_wins_and_a_foreign_token_loses(backends) -> None:
    a, b = await backends(2)
    job = make_job()
    (won,) = await a.claim([Claim(job, 1000, "a", "tok-a", now_ms())])
    (lost,) = await b.claim([Claim(job, 1000, "b", "tok-b", now_ms())])
    assert won.outcome is Outcome.WON
    assert won.grant is not None
    assert won.grant.token == "tok-a"
    assert won.grant.fencing is None
    assert lost.outcome is Outcome.LOST
    assert lost.grant is None


async def test_duplicate_ack_carries_the_stored_seq_and_duplicate_is_none_when_stored(names, backends, client) -> None:
    """BROKER-NOTES: PubAck.duplicate is None (not False) for a stored message."""
    await backends()
    js = client.jetstream()
    subject, headers = f"{names.prefix}sync.claims", {"Nats-Msg-Id": "sync:5"}
    first = await js.publish(subject, b"{}", headers=dict(headers))
    again = await js.publish(subject, b"{}", headers=dict(headers))
    assert first.duplicate is None
    assert again.duplicate is True
    assert again.seq == first.seq
    assert await stored_on(js, names.stream, subject) == 1  # the repeat stored nothing


async def test_a_retried_claim_with_the_same_token_is_still_won(backends) -> None:
    """The client's first answer was lost; the retry gets a duplicate ack but the stored token is its own."""
    a, other = await backends(2)
    job = make_job()
    c = Claim(job, 2000, "a", token(), now_ms())
    (first,) = await a.claim([c])
    (retry,) = await a.claim([c])
    assert first.outcome is Outcome.WON
    assert retry.outcome is Outcome.WON
    assert retry.grant == first.grant
    (on_another_object,) = await other.claim([c])  # same token, another connection: still that claim
    assert on_another_object.outcome is Outcome.WON


async def test_a_claim_that_reached_the_stream_before_its_ack_was_lost_is_won_on_retry(backends, names, client) -> None:
    """Simulates the lost ack: the claim is stored by hand, then the client retries."""
    from anarchon_nats._records import encode_claim

    (b,) = await backends()
    job = make_job()
    c = Claim(job, 3000, "a", token(), now_ms() - 50)
    await client.jetstream().publish(
        f"{names.prefix}sync.claims", encode_claim(c), headers={"Nats-Msg-Id": "sync:3000"}
    )
    (result,) = await b.claim([c])
    assert result.outcome is Outcome.WON
    assert result.grant is not None
    assert result.grant.started_at_ms == c.now_ms
    (foreign,) = await b.claim([Claim(job, 3000, "b", token(), now_ms())])
    assert foreign.outcome is Outcome.LOST


async def test_a_duplicate_whose_stored_claim_was_trimmed_is_lost(backends) -> None:
    """The ID is still remembered but the message is gone: the token cannot be checked, so never run."""
    (b,) = await backends(history_size=1)
    job = make_job(history_size=1)
    c = Claim(job, 1000, "a", token(), now_ms())
    assert (await b.claim([c]))[0].outcome is Outcome.WON
    assert (await b.claim([Claim(job, 2000, "a", token(), now_ms())]))[0].outcome is Outcome.WON
    (retry,) = await b.claim([c])
    assert retry.outcome is Outcome.LOST


async def test_slots_and_jobs_are_independent(backends) -> None:
    a, b = await backends(2)
    sync, report = make_job("sync"), make_job("report")
    results = await a.claim([Claim(sync, 1000, "a", token(), now_ms()), Claim(report, 1000, "a", token(), now_ms())])
    assert [r.outcome for r in results] == [Outcome.WON, Outcome.WON]
    results = await b.claim([Claim(sync, 1000, "b", token(), now_ms()), Claim(sync, 2000, "b", token(), now_ms())])
    assert [r.outcome for r in results] == [Outcome.LOST, Outcome.WON]


async def test_manual_runs_never_collide_with_scheduled_slots(backends, names, client) -> None:
    a, b = await backends(2)
    job = make_job()
    scheduled = Claim(job, 5000, "a", token(), now_ms())
    manual = Claim(job, 5000, "b", token(), now_ms(), manual=True)
    assert (await a.claim([scheduled]))[0].outcome is Outcome.WON
    (won,) = await b.claim([manual])
    assert won.outcome is Outcome.WON
    assert won.grant is not None
    assert won.grant.manual is True
    assert (await b.claim([manual]))[0].outcome is Outcome.WON  # its own retry
    assert (await a.claim([Claim(job, 5000, "a", token(), now_ms(), manual=True)]))[0].outcome is Outcome.LOST
    stored = await client.jetstream().get_last_msg(names.stream, f"{names.prefix}sync.claims")
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"] == "sync:5000:manual"


async def test_a_batch_is_pipelined_every_publish_sent_before_any_ack_is_awaited(backends) -> None:
    (b,) = await backends()
    job = make_job()
    events: list[str] = []
    nc, publishes = b._nc, b._publishes
    assert nc is not None
    send, answer = nc.publish, publishes._answer

    async def sent(*args: Any, **kw: Any) -> None:
        events.append("send")
        await send(*args, **kw)

    async def acked(msg: Any) -> None:
        events.append("ack")
        await answer(msg)

    nc.publish = sent  # type: ignore[method-assign]
    publishes._answer = acked  # type: ignore[method-assign]  # read when the reply subscription is made
    try:
        claims = [Claim(job, 10_000 + i, "a", token(), now_ms()) for i in range(50)]
        results = await b.claim(claims)
    finally:
        del nc.publish
    assert all(r.outcome is Outcome.WON for r in results)
    # Then one publish more, after every ack: the slots won, told to the fleet (decided_notify).
    assert events == ["send"] * 50 + ["ack"] * 50 + ["send"]


async def test_a_batch_answers_line_up_with_the_claims(backends) -> None:
    a, b = await backends(2)
    job = make_job()
    await a.claim([Claim(job, s, "a", token(), now_ms()) for s in (1, 3, 5)])
    results = await b.claim([Claim(job, s, "b", token(), now_ms()) for s in (1, 2, 3, 4, 5, 6)])
    assert [r.outcome for r in results] == [Outcome.LOST, Outcome.WON] * 3
    assert [r.grant.slot_ms for r in results if r.grant] == [2, 4, 6]


@pytest.mark.slow
async def test_many_instances_racing_over_many_slots_get_one_winner_per_slot(backends) -> None:
    instances = await backends(10)
    jobs = [make_job(f"race-{i}") for i in range(3)]
    slots = [100_000 + i * 1000 for i in range(150)]
    winners: Counter[tuple[str, int]] = Counter()
    answers: Counter[tuple[str, int]] = Counter()

    async def instance(idx: int, b: NatsBackend) -> None:
        order = [(job, slot) for job in jobs for slot in slots]
        random.Random(idx).shuffle(order)
        for start in range(0, len(order), 25):
            batch = [Claim(job, slot, f"i{idx}", token(), now_ms()) for job, slot in order[start : start + 25]]
            for c, r in zip(batch, await b.claim(batch), strict=True):
                answers[(c.job, c.slot_ms)] += 1
                if r.outcome is Outcome.WON:
                    winners[(c.job, c.slot_ms)] += 1
                else:
                    assert r.outcome is Outcome.LOST

    await asyncio.gather(*(instance(i, b) for i, b in enumerate(instances)))
    assert len(answers) == len(jobs) * len(slots)
    assert set(answers.values()) == {len(instances)}
    assert len(winners) == len(jobs) * len(slots)
    assert set(winners.values()) == {1}


async def test_claim_before_start_says_what_to_do(names) -> None:
    b = NatsBackend(stream=names.stream, prefix=names.prefix)
    with pytest.raises(RuntimeError, match=r"call start\(\)"):
        await b.claim([Claim(make_job(), 1, "a", token(), now_ms())])


async def test_jetstream_forgets_a_claim_after_the_duplicate_window(backends, names, nats_url, client) -> None:
    """Why jitter_ms + max_late_ms must stay under duplicate_window_ms: past the window a late
    instance's claim for a slot already run is stored and won, so the slot would run twice."""
    (short,) = await backends(duplicate_window_ms=2000)
    job = make_job("sync", backend=short, jitter_ms=0, max_late_ms=1000)
    short.check_job(job)  # a job this backend accepts
    tag = names.prefix.split(".")[0]
    wide = NatsBackend(nats_url, stream=f"{names.stream}_W", prefix=f"{tag}.wide.")  # the default 5 min window
    await wide.start()
    js = client.jetstream()
    try:
        slot = 1_000
        for b in (short, wide):
            assert (await b.claim([Claim(job, slot, "a", token(), now_ms())]))[0].outcome is Outcome.WON
            assert (await b.claim([Claim(job, slot, "b", token(), now_ms())]))[0].outcome is Outcome.LOST

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # generous: the window is 2 s
        while (await short.claim([Claim(job, slot, "late", token(), now_ms())]))[0].outcome is Outcome.LOST:
            assert loop.time() < deadline, "JetStream still remembered the claim long after its duplicate window"
            await asyncio.sleep(0.2)
        assert await stored_on(js, names.stream, f"{names.prefix}sync.claims") == 2

        (still,) = await wide.claim([Claim(job, slot, "late", token(), now_ms())])
        assert still.outcome is Outcome.LOST
        assert await stored_on(js, wide.stream, f"{tag}.wide.sync.claims") == 1
    finally:
        await wide.close()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(wide.stream)


async def test_one_claim_message_per_claimed_run_however_many_instances_race(backends, names, nats_url, client) -> None:
    """Losing claims store nothing: 12 instances racing on a slot leave one message; a manual
    run through a Scheduler adds exactly one more."""
    instances = await backends(12)
    job = make_job("sync")
    slot = 1_791_633_610_000
    results = await asyncio.gather(
        *(b.claim([Claim(job, slot, f"i{i}", token(), now_ms())]) for i, b in enumerate(instances))
    )
    assert sorted(r.outcome.name for (r,) in results) == ["LOST"] * 11 + ["WON"]
    js = client.jetstream()
    claims = f"{names.prefix}sync.claims"
    assert await stored_on(js, names.stream, claims) == 1
    again = await asyncio.gather(
        *(b.claim([Claim(job, slot, f"i{i}", token(), now_ms())]) for i, b in enumerate(instances))
    )
    assert {r.outcome for (r,) in again} == {Outcome.LOST}
    assert await stored_on(js, names.stream, claims) == 1

    scheduler = Scheduler(backend=NatsBackend(nats_url, stream=names.stream, prefix=names.prefix))
    scheduler.add("sync", "0 0 1 1 *", lambda: None)
    run = await scheduler.run_now("sync")
    assert run.manual
    assert await stored_on(js, names.stream, claims) == 2
    last = await js.get_last_msg(names.stream, claims)
    assert last.headers is not None
    assert last.headers["Nats-Msg-Id"] == f"sync:{run.slot_ms}:manual"
