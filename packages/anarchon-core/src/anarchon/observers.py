"""Typed calls of the observer hooks, bound to one scheduler.

Each method calls one hook of :mod:`anarchon.hookspecs` by its function
object, never by a string, so a misspelt hook is a type error rather than an
observer that is silently never called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .backend import Backend
from .context import RunContext
from .fleet import FleetJob
from .hookspecs import (
    Scheduler,
    anarchon_backend_error,
    anarchon_claim_lost,
    anarchon_claims_decided,
    anarchon_clock_checked,
    anarchon_clock_skew,
    anarchon_job_drift,
    anarchon_lease_lost,
    anarchon_run_ended,
    anarchon_run_finished,
    anarchon_run_handed_over,
    anarchon_run_started,
    anarchon_run_taken_over,
    anarchon_scheduler_started,
    anarchon_scheduler_stopped,
    anarchon_slot_skipped,
    anarchon_slots_not_run,
)
from .job import Job
from .run import Run


class Notifier(Protocol):
    """What observers need of :class:`anarchon.plugins.PluginManager`: calling a hook's implementations.

    A protocol, so the parts that notify (every part, through
    :class:`~anarchon._health.BackendHealth`) do not sit above the plugin
    manager and, through it, the memory backend it registers.
    """

    def notify(self, hook: Callable[..., None], **kwargs: Any) -> None: ...


__all__ = ["Observers"]


class Observers:
    """The observer hooks of one scheduler; an observer that raises is logged and skipped."""

    def __init__(self, plugins: Notifier, scheduler: Scheduler) -> None:
        self._plugins = plugins
        self._scheduler = scheduler

    def scheduler_started(self) -> None:
        self._plugins.notify(anarchon_scheduler_started, scheduler=self._scheduler)

    def scheduler_stopped(self) -> None:
        self._plugins.notify(anarchon_scheduler_stopped, scheduler=self._scheduler)

    def run_started(self, job: Job, context: RunContext, delay_ms: int | None) -> None:
        self._plugins.notify(
            anarchon_run_started, scheduler=self._scheduler, job=job, context=context, delay_ms=delay_ms
        )

    def run_ended(self, job: Job, context: RunContext, status: str | None) -> None:
        self._plugins.notify(anarchon_run_ended, scheduler=self._scheduler, job=job, context=context, status=status)

    def run_taken_over(self, job: Job, slot_ms: int, attempt: int) -> None:
        self._plugins.notify(
            anarchon_run_taken_over, scheduler=self._scheduler, job=job, slot_ms=slot_ms, attempt=attempt
        )

    def run_handed_over(self, job: Job, slot_ms: int) -> None:
        self._plugins.notify(anarchon_run_handed_over, scheduler=self._scheduler, job=job, slot_ms=slot_ms)

    def lease_lost(self, job: Job, slot_ms: int, reason: str) -> None:
        self._plugins.notify(anarchon_lease_lost, scheduler=self._scheduler, job=job, slot_ms=slot_ms, reason=reason)

    def claims_decided(self, claims: int, latency_ms: float, won: int, lost: int, skipped: int, unknown: int) -> None:
        self._plugins.notify(
            anarchon_claims_decided,
            scheduler=self._scheduler,
            claims=claims,
            latency_ms=latency_ms,
            won=won,
            lost=lost,
            skipped=skipped,
            unknown=unknown,
        )

    def run_finished(self, job: Job, run: Run) -> None:
        self._plugins.notify(anarchon_run_finished, scheduler=self._scheduler, job=job, run=run)

    def slot_skipped(self, job: Job, slot_ms: int, reason: str) -> None:
        self._plugins.notify(anarchon_slot_skipped, scheduler=self._scheduler, job=job, slot_ms=slot_ms, reason=reason)

    def slots_not_run(
        self, job: Job, outcome: str, first_ms: int, last_ms: int, count: int, covered_by: int | None
    ) -> None:
        self._plugins.notify(
            anarchon_slots_not_run,
            scheduler=self._scheduler,
            job=job,
            outcome=outcome,
            first_ms=first_ms,
            last_ms=last_ms,
            count=count,
            covered_by=covered_by,
        )

    def claim_lost(self, job: Job, slot_ms: int, reason: str) -> None:
        self._plugins.notify(anarchon_claim_lost, scheduler=self._scheduler, job=job, slot_ms=slot_ms, reason=reason)

    def job_drift(self, job: FleetJob, winner: str | None) -> None:
        self._plugins.notify(anarchon_job_drift, scheduler=self._scheduler, job=job, winner=winner)

    def backend_error(self, operation: str, error: BaseException) -> None:
        self._plugins.notify(anarchon_backend_error, scheduler=self._scheduler, operation=operation, error=error)

    def clock_checked(self, backend: Backend, skew_ms: int) -> None:
        self._plugins.notify(anarchon_clock_checked, scheduler=self._scheduler, backend=backend, skew_ms=skew_ms)

    def clock_skew(self, backend: Backend, skew_ms: int) -> None:
        self._plugins.notify(anarchon_clock_skew, scheduler=self._scheduler, backend=backend, skew_ms=skew_ms)
