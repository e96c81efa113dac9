"""Racing instances: separate backend objects, separate connections, one winner per slot."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from anarchon.backend import Outcome

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow]

RACERS = 10
SLOTS = 40


async def test_ten_instances_race_over_many_slots_and_each_slot_has_one_winner(
    make_backend, broker, prefix, job, claim, slot
):
    backends = await asyncio.gather(*(make_backend() for _ in range(RACERS)))
    jobs = [job("alpha"), job("beta")]
    await backends[0].prepare(jobs)
    slots = [slot + i * 1000 for i in range(SLOTS)]

    async def racer(i: int) -> list[tuple[str, int, Outcome]]:
        batch = [claim(j, s, f"racer-{i}") for j in jobs for s in slots]
        random.shuffle(batch)  # each instance reaches the gates in its own order
        results = await backends[i].claim(batch)
        return [(c.job, c.slot_ms, r.outcome) for c, r in zip(batch, results, strict=True)]

    answers = [a for racer_answers in await asyncio.gather(*(racer(i) for i in range(RACERS))) for a in racer_answers]
    assert {o for *_, o in answers} <= {Outcome.WON, Outcome.LOST}
    winners = Counter((name, s) for name, s, o in answers if o is Outcome.WON)
    assert len(winners) == len(jobs) * SLOTS
    assert set(winners.values()) == {1}
    gates = [q for q in broker(prefix).values() if ".slot." in q["name"]]
    assert len(gates) == len(jobs) * SLOTS and {q["messages"] for q in gates} == {1}


async def test_racing_manual_runs_of_one_millisecond_have_one_winner(make_backend, job, claim, slot):
    backends = await asyncio.gather(*(make_backend() for _ in range(8)))
    sync = job("sync")
    claims = [claim(sync, slot, f"r{i}", manual=True) for i in range(len(backends))]
    results = await asyncio.gather(*(b.claim([c]) for b, c in zip(backends, claims, strict=True)))
    assert sorted(r.outcome.value for (r,) in results) == ["lost"] * 7 + ["won"]
