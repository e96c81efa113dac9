"""Every attempt of a slot: a take-over keeps the attempt that died in the record it rewrites.

A slot has one record, and a take-over rewrites it for the new runner. Before
``Run.earlier``, history showed only the last attempt: an operator could not
see that a runner died mid-run, nor which one. Needs ``capabilities.attempts``
(and the lease tier it extends). Leases are waited out on the backend's clock.
"""

from __future__ import annotations

from anarchon.backend import ClaimResult, Grant, Outcome
from anarchon.job import Job
from anarchon.run import Attempt, RunStatus, datetime_to_ms

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._requires import gated

__all__ = ["AttemptTests"]

#: The lease of these tests: short, since each waits one or two out.
LEASE_MS = 300


async def _won(instance: Instance, job: Job, slot_ms: int) -> Grant:
    result = await instance.claim(job, slot_ms)
    assert result.won and result.grant is not None, f"{instance.id} claiming {slot_ms}: {result.outcome}"
    return result.grant


def _taken(results: list[ClaimResult]) -> Grant:
    grants = [r.grant for r in results if r.outcome is Outcome.WON and r.grant is not None]
    assert len(grants) == 1, f"take_over() answered {results!r}, not one WON"
    return grants[0]


def _as_attempt(grant: Grant) -> tuple[int, str, int | None, int]:
    return (grant.attempt, grant.instance, grant.fencing, grant.started_at_ms)


def _seen(attempt: Attempt) -> tuple[int, str, int | None, int]:
    assert attempt.started_at is not None, f"{attempt!r} has no start time"
    return (attempt.attempt, attempt.instance, attempt.fencing, datetime_to_ms(attempt.started_at))


def _close(seen: list[tuple[int, str, int | None, int]], want: list[tuple[int, str, int | None, int]]) -> bool:
    """Equal, start times within 1 ms (a store may keep microseconds, the grant milliseconds)."""
    return len(seen) == len(want) and all(
        s[:3] == w[:3] and abs(s[3] - w[3]) <= 1 for s, w in zip(seen, want, strict=True)
    )


@gated("lease", "attempts")
class AttemptTests(SuiteBase):
    """The attempts of a taken-over slot, kept in its record and read back by history."""

    async def _expire(self, conformance: Conformance) -> None:
        await conformance.wait_past(await conformance.backend_now_ms() + LEASE_MS)

    async def test_a_take_over_keeps_the_attempt_that_died(self, conformance: Conformance) -> None:
        job = conformance.job("attempts", lease_ms=LEASE_MS, max_takeovers=2)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        await a.die()
        await self._expire(conformance)
        second = _taken(await b.take_over(job))
        running = await conformance.record(job, slot)
        seen = [_seen(x) for x in running.earlier]
        assert _close(seen, [_as_attempt(first)]), f"while attempt 2 runs, earlier is {seen}, not attempt 1 by {a.id}"
        assert await b.finish(second)
        done = await conformance.record(job, slot)
        assert (done.status, done.attempt, done.instance) == (RunStatus.SUCCEEDED, 2, b.id)
        assert done.earlier == running.earlier, f"finish() changed the earlier attempts: {done.earlier!r}"
        (read,) = [r for r in await b.backend.history(job.name) if r.slot_ms == slot]
        assert read.earlier == done.earlier, "history() does not return the earlier attempts"

    async def test_every_attempt_is_kept_in_order_also_when_the_slot_is_lost(self, conformance: Conformance) -> None:
        job = conformance.job("attempts", lease_ms=LEASE_MS, max_takeovers=2)
        a, b, c, d = await conformance.instances(4)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        await self._expire(conformance)
        second = _taken(await b.take_over(job))
        await self._expire(conformance)
        third = _taken(await c.take_over(job))
        assert third.attempt == 3
        await self._expire(conformance)
        assert await d.take_over(job) == [], "a run was taken over after max_takeovers=2"
        lost = await conformance.record(job, slot)
        seen = [_seen(x) for x in lost.earlier]
        assert lost.status is RunStatus.ABANDONED, f"the record is {lost!r}"
        assert _close(seen, [_as_attempt(first), _as_attempt(second)]), f"earlier is {seen}"
        assert (lost.attempt, lost.instance, lost.fencing) == (3, c.id, third.fencing)

    async def test_a_hand_over_is_no_earlier_attempt(self, conformance: Conformance) -> None:
        job = conformance.job("attempts", lease_ms=30_000)
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        first = await _won(a, job, slot)
        assert await a.leases.hand_over(first)
        second = _taken(await b.take_over(job))
        assert await b.finish(second)
        record = await conformance.record(job, slot)
        assert (record.attempt, record.instance, record.earlier) == (1, b.id, ()), f"the record is {record!r}"

    async def test_a_slot_never_taken_over_has_no_earlier_attempt(self, conformance: Conformance) -> None:
        job = conformance.job("attempts", lease_ms=LEASE_MS)
        (a,) = await conformance.instances(1)
        (slot,) = conformance.slots(1)
        assert await a.finish(await _won(a, job, slot))
        assert (await conformance.record(job, slot)).earlier == ()
