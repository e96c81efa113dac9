"""The in-memory lease backend: one process, every lease feature.

It is the reference implementation of the lease rules in
:mod:`anarchon.backend`; the server backends do in one script or one
transaction what :meth:`_Book.claim` does under a lock here. Backends given
the same :class:`MemoryStore` act as separate instances of one store, which is
how the tests race instances without a server.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from ._memory_audit import AuditMixin, MemoryAudit
from ._memory_book import Book as _Book
from ._memory_book import Record as _Record
from ._memory_control import ControlMixin, MemoryControl
from ._memory_decided import MemoryDecided
from ._memory_fleet import MemoryFleet, RegistryMixin
from ._memory_groups import GroupsMixin, MemoryGroups
from ._memory_schedules import MemorySchedules, SchedulesMixin
from .backend import Capabilities, Claim, ClaimResult, Finding, Grant, LeaseBackend, Outcome, next_fencing
from .liveness import RETAIN_DEAD_MS, Beat, Heart, after_silence, soonest_expiry
from .options import check_history_limit
from .run import Attempt, Run, RunStatus, ms_to_datetime

if TYPE_CHECKING:
    from .job import Job

__all__ = ["MemoryBackend", "MemoryStore"]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class MemoryStore:
    """Shared state of several :class:`MemoryBackend` objects (one per instance).

    ``clock`` returns epoch milliseconds; it is the store's own clock, the
    equivalent of Redis ``TIME``, and can be replaced in tests.
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self.clock = clock or _wall_ms
        self._lock = threading.Lock()
        self._books: dict[str, _Book] = {}
        #: Heartbeat records: instance -> alive until (store clock, ms).
        self._alive: dict[str, int] = {}
        #: Pauses and run requests, under the same lock (``_memory_control``).
        self.control = MemoryControl(self)
        #: The fleet registry, under the same lock (``_memory_fleet``).
        self.fleet = MemoryFleet(self)
        #: Stored schedules, under the same lock (``_memory_schedules``).
        self.schedules = MemorySchedules(self)
        #: The audit trail, under the same lock (``_memory_audit``).
        self.audit = MemoryAudit(self)
        #: Watchers of decided slots (``_memory_decided``).
        self.decided = MemoryDecided()
        #: Concurrency groups, under the same lock (``_memory_groups``).
        self.groups_state = MemoryGroups(self, self._alive)

    def _book(self, job: str) -> _Book:
        book = self._books.get(job)
        if book is None:
            book = self._books[job] = _Book()
        return book

    # Each public method below is one atomic step, as a server backend's script is.

    def beat(self, instance: str, ttl_ms: int) -> dict[str, int]:
        """Keep ``instance`` alive ``ttl_ms`` from now; drop long-dead records, return the dead ones."""
        with self._lock:
            now = self.clock()
            self._alive.update(after_silence(self._alive, now, ttl_ms))
            self._alive[instance] = now + ttl_ms
            dead = {}
            for name, until in list(self._alive.items()):
                if until < now - RETAIN_DEAD_MS:
                    del self._alive[name]
                elif until < now:
                    dead[name] = until
            return dead

    def next_expiry(self, instance: str) -> int | None:
        """Milliseconds until the first record of another live instance expires (``Beat.next_expiry_ms``)."""
        with self._lock:
            return soonest_expiry(self._alive, instance, self.clock())

    def leave(self, instance: str) -> None:
        with self._lock:
            if instance in self._alive:
                self._alive[instance] = min(self._alive[instance], self.clock() - 1)

    def _expired(self, rec: _Record, now: int) -> bool:
        """The lease ran out, or the owner's heartbeat did (an owner without a record counts as alive).

        A heartbeat counts only while some record is alive: when every one
        expired, the store was silent, and the next beat renews them
        (:func:`anarchon.liveness.after_silence`).
        """
        if rec.expires_ms <= now:
            return True
        until = self._alive.get(rec.run.instance)
        return until is not None and until < now <= max(self._alive.values())

    def _held(self, book: _Book, now: int, below: int | None = None) -> bool:
        """Whether a run of the job (of a slot below ``below``, if given) holds an unexpired lease: overlap."""
        return any(not self._expired(book.runs[k], now) for k in book.running if below is None or k[0] < below)

    def claim(self, c: Claim) -> ClaimResult:
        opts = c.options
        with self._lock:
            now = self.clock()
            book = self._book(c.job)
            key = (c.slot_ms, c.manual)
            existing = book.runs.get(key)
            if existing is not None:
                if existing.token != c.token:
                    return ClaimResult(Outcome.LOST)
                if existing.run.status is RunStatus.SKIPPED:
                    return ClaimResult(Outcome.SKIPPED, record=existing.run)
                if existing.run.status is RunStatus.RUNNING:
                    return ClaimResult(Outcome.WON, self._grant(existing))
                return ClaimResult(Outcome.LOST)
            supersedes = previous = None
            if not c.manual:
                if book.mark is not None and c.slot_ms <= book.mark:
                    if opts.overlap == "skip" and self._held(book, now, below=c.slot_ms):
                        return self._skip(book, key, c, now)  # delayed past a newer slot, and overlapped anyway
                    return ClaimResult(Outcome.LOST)
                for slot, manual in list(book.running) if book.running else ():
                    rec = book.runs[slot, manual]
                    if not manual and slot < c.slot_ms and self._expired(rec, now):
                        rec.run = rec.run.replace(status=RunStatus.ABANDONED)
                        book.settle((slot, manual), rec)
                        if slot == book.won:
                            supersedes = slot
                previous, book.mark = book.mark, c.slot_ms
            if opts.overlap == "skip" and self._held(book, now):
                return self._skip(book, key, c, now)
            book.fencing = next_fencing(book.fencing, now)
            if not c.manual:
                book.won = c.slot_ms
            rec = _Record(c.running(fencing=book.fencing), c.token, opts.lease_ms, now + opts.lease_ms)
            book.put(key, rec)
            self._trim(book, c.spec, now)
            return ClaimResult(Outcome.WON, self._grant(rec, c.now_ms, supersedes, previous))

    def backfill(self, c: Claim) -> ClaimResult:
        """A backfill claim (see :mod:`anarchon.backend`): the slot's record if it has one, else a win.

        The record is keyed as the scheduled claim of the slot is, so the
        fleet's claim of a slot just due and every overlapping backfill meet
        here; ``mark`` only moves up to the slot, ``won`` stays.
        """
        with self._lock:
            now = self.clock()
            book = self._book(c.job)
            key = (c.slot_ms, False)
            existing = book.runs.get(key)
            if existing is not None:
                if existing.token == c.token and existing.run.status is RunStatus.RUNNING:
                    return ClaimResult(Outcome.WON, self._grant(existing))
                return ClaimResult(Outcome.LOST, record=existing.run)
            book.fencing = next_fencing(book.fencing, now)
            if book.mark is None or book.mark < c.slot_ms:
                book.mark = c.slot_ms
            rec = _Record(c.running(fencing=book.fencing), c.token, c.options.lease_ms, now + c.options.lease_ms)
            book.put(key, rec)
            self._trim(book, c.spec, now)
            return ClaimResult(Outcome.WON, self._grant(rec, c.now_ms))

    def revive(self, c: Claim) -> ClaimResult:
        """A revive claim (see :mod:`anarchon.backend`): a ``skipped`` slot granted when no live run holds the job."""
        with self._lock:
            now = self.clock()
            book = self._book(c.job)
            key = (c.slot_ms, False)
            existing = book.runs.get(key)
            if existing is None:
                return ClaimResult(Outcome.LOST)
            if existing.token == c.token and existing.run.status is RunStatus.RUNNING:
                return ClaimResult(Outcome.WON, self._grant(existing))
            if existing.run.status is not RunStatus.SKIPPED:
                return ClaimResult(Outcome.LOST, record=existing.run)
            if self._held(book, now):
                return ClaimResult(Outcome.SKIPPED, record=existing.run)
            book.fencing = next_fencing(book.fencing, now)
            rec = _Record(c.running(fencing=book.fencing), c.token, c.options.lease_ms, now + c.options.lease_ms)
            book.put(key, rec)
            return ClaimResult(Outcome.WON, self._grant(rec, c.now_ms))

    def _skip(self, book: _Book, key: tuple[int, bool], c: Claim, now: int) -> ClaimResult:
        """Record the slot skipped for overlap: a run still holds the job's lease."""
        base = c.running()
        skipped = base.replace(status=RunStatus.SKIPPED, finished_at=base.started_at, duration_ms=0)
        book.put(key, _Record(skipped, c.token, c.options.lease_ms, now))
        self._trim(book, c.spec, now)
        return ClaimResult(Outcome.SKIPPED, record=skipped)

    def _grant(
        self, rec: _Record, started_ms: int | None = None, supersedes: int | None = None, previous: int | None = None
    ) -> Grant:
        run = rec.run
        started = run.started_at
        if started_ms is None:
            started_ms = round(started.timestamp() * 1000) if started else 0
        return Grant(
            job=run.job,
            slot_ms=run.slot_ms,
            instance=run.instance,
            token=rec.token,
            attempt=run.attempt,
            fencing=run.fencing,
            manual=run.manual,
            catch_up=run.catch_up,
            missed=run.missed,
            started_at_ms=started_ms,
            lease_ms=rec.lease_ms,
            supersedes=supersedes,
            previous_mark=previous,
        )

    def _owned(self, grant: Grant) -> _Record | None:
        rec = self._book(grant.job).runs.get((grant.slot_ms, grant.manual))
        if rec is None or rec.token != grant.token or rec.run.status is not RunStatus.RUNNING:
            return None
        return rec

    def renew(self, grant: Grant) -> bool:
        with self._lock:
            rec = self._owned(grant)
            if rec is None or rec.handed_over:
                return False
            rec.expires_ms = self.clock() + rec.lease_ms
            return True

    def finish(self, grant: Grant, run: Run) -> bool:
        with self._lock:
            rec = self._owned(grant)
            if rec is None:
                return False
            rec.run = run.replace(earlier=rec.run.earlier)  # the attempts before the runner's, kept
            rec.expires_ms = self.clock()
            self._book(grant.job).settle((grant.slot_ms, grant.manual), rec)
            return True

    def hand_over(self, grant: Grant) -> bool:
        with self._lock:
            rec = self._owned(grant)
            if rec is None:
                return False
            rec.handed_over = True
            rec.expires_ms = self.clock()
            return True

    def take_over(self, job: Job, instance: str) -> list[ClaimResult]:
        won: list[ClaimResult] = []
        book = self._books.get(job.name)
        if book is None or not book.running:
            return won  # nothing running: nothing to take over (read without the lock, as a poll)
        with self._lock:
            now = self.clock()
            for slot, manual in sorted(book.running):
                rec = book.runs[slot, manual]
                if not self._expired(rec, now):
                    continue
                newest = manual or slot == book.won
                if not newest or (rec.run.attempt >= job.options.max_attempts and not rec.handed_over):
                    rec.run = rec.run.replace(status=RunStatus.ABANDONED)
                    book.settle((slot, manual), rec)
                    continue
                book.fencing = next_fencing(book.fencing, now)
                # A hand-over is no death: the run goes on as the same attempt, so max_attempts counts deaths.
                attempt = rec.run.attempt + (0 if rec.handed_over else 1)
                rec.token = uuid.uuid4().hex
                rec.handed_over = False
                rec.lease_ms = job.options.lease_ms
                rec.expires_ms = now + rec.lease_ms
                earlier = rec.run.earlier
                if attempt > rec.run.attempt:  # the attempt that died (not one handed over), kept
                    old = rec.run
                    earlier += (Attempt(old.attempt, old.instance, old.fencing, old.started_at),)
                rec.run = rec.run.replace(
                    instance=instance,
                    attempt=attempt,
                    fencing=book.fencing,
                    started_at=ms_to_datetime(now),
                    earlier=earlier,
                )
                won.append(ClaimResult(Outcome.WON, self._grant(rec)))
        return won

    def mark(self, job: str) -> int | None:
        with self._lock:
            return self._book(job).mark

    def forget_job(self, job: str, since_ms: int) -> bool:
        """Drop the job's book and pause unless it is in use (a lease held, a slot after ``since_ms``); lock held."""
        book = self._books.get(job)
        if book is not None and (self._held(book, self.clock()) or (book.mark or 0) > since_ms):
            return False
        self._books.pop(job, None)
        self.control.forget(job)
        return True

    def history(self, job: str, limit: int) -> list[Run]:
        with self._lock:
            book = self._books.get(job)
            if book is None or limit <= 0:
                return []
            return [book.runs[key].run for key in book.order[: -limit - 1 : -1]]

    def _trim(self, book: _Book, job: Job, now: int) -> None:
        """Keep the newest ``history_size`` records and every running one; drop finished ones past the TTL."""
        size, ttl = job.options.history_size, job.options.history_ttl_ms
        excess = len(book.order) - size
        if excess > 0:
            kept = [key for key in book.order[:excess] if key in book.running]
            for key in book.order[:excess]:
                if key not in book.running:
                    del book.runs[key]
            book.order[:excess] = kept
        if ttl is not None:
            cut = 0
            while cut < len(book.order) and book.order[cut][0] < now - ttl:
                cut += 1
            if cut:
                kept = [key for key in book.order[:cut] if key in book.running]
                for key in book.order[:cut]:
                    if key not in book.running:
                        del book.runs[key]
                book.order[:cut] = kept


class MemoryBackend(ControlMixin, RegistryMixin, SchedulesMixin, AuditMixin, GroupsMixin, LeaseBackend):
    """A lease backend in this process's memory (``memory://``).

    For tests, examples and single-process use. Each object is one instance;
    pass the same ``store`` to several to race them.
    """

    name: ClassVar[str] = "memory"
    url_schemes: ClassVar[tuple[str, ...]] = ("memory",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=True,
        history_ttl=True,
        multi_process=False,
        liveness=True,
        backfill=True,
        revive=True,
        pause=True,
        trigger=True,
        registry=True,
        schedules=True,
        schedule_notify=True,
        guarantees=True,
        audit=True,
        attempts=True,
        decided_notify=True,
        control_notify=True,
        groups=True,
        group_notify=True,
    )
    store: MemoryStore

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store if store is not None else MemoryStore()

    @classmethod
    def from_url(cls, url: str) -> MemoryBackend:
        return cls()

    def __repr__(self) -> str:
        return f"MemoryBackend(store=<MemoryStore at {id(self.store):#x}>)"

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        results = [self.store.claim(c) for c in claims]
        told = (Outcome.WON, Outcome.SKIPPED)
        self.store.decided.tell(
            [(c.job, c.slot_ms) for c, r in zip(claims, results, strict=True) if not c.manual and r.outcome in told]
        )
        return results

    async def watch_decided(self, heard: Callable[[Sequence[tuple[str, int]]], None]) -> None:
        await self.store.decided.watch(heard)

    async def backfill(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        return [self.store.backfill(c) for c in claims]

    async def revive(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        return [self.store.revive(c) for c in claims]

    async def finish(self, grant: Grant, run: Run) -> bool:
        return self.store.finish(grant, run)

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        return self.store.history(job, check_history_limit(limit))

    async def now_ms(self) -> int:
        return self.store.clock()

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        return [self.store.renew(g) for g in grants]

    async def take_over(self, jobs: Sequence[Job], instance: str) -> list[ClaimResult]:
        return [r for job in jobs for r in self.store.take_over(job, instance)]

    async def hand_over(self, grant: Grant) -> bool:
        return self.store.hand_over(grant)

    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        return {job.name: self.store.mark(job.name) for job in jobs}

    def heart(self) -> Heart:
        return _MemoryHeart(self.store)

    async def guarantees(self) -> list[Finding]:
        """One process, nothing on disk: nothing to fail over to, and a restart starts a new store."""
        return [
            Finding(
                "scope",
                True,
                "in this process's memory: one run per slot among the instances of this process; "
                "nothing survives a restart, so use it for tests and single-process tools",
            )
        ]


class _MemoryHeart(Heart):
    """The heartbeat into a :class:`MemoryStore`: its lock makes it safe from the heartbeat thread."""

    tells_next_expiry = True

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def open(self) -> None:
        pass

    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        dead = self._store.beat(instance, ttl_ms)
        return Beat(dead, self._store.next_expiry(instance))

    async def leave(self, instance: str) -> None:
        self._store.leave(instance)

    async def close(self) -> None:
        pass
