"""Pauses and run requests of a :class:`~anarchon.memory.MemoryStore`: the reference for the server backends.

Kept beside the store's books, under the store's one lock, so a paused claim
is decided in the same atomic step as any other claim of the job. Each pause,
resume and request tells the watchers of :meth:`ControlMixin.watch_control`
(capability ``control_notify``), as the server backends notify theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from ._memory_book import Record, Store
from ._memory_decided import MemoryDecided
from .claims import Claim, ClaimResult, Outcome
from .control import REQUEST_TTL_MS, PauseState, RunRequest, paused_run
from .run import RunStatus

__all__ = ["ControlMixin", "MemoryControl"]


class MemoryControl:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._pauses: dict[str, PauseState] = {}
        self._requests: dict[tuple[str, int], RunRequest] = {}
        #: Watchers told of each change (the same fan-out as decided slots, with no payload).
        self.watchers = MemoryDecided()

    def _told(self) -> None:
        self.watchers.tell((("", 0),))

    def pause(self, job: str, reason: str | None, by: str | None) -> PauseState:
        with self._store._lock:
            old = self._pauses.get(job)
            since = old.since_ms if old is not None and old.paused else self._store.clock()
            state = self._pauses[job] = PauseState(job, since, None, reason, by)
        self._told()
        return state

    def resume(self, job: str) -> PauseState | None:
        with self._store._lock:
            old = self._pauses.get(job)
            if old is None or not old.paused:
                return None
            state = self._pauses[job] = dataclasses.replace(old, until_ms=max(old.since_ms, self._store.clock()))
        self._told()
        return state

    def forget(self, job: str) -> None:
        """Drop the job's pause (the store's lock held: a removed schedule's state goes)."""
        self._pauses.pop(job, None)

    def pauses(self) -> list[PauseState]:
        with self._store._lock:
            return sorted(self._pauses.values(), key=lambda p: p.job)

    def claim_paused(self, c: Claim) -> ClaimResult | None:
        store = self._store
        with store._lock:
            state = self._pauses.get(c.job)
            if c.manual or state is None or not state.covers(c.slot_ms):
                return None
            now = store.clock()
            book = store._book(c.job)
            key = (c.slot_ms, False)
            existing = book.runs.get(key)
            if existing is not None:
                if existing.token == c.token and existing.run.status is RunStatus.PAUSED:
                    return ClaimResult(Outcome.PAUSED, record=existing.run)
                return ClaimResult(Outcome.LOST)
            if book.mark is not None and c.slot_ms <= book.mark:
                return ClaimResult(Outcome.LOST)
            record = paused_run(c)
            book.put(key, Record(record, c.token, c.options.lease_ms, now))
            book.mark = c.slot_ms
            store._trim(book, c.spec, now)
            return ClaimResult(Outcome.PAUSED, record=record)

    def request_run(self, job: str, by: str | None) -> RunRequest:
        with self._store._lock:
            slot = self._store.clock()
            while (job, slot) in self._requests:
                slot += 1
            request = self._requests[job, slot] = RunRequest(job, slot, by)
        self._told()
        return request

    def run_requests(self) -> list[RunRequest]:
        with self._store._lock:
            oldest = self._store.clock() - REQUEST_TTL_MS
            for key in [k for k in self._requests if k[1] < oldest]:
                del self._requests[key]
            return sorted(self._requests.values(), key=lambda r: (r.slot_ms, r.job))

    def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        with self._store._lock:
            for request in requests:
                self._requests.pop((request.job, request.slot_ms), None)


class _Steered(Protocol):
    """What the mixin needs of the store (a :class:`~anarchon.memory.MemoryStore`): no import of it, no circle."""

    control: MemoryControl


class ControlMixin:
    """Mixed into :class:`~anarchon.memory.MemoryBackend`: steering, kept in the store's :class:`MemoryControl`."""

    store: _Steered

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        return self.store.control.pause(job, reason, by)

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        return self.store.control.resume(job)

    async def pauses(self) -> list[PauseState]:
        return self.store.control.pauses()

    async def claim_paused(self, claims: Sequence[Claim]) -> list[ClaimResult | None]:
        return [self.store.control.claim_paused(c) for c in claims]

    async def request_run(self, job: str, *, by: str | None = None) -> RunRequest:
        return self.store.control.request_run(job, by)

    async def run_requests(self) -> list[RunRequest]:
        return self.store.control.run_requests()

    async def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        self.store.control.run_requests_done(requests)

    async def watch_control(self, changed: Callable[[], None]) -> None:
        changed()  # subscribed: what came before was not heard
        await self.store.control.watchers.watch(lambda _: changed())
