"""Runs the stored schedules whose task this instance has, and follows every change within a poll.

Once before the first claim, every stored schedule is read; then, every
:data:`~anarchon.schedules.POLL_MS` (± 25 %), the backend's change counter is
read (one small read) and, only when it moved, the changes after the revision
this instance holds. Between two polls the watch waits through the backend
(:meth:`~anarchon.backend.Backend.wait_schedules`): a backend that notifies
changes (capability ``schedule_notify``) ends the wait when one comes, so the
poll runs at once, and while its subscription is live the poll waits
:data:`~anarchon.schedules.NOTIFIED_POLL_MS` (± 25 %) instead, only to catch
a notification lost on the way; a backend without one sleeps. Polls woken by a
burst of changes are at least :data:`BURST_GAP_S` apart, and after a failed
poll the next one comes a short poll later, whatever the backend says.

A new or changed schedule becomes a job of its name here (the old
definition's timer entries are dropped with it, so a changed cron never runs
a slot of the old one once seen); a removed one stops being a job. An
instance without the task adds no job, so it never claims the schedule's slots.

A record this version cannot read, or one its task cannot take (unknown keyword
arguments), is reported once per revision and skipped; every other schedule runs.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from ._health import BackendHealth, error_text
from .backend import Backend
from .clock import Clock
from .errortext import clean_text
from .fleet import Fleet
from .job import Job
from .schedules import NOTIFIED_POLL_MS, POLL_MS, TOMBSTONE_MS, StoredSchedule

__all__ = ["StoredWatch"]

log = logging.getLogger("anarchon.schedules")

#: The least time between the starts of two polls: a burst of changes (an ``apply`` of many) is read in a few polls.
BURST_GAP_S = 0.1


class TaskCall(functools.partial[Any]):
    """A task with a schedule's keyword arguments bound, its signature worked out once per task and keys.

    ``Job`` inspects its function's signature (does it take the run's context?);
    for a partial that costs as much as building the rest of the job, and
    100,000 schedules of one task share a handful of signatures. The signature
    is a class attribute of one subclass per (task, keys), so an instance holds
    nothing but the partial itself.
    """

    __signature__: inspect.Signature


_calls: dict[tuple[int, frozenset[str]], tuple[Callable[..., Any], type[TaskCall]]] = {}


def task_call(task: Callable[..., Any], kwargs: Mapping[str, Any]) -> Callable[..., Any]:
    """The job function of a schedule: its task with its keyword arguments bound (the run's context still passed).

    ``TypeError`` when the task takes none of these names.
    """
    key = (id(task), frozenset(kwargs))
    known = _calls.get(key)
    if known is None or known[0] is not task:
        inspect.signature(task).bind_partial(**kwargs)
        signature = inspect.signature(functools.partial(task, **kwargs))
        known = _calls[key] = (task, type("TaskCall", (TaskCall,), {"__signature__": signature}))
    return known[1](task, **kwargs)


class StoredWatch:
    def __init__(
        self,
        backend: Backend,
        tasks: Mapping[str, Callable[..., Any]],
        clock: Clock,
        health: BackendHealth,
        *,
        install: Callable[[StoredSchedule, Callable[..., Any]], Job],
        uninstall: Callable[[str], object],
        is_code_job: Callable[[str], bool],
        fleet: Callable[[], Fleet],
        stopping: Callable[[], bool],
    ) -> None:
        self._backend = backend
        self._tasks = tasks
        self._clock = clock
        self._health = health
        self._install = install
        self._uninstall = uninstall
        self._is_code_job = is_code_job
        self._fleet = fleet
        self._stopping = stopping
        self._enabled = backend.capabilities.schedules
        #: The last revision applied, and when the backend last answered a poll (this clock).
        self.revision = 0
        self._answered_ms = 0
        #: name -> the revision last read; the names that are jobs here; the schedules kept whole
        #: until this instance registers their task (an installed one is not kept: 100,000 of them
        #: parsed were a tenth of the instance's memory).
        self.revisions: dict[str, int] = {}
        self.installed: set[str] = set()
        self.waiting: dict[str, StoredSchedule] = {}
        self._reported: set[tuple[str, int]] = set()
        self._wait_failed = False

    async def load(self) -> None:
        """Read every stored schedule; called before the first claim and after a long cut-off."""
        if not self._enabled:
            return
        revision = await self._backend.schedules_revision()
        rows = await self._backend.schedules_since(0)
        present = {name for name, _, _ in rows}
        for name in [n for n in self.revisions if n not in present]:
            self._apply(name, None, revision)
        for name, record, rev in rows:
            self._apply(name, record, rev)
        self.revision = max([revision, *(rev for _, _, rev in rows)])
        self._answered_ms = self._clock.now_ms()

    async def poll(self) -> None:
        if self._clock.now_ms() - self._answered_ms > TOMBSTONE_MS // 2:
            await self.load()  # tombstones this instance has not seen may be gone: read everything
            return
        revision = await self._backend.schedules_revision()
        self._answered_ms = self._clock.now_ms()
        if revision == self.revision:
            return
        rows = await self._backend.schedules_since(self.revision)
        for name, record, rev in rows:
            self._apply(name, record, rev)
        self.revision = max([revision, *(rev for _, _, rev in rows)])

    async def run_forever(self) -> None:
        if not self._enabled:
            return
        loop = asyncio.get_running_loop()
        listening = failed = False
        polled = float("-inf")
        while not self._stopping():
            period = NOTIFIED_POLL_MS if listening and not failed else POLL_MS
            timeout_ms = round(period * random.uniform(0.75, 1.25))
            if failed:  # never a burst of polls of a failing backend, whatever a notification says
                await asyncio.sleep(timeout_ms / 1000)
            else:
                listening = await self._wait(timeout_ms)
            if self._stopping():
                return
            await asyncio.sleep(max(polled + BURST_GAP_S - loop.time(), 0))
            polled = loop.time()
            try:
                await self.poll()
                failed = False
            except Exception as exc:  # the schedules stay as last read
                failed = True
                self._health.failed("schedules", exc)

    async def _wait(self, timeout_ms: int) -> bool:
        """The backend's wait; one that raises (the contract says it must not) is slept out, never spun on."""
        began = asyncio.get_running_loop().time()
        try:
            listening = await self._backend.wait_schedules(self.revision, timeout_ms)
        except Exception as exc:
            if not self._wait_failed:
                log.warning("backend %r: wait_schedules() raised %s; sleeping between polls", self._backend, exc)
            self._wait_failed = True
            await asyncio.sleep(max(began + timeout_ms / 1000 - asyncio.get_running_loop().time(), 0))
            return False
        self._wait_failed = False
        return bool(listening)

    def _apply(self, name: str, record: str | None, revision: int) -> None:
        if record is not None and self.revisions.get(name) == revision:
            return
        if name in self.installed:
            self._uninstall(name)
            self.installed.discard(name)
        self.waiting.pop(name, None)
        if record is None:
            self.revisions.pop(name, None)
            return
        self.revisions[name] = revision
        try:
            schedule = StoredSchedule.parse(name, record, revision)
        except (ValueError, TypeError, KeyError) as exc:
            self._report(name, revision, f"its record cannot be read ({exc}): {clean_text(record, 120)}")
            return
        self._run_here(schedule)

    def yield_to_code(self, name: str) -> None:
        """A code job of this name is being added here: the stored schedule stops running on this instance."""
        if name in self.installed:
            self._uninstall(name)
            self.installed.discard(name)
        self._report(
            name, self.revisions.get(name, 0), "a job of that name is added in this instance's code; the code job runs"
        )

    def retry(self, task: str) -> None:
        """A task was registered after the schedules were read: its schedules become jobs here now."""
        for schedule in [s for s in self.waiting.values() if s.task == task]:
            del self.waiting[schedule.name]
            self._run_here(schedule)

    def _run_here(self, schedule: StoredSchedule) -> None:
        name, revision = schedule.name, schedule.revision
        if self._is_code_job(name):
            self._report(name, revision, "a job of that name is added in this instance's code; the code job runs")
            return
        task = self._tasks.get(schedule.task)
        if task is None:
            self.waiting[name] = schedule  # until this instance registers the task
            if not any(schedule.task in i.tasks for i in self._fleet().instances):
                self._report(name, revision, f"no live instance has its task {schedule.task!r}, so it does not run")
            return
        try:
            self._install(schedule, task_call(task, schedule.kwargs))
        except (ValueError, TypeError) as exc:
            self._report(name, revision, f"it cannot run here: {error_text(exc)}")
            return
        self.installed.add(name)

    def _report(self, name: str, revision: int, why: str) -> None:
        if (name, revision) in self._reported:
            return
        self._reported.add((name, revision))
        log.warning("stored schedule %r (revision %d) skipped: %s", name, revision, why)
