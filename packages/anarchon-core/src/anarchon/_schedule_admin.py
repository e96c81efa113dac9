"""``Schedules``: add, change, remove and read stored schedules, from code, a web view or the CLI.

Every change is checked as ``add()`` checks a job (by the backend's
capabilities) before anything is written, then written in one step against
the revision it was read at, so a change made meanwhile by someone else is
refused (:class:`~anarchon.errors.ScheduleConflictError`), never overwritten.
Where the backend keeps a fleet registry and instances are live, a schedule
may not take a code job's name, and must name a task some live instance has
(``force=True`` stores it anyway, for a task a release about to roll out brings).
A one-time schedule (``at``) whose time has passed is refused too, unless
``force=True``: ``apply`` passes it, since a file may keep one that ran.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ._health import error_text
from .audit import record_audit
from .backend import Backend
from .errors import InvalidJobError, JobNotFoundError, ScheduleConflictError
from .fleet import read_fleet
from .options import check_job_name
from .schedules import (
    FORGET_AFTER_MS,
    ScheduleChange,
    StoredSchedule,
    check_kwargs,
    check_not_passed,
    check_schedule,
    default_actor,
    schedule_text,
)

__all__ = ["Schedules", "SyncSchedules"]

T = TypeVar("T")

#: Passed for a field of ``set()`` left as it is.
_KEEP: Any = object()
log = logging.getLogger("anarchon.schedules")


async def _forget(backend: Backend) -> None:
    """Forget the schedules removed long ago; a failure never stops the change (the next one tries again)."""
    try:
        await backend.forget_removed(FORGET_AFTER_MS)
    except Exception as exc:
        log.warning("forgetting removed schedules failed, tried again at the next change: %s", error_text(exc))


async def _audit(backend: Backend, change: ScheduleChange, name: str, revision: int) -> None:
    """Append a change made to the audit trail, beside the schedule's own log (which goes with its tombstone)."""
    detail = {"revision": revision, "changes": dict(change.changes)}
    await record_audit(backend, f"schedule-{change.op}", name, by=change.by, reason=change.reason, detail=detail)


class Schedules:
    """The stored schedules of one backend (and namespace); async. :class:`SyncSchedules` is the blocking face.

    ``by`` names who changes (the CLI passes ``user@host``); each call may pass
    its own. Use it started (``async with Schedules(url) as s``) or from a
    scheduler (``scheduler.schedules``), which shares the scheduler's connection.
    """

    def __init__(
        self,
        backend: Backend | str | None = None,
        *,
        by: str | None = None,
        connected: Callable[[], contextlib.AbstractAsyncContextManager[Backend]] | None = None,
    ) -> None:
        if backend is None or isinstance(backend, str):
            from .plugins import PluginManager

            backend = PluginManager().resolve(backend)
        self.backend = backend
        self.by = by or default_actor()
        self._connected = connected
        self._open = False

    async def __aenter__(self) -> Schedules:
        if self._connected is None:
            await self.backend.start()
            self._open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._open:
            self._open = False
            await self.backend.close()

    @contextlib.asynccontextmanager
    async def _backend(self) -> AsyncIterator[Backend]:
        if self._connected is not None:
            async with self._connected() as backend:
                yield backend
        elif self._open:
            yield self.backend
        else:
            async with self:
                yield self.backend

    # -- reading -------------------------------------------------------------------------

    async def get(self, name: str) -> StoredSchedule:
        check_job_name(name)
        async with self._backend() as backend:
            found = await backend.schedule(name)
        if found is None:
            raise JobNotFoundError(f"no stored schedule named {name!r}; `anarchon schedules list` shows them")
        return StoredSchedule.parse(name, *found)

    async def list(self) -> builtins.list[StoredSchedule]:
        """Every stored schedule, by name; a record this version cannot read is left out."""
        async with self._backend() as backend:
            rows = await backend.schedules_since(0)
        out = []
        for name, record, revision in rows:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                out.append(StoredSchedule.parse(name, record or "", revision))
        return sorted(out, key=lambda s: s.name)

    async def log(self, name: str) -> builtins.list[ScheduleChange]:
        """The schedule's changes, oldest first (kept after a removal until its tombstone goes)."""
        check_job_name(name)
        async with self._backend() as backend:
            return [ScheduleChange.parse(rev, text) for rev, text in await backend.schedule_log(name)]

    # -- changing ------------------------------------------------------------------------

    async def add(
        self,
        name: str,
        *,
        task: str,
        cron: str | None = None,
        every: str | None = None,
        at: str | None = None,
        timezone: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        origin: str = "api",
        reason: str | None = None,
        by: str | None = None,
        force: bool = False,
    ) -> StoredSchedule:
        """Store a new schedule; a schedule of that name must not exist (else a conflict).

        It runs on a ``cron``, an interval (``every="90s"``: a grid from the
        epoch) or once (``at``, an ISO time in the future): exactly one of them.
        """
        opts = dict(options or {})
        if timezone is not None:
            opts["timezone"] = timezone
        schedule = self._new(name, task, schedule_text(cron=cron, every=every, at=at), kwargs or {}, opts, origin, by)
        if not force:
            check_not_passed(schedule, _now_ms())
        async with self._backend() as backend:
            await self._check_fleet(backend, schedule, force)
            return await self._write(backend, None, schedule, 0, "add", reason)

    async def set(
        self,
        name: str,
        *,
        task: str = _KEEP,
        cron: str = _KEEP,
        every: str | None = None,
        at: str | None = None,
        timezone: str | None = _KEEP,
        kwargs: Mapping[str, Any] = _KEEP,
        options: Mapping[str, Any | None] | None = None,
        origin: str = _KEEP,
        if_revision: int | None = None,
        reason: str | None = None,
        by: str | None = None,
        force: bool = False,
    ) -> StoredSchedule:
        """Change the fields given; ``options`` merges (a ``None`` value removes an option).

        Written against the revision read (or ``if_revision``): a change made
        in between is refused, not overwritten. ``every`` or ``at`` replaces
        the cron as :meth:`add` reads them.
        """
        if every is not None or at is not None or cron is not _KEEP:
            cron = schedule_text(cron=None if cron is _KEEP else cron, every=every, at=at)
        async with self._backend() as backend:
            found = await backend.schedule(check_job_name(name))
            if found is None:
                raise ScheduleConflictError(name, if_revision, 0)
            before = StoredSchedule.parse(name, *found)
            if if_revision is not None and if_revision != before.revision:
                raise ScheduleConflictError(name, if_revision, before.revision)
            opts = dict(before.options)
            for key, value in (options or {}).items():
                opts.pop(key, None) if value is None else opts.__setitem__(key, value)
            if timezone is not _KEEP:
                opts.pop("timezone", None) if timezone is None else opts.__setitem__("timezone", timezone)
            after = self._new(
                name,
                before.task if task is _KEEP else task,
                before.cron if cron is _KEEP else cron,
                before.kwargs if kwargs is _KEEP else kwargs,
                opts,
                before.origin if origin is _KEEP else origin,
                by,
            )
            if cron is not _KEEP and after.cron != before.cron and not force:
                check_not_passed(after, _now_ms())
            if after.task != before.task:
                await self._check_fleet(backend, after, force)
            return await self._write(backend, before, after, before.revision, "set", reason)

    async def remove(
        self, name: str, *, if_revision: int | None = None, reason: str | None = None, by: str | None = None
    ) -> int:
        """Remove the schedule; every instance stops running it within a poll. Its run history stays."""
        check_job_name(name)
        async with self._backend() as backend:
            found = await backend.schedule(name)
            before = StoredSchedule.parse(name, *found) if found is not None else None
            change = ScheduleChange(0, "remove", _now_ms(), by or self.by, reason, ScheduleChange.between(before, None))
            expect = if_revision if if_revision is not None else (before.revision if before is not None else None)
            await _forget(backend)
            revision = await backend.put_schedule(name, None, expect=expect, change=change.text())
            await _audit(backend, change, name, revision)
            return revision

    def _new(
        self,
        name: str,
        task: str,
        cron: str,
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        origin: str,
        by: str | None,
    ) -> StoredSchedule:
        check_job_name(name)
        schedule = StoredSchedule(
            name, task, cron, check_kwargs(name, kwargs), dict(options), origin, 0, _now_ms(), by or self.by
        )
        check_schedule(self.backend, schedule)
        return schedule

    async def _write(
        self,
        backend: Backend,
        before: StoredSchedule | None,
        after: StoredSchedule,
        expect: int,
        op: str,
        reason: str | None,
    ) -> StoredSchedule:
        change = ScheduleChange(
            0, op, after.updated_ms, after.updated_by, reason, ScheduleChange.between(before, after)
        )
        await _forget(backend)
        revision = await backend.put_schedule(after.name, after.record(), expect=expect, change=change.text())
        await _audit(backend, change, after.name, revision)
        return StoredSchedule.parse(after.name, after.record(), revision)

    async def _check_fleet(self, backend: Backend, schedule: StoredSchedule, force: bool) -> None:
        """With a live fleet: no code job's name, and a task some live instance has (unless ``force``)."""
        if not backend.capabilities.registry:
            return
        fleet = await read_fleet(backend)
        if fleet.job(schedule.name) is not None:
            raise InvalidJobError(
                f"schedule {schedule.name!r}: a job of that name is added in code on live instances; "
                "a stored schedule needs a name of its own",
                option="name",
                value=schedule.name,
            )
        if force or not fleet.instances:
            return
        tasks = sorted({t for i in fleet.instances for t in i.tasks})
        if schedule.task not in tasks:
            raise InvalidJobError(
                f"schedule {schedule.name!r}: no live instance has the task {schedule.task!r} "
                f"(they have: {', '.join(tasks) or 'none'}); register it with scheduler.task(), "
                "or pass force=True (--force) to store it for a release not yet deployed",
                option="task",
                value=schedule.task,
            )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SyncSchedules:
    """The blocking face of :class:`Schedules`, for scripts, the CLI and synchronous web views.

    Each call opens the backend, does its work and closes it, on a private
    event loop; do not call it from inside a running loop (use :class:`Schedules`).
    """

    def __init__(self, backend: Backend | str | None = None, *, by: str | None = None) -> None:
        self._schedules = Schedules(backend, by=by)

    def _run(self, call: Callable[[Schedules], Awaitable[T]]) -> T:
        async def once() -> T:
            async with self._schedules as schedules:
                return await call(schedules)

        return asyncio.run(once())

    def get(self, name: str) -> StoredSchedule:
        return self._run(lambda s: s.get(name))

    def list(self) -> builtins.list[StoredSchedule]:
        return self._run(lambda s: s.list())

    def log(self, name: str) -> builtins.list[ScheduleChange]:
        return self._run(lambda s: s.log(name))

    def add(self, name: str, **fields: Any) -> StoredSchedule:
        return self._run(lambda s: s.add(name, **fields))

    def set(self, name: str, **fields: Any) -> StoredSchedule:
        return self._run(lambda s: s.set(name, **fields))

    def remove(self, name: str, **fields: Any) -> int:
        return self._run(lambda s: s.remove(name, **fields))
