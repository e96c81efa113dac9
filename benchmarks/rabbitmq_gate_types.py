"""Classic versus quorum gate queues under contention: is the gate still a mutex, and what does a claim cost?

``python benchmarks/rabbitmq_gate_types.py [AMQP_URL] [SLOTS]`` (default the
loopback broker, 300 slots). Five backends race for each slot through the
backend's own claim path; the quorum run only adds ``x-queue-type: quorum``
to the seed's gate arguments (``x-max-length 1``, ``x-overflow
reject-publish``, ``x-expires``), which quorum queues all accept. Prints,
per type, the slots with more than one winner and the claim's p50/p95.
Every queue gets a fresh prefix and expires 20 s after its last use.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon.options import resolve_options
from anarchon_rabbitmq import RabbitMQBackend

URL = sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/"
SLOTS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
RACERS = 5


def _backend(prefix: str, kind: str) -> RabbitMQBackend:
    backend = RabbitMQBackend(url=URL, prefix=prefix, slot_ttl_ms=20_000)
    if kind == "quorum":
        # Not an option of the backend (it was measured here and refused): the same claim path, one more argument.
        backend._gate_arguments = {**backend._gate_arguments, "x-queue-type": "quorum"}
    return backend


async def race(kind: str) -> str:
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    backends = [_backend(prefix, kind) for _ in range(RACERS)]
    for b in backends:
        await b.start()
    options = resolve_options("gate", {}, RabbitMQBackend.capabilities, RabbitMQBackend.name)
    job = Job("gate", "* * * * * *", lambda: None, options=options)
    times: list[float] = []
    doubled = unknown = 0
    base = int(time.time()) * 1000

    async def one(b: RabbitMQBackend, i: int, slot: int) -> str:
        began = time.perf_counter()
        claim = Claim(job=job, slot_ms=slot, instance=f"i{i}", token=uuid.uuid4().hex, now_ms=int(time.time() * 1000))
        (result,) = await b.claim([claim])
        times.append((time.perf_counter() - began) * 1000)
        return result.outcome.value

    try:
        for s in range(SLOTS):
            outcomes = await asyncio.gather(*(one(b, i, base + s * 1000) for i, b in enumerate(backends)))
            doubled += outcomes.count("won") > 1
            unknown += outcomes.count("unknown")
    finally:
        for b in backends:
            await b.close()
    times.sort()
    return (
        f"{kind:8s} {SLOTS} slots x {RACERS} racers: {doubled} slots with more than one winner, {unknown} unknown; "
        f"claim p50 {statistics.median(times):.2f} ms, p95 {times[int(len(times) * 0.95)]:.2f} ms"
    )


async def main() -> None:
    for kind in ("classic", "quorum"):
        print(await race(kind), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
