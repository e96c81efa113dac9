"""Every pluggy hook anarchon defines, in one place.

Two families share one plugin manager and the entry-point group ``anarchon``:

* **registration** — a backend distribution returns its backend classes, and
  a distribution above the core its ``anarchon`` subcommands;
* **observers** — called as runs start and finish, slots are skipped or lost,
  claims are decided, runs are taken over or handed over, the backend fails,
  the clock is checked, the scheduler starts or stops. Observers are called
  one by one, synchronously, on the scheduler's event loop: keep them short
  (count, set a gauge, hand off to a queue). An exception in one is logged and
  never disturbs scheduling or the other observers. Their return values are
  ignored. An ``async def`` observer is refused when it is registered, since
  nothing would await it; schedule your own task from a plain function if you
  must do I/O.

An implementation may take any subset of a hook's parameters, by name, so
hooks gain parameters without breaking older observers.

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
    from .commands import CliCommand
    from .context import RunContext
    from .fleet import FleetJob
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


@hookspec
def anarchon_register_commands() -> list[CliCommand]:  # type: ignore[empty-body]
    """Return the ``anarchon`` subcommands this plugin provides.

    Each :class:`~anarchon.commands.CliCommand` is listed by ``anarchon
    --help`` and receives the arguments after its name. A name that a core
    command already has, or that two plugins give, is refused with a warning
    naming both.
    """


# -- observers ------------------------------------------------------------------


@hookspec
def anarchon_scheduler_started(scheduler: Scheduler) -> None:
    """The scheduler connected to its backend and began scheduling."""


@hookspec
def anarchon_scheduler_stopped(scheduler: Scheduler) -> None:
    """The scheduler stopped: runs finished or were handed over, the backend closed."""


@hookspec
def anarchon_run_started(scheduler: Scheduler, job: Job, context: RunContext, delay_ms: int | None) -> None:
    """This instance won a slot (or took one over) and is about to run the job.

    :param delay_ms: how long after its claim was due (the slot plus this
        instance's jitter) the run started; ``None`` for take-overs, catch-ups
        and manual runs, whose start is not tied to the slot.
    """


@hookspec
def anarchon_run_finished(scheduler: Scheduler, job: Job, run: Run) -> None:
    """A run of this instance ended; ``run`` is the record written to history."""


@hookspec
def anarchon_run_ended(scheduler: Scheduler, job: Job, context: RunContext, status: str | None) -> None:
    """A run this instance started is no longer running here, however it ended.

    :param status: the recorded status (``"succeeded"``, ``"failed"``…), or
        ``None`` when this instance recorded nothing: it lost the lease, or
        handed the run over on stop.
    """


@hookspec
def anarchon_run_taken_over(scheduler: Scheduler, job: Job, slot_ms: int, attempt: int) -> None:
    """This instance took over a run whose lease expired (or was handed over); it runs it next."""


@hookspec
def anarchon_run_handed_over(scheduler: Scheduler, job: Job, slot_ms: int) -> None:
    """On stop, this instance released a run's lease so a backup takes it over at once."""


@hookspec
def anarchon_lease_lost(scheduler: Scheduler, job: Job, slot_ms: int, reason: str) -> None:
    """This instance stopped a run because its lease is, or may be, another's.

    :param reason: why, in words (taken over, not renewed in time, granted again).
    """


@hookspec
def anarchon_claims_decided(
    scheduler: Scheduler, claims: int, latency_ms: float, won: int, lost: int, skipped: int, unknown: int
) -> None:
    """One claim call answered (or failed): its size, how long it took, and the answers.

    A failed call counts every claim ``unknown``; retries of a claim backend are one call.
    """


@hookspec
def anarchon_slot_skipped(scheduler: Scheduler, job: Job, slot_ms: int, reason: str) -> None:
    """A slot was not run by this instance and will not be run by any.

    :param reason: ``"overlap"`` (the previous run still held the lease),
        ``"late"`` (this instance reached the claim after ``max_late_ms``),
        ``"paused"`` (the job is paused: the slot is recorded ``paused``) or
        ``"group"`` (its concurrency group stayed at its limit past ``max_wait_ms``:
        the slot is recorded ``skipped``).
    """


@hookspec
def anarchon_slots_not_run(
    scheduler: Scheduler, job: Job, outcome: str, first_ms: int, last_ms: int, count: int, covered_by: int | None
) -> None:
    """Slots of the job no run ran at their time, told by the instance that won the next slot it claimed.

    :param outcome: ``"missed"`` (due, nobody claimed them: every instance was
        down, or reached them past ``max_late_ms``) or ``"lost"`` (claimed, its
        runner died, and nobody took it over before a newer slot was won).
    :param first_ms: the oldest of them; ``last_ms`` the newest; ``count`` how many.
    :param covered_by: the slot of the run that covers them (a catch-up, or the
        run that superseded a lost one), or ``None``: nothing runs for them, the
        misses to alert on.
    """


@hookspec
def anarchon_claim_lost(scheduler: Scheduler, job: Job, slot_ms: int, reason: str) -> None:
    """This instance did not get, or no longer owns, a run.

    :param reason: ``"lost"`` (another instance won), ``"decided"`` (another
        instance won and the backend said so before this one claimed: no claim
        was sent; see ranked claims in ``docs/protocol.md``), ``"unknown"`` (the
        answer was lost; the slot is not run here), or ``"stale"`` (this
        instance's lease was taken over or could not be renewed in time).
    """


@hookspec
def anarchon_job_drift(scheduler: Scheduler, job: FleetJob, winner: str | None) -> None:
    """The definitions of a job among live instances changed: they began or stopped differing.

    :param job: the job across the live fleet (``job.drift`` is false once one definition is left).
    :param winner: the fingerprint that runs by the scheduler's ``drift`` policy, ``None`` with
        ``"each"`` or when nothing differs.
    """


@hookspec
def anarchon_backend_error(scheduler: Scheduler, operation: str, error: BaseException) -> None:
    """A backend call failed; the scheduler will retry with backoff."""


@hookspec
def anarchon_clock_checked(scheduler: Scheduler, backend: Backend, skew_ms: int) -> None:
    """The clock-skew check measured this instance's clock against the backend's (once a minute).

    :param skew_ms: local clock minus backend clock.
    """


@hookspec
def anarchon_clock_skew(scheduler: Scheduler, backend: Backend, skew_ms: int) -> None:
    """This instance's clock differs from the backend's by more than a quarter of ``max_late_ms``.

    :param skew_ms: local clock minus backend clock.
    """
