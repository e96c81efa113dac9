"""Ranked claims (issue 37): who tries a slot first, how late the others try, and the slots heard decided.

The ranker alone on a fleet view built here, then whole schedulers on one
memory store: one claim per slot where every instance used to send one.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence

import pytest

from anarchon import Claim, ClaimResult, MemoryBackend, MemoryStore, RunContext, Scheduler, hookimpl
from anarchon._circle import GROUP_SLOTS
from anarchon._rank import LAG_DECAY, LAG_MARGIN, RANK_BACKUPS, RANK_STEP_MS, Ranker
from anarchon.fleet import Fleet, InstanceInfo, JobDefinition
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon_conformance import make_job

EVERY_SECOND = "* * * * * *"


def every_second(name: str, **options: object) -> Job:
    return make_job(MemoryBackend(), name, EVERY_SECOND, **options)


MEMBERS = ("pod-a", "pod-b", "pod-c", "pod-d")


def view(members: Sequence[str], jobs: Sequence[Job]) -> Fleet:
    heads = tuple(InstanceInfo(m, "host", 1, "1", 0, len(jobs), "fp") for m in members)
    definitions = {m: {j.name: JobDefinition.of(j) for j in jobs} for m in members}
    return Fleet(heads, definitions)


def rankers(members: Sequence[str], jobs: Sequence[Job]) -> dict[str, Ranker]:
    fleet, listed = view(members, jobs), tuple(jobs)
    observers = Observers(PluginManager(), None)  # type: ignore[arg-type]
    return {m: Ranker(m, lambda: fleet, observers, jobs=lambda: listed) for m in members}


def test_each_slot_has_one_first_claimer_and_first_claims_spread_evenly() -> None:
    job = every_second("tick")  # jitter fitted to 250 ms: a step of 83 ms
    step = min(RANK_STEP_MS, job.options.jitter_ms // (RANK_BACKUPS + 1))
    by = rankers(MEMBERS, [job])
    first: Counter[str] = Counter()
    for n in range(4000):
        slot = 1_790_000_000_000 + n * 1000
        delays = sorted((r.delay_ms(job, slot), m) for m, r in by.items())
        # Ranks 0, 1, 2 once each, the rest one step after the last backup.
        assert [d for d, _ in delays] == [0, step, 2 * step, 3 * step], delays
        first[delays[0][1]] += 1
    assert set(first) == set(MEMBERS)
    assert max(first.values()) / min(first.values()) < 1.15, first


def test_rank_zero_goes_round_the_members_once_a_round_and_no_period_pins_a_job_to_one() -> None:
    """An every-second job's slots go to each of n members once per round of n seconds; every k seconds spreads too."""
    job = every_second("tick")
    by = rankers(MEMBERS, [job])
    start = 1_790_000_000_000 // 4000 * 4000  # a round starts here: rounds are len(MEMBERS) seconds
    for round_start in range(start, start + 100 * 4000, 4000):
        seconds = range(round_start, round_start + 4000, 1000)
        firsts = [m for slot in seconds for m, r in by.items() if r.delay_ms(job, slot) == 0]
        assert sorted(firsts) == sorted(MEMBERS), (round_start, firsts)
    for period in (2, 4, 8, 12):  # a period that shares a factor with the fleet's size
        slow = make_job(MemoryBackend(), f"every-{period}", f"*/{period} * * * * *")
        slots = [start + n * period * 1000 for n in range(400)]
        first = Counter(m for slot in slots for m, r in rankers(MEMBERS, [slow]).items() if r.delay_ms(slow, slot) == 0)
        assert set(first) == set(MEMBERS) and max(first.values()) / min(first.values()) < 1.5, (period, first)


def test_jobs_due_every_few_seconds_are_claimed_together_and_slower_ones_each_on_their_own() -> None:
    """Dense jobs form ceil(count / GROUP_SLOTS) groups, each claimed by one instance while there are fewer
    groups than instances; hourly jobs spread per job."""
    dense = [every_second(f"tick-{j:03d}") for j in range(GROUP_SLOTS + 1)]
    hourly = [make_job(MemoryBackend(), f"report-{j:03d}", "0 0 * * * *") for j in range(40)]
    by = rankers(MEMBERS, dense + hourly)
    slot = 1_790_000_000_000 // 3_600_000 * 3_600_000
    for n in range(20):
        at = slot + n * 3_600_000
        dense_firsts = {(j.name, m) for j in dense for m, r in by.items() if r.delay_ms(j, at) == 0}
        assert len(dense_firsts) == len(dense), "one first claimer per slot"
        assert len({m for _, m in dense_firsts}) == 2, "not the two groups' first claimers, on two instances"
        hourly_firsts = Counter(m for j in hourly for m, r in by.items() if r.delay_ms(j, at) == 0)
        assert sum(hourly_firsts.values()) == len(hourly) and len(hourly_firsts) == len(MEMBERS), hourly_firsts
    # As many groups as members: each job is ranked on its own again, its first claims spread over all.
    many = [every_second(f"tick-{j:03d}") for j in range(3 * GROUP_SLOTS + 1)]
    spread = rankers(MEMBERS, many)
    firsts = Counter(m for j in many for m, r in spread.items() if r.delay_ms(j, slot) == 0)
    assert sum(firsts.values()) == len(many) and max(firsts.values()) / min(firsts.values()) < 1.3, firsts
    few = [every_second(f"tick-{j:03d}") for j in range(30)]
    alone = rankers(MEMBERS, few)
    for n in range(20):
        at = slot + n * 1000
        assert len({m for j in few for m, r in alone.items() if r.delay_ms(j, at) == 0}) == 1, "not one group"


def test_an_instance_alone_claims_at_the_slot_and_one_without_a_view_keeps_the_jitter() -> None:
    job = every_second("tick")
    (alone,) = rankers(["pod-a"], [job]).values()
    assert {alone.delay_ms(job, 1_790_000_000_000 + n * 1000) for n in range(200)} == {0}
    unseen = Ranker("pod-a", lambda: Fleet(), Observers(PluginManager(), None))  # type: ignore[arg-type]
    delays = {unseen.delay_ms(job, 1_790_000_000_000 + n * 1000) for n in range(200)}
    assert len(delays) > 50 and all(0 <= d < job.options.jitter_ms for d in delays), "not the jitter"
    exact = every_second("tick", jitter_ms=0)
    assert {r.delay_ms(exact, 1_790_000_000_000) for r in rankers(MEMBERS, [exact]).values()} == {0}


def test_a_stored_schedule_is_ranked_among_every_live_instance() -> None:
    """A job in nobody's definitions (a stored schedule) may be run by any live instance with its task."""
    code, stored = every_second("code"), every_second("stored")
    fleet = view(MEMBERS, [code])
    ranker = Ranker("pod-a", lambda: fleet, Observers(PluginManager(), None))  # type: ignore[arg-type]
    step = stored.options.jitter_ms // (RANK_BACKUPS + 1)
    delays = {ranker.delay_ms(stored, 1_790_000_000_000 + n * 1000) for n in range(200)}
    assert delays == {0, step, 2 * step, 3 * step}


def test_a_job_only_some_instances_define_is_ranked_among_them() -> None:
    mine, other = every_second("mine"), every_second("other")
    fleet = Fleet(
        tuple(InstanceInfo(m, "host", 1, "1", 0, 1, "fp") for m in ("pod-a", "pod-b", "pod-c")),
        {"pod-a": {"mine": JobDefinition.of(mine)}, "pod-b": {"mine": JobDefinition.of(mine)},
         "pod-c": {"other": JobDefinition.of(other)}},
    )  # fmt: skip
    ranker = Ranker("pod-a", lambda: fleet, Observers(PluginManager(), None))  # type: ignore[arg-type]
    step = mine.options.jitter_ms // (RANK_BACKUPS + 1)
    assert {ranker.delay_ms(mine, 1_790_000_000_000 + n * 1000) for n in range(100)} == {0, step}


def test_a_slot_heard_decided_is_not_claimed_and_counts_as_decided() -> None:
    lost: list[tuple[str, int, str]] = []

    class Lost:
        @hookimpl
        def anarchon_claim_lost(self, job: Job, slot_ms: int, reason: str) -> None:
            lost.append((job.name, slot_ms, reason))

    plugins = PluginManager()
    plugins.register(Lost())
    job = every_second("tick")
    ranker = Ranker("pod-a", lambda: view(MEMBERS, [job]), Observers(plugins, None))  # type: ignore[arg-type]
    ranker.heard([("tick", 2000), ("tick", 1000)])
    due = [(job, 1000, 1000), (job, 2000, 2000), (job, 3000, 3000)]
    assert ranker.undecided(due, lambda name: True) == [(job, 3000, 3000)]
    assert lost == [("tick", 1000, "decided"), ("tick", 2000, "decided")]
    assert ranker.undecided(due, lambda name: False) == []


def test_the_step_follows_how_late_decisions_are_heard_within_the_jobs_window() -> None:
    """Backups wait past the lag of the notices they hear, never past half the gap to the next slot."""
    now = [1_790_000_000_000]
    fleet = view(MEMBERS, [every_second("tick"), make_job(MemoryBackend(), "hourly", "0 * * * *")])
    observers = Observers(PluginManager(), None)  # type: ignore[arg-type]
    ranker = Ranker("pod-a", lambda: fleet, observers, now_ms=lambda: now[0])
    tick, hourly = every_second("tick"), make_job(MemoryBackend(), "hourly", "0 * * * *")

    def steps(job: Job) -> set[int]:
        return {ranker.delay_ms(job, now[0] + n * 1000) for n in range(400)}

    base = tick.options.jitter_ms // (RANK_BACKUPS + 1)  # 83 ms
    assert steps(tick) == {0, base, 2 * base, 3 * base}
    ranker.heard([("tick", now[0] - 90), ("other", now[0] - 5000)])  # the newest slot counts: 90 ms late
    step = int(90 * LAG_MARGIN)
    assert steps(tick) == {0, step, 2 * step, 3 * step}
    ranker.heard([("tick", now[0] - 400)])  # later than the window allows: 3/4 of the gap, 750 ms, in all
    ceiling = 750 // (RANK_BACKUPS + 1)
    assert steps(tick) == {0, ceiling, 2 * ceiling, 3 * ceiling}
    hourly_step = int(400 * LAG_MARGIN)  # an hourly job's window is RANK_WINDOW_MS: room for it
    assert steps(hourly) == {0, hourly_step, 2 * hourly_step, 3 * hourly_step}
    for _ in range(60):  # notices heard at once again: the envelope decays back to the fixed step
        now[0] += 1000
        ranker.heard([("tick", now[0] - 5)])
    assert 400 * LAG_DECAY**60 < 5 and steps(tick) == {0, base, 2 * base, 3 * base}
    ranker.heard([("tick", now[0] - 60_000)])  # a catch-up's notice says nothing of the pace
    assert steps(tick) == {0, base, 2 * base, 3 * base}


class Counting(MemoryBackend):
    """Counts the scheduled claims it was sent, per slot."""

    def __init__(self, store: MemoryStore, sent: Counter[tuple[str, int]]) -> None:
        super().__init__(store)
        self.sent = sent

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        for c in claims:
            if not c.manual:
                self.sent[c.job, c.slot_ms] += 1
        return await super().claim(claims)


@pytest.mark.asyncio
async def test_a_fleet_of_four_sends_about_one_claim_per_slot_and_runs_each_once() -> None:
    store = MemoryStore()
    sent: Counter[tuple[str, int]] = Counter()
    ran: Counter[tuple[str, int]] = Counter()
    by: Counter[str] = Counter()

    async def tick(ctx: RunContext) -> None:
        ran[ctx.job.name, ctx.slot_ms] += 1
        by[ctx.instance] += 1

    fleet = [Scheduler(Counting(store, sent), instance_id=m) for m in MEMBERS]
    for s in fleet:
        for j in range(20):
            s.add(f"tick-{j:02d}", EVERY_SECOND, tick)
    for s in fleet:
        await s.start()
    try:
        deadline = time.monotonic() + 5
        while any(len(s._fleetwatch.fleet.instances) < len(MEMBERS) for s in fleet):
            assert time.monotonic() < deadline, "the instances did not see each other in the registry"
            await asyncio.sleep(0.05)
        # From a round's first slot due after all saw the fleet: one round (4 s) gives each member its second.
        first = -(-(time.time_ns() // 1_000_000 + 2000) // 4000) * 4000
        await asyncio.sleep((first + 4000 - time.time_ns() // 1_000_000) / 1000 + 0.5)
    finally:
        for s in fleet:
            await s.stop(grace_ms=1000)
    window = [(f"tick-{j:02d}", slot) for j in range(20) for slot in range(first, first + 4000, 1000)]
    assert [k for k in window if ran[k] != 1] == [], "slots not run exactly once"
    claims = sum(sent[k] for k in window)
    assert claims <= 1.2 * len(window), f"{claims} claims for {len(window)} slots: later ranks claimed decided slots"
    assert min(by.values()) > 0 and len(by) == len(MEMBERS), f"runs did not spread over the fleet: {by}"


def test_a_decided_notice_reads_back_and_skips_what_is_not_a_slot() -> None:
    from anarchon.backend import decided_lines, read_decided

    decided = [("nightly-report", 1_790_000_000_000), ("tick_2", 0)]
    assert read_decided(decided_lines(decided)) == decided
    assert read_decided("a 1\n\nno-slot\n 5\nb x\nc 2") == [("a", 1), ("c", 2)]
