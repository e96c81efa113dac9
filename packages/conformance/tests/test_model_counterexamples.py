"""Counterexamples the protocol model found (model/README.md), replayed against MemoryBackend.

Each test follows one spin trail: the model's fault (a lost request) is a
backend whose call raises, as a timed-out call does; the model's clock is the
scheduler's real one. A finding's test failed on the code the model was
checked against and passes with the fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from anarchon import RunContext, Scheduler
from anarchon.backend import Claim, ClaimResult
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon.run import Run
from anarchon_conformance import eventually


class _FirstClaimLost(MemoryBackend):
    """The model's lost claim request: the first ``claim()`` call raises, and nothing reaches the store."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.lost_slots: list[int] = []

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if not self.lost_slots:
            self.lost_slots.extend(c.slot_ms for c in claims)
            raise ConnectionError("the claim request was lost (timed out)")
        return await super().claim(claims)


def _accounts_for(history: list[Run], slot_ms: int, period_ms: int) -> bool:
    """The slot has a record, or a later run covers it in ``missed`` (counted back from its own slot)."""
    for run in history:
        if run.slot_ms == slot_ms:
            return True
        if run.missed and run.slot_ms > slot_ms >= run.slot_ms - (run.missed - 1) * period_ms:
            return True
    return False


# Model finding 1 (model/README.md, trail finding-first-slot): when the first claim of a job that never
# ran was lost on every instance, recovery skipped the job because its mark was None, and the next slot's
# grant named previous_mark=None, so the slot was neither run, recorded nor counted in a later run's missed.
@pytest.mark.asyncio
async def test_a_lost_first_claim_does_not_lose_the_first_slot() -> None:
    backend = _FirstClaimLost(MemoryStore())
    ran: list[int] = []

    async def job(ctx: RunContext) -> None:
        ran.append(ctx.slot_ms)

    scheduler = Scheduler(backend, instance_id="the-only-instance")
    scheduler.add("first-slot", "* * * * * *", job, jitter_ms=0)
    async with scheduler:

        async def two_later_slots_ran() -> bool:
            return bool(backend.lost_slots) and sum(s > backend.lost_slots[0] for s in ran) >= 2

        await eventually(two_later_slots_ran, timeout_s=15, what="two slots after the lost claim run")
        await asyncio.sleep(0)
    (lost,) = backend.lost_slots
    history = await backend.history("first-slot")
    assert _accounts_for(history, lost, 1000), (
        f"slot {lost} (its claim lost, the instance alive throughout) was neither run, recorded, nor "
        f"covered by a later run's missed: history {[(r.slot_ms, r.status.value, r.missed) for r in history]}"
    )
