"""History: the record's fields, order, bounds, TTL, ``last_run`` and a dead runner's record."""

from __future__ import annotations

import dataclasses

import pytest

from anarchon.run import Run, RunStatus, ms_to_datetime

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import finished_run, now_ms
from ._requires import requires
from .testing import eventually

__all__ = ["HISTORY_SLACK", "HistoryTests"]

#: ``history_size`` promises *at least* that many runs; the suite also
#: requires that history is bounded: after ``3 * size`` runs a backend keeps
#: at most ``HISTORY_SLACK * size``. Twice the size leaves room for stores
#: that trim in batches or by segment, and still catches one that never trims.
HISTORY_SLACK = 2


def _same_record(got: Run, expected: Run) -> None:
    for field in dataclasses.fields(Run):
        mine, theirs = getattr(got, field.name), getattr(expected, field.name)
        assert mine == theirs, (
            f"history record of {expected.job}@{expected.slot_ms}: {field.name} is {mine!r}, expected {theirs!r}"
        )


class HistoryTests(SuiteBase):
    """What history keeps and returns. Every backend; TTL per capability."""

    @pytest.mark.asyncio
    async def test_a_won_claim_is_recorded_as_running(self, conformance: Conformance) -> None:
        job = conformance.job("hist", overlap="allow")
        (a,) = await conformance.instances(1)
        (slot,) = conformance.slots(1)
        started = now_ms()
        result = await a.claim(job, slot, clock_ms=started)
        assert result.won
        assert result.grant is not None
        grant = result.grant
        if conformance.lease:
            assert isinstance(grant.fencing, int), (
                f"a lease backend's grant carries fencing {grant.fencing!r}, not an int"
            )
        else:
            assert grant.fencing is None, f"a claim backend's grant carries fencing {grant.fencing!r}; it has no lease"
        expected = Run(
            job=job.name,
            slot_ms=slot,
            status=RunStatus.RUNNING,
            instance=a.id,
            attempt=1,
            fencing=grant.fencing,
            started_at=ms_to_datetime(started),
        )
        _same_record(await conformance.record(job, slot), expected)
        last = await a.backend.last_run(job.name)
        assert last is not None
        _same_record(last, expected)

    @pytest.mark.asyncio
    async def test_finished_records_keep_every_field(self, conformance: Conformance) -> None:
        """What finish() is given comes back from history(): status, error, times, flags."""
        job = conformance.job("fields", overlap="allow")
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        runs: list[Run] = []
        for instance, slot, status, error in (
            (a, s1, RunStatus.SUCCEEDED, None),
            (b, s2, RunStatus.FAILED, "ValueError: the report's source was empty"),
        ):
            result = await instance.claim(job, slot)
            assert result.grant is not None
            run = finished_run(result.grant, status, error=error, finished_ms=result.grant.started_at_ms + 1234)
            assert await instance.backend.finish(result.grant, run), "finish() by the owner returned False"
            runs.append(run)
        manual = await a.claim(job, now_ms(), manual=True)
        assert manual.won
        assert manual.grant is not None
        assert manual.grant.manual
        manual_run = finished_run(manual.grant)
        assert await a.backend.finish(manual.grant, manual_run)
        for run in [*runs, manual_run]:
            _same_record(await conformance.record(job, run.slot_ms, manual=run.manual), run)
        if not conformance.lease:
            assert all(r.fencing is None for r in await conformance.history(job))

    @pytest.mark.asyncio
    async def test_history_is_newest_slot_first(self, conformance: Conformance) -> None:
        job = conformance.job("order", overlap="allow")
        (a,) = await conformance.instances(1)
        slots = conformance.slots(5)
        grants = []
        for slot in slots:
            result = await a.claim(job, slot)
            assert result.grant is not None
            grants.append(result.grant)
        for grant in reversed(grants):  # finishing order must not change the order
            assert await a.finish(grant)
        newest_first = sorted(slots, reverse=True)
        assert [r.slot_ms for r in await conformance.history(job)] == newest_first
        assert [r.slot_ms for r in await a.backend.history(job.name, limit=2)] == newest_first[:2]
        last = await a.backend.last_run(job.name)
        assert last is not None
        assert (last.slot_ms, last.status) == (newest_first[0], RunStatus.SUCCEEDED)

    @pytest.mark.asyncio
    async def test_a_job_that_never_ran_has_no_history(self, conformance: Conformance) -> None:
        job = conformance.job("never")
        (a,) = await conformance.instances(1)
        assert list(await a.backend.history(job.name)) == []
        assert await a.backend.last_run(job.name) is None

    @pytest.mark.asyncio
    async def test_history_size_is_kept_and_bounded(self, conformance: Conformance) -> None:
        size = 10
        job = conformance.job("size", overlap="allow", history_size=size)
        (a,) = await conformance.instances(1)
        slots = conformance.slots(3 * size)
        for slot in slots:
            result = await a.claim(job, slot)
            assert result.grant is not None
            assert await a.finish(result.grant)
        kept = await conformance.history(job)
        assert len(kept) >= size, f"history_size={size} but only {len(kept)} runs kept after {len(slots)}"
        assert len(kept) <= HISTORY_SLACK * size, (
            f"history_size={size}: {len(kept)} runs kept after {len(slots)}; history must be trimmed "
            f"(the suite allows up to {HISTORY_SLACK}x the size)"
        )
        assert [r.slot_ms for r in kept[:size]] == sorted(slots, reverse=True)[:size], "the newest runs must be kept"

    @pytest.mark.asyncio
    @requires("history_ttl")
    async def test_history_ttl_drops_old_runs(self, conformance: Conformance) -> None:
        ttl = 1000
        job = conformance.job("ttl", overlap="allow", history_ttl_ms=ttl)
        (a,) = await conformance.instances(1)
        old = now_ms() // 1000 * 1000 - 60_000
        result = await a.claim(job, old, clock_ms=old)
        assert result.grant is not None
        assert await a.backend.finish(result.grant, finished_run(result.grant, finished_ms=old + 5))
        newest = [old]

        async def old_run_dropped() -> bool:
            newest.append(max(newest[-1] + 1000, now_ms() // 1000 * 1000))
            claimed = await a.claim(job, newest[-1])
            assert claimed.grant is not None
            assert await a.finish(claimed.grant)
            return old not in {r.slot_ms for r in await conformance.history(job)}

        await eventually(
            old_run_dropped, timeout_s=10 * ttl / 1000, what=f"a run older than history_ttl_ms={ttl} dropped"
        )
        assert (await conformance.history(job))[0].slot_ms == newest[-1], "the newest run was dropped with the old one"

    @pytest.mark.asyncio
    @requires(lease=False)
    async def test_a_dead_runners_record_stays_running(self, conformance: Conformance) -> None:
        """A claim backend cannot tell a runner died: its record keeps ``running``."""
        job = conformance.job("dead", overlap="allow")
        a, b = await conformance.instances(2)
        s1, s2 = conformance.slots(2)
        assert (await a.claim(job, s1)).won
        await a.die()
        result = await b.claim(job, s2)
        assert result.grant is not None
        assert await b.finish(result.grant)
        dead = await conformance.record(job, s1)
        assert (dead.status, dead.instance) == (RunStatus.RUNNING, a.id), f"a dead runner's record became {dead!r}"
        assert (await conformance.record(job, s2)).status is RunStatus.SUCCEEDED
