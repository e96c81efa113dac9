"""What the in-memory store keeps per job: the records and the book, shared by its parts.

:mod:`anarchon.memory` (the lease rules) and :mod:`anarchon._memory_control`
(pauses and run requests) both write them under the store's one lock;
:class:`Store` is the part of :class:`~anarchon.memory.MemoryStore` the
second needs, so neither module imports the other's.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .run import Run, RunStatus

if TYPE_CHECKING:
    from .job import Job

__all__ = ["Book", "Record", "Store"]


@dataclass
class Record:
    """A run as the store keeps it: the public record plus the lease."""

    run: Run
    token: str
    lease_ms: int
    expires_ms: int
    handed_over: bool = False


@dataclass
class Book:
    """Everything the store knows of one job.

    ``order`` holds the keys of ``runs`` sorted oldest first and ``running``
    the keys of runs whose status is running, so a claim touches the live
    runs and the few records it trims, never the whole history (as the server
    backends index running runs by lease expiry).
    """

    mark: int | None = None
    #: The newest scheduled slot *won* (skipped slots move ``mark``, not this).
    won: int | None = None
    fencing: int = 0
    runs: dict[tuple[int, bool], Record] = field(default_factory=dict)
    order: list[tuple[int, bool]] = field(default_factory=list)
    running: set[tuple[int, bool]] = field(default_factory=set)

    def put(self, key: tuple[int, bool], rec: Record) -> None:
        if key not in self.runs:
            if not self.order or self.order[-1] < key:
                self.order.append(key)
            else:
                bisect.insort(self.order, key)
        self.runs[key] = rec
        self.settle(key, rec)

    def settle(self, key: tuple[int, bool], rec: Record) -> None:
        """Keep ``running`` in step after a record's status changed."""
        if rec.run.status is RunStatus.RUNNING:
            self.running.add(key)
        else:
            self.running.discard(key)


class Store(Protocol):
    """The store as its parts see it: one lock, one clock, the books."""

    _lock: threading.Lock

    def clock(self) -> int: ...

    def _book(self, job: str) -> Book: ...

    def _trim(self, book: Book, job: Job, now: int) -> None: ...
