"""Every lease backend against :class:`~anarchon.memory.MemoryStore`, the reference of the lease rules.

Random sequences of claims (new and retried, scheduled and manual, batched),
finishes, renewals, hand-overs and take-overs go to the backend under test and
to a memory store; every answer, every mark and every history record must
agree. Leases are long, so expiry comes only from hand-over and finish, and
the two clocks never need to agree. Fencing tokens are compared by the order
in which each job's values first appear, so a backend whose counter starts
elsewhere still passes while one that skips or repeats a token does not.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict

import pytest

from anarchon.backend import Claim, ClaimResult, Grant, LeaseBackend
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon.run import Run, RunStatus

from ._base import SuiteBase
from ._harness import Conformance
from ._requires import gated

__all__ = ["ReferenceTests"]

SLOT = 1_800_000_000_000
NOW = 1_790_000_000_000
STEPS = 40
SEEDS = 16
Taken = set[tuple[str, int, bool]]


class _Fences:
    """Each job's fencing values by order of first appearance, for one side of the comparison."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[int, int]] = defaultdict(dict)

    def rank(self, job: str, fencing: int | None) -> int | None:
        if fencing is None:
            return None
        seen = self._seen[job]
        return seen.setdefault(fencing, len(seen))


class _View:
    """What must agree between the backend and the reference, one side's view."""

    def __init__(self, taken: Taken) -> None:
        self.fences = _Fences()
        self.taken = taken

    def grant(self, g: Grant | None, taken_over: bool = False) -> tuple[object, ...] | None:
        if g is None:
            return None
        # A take-over makes its own token and starts on the backend's clock (a hand-over keeps the attempt).
        token = None if taken_over else g.token
        started = None if taken_over else g.started_at_ms
        fencing = self.fences.rank(g.job, g.fencing)
        return (
            g.job,
            g.slot_ms,
            g.instance,
            token,
            g.attempt,
            fencing,
            g.manual,
            g.catch_up,
            g.missed,
            started,
            g.lease_ms,
        )

    def run(self, r: Run) -> Run:
        """A run once taken over started on the backend's clock, not the test's."""
        r = r.replace(fencing=self.fences.rank(r.job, r.fencing))
        return r.replace(started_at=None) if (r.job, r.slot_ms, r.manual) in self.taken else r

    def result(self, r: ClaimResult, taken_over: bool = False) -> tuple[object, ...]:
        return (r.outcome, self.grant(r.grant, taken_over), self.run(r.record) if r.record else None)


def _finished(g: Grant, status: RunStatus) -> Run:
    error = "RuntimeError: boom" if status is RunStatus.FAILED else None
    return g.finished(status, started_ms=NOW, finished_ms=NOW + 10, error=error)


def _by_run(results: list[ClaimResult]) -> list[ClaimResult]:
    return sorted(results, key=lambda r: (r.grant.job, r.grant.slot_ms) if r.grant else ("", 0))


@gated("lease")
class ReferenceTests(SuiteBase):
    @pytest.mark.parametrize("seed", range(SEEDS))
    async def test_same_answers_as_the_memory_store(self, conformance: Conformance, seed: int) -> None:
        rng = random.Random(seed)
        backends = [(await conformance.instance()).leases for _ in range(2)]
        mem = MemoryBackend(MemoryStore(clock=lambda: NOW))
        jobs = [
            conformance.job(f"s{seed}-skip", lease_ms=60_000, max_takeovers=1, history_size=4),
            conformance.job(f"s{seed}-allow", lease_ms=60_000, max_takeovers=2, history_size=6, overlap="allow"),
        ]
        taken: Taken = set()  # runs granted by a take-over
        ours, theirs = _View(taken), _View(taken)
        sent: list[Claim] = []
        grants: list[tuple[Grant, Grant]] = []  # (memory's, the backend's) for the same run
        finished: set[str] = set()  # tokens of the grants finished so far
        for step in range(STEPS):
            op = rng.choices(["claim", "finish", "renew", "hand_over", "take_over"], [5, 2, 1, 1, 2])[0]
            where = f"seed {seed} step {step} {op}"
            backend: LeaseBackend = rng.choice(backends)
            if op == "claim":
                batch = []
                for _ in range(rng.randint(1, 3)):
                    if sent and rng.random() < 0.25:
                        batch.append(rng.choice(sent))  # a retry: same token
                        continue
                    job = rng.choice(jobs)
                    c = Claim(
                        job=job.name,
                        spec=job,
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
                assert [theirs.result(r) for r in got] == [ours.result(r) for r in expected], where
                grants += [(e.grant, g.grant) for e, g in zip(expected, got, strict=True) if e.grant and g.grant]
            elif op == "take_over":
                chosen = rng.sample(jobs, rng.randint(1, 2))
                expected = _by_run(await mem.take_over(chosen, "backup"))
                got = _by_run(await backend.take_over(chosen, "backup"))
                taken.update((r.grant.job, r.grant.slot_ms, r.grant.manual) for r in got if r.grant)
                assert [theirs.result(r, True) for r in got] == [ours.result(r, True) for r in expected], where
                grants += [(e.grant, g.grant) for e, g in zip(expected, got, strict=True) if e.grant and g.grant]
            elif grants:
                m, b = rng.choice(grants)
                if op == "finish":
                    status = rng.choice([RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
                    answers = (await backend.finish(b, _finished(b, status)), await mem.finish(m, _finished(m, status)))
                    # A second finish of a grant this test already finished is a retry whose first answer
                    # was lost: a backend may say True (idempotent) or False, but the record must not change
                    # (the history comparison below checks that).
                    if m.token not in finished:
                        assert answers[0] == answers[1], where
                    finished.add(m.token)
                elif op == "renew":
                    assert await backend.renew([b]) == await mem.renew([m]), where
                else:
                    assert await backend.hand_over(b) == await mem.hand_over(m), where
            assert await backend.marks(jobs) == await mem.marks(jobs), where
            for job in jobs:
                got_runs = [theirs.run(r) for r in await backend.history(job.name, 50)]
                assert got_runs == [ours.run(r) for r in await mem.history(job.name, 50)], where
