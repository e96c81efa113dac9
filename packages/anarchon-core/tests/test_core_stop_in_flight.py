"""A grant answered while ``stop()`` runs is run, not dropped with its claim's task.

Before, ``stop()`` waited only for runs already started, then cancelled every
task, the claim batch waiting for its answer among them: the backend had
granted the slot, nobody ran it, and its record stayed ``running`` under a
lease nobody renewed, until a newer slot abandoned it. A fleet stopped and
started again (the catch-up fleet test) lost that slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from anarchon import Claim, ClaimResult, MemoryBackend, MemoryStore, RunContext, RunStatus, Scheduler


class SlowAnswers(MemoryBackend):
    """Decides each claim at once, and answers only when ``release`` is set: an answer still on the wire."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.decided = asyncio.Event()
        self.release = asyncio.Event()

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        results = await super().claim(claims)
        self.decided.set()
        await self.release.wait()
        return results


async def test_a_grant_answered_during_stop_is_run() -> None:
    store = MemoryStore()
    backend = SlowAnswers(store)
    scheduler = Scheduler(backend)
    ran: list[int] = []

    def job(ctx: RunContext) -> None:
        ran.append(ctx.slot_ms)

    scheduler.add("every-second", "* * * * * *", job, jitter_ms=0)
    await scheduler.start()
    await asyncio.wait_for(backend.decided.wait(), 10)
    (granted,) = store.history("every-second", 10)
    assert granted.status is RunStatus.RUNNING
    stopping = asyncio.ensure_future(scheduler.stop(grace_ms=5000))
    while not scheduler._stopping:  # the stop has begun; the answer is still on its way
        await asyncio.sleep(0)
    backend.release.set()
    await asyncio.wait_for(stopping, 10)
    assert ran == [granted.slot_ms]
    (record,) = [r for r in store.history("every-second", 10) if r.slot_ms == granted.slot_ms]
    assert record.status is RunStatus.SUCCEEDED
