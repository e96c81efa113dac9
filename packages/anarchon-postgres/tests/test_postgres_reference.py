"""The backend against MemoryStore, the reference of the lease rules.

Random sequences of claims (new and retried, scheduled and manual, batched),
finishes, renewals, hand-overs and take-overs go to both; every answer, every
mark and every history record must agree. Leases are long, so expiry comes
only from hand-over and finish, and the two clocks never need to agree.
"""

from __future__ import annotations

import random
import uuid

import pytest

from anarchon.backend import Claim, ClaimResult, Grant
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon.run import Run, RunStatus

pytestmark = pytest.mark.postgres

SLOT = 1_800_000_000_000
NOW = 1_790_000_000_000


def _grant_view(g: Grant | None, taken_over: bool = False) -> tuple[object, ...] | None:
    if g is None:
        return None
    # A take-over makes its own token and starts on the server's clock (a hand-over keeps the attempt).
    token = None if taken_over else g.token
    started = None if taken_over else g.started_at_ms
    return (
        g.job,
        g.slot_ms,
        g.instance,
        token,
        g.attempt,
        g.fencing,
        g.manual,
        g.catch_up,
        g.missed,
        started,
        g.lease_ms,
    )


def _result_view(r: ClaimResult, taken: set[tuple[str, int, bool]], taken_over: bool = False) -> tuple[object, ...]:
    return (r.outcome, _grant_view(r.grant, taken_over), _run_view(r.record, taken) if r.record else None)


def _run_view(r: Run, taken: set[tuple[str, int, bool]]) -> Run:
    """A run once taken over started on the server's clock, not the test's."""
    return r.replace(started_at=None) if (r.job, r.slot_ms, r.manual) in taken else r


def _finished(g: Grant, status: RunStatus) -> Run:
    error = "RuntimeError: boom" if status is RunStatus.FAILED else None
    return g.finished(status, started_ms=NOW, finished_ms=NOW + 10, error=error)


@pytest.mark.parametrize("seed", range(16))
async def test_same_answers_as_the_memory_store(seed, make_backend, make_job):
    rng = random.Random(seed)
    pg = [await make_backend(), await make_backend()]
    mem = MemoryBackend(MemoryStore(clock=lambda: NOW))
    jobs = [
        make_job(f"s{seed}-skip", lease_ms=60_000, max_attempts=2, history_size=4),
        make_job(f"s{seed}-allow", lease_ms=60_000, max_attempts=3, history_size=6, overlap="allow"),
    ]
    sent: list[Claim] = []
    grants: list[tuple[Grant, Grant]] = []  # (memory's, postgres's) for the same run
    taken: set[tuple[str, int, bool]] = set()  # runs granted by a take-over
    for step in range(40):
        op = rng.choices(["claim", "finish", "renew", "hand_over", "take_over"], [5, 2, 1, 1, 2])[0]
        where = f"seed {seed} step {step} {op}"
        backend = rng.choice(pg)
        if op == "claim":
            batch = []
            for _ in range(rng.randint(1, 3)):
                if sent and rng.random() < 0.25:
                    batch.append(rng.choice(sent))  # a retry: same token
                    continue
                c = Claim(
                    job=rng.choice(jobs),
                    slot_ms=SLOT + rng.randint(0, 9) * 1000,
                    instance=rng.choice(["a", "b", "c"]),
                    token=uuid.uuid4().hex,
                    now_ms=NOW + step,
                    manual=rng.random() < 0.2,
                    missed=rng.choice([0, 0, 3]),
                    catch_up=rng.random() < 0.2,
                )
                sent.append(c)
                batch.append(c)
            expected = await mem.claim(batch)
            got = await backend.claim(batch)
            assert [_result_view(r, taken) for r in got] == [_result_view(r, taken) for r in expected], where
            grants += [(e.grant, g.grant) for e, g in zip(expected, got, strict=True) if e.grant and g.grant]
        elif op == "take_over":
            chosen = rng.sample(jobs, rng.randint(1, 2))
            expected = sorted(await mem.take_over(chosen, "backup"), key=lambda r: (r.grant.job, r.grant.slot_ms))
            got = sorted(await backend.take_over(chosen, "backup"), key=lambda r: (r.grant.job, r.grant.slot_ms))
            views = [[_result_view(r, taken, taken_over=True) for r in results] for results in (got, expected)]
            assert views[0] == views[1], where
            grants += [(e.grant, g.grant) for e, g in zip(expected, got, strict=True)]
            taken.update((r.grant.job, r.grant.slot_ms, r.grant.manual) for r in got if r.grant)
        elif grants:
            m, p = rng.choice(grants)
            if op == "finish":
                status = rng.choice([RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
                assert await backend.finish(p, _finished(p, status)) == await mem.finish(m, _finished(m, status)), where
            elif op == "renew":
                assert await backend.renew([p]) == await mem.renew([m]), where
            else:
                assert await backend.hand_over(p) == await mem.hand_over(m), where
        assert await backend.marks(jobs) == await mem.marks(jobs), where
        for job in jobs:
            assert [_run_view(r, taken) for r in await backend.history(job.name, 50)] == [
                _run_view(r, taken) for r in await mem.history(job.name, 50)
            ], where
