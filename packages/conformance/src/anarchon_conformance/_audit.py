"""The audit trail (capability ``audit``): entries appended, never replaced, read newest first.

A backend with ``audit`` gives every appended entry an id above every id
before it, also when instances append at once; keeps each text as given;
reads them newest first, a page at a time and by job. Through the scheduler
and :class:`~anarchon.Schedules`, every pause, resume, trigger, backfill and
schedule change is recorded with who, when and why; a backend without it
refuses the calls naming the capability, and the actions still work.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from anarchon.audit import read_audit
from anarchon.context import RunContext
from anarchon.errors import UnsupportedOperationError
from anarchon.run import ms_to_datetime

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import unique_name
from ._requires import gated, requires

__all__ = ["AuditRefusalTests", "AuditTests"]

#: A schedule that never comes due while a test runs, for jobs only run by hand.
_NEVER = "0 0 1 1 *"


def _entry(n: int) -> str:
    return f'{{"at_ms":{1_700_000_000_000 + n},"by":"t","action":"pause","job":"j","reason":"{n}","detail":{{}}}}'


@gated("audit")
class AuditTests(SuiteBase):
    """The contract of :meth:`~anarchon.backend.Backend.audit_append` and ``audit_entries``, and who records."""

    async def test_entries_are_appended_never_replaced_and_read_newest_first(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        job, other = unique_name("audit"), unique_name("audit")
        ids = []
        for n in range(5):
            ids.append(await (a if n % 2 else b).backend.audit_append(job, _entry(n)))
            await a.backend.audit_append(other, _entry(100 + n))
        assert ids == sorted(ids) and len(set(ids)) == 5, f"ids must grow with every append: {ids}"
        mine = await b.backend.audit_entries(limit=100, job=job)
        expected = [(i, _entry(n)) for n, i in reversed(list(enumerate(ids)))]
        assert mine == expected, "not newest first, or a text changed"
        assert await a.backend.audit_entries(limit=2, job=job) == mine[:2], "limit must give the newest"
        assert await a.backend.audit_entries(limit=2, job=job, before_id=ids[3]) == mine[2:4], "before_id pages"
        assert await a.backend.audit_entries(limit=9, job=job, before_id=ids[0]) == []
        every = await a.backend.audit_entries(limit=10)
        assert len(every) == 10 and [i for i, _ in every] == sorted((i for i, _ in every), reverse=True)
        assert {t for _, t in every} == {_entry(n) for n in (*range(5), *range(100, 105))}

    async def test_racing_appends_get_distinct_ids(self, conformance: Conformance) -> None:
        fleet = await conformance.instances(4)
        job = unique_name("audit-race")
        got = await asyncio.gather(*(x.backend.audit_append(job, _entry(n)) for n in range(5) for x in fleet))
        assert len(set(got)) == 20, f"20 appends at once got ids {sorted(got)}"
        read = await fleet[0].backend.audit_entries(limit=50, job=job)
        assert sorted(i for i, _ in read) == sorted(got), "an entry appended in a race is missing"

    async def test_a_corrupt_entry_is_skipped_and_reported(
        self, conformance: Conformance, caplog: pytest.LogCaptureFixture
    ) -> None:
        (a,) = await conformance.instances(1)
        job = unique_name("audit-bad")
        good = await a.backend.audit_append(job, _entry(1))
        for text in ("not json {", "[1, 2]", '{"at_ms": "soon", "by": 1}', '{"at_ms": 1e400}'):
            await a.backend.audit_append(job, text)
        newest = await a.backend.audit_append(job, _entry(2))
        with caplog.at_level(logging.WARNING, logger="anarchon.audit"):
            entries = await read_audit(a.backend, limit=2, job=job)
        assert [(e.id, e.reason) for e in entries] == [(newest, "2"), (good, "1")], "a bad entry stopped the page"
        assert "skipped" in caplog.text, "a skipped entry must be reported"

    @requires("pause", "trigger")
    async def test_pause_resume_and_trigger_are_recorded_with_who_and_why(self, conformance: Conformance) -> None:
        first, other = await conformance.scheduler(), await conformance.scheduler()
        name = unique_name("audit-steer")
        await first.pause(name, reason="migration", by="alice")
        await other.pause(name, reason="still migrating", by="bob")
        await other.resume(name, reason="done", by="carol")
        request = await first.trigger(name, reason="rerun", by="dave")
        await first.backend.run_requests_done([request])  # no instance has the job: withdraw the request
        entries = await read_audit(other.backend, limit=10, job=name)
        seen = [(e.action, e.by, e.reason, e.job) for e in entries]
        assert seen == [
            ("trigger", "dave", "rerun", name),
            ("resume", "carol", "done", name),
            ("pause", "bob", "still migrating", name),
            ("pause", "alice", "migration", name),
        ], f"two pauses must be two entries, each with its own who and why: {seen}"
        assert entries[0].detail.get("slot_ms") == request.slot_ms
        now = await first.backend.now_ms()
        assert all(now - 60_000 <= e.at_ms <= now + 1000 for e in entries), "at_ms is not the backend's now"
        (state,) = [p for p in await other.pauses() if p.job == name]
        assert state.by == "bob", f"the pause records who paused, not an instance id: {state.by!r}"
        await first.pause(name)
        assert (await read_audit(first.backend, limit=1, job=name))[0].by.count("@") == 1, "default by is user@host"

    @requires("schedules")
    async def test_schedule_changes_are_recorded(self, conformance: Conformance) -> None:
        scheduler = await conformance.scheduler()
        admin = scheduler.schedules
        name = unique_name("audit-sched")
        added = await admin.add(name, task="t", cron="0 3 * * *", reason="new report", by="erin", force=True)
        await admin.set(name, cron="0 4 * * *", reason="later", by="frank")
        await admin.remove(name, reason="retired", by="erin")
        entries = await read_audit(scheduler.backend, limit=10, job=name)
        seen = [(e.action, e.by, e.reason) for e in entries]
        assert seen == [
            ("schedule-remove", "erin", "retired"),
            ("schedule-set", "frank", "later"),
            ("schedule-add", "erin", "new report"),
        ], seen
        assert entries[2].detail["revision"] == added.revision
        assert entries[1].detail["changes"] == {"cron": ["0 3 * * *", "0 4 * * *"]}

    @requires("backfill")
    async def test_a_backfill_is_recorded_with_what_it_ran(self, conformance: Conformance) -> None:
        async def job(ctx: RunContext) -> None:
            pass

        scheduler = await conformance.scheduler()
        name = unique_name("audit-bf")
        scheduler.add(name, "* * * * *", job)
        end = ms_to_datetime(conformance.slots(1)[0] // 60_000 * 60_000 - 60_000)
        await scheduler.backfill(name, end - timedelta(minutes=2), end, dry_run=True)
        summary = await scheduler.backfill(name, end - timedelta(minutes=2), end, reason="outage", by="gina")
        (entry,) = await read_audit(scheduler.backend, limit=10, job=name)
        assert (entry.action, entry.by, entry.reason) == ("backfill", "gina", "outage"), "a dry run is not recorded"
        assert entry.detail["ran"] == len(summary.ran) == 3


@gated(audit=False)
class AuditRefusalTests(SuiteBase):
    """Without ``audit``, the trail is refused naming the capability, and nothing else fails for it."""

    async def test_the_audit_trail_is_refused_naming_the_capability(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        with pytest.raises(UnsupportedOperationError, match="'audit'") as caught:
            await a.backend.audit_append(unique_name("refuse"), "{}")
        assert caught.value.capability == "audit"
        with pytest.raises(UnsupportedOperationError):
            await a.backend.audit_entries(limit=1)
        if a.backend.capabilities.pause:
            scheduler = await conformance.scheduler()
            state = await scheduler.pause(unique_name("refuse"), reason="no trail", by="hana")
            assert state.paused, "a pause must work where no trail is kept"
