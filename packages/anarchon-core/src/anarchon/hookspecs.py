"""Every pluggy hook anarchon defines, in one place.

Two families share one plugin manager and the entry-point group ``anarchon``:

* **registration** — a backend distribution returns its backend classes;
* **observers** — called as runs start and finish, slots are skipped or lost,
  the backend fails, the scheduler starts or stops. Observers are called one
  by one; an exception in one is logged and never disturbs scheduling or the
  other observers. Their return values are ignored.

A plugin is any module or object with functions decorated by
:data:`hookimpl`; register it through an entry point in the group
``anarchon`` or with ``Scheduler(plugins=[...])``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import pluggy

if TYPE_CHECKING:
    from .backend import Backend
    from .context import RunContext
    from .job import Job
    from .run import Run

__all__ = ["PROJECT", "Scheduler", "hookimpl", "hookspec"]

PROJECT = "anarchon"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class Scheduler(Protocol):
    """What an observer may use of the :class:`anarchon.Scheduler` it is passed.

    A protocol rather than the class itself, so that the hook specifications
    sit below the scheduler that calls them.
    """

    instance_id: str
    backend: Backend

    @property
    def jobs(self) -> Mapping[str, Job]: ...


# -- registration -------------------------------------------------------------


@hookspec
def anarchon_register_backends() -> list[type[Backend]]:  # type: ignore[empty-body]
    """Return the backend classes this plugin provides.

    Each class declares ``name``, ``url_schemes`` and ``capabilities``. Two
    plugins registering one name is an error, reported when the backend is
    looked up.
    """


# -- observers ------------------------------------------------------------------


@hookspec
def anarchon_scheduler_started(scheduler: Scheduler) -> None:
    """The scheduler connected to its backend and began scheduling."""


@hookspec
def anarchon_scheduler_stopped(scheduler: Scheduler) -> None:
    """The scheduler stopped: runs finished or were handed over, the backend closed."""


@hookspec
def anarchon_run_started(scheduler: Scheduler, job: Job, context: RunContext) -> None:
    """This instance won a slot (or took one over) and is about to run the job."""


@hookspec
def anarchon_run_finished(scheduler: Scheduler, job: Job, run: Run) -> None:
    """A run of this instance ended; ``run`` is the record written to history."""


@hookspec
def anarchon_slot_skipped(scheduler: Scheduler, job: Job, slot_ms: int, reason: str) -> None:
    """A slot was not run by this instance and will not be run by any.

    :param reason: ``"overlap"`` (the previous run still held the lease) or
        ``"late"`` (this instance reached the claim after ``max_late_ms``).
    """


@hookspec
def anarchon_claim_lost(scheduler: Scheduler, job: Job, slot_ms: int, reason: str) -> None:
    """This instance did not get, or no longer owns, a run.

    :param reason: ``"lost"`` (another instance won), ``"unknown"`` (the answer
        was lost; the slot is not run here), or ``"stale"`` (this instance's
        lease was taken over or could not be renewed in time).
    """


@hookspec
def anarchon_backend_error(scheduler: Scheduler, operation: str, error: BaseException) -> None:
    """A backend call failed; the scheduler will retry with backoff."""


@hookspec
def anarchon_clock_skew(scheduler: Scheduler, backend: Backend, skew_ms: int) -> None:
    """This instance's clock differs from the backend's by more than a quarter of ``max_late_ms``.

    :param skew_ms: local clock minus backend clock.
    """
