"""``Scheduler.task``: the callables stored schedules name, and the jobs they become on this instance.

A stored schedule (:mod:`anarchon.schedules`) names a task; each instance
registers the tasks it can run. The task's name is published in the fleet
registry, so ``anarchon schedules list`` can say which live instances can run
a schedule, and a schedule whose task no live instance has is reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, overload

from ._build import build_job
from ._registry import JobRegistry
from ._schedule_admin import Schedules
from ._storedwatch import StoredWatch
from .backend import Backend
from .errors import InvalidJobError
from .job import Job
from .options import check_job_name
from .schedules import StoredSchedule

__all__ = ["TaskBook"]

F = TypeVar("F", bound=Callable[..., Any])


class TaskBook:
    """Mixed into :class:`~anarchon.Scheduler`."""

    instance_id: str
    backend: Backend
    _registry: JobRegistry
    _stored: StoredWatch
    _task_funcs: dict[str, Callable[..., Any]]

    def _connected(self) -> contextlib.AbstractAsyncContextManager[Backend]:
        raise NotImplementedError

    def _install(self, job: Job, options: dict[str, Any], *, stored: bool) -> Job:
        raise NotImplementedError

    @overload
    def task(self, fn: F, *, name: str | None = None) -> F: ...

    @overload
    def task(self, fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...

    def task(self, fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
        """Register a callable (sync or async) that stored schedules may name; the name defaults to the function's.

        ``scheduler.task(fn)``, ``scheduler.task(fn, name="report")``, ``@scheduler.task`` and
        ``@scheduler.task(name="report")`` all work. A schedule's run calls it as a job is called
        (with the run's :class:`~anarchon.context.RunContext` if it takes one; ``ctx.job.name`` is
        the schedule's name) and with the schedule's keyword arguments.
        """

        def register(func: F) -> F:
            if not callable(func):
                raise InvalidJobError(f"task {func!r} is not callable; pass a function", option="fn", value=func)
            task_name = check_job_name(name if name is not None else getattr(func, "__name__", ""))
            if task_name in self._task_funcs and self._task_funcs[task_name] is not func:
                raise ValueError(f"a task named {task_name!r} is registered already; pass another name=")
            self._task_funcs[task_name] = func
            self._registry.touch()  # the registry entry says which tasks this instance has
            self._stored.retry(task_name)
            return func

        return register(fn) if fn is not None else register

    @property
    def tasks(self) -> Mapping[str, Callable[..., Any]]:
        """The tasks registered here, by name."""
        return MappingProxyType(self._task_funcs)

    @property
    def schedules(self) -> Schedules:
        """Add, change, remove and read stored schedules through this scheduler's backend.

        Changes are made by ``user@host`` of this process unless a call passes ``by=``
        (a web view passes the signed-in name), as the audit trail records them.
        """
        return Schedules(self.backend, connected=self._connected)

    def _install_stored(self, schedule: StoredSchedule, func: Callable[..., Any]) -> Job:
        options = dict(schedule.options)
        job = build_job(self.backend, schedule.name, schedule.cron, func, **options)
        return self._install(job, options, stored=True)
