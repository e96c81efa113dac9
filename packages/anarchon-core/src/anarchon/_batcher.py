"""Claim batching: the slots due together are claimed in one backend call (in parts past 1,000).

:meth:`ClaimBatcher.submit` counts a batch as in flight at once (a take-over
pass waits for quiet between batches), decides it — retrying with the same
tokens only where that is the only way not to lose the slot — and dispatches
each answer: a win is run, a skip or a loss is reported to observers. A batch
goes out only when :class:`~anarchon._window.ClaimWindow` has room for it; one
that waited there past its slots' ``max_late_ms`` is skipped as late, unsent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from ._collector import CollectionDeferred
from ._health import BackendHealth
from ._runlog import RunLog
from ._tasks import Tasks
from ._waits import at_most
from ._window import ClaimWindow
from .backend import Capabilities, Claim, ClaimResult, Grant, Outcome
from .clock import Clock
from .job import Job
from .observers import Observers

__all__ = ["ClaimBatcher"]

log = logging.getLogger("anarchon.claims")

#: Back-off between retries of a batch whose claim raised, doubling up to 2 s.
RETRY_MIN_S, RETRY_MAX_S = 0.2, 2.0
#: Claims per backend call when more come due together, and how many such calls are out at once.
#: 10,000 slots due in one instant were one call: no run started before the whole batch was
#: answered (1.5-2 s on a loaded 2-core machine), and the runs' own start-up then came on top.
#: In parts, the runs of the first part start while the backend decides the next two.
PART, PARTS_AT_ONCE = 1000, 2
#: Claims out to the backend at once, over all batches (see :mod:`anarchon._window`): a burst's
#: two parts and two more seconds of 1,000 every-second jobs; a healthy backend stays far below.
CLAIMS_OUT = 4 * PART
#: Longest a claim batch holds the cyclic collector off while the backend answers (s).
HOLD_S = 1.0


class Claimer(Protocol):
    """What the batcher needs of a backend: the backend itself, or the pause gate in front of it."""

    @property
    def capabilities(self) -> Capabilities: ...

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]: ...


class ClaimBatcher:
    def __init__(
        self,
        backend: Claimer,
        clock: Clock,
        instance_id: str,
        health: BackendHealth,
        observers: Observers,
        tasks: Tasks,
        *,
        run: Callable[[Job, Grant, float, int | None], Awaitable[object]],
        runlog: RunLog,
        stopping: Callable[[], bool],
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._instance_id = instance_id
        self._health = health
        self._observers = observers
        self._tasks = tasks
        self._run = run
        self._runlog = runlog
        self._stopping = stopping
        #: Claim batches not yet answered and started; ``_idle`` is set while there are none.
        self._in_flight = 0
        self._idle: asyncio.Event | None = None
        self._window = ClaimWindow(CLAIMS_OUT)

    @property
    def clock(self) -> Clock:
        """The instance's clock, for the parts that claim through this batcher (backfill)."""
        return self._clock

    def start(self) -> None:
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._window = ClaimWindow(CLAIMS_OUT)

    def claims(
        self, due: list[tuple[Job, int]], *, manual: bool = False, catch_up: bool = False, missed: int = 0
    ) -> list[Claim]:
        """Claims of slots due together: one clock reading and one read of randomness for all of them."""
        now = self._clock.now_ms()
        tokens = os.urandom(16 * len(due)).hex()
        instance = self._instance_id
        return [
            Claim(
                job=job.name,
                spec=job,
                slot_ms=slot,
                instance=instance,
                token=tokens[32 * i : 32 * i + 32],
                now_ms=now,
                manual=manual,
                catch_up=catch_up,
                missed=missed,
            )
            for i, (job, slot) in enumerate(due)
        ]

    def claim(self, job: Job, slot_ms: int, *, manual: bool = False, catch_up: bool = False, missed: int = 0) -> Claim:
        (claim,) = self.claims([(job, slot_ms)], manual=manual, catch_up=catch_up, missed=missed)
        return claim

    def submit(self, claims: list[Claim], due_ms: Sequence[int | None] | None = None) -> None:
        """Count the batch as in flight from now (not from when its task starts), then claim and run it.

        ``due_ms``, per claim, is when it was due (for the run's start delay), ``None`` where that means nothing.
        A batch over :data:`PART` claims goes out in parts, :data:`PARTS_AT_ONCE` at a time, each
        part's runs started as soon as it is answered.
        """
        due = list(due_ms) if due_ms is not None else [None] * len(claims)
        gate = asyncio.Semaphore(PARTS_AT_ONCE) if len(claims) > PART else None
        for i in range(0, len(claims), PART):
            self._in_flight += 1
            if self._idle is not None:
                self._idle.clear()
            self._tasks.spawn(self._claim_and_run(claims[i : i + PART], due[i : i + PART], gate))

    def submit_due(self, due: list[tuple[Job, int, int]]) -> None:
        """The timer's callback: claim the slots that came due together."""
        self.submit(self.claims([(job, slot) for job, slot, _ in due]), [at for _, _, at in due])

    async def _claim_and_run(
        self, claims: list[Claim], due_ms: Sequence[int | None], gate: asyncio.Semaphore | None = None
    ) -> None:
        try:
            if gate is None:
                await self._through_window(claims, due_ms)
            else:
                async with gate:
                    await self._through_window(claims, due_ms)
        finally:
            self._in_flight -= 1
            if not self._in_flight and self._idle is not None:
                self._idle.set()

    async def _through_window(self, claims: list[Claim], due_ms: Sequence[int | None]) -> None:
        """Wait for room among the claims out; one that waited past its ``max_late_ms`` is not sent."""
        size = len(claims)
        waited = await self._window.enter(size)
        try:
            if waited:
                if self._stopping():
                    log.debug("stopping: %d claim(s) that waited for the backend not sent", size)
                    return
                claims, due_ms = self._on_time(claims, due_ms)
            if claims:
                await self._decide_and_dispatch(claims, due_ms)
        finally:
            self._window.leave(size)

    def _on_time(self, claims: list[Claim], due_ms: Sequence[int | None]) -> tuple[list[Claim], Sequence[int | None]]:
        """Claims that waited for their turn, less those now later than ``max_late_ms``, read at today's clock.

        A catch-up or manual claim has no such bound (its slot is past by design). The
        rest carry the time of sending as ``now_ms`` (the run's ``started_at``, and for
        some backends where its lease starts), not the time they were made.
        """
        now = self._clock.now_ms()
        kept: list[Claim] = []
        kept_due: list[int | None] = []
        late: list[Claim] = []
        for claim, due in zip(claims, due_ms, strict=True):
            if not (claim.catch_up or claim.manual) and now > claim.slot_ms + claim.options.max_late_ms:
                late.append(claim)
            else:
                kept.append(dataclasses.replace(claim, now_ms=now))
                kept_due.append(due)
        if late:
            log.warning(
                "%d slot(s) waited for the backend (%d claims out, %d batches waiting) past their max_late_ms; "
                "skipped as late. The backend answers slower than slots come due: look at its load",
                len(late),
                self._window.out,
                self._window.waiting,
                extra={"claims": len(late)},
            )
            for claim in late:
                self._observers.slot_skipped(claim.spec, claim.slot_ms, "late")
        return kept, kept_due

    async def _decide_and_dispatch(self, claims: list[Claim], due_ms: Sequence[int | None]) -> None:
        # Held while the backend answers too, at most HOLD_S: in a 10,000-slot burst the
        # calls' own packing and parsing set off full collections of a heap that holds every
        # job (about 100 ms each, a quarter of the burst's CPU). A slow or stalled store
        # lets it go at HOLD_S, and CollectionDeferred bounds overlapping holds.
        held = CollectionDeferred().__enter__()
        release = asyncio.get_running_loop().call_later(HOLD_S, held.end)
        try:
            results, sent = await self.decide(claims)
            self._report(claims, results, sent)
            with CollectionDeferred():
                for claim, result, due in zip(claims, results, due_ms, strict=True):
                    self._dispatch(claim.spec, claim.slot_ms, result, sent, due)
                # The runs just spawned were queued first: they start (up to their
                # first await) before this task resumes and lets the collector run.
                await asyncio.sleep(0)
        finally:
            release.cancel()
            held.end()

    async def drain(self, timeout_s: float) -> None:
        """Wait, at most ``timeout_s``, until the claim batches in flight are answered and their runs started.

        ``stop()`` calls it before it waits for the runs. A grant answered
        during the stop is then run (and handed over after the grace) like any
        other; before, it was dropped with its batch's task, and its slot stayed
        ``running`` under a lease nobody renewed, then was abandoned unrun once a
        newer slot ran (found by the fleet test of ``catch_up="each"``).
        """
        if self._idle is not None and self._in_flight and timeout_s > 0:
            await at_most(self._idle.wait(), timeout_s)

    async def between_batches(self, limit: float, quiet_ms: int, next_due_ms: Callable[[], int | None]) -> None:
        """Wait until no claim batch is in flight or due within ``quiet_ms``.

        A take-over pass reads every job's runs (a transaction of its own on a
        store): arriving together with a batch, it delayed every run of the
        batch. Waiting is capped at ``limit`` seconds, so dense schedules still get their polls.
        """
        assert self._idle is not None
        deadline = self._clock.monotonic() + limit
        while not self._stopping() and (left := deadline - self._clock.monotonic()) > 0:
            if self._in_flight:
                await at_most(self._idle.wait(), left)
                continue
            next_at = next_due_ms()
            gap = next_at - self._clock.now_ms() if next_at is not None else quiet_ms
            if gap >= quiet_ms:
                return
            await asyncio.sleep(min(left, max(gap, 0) / 1000 + 0.002))

    async def decide(self, claims: list[Claim]) -> tuple[list[ClaimResult], float]:
        """Claim, retrying with the same tokens where that is the only way not to lose the slot.

        A claim backend that recognises a retried token gets retries until the
        slot is too late. A lease backend does not need them: a grant whose
        answer was lost expires and is taken over, and slots not claimed are
        caught up once the backend answers again. Also returns when (monotonic)
        the answering call was sent: a lease runs from then, not from the answer.
        """
        caps = self._backend.capabilities
        retry = caps.idempotent_claim and not caps.lease
        delay = RETRY_MIN_S
        while True:
            sent = self._clock.monotonic()
            try:
                results = await self._backend.claim(claims)
            except Exception as exc:
                self._health.failed("claim", exc)
                deadline = min(c.slot_ms + c.options.max_late_ms for c in claims)
                if not retry or self._stopping() or self._clock.now_ms() + delay * 1000 >= deadline:
                    return [ClaimResult(Outcome.UNKNOWN) for _ in claims], sent
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self._health.ok()
            return results, sent

    def _report(self, claims: list[Claim], results: list[ClaimResult], sent: float) -> None:
        latency_ms = (self._clock.monotonic() - sent) * 1000
        answers = Counter(r.outcome for r in results)
        won, lost = answers[Outcome.WON], answers[Outcome.LOST]
        # A paused slot counts as skipped here: the hook's arguments stay as observers know them.
        skipped, unknown = answers[Outcome.SKIPPED] + answers[Outcome.PAUSED], answers[Outcome.UNKNOWN]
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "claimed %d slot(s) in %.1f ms: %d won, %d lost, %d skipped, %d unknown (%s)",
                len(claims),
                latency_ms,
                won,
                lost,
                skipped,
                unknown,
                ", ".join(f"{c.job}@{c.slot_ms}={r.outcome}" for c, r in zip(claims[:10], results, strict=False)),
                extra={"claims": len(claims), "latency_ms": latency_ms},
            )
        self._observers.claims_decided(len(claims), latency_ms, won, lost, skipped, unknown)

    def _dispatch(self, job: Job, slot_ms: int, result: ClaimResult, sent: float, due_ms: int | None) -> None:
        if result.outcome is Outcome.WON and result.grant is not None:
            self._tasks.spawn(self._run(job, result.grant, sent, due_ms))
        elif result.outcome is Outcome.SKIPPED:
            self._runlog.skipped(job, slot_ms, self._instance_id)
            self._observers.slot_skipped(job, slot_ms, "overlap")
        elif result.outcome is Outcome.PAUSED:
            log.debug(
                "job %s, slot %s: paused, not run", job.name, slot_ms, extra={"job": job.name, "slot_ms": slot_ms}
            )
            self._observers.slot_skipped(job, slot_ms, "paused")
        else:
            reason = "unknown" if result.outcome is Outcome.UNKNOWN else "lost"
            self._observers.claim_lost(job, slot_ms, reason)
