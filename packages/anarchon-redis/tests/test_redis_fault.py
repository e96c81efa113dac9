"""A Redis restart mid-run: claims survive (AOF, fsync always), backends reconnect by themselves."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from redis.exceptions import RedisError

from anarchon.backend import Outcome
from anarchon_redis import RedisBackend

pytestmark = pytest.mark.slow


async def test_restart_mid_run_never_grants_a_slot_twice_and_backends_reconnect(private_server, make_job, claim):
    backends = [RedisBackend(url=private_server.url, prefix="t:fault:") for _ in range(4)]
    for backend in backends:
        await backend.start()
    held_job = make_job("held", lease_ms=60_000)
    ticking = make_job("tick", overlap="allow")
    try:
        held_claim = claim(held_job, 1000, "i0")
        (held,) = await backends[0].claim([held_claim])
        assert held.won
        assert held.grant is not None

        winners: Counter[int] = Counter()
        unknown = 0
        restarted_at_slot: int | None = None
        stop = asyncio.Event()

        async def instance(n: int, backend: RedisBackend) -> None:
            nonlocal unknown
            slot = 0
            while not stop.is_set():
                slot += 1
                try:
                    (result,) = await backend.claim([claim(ticking, slot * 1000, f"i{n}")])
                except (RedisError, OSError):
                    unknown += 1  # the answer is unknown: a scheduler would not run this slot
                    await asyncio.sleep(0.05)
                    continue
                if result.won:
                    winners[slot] += 1
                await asyncio.sleep(0.02)

        racers = [asyncio.create_task(instance(n, b)) for n, b in enumerate(backends)]
        await asyncio.sleep(1.0)
        private_server.stop(kill=True)  # kill -9: only what was fsynced survives
        await asyncio.sleep(0.5)
        private_server.start()
        restarted_at_slot = max(winners)
        started = time.monotonic()
        while max(winners) < restarted_at_slot + 20:
            assert time.monotonic() - started < 30, "no claim was won after the restart: no reconnect"
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*racers)

        assert set(winners.values()) == {1}, [s for s, n in winners.items() if n > 1]
        others = await asyncio.gather(
            *(b.claim([claim(held_job, 1000, f"i{n}")]) for n, b in enumerate(backends[1:], 1))
        )
        assert all(r[0].outcome is Outcome.LOST for r in others), "the slot claimed before the restart stays claimed"
        assert (await backends[0].claim([held_claim]))[0].grant == held.grant, "the owner's retry is recognised"
        assert await backends[0].renew([held.grant]) == [True], "the same backend object reconnected"
        assert [r.slot_ms for r in await backends[1].history("held")] == [1000]
        recorded = {r.slot_ms // 1000 for r in await backends[2].history("tick", limit=10_000)}
        assert set(winners) <= recorded, "every grant survived the kill -9"
        print(f"slots won: {len(winners)}, unknown answers during the restart: {unknown}")
    finally:
        for backend in backends:
            await backend.close()
