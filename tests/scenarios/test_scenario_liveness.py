"""Issue 16 in one process: the heartbeat part, and default jitter that cannot lose a slot.

Several schedulers share one :class:`MemoryStore`, each with its heartbeat
thread; a "dead" instance is one whose heartbeat stopped without leaving
(as after ``kill -9``) while its runs stay in the store.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from anarchon import MemoryBackend, MemoryStore, Run, RunContext, RunStatus, Scheduler, hookimpl
from anarchon.backend import Grant
from anarchon.heartbeat import Heartbeat
from anarchon.liveness import LIVENESS_TTL_MS

#: For the tests that run a job by hand: no scheduled slot of it comes during the test.
YEARLY = "0 0 0 1 1 *"


class _CutOff(MemoryBackend):
    """The calls named in ``cut`` fail, as on a referee the instance cannot reach; ``failed`` counts them."""

    def __init__(self, store: MemoryStore, *cut: str) -> None:
        super().__init__(store)
        self.cut = set(cut)
        self.failed: Counter[str] = Counter()

    def _call(self, name: str) -> None:
        if name in self.cut:
            self.failed[name] += 1
            raise ConnectionError("the referee is unreachable")

    async def finish(self, grant: Grant, run: Run) -> bool:
        self._call("finish")
        return await super().finish(grant, run)

    async def hand_over(self, grant: Grant) -> bool:
        self._call("hand_over")
        return await super().hand_over(grant)


async def _until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.02)


async def _every_second_then_lapse(
    store: MemoryStore, tick: Callable[[RunContext], Awaitable[None]], ran: Callable[[], object], *plugins: object
) -> tuple[Scheduler, Heartbeat]:
    """Scheduler "a" with an every-second job, started until it ran once, then its heartbeat stopped
    (without leaving) and its lapse seen: claims are paused from here."""
    a = Scheduler(MemoryBackend(store), instance_id="a")
    for plugin in plugins:
        a.plugins.register(plugin)
    a.add("tick", "* * * * * *", tick, jitter_ms=0)
    await a.start()
    await _until(ran, 3, "a first run")
    heartbeat = a._heartbeat
    assert heartbeat is not None
    await heartbeat.stop(leave=False)
    await _until(lambda: a._health.degraded, LIVENESS_TTL_MS / 1000 + 1, "the lapse to pause claiming")
    return a, heartbeat


@pytest.mark.asyncio
async def test_every_slot_of_every_second_jobs_runs_once_with_default_options() -> None:
    """The default jitter (a quarter of the gap) never lets a slot's claim come after the next one's."""
    store = MemoryStore()
    ran: Counter[tuple[str, int]] = Counter()

    async def job(ctx: RunContext) -> None:
        ran[ctx.job.name, ctx.slot_ms] += 1

    schedulers = [Scheduler(MemoryBackend(store), instance_id=f"i{n}") for n in range(3)]
    for s in schedulers:
        for j in range(100):
            s.add(f"tick-{j:03d}", "* * * * * *", job)
    for s in schedulers:
        await s.start()
    first = (time.time_ns() // 1_000_000 // 1000 + 1) * 1000
    await asyncio.sleep(6.5)
    for s in schedulers:
        await s.stop(grace_ms=1000)
    last = first + 4000
    window = [(f"tick-{j:03d}", slot) for j in range(100) for slot in range(first, last + 1, 1000)]
    assert [key for key in window if ran[key] != 1] == [], "slots not run exactly once"
    history = await schedulers[0].history("tick-000", limit=20)
    assert {r.status for r in history if first <= r.slot_ms <= last} == {RunStatus.SUCCEEDED}


@pytest.mark.asyncio
async def test_a_dead_instances_run_is_taken_over_in_about_a_ttl() -> None:
    store = MemoryStore()
    started: list[tuple[str, int, int]] = []
    slots: list[int] = []
    release = asyncio.Event()

    async def slow(ctx: RunContext) -> None:
        started.append((ctx.instance, ctx.attempt, time.monotonic_ns() // 1_000_000))
        slots.append(ctx.slot_ms)
        if ctx.attempt == 1:
            await release.wait()  # the "dead" instance's run never ends on its own

    a, b = (Scheduler(MemoryBackend(store), instance_id=name) for name in ("a", "b"))
    a.add("slow", "* * * * * *", slow, jitter_ms=0)
    await a.start()
    await _until(lambda: started, 3, "the first run to start")
    # Make `a` dead to the fleet: its heartbeat stops without leaving, its run stays in the store.
    assert a._heartbeat is not None
    await a._heartbeat.stop(leave=False)
    b.add("slow", "* * * * * *", slow, jitter_ms=0)
    died = time.monotonic_ns() // 1_000_000
    await b.start()
    # `a` is alive here, only its heartbeat stopped: it gives the run up at its lapse and hands it over
    # over its working connection, so `b` takes it as the same attempt (a dead `a` would leave attempt
    # 2), or, when b's claim of the next slot comes first, that claim abandons it (newest-slot rule).
    await _until(lambda: any(inst == "b" for inst, _, _ in started), 5, "the take-over")
    took = next(t for inst, _, t in started if inst == "b") - died
    release.set()
    await b.stop(grace_ms=1000)
    await a.stop(grace_ms=1000)
    assert took <= LIVENESS_TTL_MS + 1000, f"taken over {took} ms after the heartbeat stopped (lease: 30 s)"
    records = {r.slot_ms: r for r in await b.history("slow", limit=50)}
    first = records[slots[0]]
    if first.status is RunStatus.ABANDONED:
        # The newest-slot rule: b's claim of the next slot came before its take-over pass and found
        # the handed-over run expired, so it abandoned that run and ran the new slot instead.
        taken = next(slot for (inst, _, _), slot in zip(started, slots, strict=True) if inst == "b")
        assert taken > slots[0] and first.instance == "a", "the abandoned run was not superseded by b's slot"
        assert (records[taken].instance, records[taken].status) == ("b", RunStatus.SUCCEEDED)
    else:
        assert (first.instance, first.status) == ("b", RunStatus.SUCCEEDED) and first.attempt in (1, 2)


@pytest.mark.asyncio
async def test_an_instance_whose_heartbeat_lapses_gives_its_runs_up() -> None:
    """The owner's side: no acknowledged beat for TTL*0.9, and every run it holds is stopped."""
    store = MemoryStore()
    cancelled = asyncio.Event()

    async def slow(ctx: RunContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    a = Scheduler(MemoryBackend(store), instance_id="a")
    a.add("slow", "* * * * * *", slow, jitter_ms=0)
    await a.start()
    await _until(lambda: a._runner.active, 3, "the run to start")
    assert a._heartbeat is not None
    await a._heartbeat.stop(leave=False)  # no more beats: a lapse, as when the store is cut off
    t0 = time.monotonic()
    await asyncio.wait_for(cancelled.wait(), LIVENESS_TTL_MS / 1000 + 2)
    assert time.monotonic() - t0 <= LIVENESS_TTL_MS / 1000 + 1
    await a.stop(grace_ms=500)


@pytest.mark.asyncio
@pytest.mark.parametrize("failing", [False, True], ids=["hand-over-answers", "hand-over-fails-first"])
async def test_runs_given_up_in_a_lapse_are_handed_over_once_beats_come_back(failing: bool) -> None:
    """A store down for everyone: nobody took the runs over, so they must not wait out their 30 s lease.

    ``failing``: issue 36 (PostgreSQL at max_connections, 6 slots missed): the one hand-over tried after
    the lapse failed, the run waited out its lease, and its job's slots were skipped meanwhile. A failed
    hand-over is tried again each heartbeat period.
    """
    store = MemoryStore()
    backend = _CutOff(store, *(["hand_over"] if failing else []))
    attempts: list[tuple[int, int]] = []

    async def slow(ctx: RunContext) -> None:
        attempts.append((ctx.slot_ms, ctx.attempt))
        if len(attempts) == 1:
            await asyncio.sleep(30)

    a = Scheduler(backend, instance_id="a")
    a.add("slow", YEARLY, slow, jitter_ms=0, catch_up_ms=0)
    await a.start()
    # Run the job now on the fleet's behalf, as a scheduled slot would be.
    runner = asyncio.ensure_future(a.run_now("slow"))
    await _until(lambda: attempts, 3, "the run to start")
    heartbeat = a._heartbeat
    assert heartbeat is not None
    await heartbeat.stop(leave=False)
    await _until(lambda: runner.done(), LIVENESS_TTL_MS / 1000 + 2, "the lapse to stop the run")
    assert await heartbeat.start(5)  # beats come back
    if failing:  # the hand-over still fails, as on a store short of connections
        await _until(lambda: backend.failed["hand_over"] >= 2, 5, "a hand-over tried after the lapse")
        backend.cut.clear()
    await _until(lambda: len(attempts) >= 2, 5, "the hand-over and take-over of the given-up run")
    await a.stop(grace_ms=500)
    assert attempts[1] == (attempts[0][0], 1), f"not the same run taken over as the same attempt: {attempts}"


@pytest.mark.asyncio
async def test_a_run_that_returned_before_a_lapse_is_recorded_once_the_referee_answers() -> None:
    """Issue 36 (Sentinel failover, 1 slot twice): its record failed, the lapse lost the lease locally,
    the runner gave the record up and handed the run over, and the take-over ran the slot again."""
    store = MemoryStore()
    backend = _CutOff(store, "finish")
    attempts: list[tuple[int, int]] = []

    async def quick(ctx: RunContext) -> None:
        attempts.append((ctx.slot_ms, ctx.attempt))

    a = Scheduler(backend, instance_id="a")
    a.add("quick", YEARLY, quick, jitter_ms=0, catch_up_ms=0)
    await a.start()
    runner = asyncio.ensure_future(a.run_now("quick"))
    await _until(lambda: attempts, 3, "the run")
    heartbeat = a._heartbeat
    assert heartbeat is not None
    await heartbeat.stop(leave=False)  # the store is cut off: no beats either
    active = a._runner.active
    await _until(lambda: all(r.context.lease_lost for r in active.values()), LIVENESS_TTL_MS / 1000 + 2, "the lapse")
    assert active and not runner.done(), "the record was given up at the lapse"
    assert await heartbeat.start(5)
    backend.cut.clear()
    await asyncio.wait_for(runner, 5)
    (record,) = [r for r in await a.history("quick", limit=5) if r.slot_ms == attempts[0][0]]
    await a.stop(grace_ms=500)
    assert (record.status, record.attempt, record.instance) == (RunStatus.SUCCEEDED, 1, "a")
    assert attempts == [(record.slot_ms, 1)], "the run was taken over and run again"


def test_liveness_is_a_bool() -> None:
    with pytest.raises(TypeError, match="liveness='no' must be True"):
        Scheduler(MemoryBackend(), liveness="no")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_scheduler_without_liveness_keeps_no_heartbeat() -> None:
    store = MemoryStore()
    async with Scheduler(MemoryBackend(store), instance_id="quiet", liveness=False) as quiet:
        assert quiet._heartbeat is None
        assert store.beat("probe", 1000) == {}, "an instance without liveness wrote a heartbeat record"


@pytest.mark.asyncio
async def test_a_lapsed_heartbeat_pauses_claims_until_it_beats_again() -> None:
    """Model finding: beats failing while other calls work must not loop claim, hand-over, take-over."""
    store = MemoryStore()
    starts: list[int] = []

    async def tick(ctx: RunContext) -> None:
        starts.append(ctx.slot_ms)

    errors: list[str] = []

    class Errors:
        @hookimpl
        def anarchon_backend_error(self, scheduler: Scheduler, operation: str, error: BaseException) -> None:
            errors.append(operation)

    a, heartbeat = await _every_second_then_lapse(store, tick, lambda: starts, Errors())
    during = len(starts)
    fencing_before = store._books["tick"].fencing
    await asyncio.sleep(2.5)
    assert len(starts) == during, "runs started while the heartbeat had lapsed"
    assert store._books["tick"].fencing - fencing_before <= 1, "claims and take-overs went on during the lapse"
    # One report per lapse: the watcher's 250 ms wake-ups are no failed backend calls.
    assert errors.count("heartbeat") == 1, errors
    assert await heartbeat.start(5)
    await _until(lambda: len(starts) > during, 5, "claiming to resume after the heartbeat came back")
    await a.stop(grace_ms=500)


@pytest.mark.asyncio
async def test_claims_resume_soon_after_a_long_lapse_ends() -> None:
    """Waiting for the heartbeat is a local read: it must not back off as probes of the backend do.

    The probes double from 0.2 s (each +-20 %), so the sixth comes 10.1-15.1 s into the
    outage; beats come back at 7.6 s, after the fifth (at most 7.44 s). Backing off while
    waiting for them left claims paused until that sixth probe, 2.5 s or more later.
    """
    store = MemoryStore()
    starts: list[float] = []

    async def tick(ctx: RunContext) -> None:
        starts.append(time.monotonic())

    a, heartbeat = await _every_second_then_lapse(store, tick, lambda: starts)
    await asyncio.sleep(7.6)
    during = len(starts)
    assert await heartbeat.start(5)
    back = time.monotonic()
    await _until(lambda: len(starts) > during, 15, "claiming to resume after the heartbeat came back")
    await a.stop(grace_ms=500)
    assert starts[during] - back <= 1.5, f"the first run came {starts[during] - back:.1f} s after beats were back"
