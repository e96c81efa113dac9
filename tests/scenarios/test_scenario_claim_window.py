"""The bound on claims out to the backend at once (``anarchon._window``), and what it does to late slots.

Before it, a backend that answered slower than slots came due had every
batch sent at once and left waiting: a 10-minute soak on a broker slowed by
its per-subject limits held tens of 1,000-claim batches per instance and grew to 1.1 GB.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from anarchon import Claim, ClaimResult, MemoryBackend, MemoryStore, Scheduler, _batcher, hookimpl
from anarchon_conformance import eventually

# --- the scheduler behind it --------------------------------------------------------------------


class Stalled(MemoryBackend):
    """Decides claims only once ``release`` is set; counts the claims out at once."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.release = asyncio.Event()
        self.out = 0
        self.most_out = 0
        self.sent: list[tuple[str, int]] = []

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        self.sent.extend((c.job, c.slot_ms) for c in claims)
        self.out += len(claims)
        self.most_out = max(self.most_out, self.out)
        try:
            await self.release.wait()
            return await super().claim(claims)
        finally:
            self.out -= len(claims)


class Skips:
    def __init__(self) -> None:
        self.late: list[tuple[str, int]] = []
        #: Skipped for any other reason: a slot claimed while the run before it still finishes is
        #: skipped for overlap, the job's default rule, when a stalled backend answers in a rush.
        self.other: list[tuple[str, int]] = []

    @hookimpl
    def anarchon_slot_skipped(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
        (self.late if reason == "late" else self.other).append((job.name, slot_ms))


async def test_a_stalled_backend_gets_a_bounded_number_of_claims_and_late_slots_are_skipped_unsent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_batcher, "CLAIMS_OUT", 3)  # one second's batch of the three jobs
    store = MemoryStore()
    backend = Stalled(store)
    skips = Skips()
    ran: Counter[tuple[str, int]] = Counter()
    s = Scheduler(backend, instance_id="window", plugins=[skips])
    for name in ("a", "b", "c"):
        s.add(name, "* * * * * *", lambda ctx: ran.update([(ctx.job.name, ctx.slot_ms)]), jitter_ms=0, max_late_ms=1500)
    await s.start()
    try:
        await eventually(lambda: s._batcher._window.waiting >= 4)  # four more seconds came due, unsent
        assert backend.most_out == 3
        first_sent = {slot for _, slot in backend.sent}
        assert len(first_sent) == 1, f"only the first second's claims may be out, not {sorted(first_sent)}"
        backend.release.set()
        await eventually(lambda: len(skips.late) >= 6 and len(ran) >= 6)
    finally:
        await s.stop()
    assert backend.most_out <= 3, f"{backend.most_out} claims were out at once"
    late = set(skips.late)
    assert len(late) == len(skips.late), "a slot was reported late twice"
    assert not late & set(backend.sent), "a slot reported late was still sent to the backend"
    assert not late & set(ran), "a slot reported late was run"
    assert all(store.history(job, 100) for job in ("a", "b", "c"))
    for job, slot in late:
        assert slot not in {r.slot_ms for r in store.history(job, 100)}, f"{job}@{slot} has a record"
    assert max(ran.values()) == 1
    assert not set(skips.other) & set(ran), "a slot reported skipped was run"
    # Every slot from the first to the last one run was run or skipped: none fell between.
    for job in ("a", "b", "c"):
        slots = sorted({slot for j, slot in [*ran, *late, *skips.other] if j == job})
        assert slots == list(range(slots[0], slots[-1] + 1000, 1000)), f"{job}: a slot neither ran nor was skipped"


async def test_batches_still_waiting_when_the_stop_begins_are_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_batcher, "CLAIMS_OUT", 1)
    store = MemoryStore()
    backend = Stalled(store)
    s = Scheduler(backend, instance_id="window-stop")
    s.add("job", "* * * * * *", lambda ctx: None, jitter_ms=0)
    await s.start()
    await eventually(lambda: s._batcher._window.waiting >= 2)
    (sent_before,) = backend.sent
    stopping = asyncio.ensure_future(s.stop(grace_ms=5000))
    while not s._stopping:
        await asyncio.sleep(0)
    backend.release.set()
    await asyncio.wait_for(stopping, 10)
    assert backend.sent == [sent_before], "a batch that had not yet gone out was sent during the stop"
    (record,) = store.history("job", 10)
    assert record.slot_ms == sent_before[1]
