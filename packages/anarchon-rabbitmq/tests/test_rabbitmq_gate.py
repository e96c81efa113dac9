"""How one instance wins: the gate queue per run, as the broker sees it."""

from __future__ import annotations

import asyncio
import time

import pytest

from anarchon.backend import Outcome
from anarchon.run import Run, RunStatus

pytestmark = pytest.mark.rabbitmq

SEED_ARGUMENTS = {"x-max-length": 1, "x-overflow": "reject-publish", "x-expires": 300_000}


async def test_gate_queue_has_the_seed_name_and_arguments(make_backend, prefix, broker, job, claim, slot):
    backend = await make_backend()
    (result,) = await backend.claim([claim(job("sync"), slot)])
    assert result.outcome is Outcome.WON

    queues = broker(prefix)
    gate = queues[f"{prefix}sync.slot.{slot}"]
    assert gate["args"] == SEED_ARGUMENTS
    assert gate["types"]["x-max-length"] == "byte"
    assert gate["messages"] == 1  # the claim, kept: the run stays taken
    assert gate["consumers"] == 0  # nobody consumes the gate queue


async def test_first_publish_is_acked_and_every_later_one_nacked(make_backend, job, claim, slot):
    a, b, c = await make_backend(), await make_backend(), await make_backend()
    sync = job("sync")
    (first,) = await a.claim([claim(sync, slot, "a")])
    (second,) = await b.claim([claim(sync, slot, "b")])
    (third,) = await c.claim([claim(sync, slot, "c")])
    assert [first.outcome, second.outcome, third.outcome] == [Outcome.WON, Outcome.LOST, Outcome.LOST]
    assert first.grant is not None and first.grant.instance == "a" and first.grant.fencing is None
    assert second.grant is None


async def test_declaring_an_existing_gate_with_the_same_arguments_is_no_error(make_backend, broker, prefix, job, claim):
    backend = await make_backend()
    sync = job("sync")
    base = (time.time_ns() // 1_000_000 // 1000 + 7200) * 1000
    results = await backend.claim([claim(sync, base), claim(sync, base + 1000)])
    assert [r.outcome for r in results] == [Outcome.WON, Outcome.WON]
    again = await backend.claim([claim(sync, base), claim(sync, base + 1000)])
    assert [r.outcome for r in again] == [Outcome.LOST, Outcome.LOST]
    assert {q["messages"] for q in broker(prefix).values() if ".slot." in q["name"]} == {1}


@pytest.mark.slow
async def test_slot_ttl_ms_becomes_x_expires_and_the_gate_lives_that_long_then_expires(
    make_backend, broker, prefix, job, claim
):
    ttl_s = 10.0
    backend = await make_backend(slot_ttl_ms=int(ttl_s * 1000))
    sync = job("sync", jitter_ms=100, max_late_ms=1000)
    await backend.prepare([sync])
    slot = (time.time_ns() // 1_000_000 // 1000) * 1000
    name = f"{prefix}sync.slot.{slot}"
    declared = time.monotonic()  # taken before the declare: the gate lives at least ttl_s past it
    (won,) = await backend.claim([claim(sync, slot)])
    assert won.outcome is Outcome.WON

    # Well into slot_ttl_ms, with seconds to spare, the gate still remembers the run.
    await asyncio.sleep(max(0.0, declared + 0.6 * ttl_s - time.monotonic()))
    gate = broker(prefix)[name]
    assert gate["args"]["x-expires"] == 10_000 and gate["messages"] == 1
    (again,) = await backend.claim([claim(sync, slot, "again")])
    assert again.outcome is Outcome.LOST

    deadline = time.monotonic() + ttl_s + 20
    while name in broker(prefix):  # listing the queues is no use of them
        assert time.monotonic() < deadline, "the gate queue did not delete itself after slot_ttl_ms"
        await asyncio.sleep(0.5)
    # Expired: RabbitMQ no longer knows the run was taken, hence the jitter + max_late check.
    (late,) = await backend.claim([claim(sync, slot, "late")])
    assert late.outcome is Outcome.WON


async def test_instances_with_another_slot_ttl_use_existing_gates_as_they_are(make_backend, broker, prefix, job, claim):
    first = await make_backend(slot_ttl_ms=300_000)
    other = await make_backend(slot_ttl_ms=600_000)
    sync = job("sync")
    base = (time.time_ns() // 1_000_000 // 1000 + 3600) * 1000
    (won,) = await first.claim([claim(sync, base, "first")])
    # PRECONDITION_FAILED on declare (x-expires differs) is handled: a plain LOST, no error.
    lost = await other.claim([claim(sync, base, "other") for _ in range(3)])
    assert won.outcome is Outcome.WON
    assert [r.outcome for r in lost] == [Outcome.LOST] * 3
    # A later run's gate, first declared by the other instance, gets the new slot_ttl_ms.
    (later,) = await other.claim([claim(sync, base + 1000, "other")])
    (later_lost,) = await first.claim([claim(sync, base + 1000, "first")])
    assert (later.outcome, later_lost.outcome) == (Outcome.WON, Outcome.LOST)
    queues = broker(prefix)
    assert queues[f"{prefix}sync.slot.{base}"]["args"]["x-expires"] == 300_000
    assert queues[f"{prefix}sync.slot.{base + 1000}"]["args"]["x-expires"] == 600_000


async def test_manual_runs_have_their_own_gate(make_backend, broker, prefix, job, claim, slot):
    a, b = await make_backend(), await make_backend()
    sync = job("sync")
    scheduled = await a.claim([claim(sync, slot, "a")])
    manual = await a.claim([claim(sync, slot, "a", manual=True)])
    manual_b = await b.claim([claim(sync, slot, "b", manual=True)])
    assert [r.outcome for r in scheduled + manual + manual_b] == [Outcome.WON, Outcome.WON, Outcome.LOST]
    assert manual[0].grant is not None and manual[0].grant.manual
    gate = broker(prefix)[f"{prefix}sync.manual.{slot}"]
    assert gate["args"] == SEED_ARGUMENTS and gate["messages"] == 1


async def test_a_batch_is_answered_in_order_with_one_channel_per_claim_in_flight(make_backend, job, claim, slot):
    a, b = await make_backend(), await make_backend()
    jobs = [job(f"job-{i}") for i in range(12)]
    taken = await b.claim([claim(j, slot, "b") for j in jobs[::2]])
    assert all(r.outcome is Outcome.WON for r in taken)
    results = await a.claim([claim(j, slot, "a") for j in jobs])
    assert [r.outcome for r in results] == [Outcome.LOST, Outcome.WON] * 6
    assert [r.grant.job for r in results if r.grant] == [j.name for j in jobs[1::2]]


async def test_a_retried_claim_gets_its_first_answer(make_backend, job, claim, slot):
    a, b = await make_backend(), await make_backend()
    sync = job("sync")
    mine, theirs = claim(sync, slot, "a"), claim(sync, slot, "b")
    (first,) = await a.claim([mine])
    (lost,) = await b.claim([theirs])
    (again,) = await a.claim([mine])
    (lost_again,) = await b.claim([theirs])
    assert first.outcome is Outcome.WON and again.outcome is Outcome.WON
    assert again.grant == first.grant
    assert lost.outcome is Outcome.LOST and lost_again.outcome is Outcome.LOST
    # Once the run is finished a retry is no longer a win (as on the lease backends).
    assert first.grant is not None
    await a.finish(first.grant, Run(job="sync", slot_ms=slot, status=RunStatus.SUCCEEDED, instance="a"))
    (after,) = await a.claim([mine])
    assert after.outcome is Outcome.LOST
    # Another object never recognises a token it did not publish: no second winner.
    c = await make_backend()
    (foreign,) = await c.claim([mine])
    assert foreign.outcome is Outcome.LOST
