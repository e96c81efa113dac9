"""The SQLite backend answers every call as the reference MemoryStore does.

Random sequences of claims (fresh and retried, scheduled and manual, in
batches), renewals, finishes, hand-overs, take-overs and clock steps run
against both, with the same clock; every answer, every history record and
every mark must agree. The clock is the only thing replaced, through a test
hook of the backend, so lease expiry can be stepped instead of waited for.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta

import pytest

from anarchon.backend import ClaimResult, Grant
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon.run import Run, RunStatus, ms_to_datetime
from anarchon_sqlite import SQLiteBackend

SLOT = 1_800_000_000_000
INSTANCES = 3
FINAL = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED]


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Fences:
    """Simultaneous take-overs of one job may hand out its fencing values in another order.

    The contract fixes that each take-over gets a new, higher value, not
    which run gets which; this maps SQLite's values onto the reference's.
    """

    def __init__(self) -> None:
        self.maps: dict[str, dict[int, int]] = {}

    def learn(self, job: str, sql: int, mem: int) -> None:
        self.maps.setdefault(job, {})[sql] = mem

    def grant(self, g: Grant | None) -> Grant | None:
        if g is None:
            return None
        fencing = self.maps.get(g.job, {}).get(g.fencing, g.fencing) if g.fencing is not None else None
        return dataclasses.replace(g, token="", fencing=fencing)

    def run(self, r: Run | None) -> Run | None:
        if r is None or r.fencing is None:
            return r
        return r.replace(fencing=self.maps.get(r.job, {}).get(r.fencing, r.fencing))

    def result(self, r: ClaimResult) -> tuple[object, ...]:
        """A SQLite answer in the reference's terms (tokens of take-overs are random in both)."""
        return (r.outcome, self.grant(r.grant), self.run(r.record))


def reference(r: ClaimResult) -> tuple[object, ...]:
    return (r.outcome, dataclasses.replace(r.grant, token="") if r.grant else None, r.record)


@pytest.mark.parametrize("seed", range(40))
async def test_same_answers_as_the_memory_store(seed, tmp_path, make_job, make_claim):
    rng = random.Random(seed)
    clock = Clock(SLOT)
    store = MemoryStore(clock=clock)
    mem = [MemoryBackend(store) for _ in range(INSTANCES)]
    sql = [SQLiteBackend(tmp_path / "diff.sqlite3") for _ in range(INSTANCES)]
    for backend in sql:
        backend._clock = clock
        await backend.start()
    jobs = [
        make_job("skip", lease_ms=1000, max_takeovers=1, history_size=4),
        make_job("allow", overlap="allow", lease_ms=600, max_takeovers=2, history_size=3, history_ttl_ms=8000),
        make_job("once", lease_ms=400, max_takeovers=0, history_size=50),
    ]
    fences = Fences()
    held: list[tuple[int, Grant, Grant]] = []  # (instance, reference grant, sqlite grant)
    sent = []
    try:
        for _ in range(120):
            op = rng.choices(
                ["claim", "retry", "renew", "finish", "hand_over", "take_over", "tick"], [6, 2, 2, 3, 1, 3, 4]
            )[0]
            i = rng.randrange(INSTANCES)
            if op in ("claim", "retry") and (op == "claim" or not sent):
                batch = [
                    make_claim(
                        rng.choice(jobs),
                        clock.now + rng.randrange(-3, 6) * 1000,
                        f"i{i}",
                        manual=rng.random() < 0.15,
                        now_ms=clock.now + rng.randrange(-50, 50),
                    )
                    for _ in range(rng.randint(1, 3))
                ]
                sent.extend(batch)
            elif op == "retry":
                batch = [rng.choice(sent)]
            if op in ("claim", "retry"):
                expected, got = await mem[i].claim(batch), await sql[i].claim(batch)
                assert [fences.result(r) for r in got] == [reference(r) for r in expected], op
                held += [(i, m.grant, s.grant) for m, s in zip(expected, got, strict=True) if m.grant and s.grant]
            elif op == "take_over":
                chosen = rng.sample(jobs, rng.randint(1, len(jobs)))
                expected, got = await mem[i].take_over(chosen, f"i{i}"), await sql[i].take_over(chosen, f"i{i}")
                key = lambda r: (r.grant.job, r.grant.slot_ms, r.grant.manual)  # noqa: E731
                expected, got = sorted(expected, key=key), sorted(got, key=key)
                assert len(got) == len(expected)
                for m, s in zip(expected, got, strict=True):
                    assert m.grant is not None
                    assert s.grant is not None
                    fences.learn(s.grant.job, s.grant.fencing, m.grant.fencing)
                    assert fences.result(s) == reference(m)
                    held.append((i, m.grant, s.grant))
            elif op == "tick":
                clock.now += rng.choice([0, 100, 300, 700, 1500, 5000])
            elif held:
                i, m_grant, s_grant = rng.choice(held)
                if op == "renew":
                    assert await sql[i].renew([s_grant]) == await mem[i].renew([m_grant])
                elif op == "hand_over":
                    assert await sql[i].hand_over(s_grant) == await mem[i].hand_over(m_grant)
                else:
                    started = ms_to_datetime(m_grant.started_at_ms)
                    run = Run(
                        job=m_grant.job,
                        slot_ms=m_grant.slot_ms,
                        status=rng.choice(FINAL),
                        instance=m_grant.instance,
                        attempt=m_grant.attempt,
                        fencing=m_grant.fencing,
                        manual=m_grant.manual,
                        catch_up=m_grant.catch_up,
                        started_at=started,
                        finished_at=started + timedelta(microseconds=rng.randrange(10**7)),
                        duration_ms=rng.randrange(10_000),
                        error=rng.choice([None, "RuntimeError: boom"]),
                        missed=m_grant.missed,
                    )
                    ours = run.replace(fencing=s_grant.fencing)
                    assert await sql[i].finish(s_grant, ours) == await mem[i].finish(m_grant, run)
            for job in jobs:
                want = await mem[0].history(job.name, 100)
                have = await sql[rng.randrange(INSTANCES)].history(job.name, 100)
                assert [fences.run(r) for r in have] == want
            assert await sql[0].marks(jobs) == await mem[0].marks(jobs)
    finally:
        for backend in sql:
            await backend.close()
