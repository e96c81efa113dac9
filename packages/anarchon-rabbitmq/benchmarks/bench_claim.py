"""Sequential claim() against the raw primitive it is built on, and a batch.

    .venv/bin/python packages/anarchon-rabbitmq/benchmarks/bench_claim.py [amqp-url]

Rounds alternate between the variants so a busy machine hurts them alike;
compare the ratios, not absolute times. Every queue made is deleted.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid

import aio_pika
from pamqp import commands as spec

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon.options import resolve_options
from anarchon_rabbitmq import RabbitMQBackend
from anarchon_rabbitmq._names import gate_arguments

URL = sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/"
ROUNDS, PER_ROUND, BATCH = 4, 50, 32


def _job(name: str) -> Job:
    return Job(name, "* * * * * *", lambda: None, resolve_options(name, {}, RabbitMQBackend.capabilities, "rabbitmq"))


def _ms(samples: list[float]) -> str:
    return f"p50 {statistics.median(samples) * 1000:.2f} ms"


async def main() -> None:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    connection = await aio_pika.connect(URL)
    raw = await (await connection.channel(publisher_confirms=True, on_return_raises=True)).get_underlay_channel()
    winner, loser = RabbitMQBackend(URL, prefix=prefix), RabbitMQBackend(URL, prefix=prefix)
    await winner.start()
    await loser.start()
    job = _job("bench")
    await winner.prepare([job])
    await loser.prepare([job])
    await asyncio.sleep(0.5)
    args = gate_arguments(300_000)
    props = spec.Basic.Properties(delivery_mode=2)
    slot = (time.time_ns() // 1_000_000 // 1000 + 86_400) * 1000
    times: dict[str, list[float]] = {"raw declare + publish + confirm": [], "claim() won": [], "claim() lost": []}
    for _ in range(ROUNDS):
        for _ in range(PER_ROUND):
            name = f"{prefix}raw.{uuid.uuid4().hex}"
            t = time.perf_counter()
            await raw.queue_declare(name, durable=True, arguments=args)
            await raw.basic_publish(b"x", routing_key=name, properties=props, mandatory=True)
            times["raw declare + publish + confirm"].append(time.perf_counter() - t)
        for _ in range(PER_ROUND):
            slot += 1000
            c = Claim(job, slot, "w", uuid.uuid4().hex, slot)
            t = time.perf_counter()
            (won,) = await winner.claim([c])
            times["claim() won"].append(time.perf_counter() - t)
            assert won.won
            t = time.perf_counter()
            (lost,) = await loser.claim([Claim(job, slot, "l", uuid.uuid4().hex, slot)])
            times["claim() lost"].append(time.perf_counter() - t)
            assert not lost.won
    for what, samples in times.items():
        print(f"{what:34s} {_ms(samples)} ({len(samples)} sequential)")

    jobs = [_job(f"b{i}") for i in range(BATCH)]
    await winner.prepare(jobs)
    await asyncio.sleep(0.5)
    batch, one_by_one = [], []
    for _ in range(ROUNDS):
        slot += 1000
        t = time.perf_counter()
        results = await winner.claim([Claim(j, slot, "w", uuid.uuid4().hex, slot) for j in jobs])
        batch.append(time.perf_counter() - t)
        assert all(r.won for r in results)
        slot += 1000
        t = time.perf_counter()
        for j in jobs:
            await winner.claim([Claim(j, slot, "w", uuid.uuid4().hex, slot)])
        one_by_one.append(time.perf_counter() - t)
    print(f"{BATCH} claims in one claim() call     {_ms(batch)}")
    print(f"{BATCH} claims one call after another  {_ms(one_by_one)}")

    await winner.close()
    await loser.close()
    rows = await asyncio.create_subprocess_exec(
        "rabbitmqctl", "list_queues", "name", "-q", "--no-table-headers", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await rows.communicate()
    for name in out.decode().split():
        if name.startswith(prefix):
            await raw.queue_delete(name)
    await connection.close()


if __name__ == "__main__":
    asyncio.run(main())
