"""Stored schedules (capability ``schedules``): records kept by revision, changes that never lose one another.

A backend with ``schedules`` stores each schedule's record under one counter
shared by every change, refuses a change made over another (the revision
check and the write are one step, also when two instances race), keeps a
tombstone so every instance sees a removal, and logs each change. A backend
without it refuses the calls naming the capability.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest

from anarchon.backend import LeaseBackend, Outcome
from anarchon.context import RunContext
from anarchon.errors import ScheduleConflictError, UnsupportedOperationError
from anarchon.scheduler import Scheduler
from anarchon.schedules import LOG_KEEP

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import unique_name
from ._requires import gated
from .testing import eventually

__all__ = ["ScheduleStoreRefusalTests", "ScheduleStoreTests", "StoredScheduleFleetTests"]

#: The issue's bound: every live instance runs a change from its next slot within this of the change.
PROPAGATION_S = 2.0


def _record(cron: str) -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


@gated("schedules")
class ScheduleStoreTests(SuiteBase):
    """The contract of :meth:`~anarchon.backend.Backend.put_schedule` and its readers."""

    async def test_a_schedule_is_stored_changed_and_removed_by_revision(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        name = unique_name("sched")
        before = await b.backend.schedules_revision()
        first = await a.backend.put_schedule(name, _record("0 * * * *"), expect=0, change='{"op":"add"}')
        assert first > before, f"revision {first} is not above the counter {before} read before"
        assert await b.backend.schedule(name) == (_record("0 * * * *"), first)
        assert await b.backend.schedules_revision() >= first
        assert (name, _record("0 * * * *"), first) in await b.backend.schedules_since(first - 1)
        assert name in {n for n, _, _ in await b.backend.schedules_since(0)}

        second = await b.backend.put_schedule(name, _record("5 * * * *"), expect=first, change='{"op":"set"}')
        assert second > first
        assert await a.backend.schedule(name) == (_record("5 * * * *"), second)
        changed = [row for row in await a.backend.schedules_since(first) if row[0] == name]
        assert changed == [(name, _record("5 * * * *"), second)], "since() must give the last version once"

        gone = await a.backend.put_schedule(name, None, expect=second, change='{"op":"remove"}')
        assert gone > second
        assert await b.backend.schedule(name) is None, "a removed schedule is still read"
        assert [row for row in await b.backend.schedules_since(second) if row[0] == name] == [(name, None, gone)]
        assert name not in {n for n, _, _ in await b.backend.schedules_since(0)}, "since(0) gave a tombstone"
        assert [rev for rev, _ in await b.backend.schedule_log(name)] == [first, second, gone]

        again = await b.backend.put_schedule(name, _record("9 * * * *"), expect=0, change='{"op":"add"}')
        assert await a.backend.schedule(name) == (_record("9 * * * *"), again), "a removed name cannot be added again"

    async def test_a_change_over_another_is_refused_and_changes_nothing(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        name = unique_name("sched")
        rev = await a.backend.put_schedule(name, _record("0 * * * *"), expect=0, change='{"op":"add"}')
        counter = await a.backend.schedules_revision()
        with pytest.raises(ScheduleConflictError) as exists:
            await b.backend.put_schedule(name, _record("1 * * * *"), expect=0, change='{"op":"add"}')
        assert exists.value.current == rev
        with pytest.raises(ScheduleConflictError) as stale:
            await b.backend.put_schedule(name, _record("1 * * * *"), expect=rev + 1000, change='{"op":"set"}')
        assert (stale.value.expected, stale.value.current) == (rev + 1000, rev)
        missing = unique_name("sched")
        with pytest.raises(ScheduleConflictError) as absent:
            await b.backend.put_schedule(missing, None, expect=None, change='{"op":"remove"}')
        assert absent.value.current == 0
        with pytest.raises(ScheduleConflictError):
            await b.backend.put_schedule(missing, _record("1 * * * *"), expect=3, change='{"op":"set"}')
        assert await a.backend.schedule(name) == (_record("0 * * * *"), rev), "a refused change was written"
        assert await a.backend.schedule(missing) is None
        assert await a.backend.schedules_revision() == counter, "a refused change moved the counter"
        assert [r for r, _ in await a.backend.schedule_log(name)] == [rev], "a refused change was logged"
        assert await a.backend.schedule_log(missing) == []

    async def test_racing_changes_get_distinct_revisions_and_one_wins_each_conflict(
        self, conformance: Conformance
    ) -> None:
        a, b = await conformance.instances(2)
        names = [unique_name("race") for _ in range(10)]
        revs = await asyncio.gather(
            *(
                inst.backend.put_schedule(n, _record("0 * * * *"), expect=0, change="{}")
                for n in names
                for inst in (a, b)
            ),
            return_exceptions=True,
        )
        won = [r for r in revs if isinstance(r, int)]
        refused = [r for r in revs if isinstance(r, ScheduleConflictError)]
        assert len(won) == len(names) and len(refused) == len(names), f"each name must be added once: {revs!r}"
        assert len(set(won)) == len(won), f"two changes got one revision: {sorted(won)}"
        assert await a.backend.schedules_revision() >= max(won)
        target = names[0]
        (_, rev) = await a.backend.schedule(target) or ("", 0)
        outcomes = await asyncio.gather(
            *(
                inst.backend.put_schedule(target, _record(f"{i} * * * *"), expect=rev, change="{}")
                for i, inst in enumerate((a, b, a, b))
            ),
            return_exceptions=True,
        )
        assert sum(isinstance(o, int) for o in outcomes) == 1, (
            f"not exactly one change over revision {rev}: {outcomes!r}"
        )
        assert all(isinstance(o, (int, ScheduleConflictError)) for o in outcomes), outcomes

    async def test_since_gives_changes_in_revision_order(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        start = await a.backend.schedules_revision()
        x, y = unique_name("order"), unique_name("order")
        r1 = await a.backend.put_schedule(x, _record("0 * * * *"), expect=0, change="{}")
        r2 = await a.backend.put_schedule(y, _record("0 * * * *"), expect=0, change="{}")
        r3 = await a.backend.put_schedule(x, _record("1 * * * *"), expect=r1, change="{}")
        rows = [row for row in await a.backend.schedules_since(start) if row[0] in (x, y)]
        assert rows == [(y, _record("0 * * * *"), r2), (x, _record("1 * * * *"), r3)]
        revisions = [rev for _, _, rev in await a.backend.schedules_since(start)]
        assert revisions == sorted(revisions), "since() must be in revision order"
        assert await a.backend.schedules_since(await a.backend.schedules_revision()) == []

    async def test_the_log_keeps_the_last_changes(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        name = unique_name("log")
        rev = await a.backend.put_schedule(name, _record("0 * * * *"), expect=0, change='{"n":0}')
        for i in range(1, LOG_KEEP + 5):
            rev = await a.backend.put_schedule(name, _record("0 * * * *"), expect=rev, change=f'{{"n":{i}}}')
        log = await a.backend.schedule_log(name)
        assert len(log) == LOG_KEEP, f"the log keeps {len(log)} changes, not the last {LOG_KEEP}"
        assert log[-1] == (rev, f'{{"n":{LOG_KEEP + 4}}}') and log[0][1] == '{"n":5}', (
            "not the last changes, oldest first"
        )

    async def test_a_removed_schedule_leaves_nothing_once_its_tombstone_goes(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        gone, busy = conformance.job("gone"), conformance.job("busy")
        for job in (gone, busy):
            await a.backend.put_schedule(job.name, _record("* * * * * *"), expect=0, change='{"op":"add"}')
        first, second, later = conformance.slots(3)
        won = await a.claim(gone, first)
        assert won.outcome is Outcome.WON and won.grant is not None
        assert await a.finish(won.grant)
        held = await a.claim(busy, second)  # running, its lease unexpired: the name is in use
        assert held.outcome is Outcome.WON and held.grant is not None
        if a.backend.capabilities.pause:
            await a.backend.pause(gone.name, reason="before the removal", by="conformance")
        for job in (gone, busy):
            found = await a.backend.schedule(job.name)
            assert found is not None
            await a.backend.put_schedule(job.name, None, expect=found[1], change='{"op":"remove"}')
        await conformance.wait_past(await conformance.backend_now_ms())

        assert await b.backend.forget_removed(3_600_000) == [], "a tombstone younger than asked was forgotten"
        forgotten = await b.backend.forget_removed(0)
        leases = isinstance(a.backend, LeaseBackend)  # the claim tier has no lease: a run in flight holds nothing
        assert gone.name in forgotten, f"{gone.name} was not forgotten: {forgotten}"
        assert (busy.name in forgotten) is not leases, f"a run holding a lease: {busy.name} in {forgotten}"
        assert await b.backend.schedule_log(gone.name) == [], "the change log outlived the tombstone"
        assert await b.backend.schedule_log(busy.name) == [], "the change log outlived the tombstone"
        assert await conformance.history(gone) == [], "the run history of a forgotten schedule is still kept"
        if leases:
            assert [r.slot_ms for r in await conformance.history(busy)] == [second], "a job in use lost its history"
        if a.backend.capabilities.pause:
            assert gone.name not in {p.job for p in await b.backend.pauses() if p.paused}, "its pause is kept"
        assert await b.backend.forget_removed(0) == [], "forgotten twice"

        again = await b.claim(gone, later)  # the name is free again, as if new
        assert again.outcome is Outcome.WON and again.grant is not None
        if leases:
            assert won.grant.fencing is not None and again.grant.fencing is not None
            assert again.grant.fencing > won.grant.fencing, "a forgotten job's tokens fell"
            assert await b.finish(again.grant)
            assert await a.finish(held.grant)


@gated("schedules")
class StoredScheduleFleetTests(SuiteBase):
    """Three instances run a stored schedule once per slot and follow each change within a poll."""

    async def test_three_instances_follow_add_change_and_removal_slot_by_slot(self, conformance: Conformance) -> None:
        task, name = unique_name("task"), unique_name("tenant")
        runs: list[tuple[str, int, object, str]] = []  # (instance, slot, tenant, time zone)

        def member(s: Scheduler) -> None:
            def report(ctx: RunContext, tenant: int) -> None:
                runs.append((s.instance_id, ctx.slot_ms, tenant, ctx.job.timezone))

            s.task(report, name=task)

        fleet = []
        for _ in range(3):
            s = await conformance.scheduler(start=False)
            member(s)
            await s.start()
            fleet.append(s)
        bystander = await conformance.scheduler()  # without the task: must never run the schedule
        admin = fleet[0].schedules
        await admin.add(name, task=task, cron="* * * * * *", kwargs={"tenant": 1}, options={"jitter_ms": 0})
        added_ms = _now_ms()
        await eventually(lambda: len(runs) >= 3, timeout_s=PROPAGATION_S + 4, what="three runs of a new schedule")
        await admin.set(name, cron="*/2 * * * * *", kwargs={"tenant": 2}, timezone="Asia/Kolkata")
        changed_ms = _now_ms()
        await asyncio.sleep(PROPAGATION_S + 4.5)
        await admin.remove(name)
        removed_ms = _now_ms()
        await asyncio.sleep(PROPAGATION_S + 1.5)
        for s in [*fleet, bystander]:
            await s.stop()

        slots = Counter(slot for _, slot, _, _ in runs)
        assert max(slots.values()) == 1, f"slots ran twice: {[k for k, n in slots.items() if n > 1]}"
        assert bystander.instance_id not in {i for i, _, _, _ in runs}, "an instance without the task ran it"
        first = (added_ms + int(PROPAGATION_S * 1000)) // 1000 + 1
        before = {slot for slot, _ in [(r[1], r[2]) for r in runs] if slot < changed_ms}
        missing = [ms for ms in range(first * 1000, changed_ms - 1000, 1000) if ms not in before]
        assert not missing, f"slots {missing} of the new schedule did not run"
        settle = changed_ms + int(PROPAGATION_S * 1000)
        after = [(slot, tenant, tz) for _, slot, tenant, tz in runs if slot > settle]
        old = [a for a in after if a[0] % 2000 or a[1] != 2 or a[2] != "Asia/Kolkata"]
        assert not old, f"runs of the old definition after the change was seen: {old}"
        expected = range((settle // 2000 + 1) * 2000, removed_ms - 2000, 2000)
        missed = [ms for ms in expected if ms not in {a[0] for a in after}]
        assert not missed, f"slots {missed} of the changed schedule did not run"
        late = [slot for _, slot, _, _ in runs if slot > removed_ms + PROPAGATION_S * 1000]
        assert not late, f"slots {late} ran after the removal"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@gated(schedules=False)
class ScheduleStoreRefusalTests(SuiteBase):
    """Without ``schedules`` the calls are refused naming the capability."""

    async def test_stored_schedules_are_refused_naming_the_capability(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        with pytest.raises(UnsupportedOperationError, match="'schedules'") as caught:
            await a.backend.put_schedule("x", "{}", expect=0, change="{}")
        assert caught.value.capability == "schedules"
        for call in (a.backend.schedules_revision(), a.backend.schedules_since(0), a.backend.schedule("x")):
            with pytest.raises(UnsupportedOperationError):
                await call
