"""Queues someone else declared under our names are refused, never used as they are (issue 23).

A gate queue without ``x-max-length 1`` and ``x-overflow reject-publish``
takes every publish: using it would let every instance win the slot. A
history queue that is a classic queue is no stream of ours.
"""

from __future__ import annotations

import logging

import aio_pika
import pytest

from anarchon import Scheduler
from anarchon.backend import Outcome
from anarchon_rabbitmq import ForeignQueueError, RabbitMQBackend

pytestmark = pytest.mark.rabbitmq


async def _declare(url: str, queue: str, arguments: dict[str, object] | None = None) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True, arguments=arguments)


@pytest.mark.parametrize(
    "arguments",
    [None, {"x-expires": 300_000}, {"x-max-length": 5, "x-overflow": "reject-publish"}, {"x-max-length": 1}],
    ids=["plain", "expiry-only", "length-5", "drop-head"],
)
async def test_a_gate_declared_without_the_seed_arguments_answers_unknown_for_everyone(
    rabbit_url, make_backend, prefix, job, claim, slot, caplog, arguments
):
    await _declare(rabbit_url, f"{prefix}sync.slot.{slot}", arguments)
    first, other = await make_backend(), await make_backend()
    with caplog.at_level(logging.ERROR, logger="anarchon_rabbitmq"):
        answers = [await b.claim([claim(job("sync"), slot, f"i{n}")]) for n, b in enumerate((first, other))]
    assert [a.outcome for (a,) in answers] == [Outcome.UNKNOWN, Outcome.UNKNOWN], "nobody may win from a plain gate"
    assert "job sync" in caplog.text and "without the arguments a gate needs" in caplog.text


async def test_a_gate_with_another_expiry_is_still_used_with_its_own(
    rabbit_url, make_backend, prefix, job, claim, slot, broker
):
    await _declare(rabbit_url, f"{prefix}sync.slot.{slot}", {"x-max-length": 1, "x-overflow": "reject-publish"})
    backend = await make_backend()
    (won,) = await backend.claim([claim(job("sync"), slot, "a")])
    (lost,) = await backend.claim([claim(job("sync"), slot, "b")])
    assert (won.outcome, lost.outcome) == (Outcome.WON, Outcome.LOST)
    assert "x-expires" not in broker(prefix)[f"{prefix}sync.slot.{slot}"]["args"]


async def test_a_classic_queue_under_the_history_name_is_refused_at_start(rabbit_url, prefix):
    await _declare(rabbit_url, f"{prefix}sync.history")
    scheduler = Scheduler(RabbitMQBackend(url=rabbit_url, prefix=prefix))
    scheduler.add("sync", "* * * * * *", lambda: None)
    with pytest.raises(ForeignQueueError, match=r"history queue .*sync\.history.* exists, but not as the stream"):
        await scheduler.start()
    assert not scheduler._started
