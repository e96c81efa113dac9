"""Several schedulers sharing one MemoryStore: the scheduler's promises, end to end."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from anarchon import (
    Claim,
    Grant,
    Job,
    JobNotFoundError,
    MemoryBackend,
    MemoryStore,
    Run,
    RunContext,
    RunStatus,
    Scheduler,
    SystemClock,
    hookimpl,
)
from anarchon_conformance import eventually


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def claim_of(job: Job, slot_ms: int) -> Claim:
    """A scheduled claim of one slot, as an instance named "seed" makes it."""
    return Claim(job=job, slot_ms=slot_ms, instance="seed", token=secrets.token_hex(16), now_ms=now_ms())


class FaultyBackend(MemoryBackend):
    """The real memory store behind a connection we can cut, as a partition would."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.cut = False
        self.failing: set[str] = set()
        self.calls: Counter[str] = Counter()

    def _check(self, operation: str) -> None:
        self.calls[operation] += 1
        if self.cut or operation in self.failing:
            raise ConnectionError(f"{operation}: connection refused (test partition)")

    async def claim(self, claims: Sequence[Any]) -> list[Any]:
        self._check("claim")
        return await super().claim(claims)

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        self._check("renew")
        return await super().renew(grants)

    async def finish(self, grant: Grant, run: Run) -> bool:
        self._check("finish")
        return await super().finish(grant, run)

    async def take_over(self, jobs: Sequence[Any], instance: str) -> list[Any]:
        self._check("take_over")
        return await super().take_over(jobs, instance)

    async def marks(self, jobs: Sequence[Any]) -> dict[str, int | None]:
        self._check("marks")
        return await super().marks(jobs)


class Recorder:
    """An observer plugin that keeps every event, and one that always fails beside it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def anarchon_scheduler_started(self, scheduler: Scheduler) -> None:
        self.events.append(("started", scheduler.instance_id))

    @hookimpl
    def anarchon_scheduler_stopped(self, scheduler: Scheduler) -> None:
        self.events.append(("stopped", scheduler.instance_id))

    @hookimpl
    def anarchon_run_started(self, scheduler: Scheduler, job: Any, context: RunContext) -> None:
        self.events.append(("run_started", (job.name, context.slot_ms)))

    @hookimpl
    def anarchon_run_finished(self, scheduler: Scheduler, job: Any, run: Run) -> None:
        self.events.append(("run_finished", run))

    @hookimpl
    def anarchon_slot_skipped(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
        self.events.append(("skipped", reason))

    @hookimpl
    def anarchon_claim_lost(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
        self.events.append(("lost", reason))

    @hookimpl
    def anarchon_backend_error(self, scheduler: Scheduler, operation: str, error: BaseException) -> None:
        self.events.append(("backend_error", operation))

    def kinds(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.events)


class Broken:
    @hookimpl
    def anarchon_run_started(self, scheduler: Scheduler, job: Any, context: RunContext) -> None:
        raise RuntimeError("observer bug")

    @hookimpl
    def anarchon_run_finished(self, scheduler: Scheduler, job: Any, run: Run) -> None:
        raise RuntimeError("observer bug")


async def cut_between_runs(backend: FaultyBackend, store: MemoryStore) -> None:
    """Cut the backend once a run is recorded finished, before the next claim.

    A run cut off before its finish() keeps its lease, and by the lease rules the
    catch-up after the outage is then skipped for overlap with it.
    """
    await eventually(lambda: bool(store.history("job", 1)) and store.history("job", 1)[0].status is RunStatus.SUCCEEDED)
    backend.cut = True


async def test_every_slot_runs_exactly_once_across_instances() -> None:
    store = MemoryStore()
    runs: list[tuple[str, int, str]] = []
    threads: set[str] = set()
    schedulers = [Scheduler(MemoryBackend(store), instance_id=f"i{i}") for i in range(4)]
    for s in schedulers:

        async def tick(ctx: RunContext, s: Scheduler = s) -> None:
            runs.append(("tick", ctx.slot_ms, ctx.instance))

        def sync_job() -> None:
            threads.add(threading.current_thread().name)
            runs.append(("sync", 0, ""))

        s.add("tick", "* * * * * *", tick, jitter_ms=300)
        s.add("tock", "* * * * * *", lambda ctx: runs.append(("tock", ctx.slot_ms, ctx.instance)), jitter_ms=300)
        s.add("sync", "* * * * * *", sync_job, jitter_ms=300)
    for s in schedulers:
        await s.start()
    first = now_ms()
    await eventually(lambda: len({slot for job, slot, _ in runs if job == "tick"}) >= 4)
    for s in schedulers:
        await s.stop()
    per_slot = Counter((job, slot) for job, slot, _ in runs if job != "sync")
    assert per_slot, "nothing ran"
    assert max(per_slot.values()) == 1, f"a slot ran twice: {per_slot.most_common(3)}"
    tick_slots = sorted(slot for job, slot in per_slot if job == "tick")
    assert tick_slots == list(range(tick_slots[0], tick_slots[0] + 1000 * len(tick_slots), 1000)), "a slot was missed"
    assert tick_slots[0] >= first - 1000
    assert all(name.startswith("anarchon-job") for name in threads), threads
    history = await schedulers[0].history("tick")
    assert [r.slot_ms for r in history] == sorted(tick_slots, reverse=True)
    assert {r.status for r in history} == {RunStatus.SUCCEEDED}
    assert all(r.instance in {"i0", "i1", "i2", "i3"} and r.fencing is not None for r in history)
    assert len({r.instance for r in history}) >= 1


async def test_failure_and_timeout_are_recorded_and_scheduling_goes_on() -> None:
    scheduler = Scheduler(MemoryBackend())

    def boom() -> None:
        raise ValueError("boom")

    async def slow() -> None:
        await asyncio.sleep(5)

    scheduler.add("boom", "@yearly", boom)
    scheduler.add("slow", "@yearly", slow, timeout_ms=200)
    async with scheduler:
        failed = await scheduler.run_now("boom")
        timed_out = await scheduler.run_now("slow")
        assert (await scheduler.last_run("boom")) == failed
    assert failed.status is RunStatus.FAILED and failed.error == "ValueError: boom"
    assert timed_out.status is RunStatus.TIMED_OUT and "timeout_ms=200" in (timed_out.error or "")
    assert timed_out.duration_ms is not None and 150 <= timed_out.duration_ms < 2000
    assert failed.manual and failed.attempt == 1 and failed.fencing is not None


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is new in Python 3.11")
async def test_a_job_cancelled_in_the_callers_task_leaves_no_cancel_behind() -> None:
    # run_now() runs the job in the caller's task; the timeout cancelled the job, not the caller.
    scheduler = Scheduler(MemoryBackend())

    async def slow() -> None:
        await asyncio.sleep(5)

    scheduler.add("slow", "@yearly", slow, timeout_ms=100)
    run = await scheduler.run_now("slow")
    assert run.status is RunStatus.TIMED_OUT
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    async with asyncio.timeout(5):  # a timeout of the caller's own still tells its cancel from others
        await asyncio.sleep(0)


async def test_run_now_records_a_manual_run_and_returns_it_finished() -> None:
    scheduler = Scheduler(MemoryBackend(), instance_id="me")
    seen: list[RunContext] = []
    scheduler.add("job", "@yearly", lambda ctx: seen.append(ctx))
    run = await scheduler.run_now("job")  # works before start(): opens the backend for the call
    assert run.status is RunStatus.SUCCEEDED and run.manual and run.instance == "me"
    assert seen[0].manual and seen[0].slot_ms == run.slot_ms
    assert await scheduler.history("job") == [run]
    with pytest.raises(JobNotFoundError, match="no job named 'nope'.*jobs: job"):
        await scheduler.run_now("nope")


async def test_overlap_skip_records_the_slot_once_as_skipped() -> None:
    store = MemoryStore()
    release = asyncio.Event()
    started = asyncio.Event()

    async def long_job(ctx: RunContext) -> None:
        started.set()
        await release.wait()

    a, b = Scheduler(MemoryBackend(store), instance_id="a"), Scheduler(MemoryBackend(store), instance_id="b")
    for s in (a, b):
        s.add("job", "* * * * * *", long_job, jitter_ms=100)
    await a.start()
    await b.start()
    await started.wait()
    skipped = await b.run_now("job")
    assert skipped.status is RunStatus.SKIPPED and skipped.manual
    await eventually(lambda: any(r.status is RunStatus.SKIPPED and not r.manual for r in store.history("job", 100)))
    release.set()
    await a.stop()
    await b.stop()
    scheduled_skips = Counter(r.slot_ms for r in store.history("job", 100) if r.status is RunStatus.SKIPPED)
    assert scheduled_skips and max(scheduled_skips.values()) == 1


async def test_a_runner_that_stops_renewing_is_taken_over_with_a_higher_fencing_token() -> None:
    store = MemoryStore()
    contexts: dict[str, RunContext] = {}
    done = asyncio.Event()

    async def job(ctx: RunContext) -> None:
        contexts[ctx.instance] = ctx
        if ctx.instance == "a":
            await asyncio.sleep(30)
        done.set()

    faulty = FaultyBackend(store)
    a = Scheduler(faulty, instance_id="a")
    a.add("job", "@yearly", job, lease_ms=300)
    await a.start()
    runner = asyncio.ensure_future(a.run_now("job"))
    await eventually(lambda: "a" in contexts)
    faulty.cut = True  # a can no longer renew: its local deadline passes, it must stop
    b = Scheduler(MemoryBackend(store), instance_id="b")
    b.add("job", "@yearly", job, lease_ms=300)
    await b.start()
    await asyncio.wait_for(done.wait(), 5)
    with pytest.raises(Exception, match="lost the lease"):
        await runner
    assert contexts["a"].lease_lost
    assert contexts["b"].attempt == 2 and contexts["b"].manual
    assert (contexts["b"].fencing or 0) > (contexts["a"].fencing or 0)
    await eventually(lambda: store.history("job", 1)[0].status is RunStatus.SUCCEEDED)
    (record,) = store.history("job", 10)
    assert (record.instance, record.attempt) == ("b", 2)
    faulty.cut = False
    await a.stop()
    await b.stop()


async def test_catch_up_runs_the_newest_missed_slot_once_with_the_count() -> None:
    store = MemoryStore()
    ran: list[RunContext] = []
    seed = Scheduler(MemoryBackend(store))
    job = seed.add("job", "* * * * * *", lambda ctx: None)
    old_slot = (now_ms() // 1000 - 10) * 1000
    (won,) = await seed.backend.claim([claim_of(job, old_slot)])  # a run 10 s ago, then nobody was up
    assert won.grant is not None
    await seed.backend.finish(won.grant, Run("job", old_slot, RunStatus.SUCCEEDED, "gone"))

    instances = [Scheduler(MemoryBackend(store), instance_id=f"i{i}") for i in range(3)]
    for s in instances:
        s.add("job", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=500)
        s.add("never-ran", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=500)
    await asyncio.gather(*(s.start() for s in instances))
    await eventually(lambda: any(c.catch_up for c in ran))
    for s in instances:
        await s.stop()
    catch_ups = [c for c in ran if c.catch_up]
    assert len(catch_ups) == 1 and catch_ups[0].job.name == "job"
    assert 9 <= catch_ups[0].missed <= 12
    record = next(r for r in store.history("job", 100) if r.catch_up)
    assert record.missed == catch_ups[0].missed and record.status is RunStatus.SUCCEEDED


async def test_catch_up_ignores_slots_older_than_the_window() -> None:
    store = MemoryStore()
    seed = Scheduler(MemoryBackend(store))
    job = seed.add("job", "* * * * * *", lambda: None)
    (won,) = await seed.backend.claim([claim_of(job, (now_ms() // 1000 - 30) * 1000)])
    assert won.won
    s = Scheduler(MemoryBackend(store))
    s.add("job", "0 0 1 1 *", lambda: None, catch_up_ms=1000)  # newest missed slot: Jan 1st, long ago
    async with s:
        await asyncio.sleep(0.2)
    assert not any(r.catch_up for r in store.history("job", 100))


async def test_stop_hands_running_jobs_over_to_a_backup_at_once() -> None:
    store = MemoryStore()
    contexts: list[RunContext] = []
    backup_done = asyncio.Event()

    async def job(ctx: RunContext) -> None:
        contexts.append(ctx)
        if ctx.instance == "a":
            await asyncio.sleep(60)
        backup_done.set()

    a, b = Scheduler(MemoryBackend(store), instance_id="a"), Scheduler(MemoryBackend(store), instance_id="b")
    for s in (a, b):
        s.add("job", "@yearly", job, lease_ms=20_000)
    await a.start()
    await b.start()
    runner = asyncio.ensure_future(a.run_now("job"))
    await eventually(lambda: bool(contexts))
    stopped_at = time.monotonic()
    await a.stop(grace_ms=100)
    await asyncio.wait_for(backup_done.wait(), 5)
    took = time.monotonic() - stopped_at
    assert took < 5, "the backup waited for the 20 s lease instead of the hand-over"
    assert contexts[0].lease_lost
    assert [(c.instance, c.attempt) for c in contexts] == [("a", 1), ("b", 1)]  # a hand-over is no new attempt
    with pytest.raises(Exception, match="lost the lease"):
        await runner
    await b.stop()
    (record,) = store.history("job", 10)
    assert record.instance == "b" and record.attempt == 1 and record.status is RunStatus.SUCCEEDED


async def test_a_slot_reached_too_late_is_skipped_not_claimed() -> None:
    class JumpyClock(SystemClock):
        offset = 0

        def now_ms(self) -> int:
            return now_ms() + self.offset

    clock, recorder = JumpyClock(), Recorder()
    backend = FaultyBackend(MemoryStore())
    s = Scheduler(backend, clock=clock, plugins=[recorder])
    s.add("job", "* * * * * *", lambda: None, jitter_ms=0, max_late_ms=500)
    await s.start()
    clock.offset = 5_000  # the instance wakes 5 s after its slot, as after a long GC pause
    await eventually(lambda: ("skipped", "late") in recorder.events)
    await s.stop()
    late_slots = [e for e in recorder.events if e == ("skipped", "late")]
    assert late_slots
    assert ("run_started", ("job", None)) not in recorder.events


async def test_backend_outage_never_raises_and_catches_up_after() -> None:
    store = MemoryStore()
    recorder = Recorder()
    ran: list[RunContext] = []
    backend = FaultyBackend(store)
    s = Scheduler(backend, plugins=[recorder, Broken()])
    # max_late_ms is short so that claims retried during the outage give up (unknown) and must be caught up
    s.add("job", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=0, max_late_ms=800)
    await s.start()
    await cut_between_runs(backend, store)
    await eventually(lambda: recorder.events.count(("lost", "unknown")) >= 2, timeout_s=10)
    cut_runs = len(ran)
    backend.cut = False
    await eventually(lambda: any(c.catch_up for c in ran), timeout_s=10)
    await s.stop()
    assert recorder.kinds()["backend_error"] >= 1
    catch_up = next(c for c in ran if c.catch_up)
    assert catch_up.missed >= 1
    assert len(ran) > cut_runs
    kinds = recorder.kinds()
    assert kinds["started"] == 1 and kinds["stopped"] == 1
    assert kinds["run_finished"] == kinds["run_started"] >= 2, "a failing observer disturbed the others"
    per_slot = Counter(c.slot_ms for c in ran)
    assert max(per_slot.values()) == 1


async def test_jobs_can_be_added_and_removed_while_running() -> None:
    ran: list[str] = []
    s = Scheduler(MemoryBackend())
    async with s:
        s.add("late-comer", "* * * * * *", lambda: ran.append("late-comer"), jitter_ms=0)
        await eventually(lambda: "late-comer" in ran)
        s.remove("late-comer")
        count = len(ran)
        assert "late-comer" not in s.jobs
        await asyncio.sleep(1.2)
        assert len(ran) == count
    with pytest.raises(JobNotFoundError):
        s.remove("late-comer")


def test_job_decorator_and_slots() -> None:
    s = Scheduler(MemoryBackend())

    @s.job("*/5 * * * *", timezone="Europe/Athens")
    async def sync(ctx: RunContext) -> None:
        pass

    job = s.jobs["sync"]
    assert job.is_async and job.takes_context and job.timezone == "Europe/Athens"
    slots = job.slots(count=3)
    assert len(slots) == 3 and all(b.timestamp() - a.timestamp() == 300 for a, b in itertools.pairwise(slots))
    assert s.next_slot("sync") == slots[0]
    with pytest.raises(TypeError):
        s.jobs["x"] = job  # type: ignore[index]


def test_blocking_run_stops_on_sigterm(tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import sys
            from anarchon import Scheduler, MemoryBackend, hookimpl
            class Ready:
                @hookimpl
                def anarchon_scheduler_started(self, scheduler):
                    print("ready", flush=True)
                @hookimpl
                def anarchon_scheduler_stopped(self, scheduler):
                    print("stopped", flush=True)
            s = Scheduler(MemoryBackend(), plugins=[Ready()])
            s.add("job", "* * * * * *", lambda: None)
            s.run()
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(app)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "stopped" in out and proc.returncode == 0


async def test_a_grant_answered_after_its_lease_is_handed_over_not_run() -> None:
    class LockedStore(MemoryBackend):
        """Decides late, so the lease starts late: as a SQLite file whose write lock was held."""

        async def claim(self, claims: Sequence[Any]) -> list[Any]:
            await asyncio.sleep(2.5)
            return await super().claim(claims)

    store = MemoryStore()
    ran: list[RunContext] = []
    late = Scheduler(LockedStore(store), instance_id="late")
    backup = Scheduler(MemoryBackend(store), instance_id="backup")
    for s in (late, backup):
        s.add("job", "@yearly", lambda ctx: ran.append(ctx), lease_ms=2000)
    await backup.start()
    asked = time.monotonic()
    with pytest.raises(Exception, match="lost the lease"):
        await late.run_now("job")
    await eventually(lambda: bool(ran), timeout_s=5)
    took = time.monotonic() - asked
    await backup.stop()
    assert [(c.instance, c.attempt) for c in ran] == [("backup", 1)], "the late grant ran, or ran beside the backup"
    # Granted at 2.5 s with a fresh 2 s lease: waiting it out would take 4.5 s.
    assert took < 4.0, f"the backup waited {took:.1f} s for the lease instead of getting the hand-over"
    (record,) = store.history("job", 10)
    assert (record.instance, record.attempt, record.status) == ("backup", 1, RunStatus.SUCCEEDED)


async def test_a_run_taken_over_by_its_own_instance_keeps_its_lease_after_the_stale_attempt_ends() -> None:
    """Attempt 1's answer to finish() is stuck while its lease runs out; the same instance takes the
    run over. When attempt 1 finally gives up, attempt 2 must still be renewed, or the instance
    takes the run over once more while attempt 2 still runs."""

    class StuckFinish(FaultyBackend):
        def __init__(self, store: MemoryStore) -> None:
            super().__init__(store)
            self.stuck = asyncio.Event()
            self.release = asyncio.Event()

        async def finish(self, grant: Grant, run: Run) -> bool:
            if grant.attempt == 1:
                self.stuck.set()
                await self.release.wait()
            return await super().finish(grant, run)

    store = MemoryStore()
    backend = StuckFinish(store)
    running: list[int] = []
    overlapped: list[tuple[int, list[int]]] = []
    second = asyncio.Event()

    async def job(ctx: RunContext) -> None:
        if running:
            overlapped.append((ctx.attempt, list(running)))
        running.append(ctx.attempt)
        try:
            if ctx.attempt == 1:
                backend.failing = {"renew"}  # attempt 1's lease can no longer be renewed
                return
            backend.failing = set()
            second.set()
            await asyncio.sleep(1.5)  # five leases: attempt 2 lives on renewals alone
        finally:
            running.remove(ctx.attempt)

    a = Scheduler(backend, instance_id="a")
    a.add("job", "@yearly", job, lease_ms=300)
    await a.start()
    first = asyncio.ensure_future(a.run_now("job"))
    await asyncio.wait_for(second.wait(), 5)  # a took its own run over
    backend.release.set()  # attempt 1's finish() answers now: stale
    with pytest.raises(Exception, match="lost the lease"):
        await first
    await eventually(lambda: store.history("job", 1)[0].status is not RunStatus.RUNNING, timeout_s=5)
    await a.stop()
    assert overlapped == [], f"attempts ran at the same time: {overlapped}"
    (record,) = store.history("job", 10)
    assert (record.attempt, record.status) == (2, RunStatus.SUCCEEDED)


async def test_a_renewal_slow_to_cancel_does_not_keep_the_run_past_its_lease() -> None:
    """A's link is held: its renewal gets no answer, and asyncpg then waits for the server to
    confirm the cancel. Waited for, it kept the keeper from stopping the run at its deadline while
    a backup took the run over: two attempts ran at once (the fault suite's PostgreSQL duplicate)."""

    class HeldLink(MemoryBackend):
        def __init__(self, store: MemoryStore) -> None:
            super().__init__(store)
            self.hold = False
            self.release = asyncio.Event()

        async def _held(self) -> None:
            while self.hold and not self.release.is_set():
                with contextlib.suppress(asyncio.CancelledError):  # a cancel only asks; the link answers
                    await self.release.wait()

        async def renew(self, grants: Sequence[Grant]) -> list[bool]:
            await self._held()
            return await super().renew(grants)

        async def take_over(self, jobs: Sequence[Any], instance: str) -> list[Any]:
            await self._held()
            return await super().take_over(jobs, instance)

    store = MemoryStore()
    held = HeldLink(store)
    events: list[tuple[str, str]] = []
    started, backup_done = asyncio.Event(), asyncio.Event()

    async def job(ctx: RunContext) -> None:
        events.append(("start", ctx.instance))
        started.set()
        try:
            await asyncio.sleep(30 if ctx.instance == "a" else 0)
        finally:
            events.append(("end", ctx.instance))
            if ctx.instance == "b":
                backup_done.set()

    a = Scheduler(held, instance_id="a")
    b = Scheduler(MemoryBackend(store), instance_id="b")
    for s in (a, b):
        s.add("job", "@yearly", job, lease_ms=300)
    await a.start()
    runner = asyncio.ensure_future(a.run_now("job"))
    await asyncio.wait_for(started.wait(), 5)
    held.hold = True
    await b.start()
    try:
        await asyncio.wait_for(backup_done.wait(), 5)
    finally:
        held.release.set()
    with pytest.raises(Exception, match="lost the lease"):
        await runner
    await a.stop()
    await b.stop()
    assert events == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")], "a ran beside its backup"


async def test_a_slot_caught_up_after_an_outage_is_not_claimed_again_by_the_timer() -> None:
    """The timer holds each slot until its jitter passes; a recovery in that window catches the slot
    up with the count it missed. Claimed again as a plain slot, it would race the catch-up, and if it
    won, the missed slots it was to cover would count as lost."""

    class Recording(FaultyBackend):
        def __init__(self, store: MemoryStore) -> None:
            super().__init__(store)
            self.claimed: list[tuple[int, bool]] = []

        async def claim(self, claims: Sequence[Any]) -> list[Any]:
            self._check("claim")
            self.claimed += [(c.slot_ms, c.catch_up) for c in claims]
            return await MemoryBackend.claim(self, claims)

    store = MemoryStore()
    backend = Recording(store)
    recorder = Recorder()
    ran: list[RunContext] = []
    s = Scheduler(backend, plugins=[recorder])
    s.add("job", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=950, max_late_ms=5000)
    await s.start()
    await cut_between_runs(backend, store)
    await eventually(lambda: recorder.events.count(("lost", "unknown")) >= 2, timeout_s=10)
    backend.cut = False
    await eventually(lambda: any(c.catch_up for c in ran), timeout_s=10)
    caught_up = next(c.slot_ms for c in ran if c.catch_up)
    await eventually(lambda: any(c.slot_ms > caught_up + 1000 for c in ran), timeout_s=10)
    await s.stop()
    again = [slot for slot, catch_up in backend.claimed if slot == caught_up and not catch_up]
    assert again == [], f"slot {caught_up} was caught up and then claimed again as a plain slot"


async def test_a_run_that_supersedes_a_dead_run_counts_the_slots_it_covers() -> None:
    """A backend names the dead run a grant superseded; the run covers its slot and those skipped for it."""

    class Superseding(MemoryBackend):
        async def claim(self, claims: Sequence[Any]) -> list[Any]:
            results = await super().claim(claims)
            return [
                dataclasses.replace(r, grant=dataclasses.replace(r.grant, supersedes=r.grant.slot_ms - 2000))
                if r.grant is not None
                else r
                for r in results
            ]

    store = MemoryStore()
    ran: list[RunContext] = []
    s = Scheduler(Superseding(store))
    s.add("job", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=0)
    await s.start()
    await eventually(lambda: bool(ran) and store.history("job", 1)[0].status is RunStatus.SUCCEEDED)
    await s.stop()
    assert (ran[0].missed, ran[0].catch_up) == (3, False), "the dead run's slot, the skipped one and its own"
    assert store.history("job", 10)[-1].missed == 3


async def test_a_plain_claim_past_slots_nobody_decided_covers_them() -> None:
    """Issue #8's Redis loss: claims of some slots are held on a link (no error, no answer) until a
    later slot's claim goes through and moves the mark past them. The grant names the mark it found,
    so that run counts the undecided slots as missed; the held claims, delivered late, lose."""

    class Holding(MemoryBackend):
        def __init__(self, store: MemoryStore) -> None:
            super().__init__(store)
            self.hold = False
            self.held: list[tuple[int, asyncio.Event]] = []
            self.late: list[Any] = []

        async def claim(self, claims: Sequence[Any]) -> list[Any]:
            if not self.hold:
                return await super().claim(claims)
            release = asyncio.Event()
            self.held += [(c.slot_ms, release) for c in claims]
            await release.wait()
            results = await super().claim(claims)
            self.late += results
            return results

    store = MemoryStore()
    backend = Holding(store)
    ran: list[RunContext] = []
    s = Scheduler(backend)
    s.add("job", "* * * * * *", lambda ctx: ran.append(ctx), jitter_ms=0, max_late_ms=5000)
    await s.start()
    await eventually(lambda: bool(ran))
    backend.hold = True
    await eventually(lambda: len(backend.held) >= 2, timeout_s=5)
    backend.hold = False
    held = sorted(slot for slot, _ in backend.held)
    await eventually(lambda: any(c.slot_ms > held[-1] for c in ran), timeout_s=5)
    for _, release in backend.held:
        release.set()
    await eventually(lambda: len(backend.late) == len(held), timeout_s=5)
    await s.stop()
    after = next(c for c in ran if c.slot_ms > held[-1])
    before = max(c.slot_ms for c in ran if c.slot_ms < held[0])
    assert after.missed == (after.slot_ms - before) // 1000, (before, held, after)
    assert after.missed >= len(held) + 1, "the run must cover the held slots and its own"
    assert {r.outcome.value for r in backend.late} == {"lost"}, "a held claim delivered late must lose"
    assert not [c for c in ran if c.slot_ms in held], "a held slot ran after the mark moved past it"


async def test_with_default_options_no_slot_of_an_every_second_job_is_lost() -> None:
    """Three instances, 50 every-second jobs, every option at its default: each slot runs exactly once.

    With the old fixed 2 s jitter, a slot's claim could come more than a period after the next
    slot's; the mark rule then refused it and the slot ran only as a later run's ``missed``.
    """
    store = MemoryStore()
    runs: Counter[tuple[str, int]] = Counter()
    fleet = [Scheduler(MemoryBackend(store), instance_id=f"i{n}") for n in range(3)]
    for s in fleet:
        for j in range(50):
            s.add(f"job-{j:02d}", "* * * * * *", lambda ctx: runs.update([(ctx.job.name, ctx.slot_ms)]))
    begin = now_ms()
    for s in fleet:
        await s.start()
    await asyncio.sleep(6)
    for s in fleet:
        await s.stop()
    end = now_ms()
    window = range((begin // 1000 + 2) * 1000, (end // 1000 - 1) * 1000, 1000)
    assert len(window) >= 3
    for j in range(50):
        for slot in window:
            assert runs[(f"job-{j:02d}", slot)] == 1, f"job-{j:02d} @ {slot}: {runs[(f'job-{j:02d}', slot)]} runs"


async def test_slots_due_together_past_a_part_are_claimed_in_parts_two_at_a_time() -> None:
    """2,500 slots of one instant: parts of at most 1,000, never more than two out at once, each run once."""
    from anarchon._batcher import PART, PARTS_AT_ONCE

    sizes: list[int] = []
    out = [0, 0]  # now, most

    class Counting(MemoryBackend):
        async def claim(self, claims: Sequence[Claim]) -> list[Any]:
            sizes.append(len(claims))
            out[0] += 1
            out[1] = max(out[1], out[0])
            try:
                await asyncio.sleep(0.05)  # answered later, so the parts could pile up
                return await super().claim(claims)
            finally:
                out[0] -= 1

    ran: Counter[str] = Counter()
    s = Scheduler(Counting(), instance_id="parts")
    for i in range(2500):
        s.add(f"j{i}", "* * * * * *", lambda ctx: ran.update([ctx.job.name]), jitter_ms=0)
    await s.start()
    try:
        await eventually(lambda: len(ran) == 2500)
    finally:
        await s.stop()
    burst = sizes[:3]
    assert sorted(burst) == [500, 1000, 1000], f"the first instant's claims went out as {sizes[:6]}"
    assert max(sizes) <= PART
    assert out[1] <= PARTS_AT_ONCE, f"{out[1]} parts were out at once"
    assert max(ran.values()) == 1
