"""The runs this instance is executing, and what each one's parts need to know of it.

The executor creates an :class:`ActiveRun` per grant, the lease keeper renews
it and may declare its lease lost, and ``stop()`` waits for it to end. They
share one :class:`ActiveRuns` table keyed by the run's :class:`~anarchon.run.RunId`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

from .backend import Grant
from .context import RunContext
from .job import Job
from .run import RunId

__all__ = ["ActiveRun", "ActiveRuns", "Flag"]


class Flag:
    """A flag that can be awaited; its Event is made only when someone waits.

    Each run has two, and an Event per run would be a cost paid every slot.
    """

    __slots__ = ("_event", "is_set")

    def __init__(self) -> None:
        self.is_set = False
        self._event: asyncio.Event | None = None

    def set(self) -> None:
        self.is_set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if not self.is_set:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()


@dataclass(eq=False)
class ActiveRun:
    """A run this instance is executing."""

    job: Job
    grant: Grant
    context: RunContext
    #: Monotonic time (s) after which the lease must be presumed lost.
    lease_deadline: float
    #: Monotonic time (s) the claim or take-over that granted it was sent (the heartbeat checks it).
    sent: float = 0.0
    #: Monotonic time (s) of the next renewal (lease backends).
    renew_at: float = 0.0
    #: The task the job function runs in; cancelled only while ``in_job``.
    task: asyncio.Task[Any] | None = None
    in_job: bool = False
    #: Cancels requested of ``task`` for the job (stop, lease lost, timeout), undone once it returned.
    cancels: int = 0
    timed_out: bool = False
    cancelled_by_stop: bool = False
    #: The job function has given its final result and the run's record is being written. Such a
    #: run is never handed over: recorded, it is not run again; its token fences a take-over.
    finishing: bool = False
    #: Set when the job function returned (a later attempt of this run waits for it).
    returned: Flag = dataclasses.field(default_factory=Flag)
    #: Set when the run's bookkeeping is done too (stop() waits for it).
    ended: Flag = dataclasses.field(default_factory=Flag)
    #: Between two tries of a retried job: a cancel ends the wait (:meth:`cancel_job`).
    between_tries: Flag | None = None

    #: The run's identity, computed once: the table is looked up by it several times per run.
    key: RunId = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.key = self.grant.id

    def cancel_job(self) -> bool:
        """Cancel the job function if it is still running; its bookkeeping is never interrupted.

        Between two tries of a retried job this ends the wait for the retry,
        so a stop or a lost lease does not wait out a retry's delay.
        """
        if self.between_tries is not None and not self.between_tries.is_set:
            self.between_tries.set()
            return True
        if not self.in_job or self.task is None or self.task.done():
            return False
        self.cancels += 1
        self.task.cancel()
        return True

    def time_out(self) -> None:
        if self.in_job and not self.cancels:
            self.timed_out = True
            self.cancel_job()

    def job_returned(self) -> None:
        self.in_job = False
        self.returned.set()

    async def wait_job_returned(self) -> None:
        if self.in_job:
            await self.returned.wait()


class ActiveRuns(dict[RunId, ActiveRun]):
    """Runs in progress by key; an attempt removes only its own entry (a later attempt may hold the key)."""

    def holds(self, active: ActiveRun) -> bool:
        return self.get(active.key) is active

    def discard(self, active: ActiveRun) -> None:
        if self.holds(active):
            del self[active.key]
