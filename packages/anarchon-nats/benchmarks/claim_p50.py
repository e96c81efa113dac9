"""Sequential p50 of NatsBackend.claim() against a bare js.publish with Nats-Msg-Id, on one client.

    .venv/bin/python packages/anarchon-nats/benchmarks/claim_p50.py [rounds]

Rounds alternate between the two so a busy machine affects both alike. Also
prints the losing path (duplicate ack + reading the stored claim) and a batch
of 100 claims in one call against 100 sequential calls.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid

import nats

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_nats import NatsBackend

URL = os.environ.get("ANARCHON_NATS_URL", "nats://127.0.0.1:4222")


def _p50(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.3f} ms"


async def main(rounds: int) -> None:
    nc = await nats.connect(URL)
    tag = uuid.uuid4().hex[:8]
    backend = NatsBackend(connection=nc, stream=f"BENCH_{tag}", prefix=f"bench{tag}.")
    await backend.start()
    js = nc.jetstream()
    job = Job("bench", "* * * * * *", lambda: None, options=backend.job_options("bench", {}))
    rival = Job("rival", "* * * * * *", lambda: None, options=backend.job_options("rival", {}))
    raw: list[float] = []
    won: list[float] = []
    lost: list[float] = []
    try:
        for i in range(200):  # warm-up
            await backend.claim([Claim(job, -i - 1, "w", uuid.uuid4().hex, 0)])
        for i in range(rounds):
            t = time.perf_counter()
            await js.publish(f"bench{tag}.raw.claims", b"{}", headers={"Nats-Msg-Id": f"raw:{i}"})
            raw.append(time.perf_counter() - t)
            t = time.perf_counter()
            (r,) = await backend.claim([Claim(job, i, "a", uuid.uuid4().hex, i)])
            won.append(time.perf_counter() - t)
            assert r.won
        for i in range(rounds):
            await backend.claim([Claim(rival, i, "a", uuid.uuid4().hex, i)])
            t = time.perf_counter()
            (r,) = await backend.claim([Claim(rival, i, "b", uuid.uuid4().hex, i)])
            lost.append(time.perf_counter() - t)
            assert not r.won
        batch = [Claim(job, 10_000_000 + i, "a", uuid.uuid4().hex, 0) for i in range(100)]
        t = time.perf_counter()
        await backend.claim(batch)
        one_call = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(100):
            await backend.claim([Claim(job, 20_000_000 + i, "a", uuid.uuid4().hex, 0)])
        sequential = time.perf_counter() - t
    finally:
        await js.delete_stream(f"BENCH_{tag}")
        await backend.close()
        await nc.close()
    print(f"rounds: {rounds}")
    print(f"raw js.publish + Nats-Msg-Id   p50 {_p50(raw)}")
    print(f"NatsBackend.claim(), won       p50 {_p50(won)}  ({statistics.median(won) / statistics.median(raw):.2f}x)")
    print(f"NatsBackend.claim(), lost      p50 {_p50(lost)}  (duplicate ack + read of the stored claim)")
    print(f"100 claims: one call {one_call * 1e3:.1f} ms, 100 calls {sequential * 1e3:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
