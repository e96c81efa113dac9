"""Decided slots told to the fleet (capability ``decided_notify``): what ranked claims lean on.

With ``decided_notify`` an instance sends no claim for a scheduled slot it
heard decided (:mod:`anarchon._rank`), so the notice must come from every
claim that wrote a scheduled slot's record, and only from those: a notice of
a slot nobody decided would lose that slot for every later-ranked instance.
A manual run's claim decides no scheduled slot and must not be told.

No test sleeps to see that nothing came: a later scheduled claim, which must
be heard, is the barrier (one channel keeps its order).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from anarchon.job import Job

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import now_ms, unique_name
from ._requires import gated

__all__ = ["DecidedNotifyTests"]

#: The bound on a notice reaching another instance: well under a rank's step would be ideal; this is generous.
HEARD_S = 5.0


class _Ear:
    """One instance's ``watch_decided``, with what it heard in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, int]] = []
        self.new = asyncio.Event()

    def __call__(self, decided: Sequence[tuple[str, int]]) -> None:
        self.heard.extend(decided)
        self.new.set()

    async def until(self, job: str, slot_ms: int, what: str) -> None:
        async def wait() -> None:
            while (job, slot_ms) not in self.heard:
                self.new.clear()
                await self.new.wait()

        try:
            await asyncio.wait_for(wait(), HEARD_S)
        except TimeoutError:
            raise AssertionError(f"{what}: {job}@{slot_ms} not heard within {HEARD_S} s") from None


@contextlib.asynccontextmanager
async def _listening(listener: Instance, claimer: Instance, probe: Job) -> AsyncIterator[_Ear]:
    """``listener`` watching, its subscription made: a scheduled claim by ``claimer`` was heard."""
    ear = _Ear()
    watch = asyncio.ensure_future(listener.backend.watch_decided(ear))
    try:
        slot = now_ms() // 1000 * 1000
        deadline = asyncio.get_running_loop().time() + 10 + HEARD_S
        while True:  # a notice sent before the subscription existed is lost, as the contract allows
            slot += 1000
            await claimer.claim(probe, slot)
            with contextlib.suppress(AssertionError):
                await ear.until(probe.name, slot, "the probe")
                break
            assert not watch.done(), f"watch_decided() returned: {watch}"
            assert asyncio.get_running_loop().time() < deadline, "watch_decided() never heard a claim"
        yield ear
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch


@gated("decided_notify")
class DecidedNotifyTests(SuiteBase):
    """A won scheduled claim is heard by another instance; a manual run and a losing claim tell nothing."""

    async def test_a_won_scheduled_claim_is_heard_by_another_instance(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        probe, job = conformance.make_job(unique_name("dp")), conformance.make_job(unique_name("dn"))
        async with _listening(b, a, probe) as ear:
            slot = now_ms() // 1000 * 1000 + 5000
            won = await a.claim(job, slot)
            assert won.grant is not None, won
            await ear.until(job.name, slot, "a won scheduled claim")

    async def test_each_slot_of_a_batch_is_heard(self, conformance: Conformance) -> None:
        """The slots of many jobs due together go in one call (a backend may decide them apart)."""
        a, b = await conformance.instances(2)
        probe = conformance.make_job(unique_name("dp"))
        jobs = [conformance.make_job(unique_name("db")) for _ in range(120)]
        async with _listening(b, a, probe) as ear:
            slot = now_ms() // 1000 * 1000 + 5000
            results = await a.claim_all([a.make_claim(job, slot) for job in jobs])
            assert all(r.grant is not None for r in results), results
            for job in jobs:
                await ear.until(job.name, slot, "a slot of a batch")

    async def test_a_manual_run_and_a_losing_claim_tell_nothing(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        probe = conformance.make_job(unique_name("dp"))
        job = conformance.make_job(unique_name("dn"), overlap="allow")  # the manual run holds no slot off
        async with _listening(b, a, probe) as ear:
            slot = now_ms() // 1000 * 1000 + 5000
            manual = await a.claim(job, slot + 1000, manual=True)
            assert manual.grant is not None, manual
            assert (await a.claim(job, slot)).grant is not None
            assert (await b.claim(job, slot)).grant is None, "a second claim of a decided slot won"
            barrier = slot + 60_000
            await a.claim(probe, barrier)
            await ear.until(probe.name, barrier, "the barrier")
            told = [s for j, s in ear.heard if j == job.name]
            assert told == [slot], f"told of {job.name} at {told}, where only the scheduled win at {slot} decides"
