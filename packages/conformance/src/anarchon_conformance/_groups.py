"""Concurrency groups (capability ``groups``): places handed out in slot order, never past the limit.

The contract tests call :meth:`Backend.places` directly from several
instances, each with a heartbeat (a place's holder must have one); the
scheduler test runs three schedulers whose jobs share a group and checks,
from the runs' own start and end stamps, that no more than the limit ran at
once and no slot ran twice. ``GroupRefusalTests`` holds for the others:
``group=`` is refused at ``add()``, naming the capability.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from anarchon.context import RunContext
from anarchon.errors import UnsupportedOptionError
from anarchon.groups import Place
from anarchon.run import Run, RunStatus

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import unique_name
from ._liveness import TTL_MS, _seen_dead
from ._requires import gated
from .ledger import most_at_once
from .testing import eventually

__all__ = ["GroupRefusalTests", "GroupTests"]

#: A heartbeat long enough to outlast every test here.
LONG_TTL_MS = 60_000


def _place(instance: Instance, group: str, job: str, slot_ms: int, *, token: str | None = None) -> Place:
    return Place(group, job, slot_ms, False, token or f"{instance.id}-{job}-{slot_ms}", instance.id)


async def _ask(instance: Instance, *places: Place, leave: tuple[Place, ...] = ()) -> list[bool]:
    answers = list(await instance.backend.places(list(leave), list(places)))
    assert len(answers) == len(places), f"places() got {len(places)} asks and answered {answers!r}"
    return answers


@gated("groups")
class GroupTests(SuiteBase):
    """A group's limit holds across instances; places go oldest slot first; a dead holder's place is freed."""

    async def test_places_go_in_slot_order_up_to_the_limit(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        for instance in (a, b):
            await instance.beat(LONG_TTL_MS)
        group, job = unique_name("grp"), unique_name("gj")
        await a.backend.set_group(group, 2)
        p1, p2, p3 = (_place(a, group, job, s) for s in (1000, 2000, 3000))
        assert await _ask(a, p1, p2, p3) == [True, True, False], "limit 2: the two oldest slots get places"
        older = _place(b, group, job + "b", 500)
        assert await _ask(b, older) == [False], "a full group gives no place, however old the slot"
        # A place is freed: it goes to the oldest waiting slot (b's), even though a asks and b does not.
        assert await _ask(a, p3, leave=(p1,)) == [False], "a younger slot took the place of an older waiting one"
        assert await _ask(b, older) == [True], "the oldest waiting slot did not get the freed place"
        assert await _ask(a, p2) == [True], "a place once given is kept until left"
        state = {g.name: g for g in await a.backend.groups()}[group]
        assert (state.max_running, state.running, state.waiting, state.oldest_waiting_ms) == (2, 2, 1, 3000), state

    async def test_a_leave_with_another_token_frees_nothing(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        await a.beat(LONG_TTL_MS)
        group, job = unique_name("grp"), unique_name("gj")
        await a.backend.set_group(group, 1)
        held, waiting = _place(a, group, job, 1000), _place(a, group, job, 2000)
        assert await _ask(a, held, waiting) == [True, False]
        stale = _place(a, group, job, 1000, token="someone-else")  # noqa: S106 - a run token, not a secret
        assert await _ask(a, waiting, leave=(stale,)) == [False], "a stale token's leave freed a live place"
        assert await _ask(a, waiting, leave=(held,)) == [True], "the holder's own leave did not free its place"

    async def test_a_take_over_asks_again_in_its_slots_turn(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        await a.beat(LONG_TTL_MS)
        group, job = unique_name("grp"), unique_name("gj")
        await a.backend.set_group(group, 1)
        first = _place(a, group, job, 1000)
        later = _place(a, group, job, 2000)
        assert await _ask(a, first, later) == [True, False]
        again = _place(a, group, job, 1000, token="taken-over")  # noqa: S106 - a run token, not a secret
        # The same run with a new token replaces the entry: it waits again, first in line; the old
        # token's place is gone, so the new entry gets it.
        assert await _ask(a, again) == [True], "a take-over's ask did not get the place its run held"
        assert await _ask(a, later) == [False], "the old token's place was counted besides the new one's"

    async def test_a_dead_holders_place_is_freed(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        group, job = unique_name("grp"), unique_name("gj")
        await b.backend.set_group(group, 1)
        await b.beat(LONG_TTL_MS)
        await a.beat(TTL_MS)
        assert await _ask(a, _place(a, group, job, 1000)) == [True]
        mine = _place(b, group, job, 2000)
        assert await _ask(b, mine) == [False]
        await a.stop_beating()
        # b beats until its beat reports a dead, as a live scheduler's heartbeat does, with the TTL a beat
        # with (one TTL for all: the silence rule reads the newest record's), and once more before it asks.
        await _seen_dead(b, a)
        await b.beat(TTL_MS)
        assert await _ask(b, mine) == [True], "the place of a holder whose heartbeat expired was not freed"
        state = {g.name: g for g in await b.backend.groups()}[group]
        assert (state.running, state.waiting) == (1, 0), state

    async def test_a_group_without_a_limit_gives_every_ask_a_place(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        await a.beat(LONG_TTL_MS)
        group, job = unique_name("grp"), unique_name("gj")
        asks = [_place(a, group, job, s) for s in range(1000, 6000, 1000)]
        assert await _ask(a, *asks) == [True] * 5
        await a.backend.set_group(group, 1)
        state = {g.name: g for g in await a.backend.groups()}[group]
        assert (state.max_running, state.running) == (1, 5), "a limit set later stops no run already placed"
        new = _place(a, group, job, 9000)
        assert await _ask(a, new) == [False]
        await a.backend.set_group(group, None)
        assert await _ask(a, new) == [True], "removing the limit did not lift it"
        assert group not in {g.name for g in await a.backend.groups() if g.max_running is not None}

    async def test_a_fleet_never_runs_more_of_a_group_than_its_limit(self, conformance: Conformance) -> None:
        group = unique_name("grp")
        spans: list[tuple[float, float, str, int, float]] = []

        async def work(ctx: RunContext) -> None:
            started, wall = time.monotonic(), time.time()
            await asyncio.sleep(0.4)
            spans.append((started, time.monotonic(), ctx.job.name, ctx.slot_ms, wall))

        names = [unique_name("gjob") for _ in range(4)]
        schedulers = [await conformance.scheduler(start=False) for _ in range(3)]
        await schedulers[0].backend.start()
        await schedulers[0].backend.set_group(group, 2)
        for scheduler in schedulers:
            for name in names:
                scheduler.add(name, "* * * * * *", work, group=group, jitter_ms=0, max_wait_ms=3000)
        for scheduler in schedulers:
            await scheduler.start()
        await eventually(lambda: len(spans) >= 16, timeout_s=30, what="16 runs of the group", interval_s=0.1)
        for scheduler in schedulers:
            await scheduler.stop()
        most = most_at_once((started, ended) for started, ended, *_ in spans)
        assert most <= 2, f"{most} runs of a group limited to 2 ran at once"
        slots = [(name, slot) for _, _, name, slot, _ in spans]
        assert len(slots) == len(set(slots)), "a slot ran twice"
        late = [
            (name, slot, round(wall * 1000) - slot) for _, _, name, slot, wall in spans if wall * 1000 > slot + 3500
        ]
        assert not late, f"runs started past their wait bound (max_wait_ms=3000): {late}"
        for name in names:
            for run in await conformance.history(name):
                if run.status is RunStatus.SKIPPED and run.error and "max_wait_ms" in run.error:
                    assert group in run.error, f"a slot skipped for its group does not name it: {run.error!r}"

    async def test_a_raised_limit_takes_effect_within_2_s(self, conformance: Conformance) -> None:
        group = unique_name("grp")
        started: list[float] = []

        async def work() -> None:
            started.append(time.monotonic())
            await asyncio.sleep(3)

        scheduler = await conformance.scheduler(start=False)
        await scheduler.backend.start()
        await scheduler.backend.set_group(group, 1)
        for _ in range(3):  # overlap="skip": each job has one run at a time, going or waiting
            scheduler.add(unique_name("gjob"), "* * * * * *", work, group=group, jitter_ms=0)
        await scheduler.start()
        operator = await conformance.instance()

        async def two_waiting() -> bool:
            return any(g.name == group and g.waiting >= 2 for g in await operator.backend.groups())

        # The holder's function may start a moment after the store counts the others waiting: await both.
        await eventually(lambda: bool(started), timeout_s=15, what="the first run of the group to start")
        await eventually(two_waiting, timeout_s=15, what="two runs of the group waiting behind the first")
        assert len(started) == 1, f"{len(started)} runs of a group limited to 1 started"
        raised = time.monotonic()
        await operator.backend.set_group(group, 3)
        await eventually(lambda: len(started) >= 3, timeout_s=10, what="the waiting runs to start", interval_s=0.01)
        took = max(started[1:3]) - raised
        assert took <= 2.0, f"a raised limit took {took:.2f} s to start the waiting runs"

    async def test_a_slot_waiting_past_max_wait_ms_is_recorded_skipped_naming_the_group(
        self, conformance: Conformance
    ) -> None:
        group = unique_name("grp")
        release = asyncio.Event()

        async def hold() -> None:
            await asyncio.wait_for(release.wait(), 20)

        scheduler = await conformance.scheduler(start=False)
        await scheduler.backend.start()
        await scheduler.backend.set_group(group, 1)
        # Equal slots take turns by job name: "ga-…" holds the one place, "gb-…" waits past its bound.
        scheduler.add(unique_name("ga"), "* * * * * *", hold, group=group, jitter_ms=0)
        waiter = scheduler.add(unique_name("gb"), "* * * * * *", lambda: None, group=group, max_wait_ms=500)
        await scheduler.start()
        try:

            async def skipped() -> list[Run]:
                return [r for r in await conformance.history(waiter.name) if r.status is RunStatus.SKIPPED]

            runs = await eventually(skipped, timeout_s=15, what="a slot of the waiting job recorded skipped")
        finally:
            release.set()
        assert runs[0].error is not None and group in runs[0].error and "max_wait_ms=500" in runs[0].error, runs[0]
        ran = [r for r in await conformance.history(waiter.name) if r.status is RunStatus.SUCCEEDED]
        assert all(r.slot_ms != runs[0].slot_ms for r in ran), "a slot recorded skipped also ran"


@gated(groups=False)
class GroupRefusalTests(SuiteBase):
    """A backend without groups refuses ``group=`` when the job is added, naming the capability."""

    async def test_group_is_refused_at_add(self, conformance: Conformance) -> None:
        await conformance.instances(1)
        with pytest.raises(UnsupportedOptionError, match="groups"):
            conformance.job("grp-refused", group="reports")
