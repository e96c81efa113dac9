"""What an operator sees: run lines with their facts as fields, a readable INFO log at scale, the hooks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from anarchon import AnarchonError, Grant, Job, MemoryBackend, MemoryStore, RunContext, Scheduler, hookimpl
from anarchon._runlog import INFO_LINES_PER_SECOND
from anarchon_conformance import eventually


class Events:
    """Every hook this file checks, as (hook, facts) pairs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def named(self, hook: str) -> list[dict[str, Any]]:
        return [facts for name, facts in self.seen if name == hook]

    @hookimpl
    def anarchon_run_started(self, job: Job, context: RunContext, delay_ms: int | None) -> None:
        self.seen.append(("started", {"job": job.name, "attempt": context.attempt, "delay_ms": delay_ms}))

    @hookimpl
    def anarchon_run_ended(self, job: Job, context: RunContext, status: str | None) -> None:
        self.seen.append(("ended", {"job": job.name, "status": status}))

    @hookimpl
    def anarchon_claims_decided(self, claims: int, latency_ms: float, won: int, lost: int, skipped: int) -> None:
        self.seen.append(("decided", {"claims": claims, "latency_ms": latency_ms, "won": won, "lost": lost}))

    @hookimpl
    def anarchon_run_taken_over(self, job: Job, slot_ms: int, attempt: int) -> None:
        self.seen.append(("taken_over", {"job": job.name, "slot_ms": slot_ms, "attempt": attempt}))

    @hookimpl
    def anarchon_lease_lost(self, job: Job, slot_ms: int, reason: str) -> None:
        self.seen.append(("lease_lost", {"job": job.name, "reason": reason}))


async def test_run_lines_carry_the_facts_as_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="anarchon")

    def boom() -> None:
        raise ValueError("no report today")

    s = Scheduler(MemoryBackend(), instance_id="web-1")
    s.add("report", "* * * * * *", boom, jitter_ms=0, timezone="Europe/Athens")
    async with s:
        await eventually(lambda: any(getattr(r, "status", None) == "failed" for r in caplog.records))
    started = next(r for r in caplog.records if getattr(r, "status", None) == "running")
    failed = next(r for r in caplog.records if getattr(r, "status", None) == "failed")
    assert started.levelno == logging.INFO and started.name == "anarchon.runs"
    assert (started.job, started.instance, started.attempt) == ("report", "web-1", 1)  # type: ignore[attr-defined]
    assert failed.levelno == logging.WARNING
    assert failed.slot_ms == started.slot_ms  # type: ignore[attr-defined]
    assert "EET" in failed.getMessage() or "EEST" in failed.getMessage(), "the slot in the job's zone too"
    assert "ValueError: no report today" in failed.getMessage()
    raised = next(r for r in caplog.records if r.exc_info and r.levelno == logging.ERROR)
    assert raised.job == "report"  # type: ignore[attr-defined]


async def test_the_info_log_stays_readable_at_scale(caplog: pytest.LogCaptureFixture) -> None:
    """A hundred runs in one second: INFO keeps the budget, DEBUG keeps every line, one summary says so."""
    caplog.set_level(logging.DEBUG, logger="anarchon")
    s = Scheduler(MemoryBackend())
    ran: list[int] = []
    for i in range(100):
        s.add(f"j{i:03d}", "* * * * * *", lambda ctx: ran.append(ctx.slot_ms), jitter_ms=0)
    async with s:
        await eventually(lambda: any(r.getMessage().startswith("in the last second also") for r in caplog.records))
    run_lines = [r for r in caplog.records if r.name == "anarchon.runs" and hasattr(r, "status")]
    per_second: dict[int, int] = {}
    for r in run_lines:
        if r.levelno >= logging.INFO:
            per_second[int(r.created)] = per_second.get(int(r.created), 0) + 1
    assert max(per_second.values()) <= INFO_LINES_PER_SECOND + 1  # a window need not start on a whole second
    assert sum(1 for r in run_lines if r.levelno == logging.DEBUG) >= 100, "every run still has its line at DEBUG"
    summary = next(r for r in caplog.records if r.getMessage().startswith("in the last second also"))
    assert summary.levelno == logging.INFO and sum(summary.summary.values()) > 0  # type: ignore[attr-defined]


async def test_a_lost_claim_is_never_logged_above_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="anarchon")
    store = MemoryStore()
    fleet = [Scheduler(MemoryBackend(store), instance_id=f"i{n}") for n in range(3)]
    events = Events()
    fleet[0].plugins.register(events)
    for s in fleet:
        s.add("tick", "* * * * * *", lambda: None, jitter_ms=0)
    for s in fleet:
        await s.start()
    await eventually(lambda: len(events.named("decided")) >= 3)
    for s in fleet:
        await s.stop()
    claim_lines = [r for r in caplog.records if r.name == "anarchon.claims"]
    assert claim_lines and all(r.levelno == logging.DEBUG for r in claim_lines)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG and "lost" in r.getMessage()]


async def test_hooks_carry_claim_latency_start_delay_and_the_end_of_every_run() -> None:
    events = Events()
    s = Scheduler(MemoryBackend(), plugins=[events])
    s.add("tick", "* * * * * *", lambda: None, jitter_ms=0)
    async with s:
        await eventually(lambda: len(events.named("ended")) >= 2)
    decided = events.named("decided")
    assert decided and all(d["claims"] == 1 and d["won"] == 1 and d["latency_ms"] >= 0 for d in decided)
    started = events.named("started")
    assert all(e["delay_ms"] is not None and 0 <= e["delay_ms"] < 1000 for e in started)
    assert {e["status"] for e in events.named("ended")} == {"succeeded"}


async def test_a_take_over_and_a_lost_lease_are_hooks() -> None:
    class Refusing(MemoryBackend):
        """Every renewal is refused, as when another instance already took the run over."""

        async def renew(self, grants: Sequence[Grant]) -> list[bool]:
            return [False for _ in grants]

    store = MemoryStore()
    events, stuck_events = Events(), Events()
    stuck = Scheduler(Refusing(store), instance_id="stuck", plugins=[stuck_events])
    backup = Scheduler(MemoryBackend(store), instance_id="backup", plugins=[events])
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()

    for s in (stuck, backup):
        s.add("slow", "0 0 1 1 *", slow, lease_ms=300, hand_over=False)
    await backup.start()
    with pytest.raises(AnarchonError, match="lost the lease"):
        await stuck.run_now("slow")  # not started: no take-over loop of its own
    assert stuck_events.named("lease_lost")[0] == {"job": "slow", "reason": "another instance took the run over"}
    await eventually(lambda: events.named("taken_over"))
    assert events.named("taken_over")[0]["attempt"] == 2
    await eventually(lambda: events.named("started"))  # the run starts after the take-over is reported
    assert events.named("started")[0]["delay_ms"] is None, "a take-over has no start delay"
    release.set()
    await eventually(lambda: events.named("ended"))
    assert events.named("ended")[0]["status"] == "succeeded"
    await backup.stop()


def test_an_async_observer_is_refused_with_what_to_do() -> None:
    class Late:
        @hookimpl
        async def anarchon_run_started(self, job: Job, context: RunContext) -> None:
            pass

    with pytest.raises(TypeError, match=r"async def.*never be awaited.*create_task"):
        Scheduler(MemoryBackend(), plugins=[Late()])
