"""Steering the fleet: pause and resume (capability ``pause``) and trigger (capability ``trigger``).

A backend with ``pause`` stores a job's pause where every instance reads it
and decides a paused job's slot once, recorded ``paused`` and moving the
mark; one with ``trigger`` stores run requests every instance reads, and
its manual claims pick one runner. A backend without them refuses with
:class:`~anarchon.errors.UnsupportedOperationError` naming the capability.
"""

from __future__ import annotations

import asyncio

import pytest

from anarchon.backend import LeaseBackend, Outcome
from anarchon.context import RunContext
from anarchon.errors import UnsupportedOperationError
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import unique_name
from ._requires import gated
from .testing import eventually

__all__ = ["PauseRefusalTests", "PauseTests", "TriggerRefusalTests", "TriggerTests"]

#: A schedule that never comes due while a test runs, for jobs only run by hand.
_NEVER = "0 0 1 1 *"


@gated("pause")
class PauseTests(SuiteBase):
    """The pause is stored with the job, read by every instance, and decides a paused slot once."""

    async def test_a_pause_is_read_by_every_instance_and_ends_with_resume(self, conformance: Conformance) -> None:
        job = conformance.job("pause")
        a, b = await conformance.instances(2)
        state = await a.backend.pause(job.name, reason="maintenance", by=a.id)
        assert (state.job, state.paused, state.reason, state.by) == (job.name, True, "maintenance", a.id)
        (seen,) = [p for p in await b.backend.pauses() if p.job == job.name]
        assert seen == state, f"another instance reads {seen!r}, not the pause written: {state!r}"
        again = await b.backend.pause(job.name, reason="still", by=b.id)
        assert (again.since_ms, again.reason) == (state.since_ms, "still"), "pausing a paused job moved since_ms"
        ended = await b.backend.resume(job.name, by=b.id)
        assert ended is not None and ended.until_ms is not None and ended.until_ms >= state.since_ms
        assert not ended.paused
        (seen,) = [p for p in await a.backend.pauses() if p.job == job.name]
        assert seen.until_ms == ended.until_ms
        assert await a.backend.resume(job.name, by=a.id) is None, "resume() of a job not paused must answer None"

    async def test_a_paused_slot_is_recorded_paused_once(self, conformance: Conformance) -> None:
        job = conformance.job("paused-once")
        instances = await conformance.instances(3)
        await instances[0].backend.pause(job.name, by=instances[0].id)
        (slot,) = conformance.slots(1)
        for i in instances:
            await i.prepare([job])
        answers = await asyncio.gather(*(i.backend.claim_paused([i.make_claim(job, slot)]) for i in instances))
        outcomes = sorted(str(a[0].outcome) if a[0] is not None else "None" for a in answers)
        assert outcomes == ["lost", "lost", "paused"], f"three paused claims of one slot answered {outcomes}"
        record = await conformance.record(job, slot)
        assert (record.status, record.manual) == (RunStatus.PAUSED, False)
        if isinstance(instances[0].backend, LeaseBackend):
            marks = await instances[0].leases.marks([job])
            assert marks[job.name] == slot, f"a paused slot must move the mark (decided); marks() = {marks}"
        later = await instances[1].claim(job, slot)
        assert later.outcome is Outcome.LOST, f"a plain claim of a slot recorded paused answered {later.outcome}"

    async def test_a_retried_paused_claim_gets_its_answer_again(self, conformance: Conformance) -> None:
        job = conformance.job("paused-retry")
        (a,) = await conformance.instances(1)
        await a.prepare([job])
        await a.backend.pause(job.name, by=a.id)
        claim = a.make_claim(job, conformance.slots(1)[0])
        (first,) = await a.backend.claim_paused([claim])
        (second,) = await a.backend.claim_paused([claim])
        assert first is not None and second is not None
        assert (first.outcome, second.outcome) == (Outcome.PAUSED, Outcome.PAUSED)

    async def test_resume_ends_the_pause_for_later_slots_only(self, conformance: Conformance) -> None:
        job = conformance.job("resumed")
        a, b = await conformance.instances(2)
        await a.prepare([job])
        await b.prepare([job])
        state = await a.backend.pause(job.name, by=a.id)
        ended = await a.backend.resume(job.name, by=a.id)
        assert ended is not None and ended.until_ms is not None
        during, after = state.since_ms, ended.until_ms + 1000
        answers = await b.backend.claim_paused([b.make_claim(job, after), b.make_claim(job, during)])
        assert answers[0] is None, f"a slot after the resume must be claimed as usual, not {answers[0]!r}"
        assert answers[1] is not None and answers[1].outcome is Outcome.PAUSED, (
            f"a slot due during the pause must stay paused after the resume; answered {answers[1]!r}"
        )
        won = await b.claim(job, after)
        assert won.won, f"the first slot after the resume answered {won.outcome}"

    async def test_a_decided_slot_is_not_recorded_again(self, conformance: Conformance) -> None:
        job = conformance.job("decided")
        a, b = await conformance.instances(2)
        (slot,) = conformance.slots(1)
        assert (await a.claim(job, slot)).won
        await b.backend.pause(job.name, by=b.id)
        (answer,) = await b.backend.claim_paused([b.make_claim(job, slot)])
        assert answer is not None and answer.outcome is Outcome.LOST
        assert (await conformance.record(job, slot)).status is RunStatus.RUNNING

    async def test_manual_claims_are_not_paused(self, conformance: Conformance) -> None:
        job = conformance.job("manual")
        (a,) = await conformance.instances(1)
        await a.prepare([job])
        await a.backend.pause(job.name, by=a.id)
        (answer,) = await a.backend.claim_paused([a.make_claim(job, conformance.slots(1)[0], manual=True)])
        assert answer is None, "a manual claim (run_now, trigger) must not be paused"

    async def test_a_pause_outlives_every_instance(self, conformance: Conformance) -> None:
        job = conformance.job("outlive")
        (a,) = await conformance.instances(1)
        await a.backend.pause(job.name, reason="kept", by=a.id)
        await a.die()
        (fresh,) = await conformance.instances(1)
        (seen,) = [p for p in await fresh.backend.pauses() if p.job == job.name]
        assert (seen.paused, seen.reason) == (True, "kept")

    async def test_a_scheduler_records_a_paused_jobs_slots_paused(self, conformance: Conformance) -> None:
        ran: list[int] = []

        async def tick(ctx: RunContext) -> None:
            ran.append(ctx.slot_ms)

        name = unique_name("sched-pause")
        first = await conformance.scheduler()
        state = await first.pause(name, reason="test")
        other = await conformance.scheduler()  # started after the pause: it reads it before its first claim
        for scheduler in (first, other):
            scheduler.add(name, "* * * * * *", tick, jitter_ms=0)

        async def paused_twice() -> bool:
            return sum(r.status is RunStatus.PAUSED for r in await first.history(name)) >= 2

        await eventually(paused_twice, timeout_s=15, what="two slots recorded paused")
        assert ran == [], f"a job paused before it was added ran slots {ran}"
        ended = await other.resume(name)
        assert ended is not None and ended.until_ms is not None
        until = ended.until_ms

        async def ran_after() -> bool:
            return any(slot > until for slot in ran)

        await eventually(ran_after, timeout_s=15, what="a slot after the resume run")
        runs = await first.history(name)
        assert all(r.status is RunStatus.PAUSED for r in runs if state.since_ms <= r.slot_ms <= until)
        assert all(slot > until for slot in ran), f"slots of the pause ran after the resume: {ran}"


@gated(pause=False)
class PauseRefusalTests(SuiteBase):
    """Without ``pause``, pausing is refused with the capability named, never ignored."""

    async def test_pause_is_refused_naming_the_capability(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        with pytest.raises(UnsupportedOperationError, match="'pause'") as caught:
            await a.backend.pause(unique_name("refuse"), by=a.id)
        assert caught.value.capability == "pause"
        scheduler = await conformance.scheduler()
        with pytest.raises(UnsupportedOperationError, match="Redis, PostgreSQL or SQLite"):
            await scheduler.pause(unique_name("refuse"))
        with pytest.raises(UnsupportedOperationError):
            await scheduler.resume(unique_name("refuse"))


@gated("trigger")
class TriggerTests(SuiteBase):
    """A run request is read by every instance; its manual claim picks one runner."""

    async def test_a_request_is_read_by_every_instance_until_done(self, conformance: Conformance) -> None:
        name = unique_name("request")
        a, b = await conformance.instances(2)
        first = await a.backend.request_run(name, by=a.id)
        second = await a.backend.request_run(name, by=a.id)
        assert first.slot_ms != second.slot_ms, "two requests of one job must have slots of their own"
        seen = [r for r in await b.backend.run_requests() if r.job == name]
        assert seen == sorted([first, second], key=lambda r: r.slot_ms)
        await b.backend.run_requests_done([first])
        assert [r for r in await a.backend.run_requests() if r.job == name] == [second]

    async def test_a_trigger_runs_once_among_instances(self, conformance: Conformance) -> None:
        ran: list[RunContext] = []

        async def job(ctx: RunContext) -> None:
            ran.append(ctx)

        name = unique_name("trigger")
        schedulers = [await conformance.scheduler() for _ in range(3)]
        for scheduler in schedulers:
            scheduler.add(name, _NEVER, job)
        request = await schedulers[0].trigger(name)
        run = await schedulers[0].trigger_result(request, timeout_s=30)
        assert (run.status, run.manual, run.slot_ms) == (RunStatus.SUCCEEDED, True, request.slot_ms)
        instances = {s.instance_id for s in schedulers}
        assert run.instance in instances

        async def forgotten() -> bool:
            backend = schedulers[1].backend
            return not [r for r in await backend.run_requests() if r.job == name]

        await eventually(forgotten, timeout_s=15, what="the request forgotten once its claim was decided")
        assert [c.slot_ms for c in ran] == [request.slot_ms], f"one trigger ran {len(ran)} times"
        assert ran[0].manual


@gated(trigger=False)
class TriggerRefusalTests(SuiteBase):
    """Without ``trigger``, a trigger is refused with the capability named."""

    async def test_trigger_is_refused_naming_the_capability(self, conformance: Conformance) -> None:
        scheduler = await conformance.scheduler()
        with pytest.raises(UnsupportedOperationError, match="'trigger'") as caught:
            await scheduler.trigger(unique_name("refuse"))
        assert caught.value.capability == "trigger"
