"""The metrics and the hooks that feed them.

Job names are labels, so the number of series grows with the number of jobs:
at most ``max_jobs`` distinct names (default 1,000) get their own label
value, later ones are counted under ``anarchon_job="_other"``. The label is
``anarchon_job``, not ``job``: Prometheus attaches ``job`` (the scrape job)
to every target's series, and a metric's own ``job`` would be renamed
``exported_job`` at scrape time, so ``sum by (job)`` would add up every job.
Histograms carry no job label (a histogram per job would multiply the series
by the buckets): start delay, claim latency, batch size and run duration are
per process.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from anarchon import Job, Run, RunContext, hookimpl
from anarchon.fleet import FleetJob

__all__ = ["DEFAULT_MAX_JOBS", "OTHER_JOBS", "PrometheusMetrics"]

DEFAULT_MAX_JOBS = 1000
OTHER_JOBS = "_other"

#: Seconds; start delay and claim latency live below a second when all is well.
_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_DURATION = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
#: Claims per call, a whole number of at least 1. ``histogram_quantile`` interpolates inside a bucket from
#: its lower bound, 0 for the lowest: with 1 as the lowest bound, batches of one answered 0.6 for the 0.6
#: quantile. The bound just below 1 makes the lowest real bucket (0.999, 1].
_BATCH = (0.999, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000)


class PrometheusMetrics:
    """An anarchon observer that keeps Prometheus metrics (names in the package README)."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY, *, max_jobs: int = DEFAULT_MAX_JOBS) -> None:
        if not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 1:
            raise ValueError(f"max_jobs={max_jobs!r} must be a positive integer, for example max_jobs=1000")
        self.max_jobs = max_jobs
        self._jobs: set[str] = set()
        self._lock = threading.Lock()
        kw: dict[str, Any] = {"registry": registry}
        self.runs = Counter(
            "anarchon_runs", "Runs this process ended, by job and status.", ["anarchon_job", "status"], **kw
        )
        self.claims = Counter("anarchon_claims", "Claims this process made, by answer.", ["answer"], **kw)
        self.take_overs = Counter("anarchon_take_overs", "Runs this process took over.", ["anarchon_job"], **kw)
        self.hand_overs = Counter(
            "anarchon_hand_overs", "Runs this process handed over on stop.", ["anarchon_job"], **kw
        )
        self.catch_ups = Counter("anarchon_catch_ups", "Catch-up runs this process started.", ["anarchon_job"], **kw)
        self.missed = Counter(
            "anarchon_missed_slots",
            "Slots not run on their own, covered by a later run (a catch-up, or a run after a dead one).",
            ["anarchon_job"],
            **kw,
        )
        self.skipped = Counter("anarchon_slots_skipped", "Slots skipped, by reason.", ["anarchon_job", "reason"], **kw)
        self.not_run = Counter(
            "anarchon_slots_not_run",
            "Slots no run ran at their time, told by the instance that won the next slot: outcome missed (nobody "
            "claimed them) or lost (the runner died, nobody took over); covered yes when a later run covers them.",
            ["anarchon_job", "outcome", "covered"],
            **kw,
        )
        self.leases_lost = Counter(
            "anarchon_leases_lost", "Runs stopped because the lease was lost.", ["anarchon_job"], **kw
        )
        self.backend_errors = Counter(
            "anarchon_backend_errors",
            "Backend calls that failed, by operation and error type.",
            ["operation", "kind"],
            **kw,
        )
        self.start_delay = Histogram(
            "anarchon_start_delay_seconds",
            "From when a claim was due (slot + jitter) to the run's start.",
            buckets=_FAST,
            **kw,
        )
        self.claim_latency = Histogram(
            "anarchon_claim_latency_seconds", "How long one claim call took.", buckets=_FAST, **kw
        )
        self.claim_batch = Histogram("anarchon_claim_batch_size", "Claims per backend call.", buckets=_BATCH, **kw)
        self.duration = Histogram(
            "anarchon_run_duration_seconds", "Run durations, as recorded.", buckets=_DURATION, **kw
        )
        self.running = Gauge("anarchon_runs_running", "Runs in progress in this process.", **kw)
        self.skew = Gauge("anarchon_clock_skew_seconds", "Last measured local clock minus the backend's clock.", **kw)
        self.definitions = Gauge(
            "anarchon_job_definitions",
            "Distinct definitions of a job among live instances, as this process last saw them (1: no drift).",
            ["anarchon_job"],
            **kw,
        )
        self.superseded = Gauge(
            "anarchon_job_superseded",
            "1 while this process claims none of the job's slots because another definition runs.",
            ["anarchon_job"],
            **kw,
        )

    def _job(self, name: str) -> str:
        """The label value for a job name, bounded by ``max_jobs``."""
        if name in self._jobs:
            return name
        with self._lock:
            if len(self._jobs) < self.max_jobs:
                self._jobs.add(name)
                return name
        return OTHER_JOBS

    # -- hooks -----------------------------------------------------------------

    @hookimpl
    def anarchon_run_started(self, job: Job, context: RunContext, delay_ms: int | None) -> None:
        self.running.inc()
        if delay_ms is not None:
            self.start_delay.observe(max(0, delay_ms) / 1000)
        if context.catch_up:
            self.catch_ups.labels(self._job(job.name)).inc()
        if context.missed > 1:  # ``missed`` counts the run's own slot too, which this run runs
            self.missed.labels(self._job(job.name)).inc(context.missed - 1)

    @hookimpl
    def anarchon_slots_not_run(self, job: Job, outcome: str, count: int, covered_by: int | None) -> None:
        self.not_run.labels(self._job(job.name), outcome, "no" if covered_by is None else "yes").inc(count)

    @hookimpl
    def anarchon_run_ended(self, job: Job, status: str | None) -> None:
        self.running.dec()
        self.runs.labels(self._job(job.name), status or "unrecorded").inc()

    @hookimpl
    def anarchon_run_finished(self, run: Run) -> None:
        if run.duration_ms is not None:
            self.duration.observe(run.duration_ms / 1000)

    @hookimpl
    def anarchon_run_taken_over(self, job: Job) -> None:
        self.take_overs.labels(self._job(job.name)).inc()

    @hookimpl
    def anarchon_run_handed_over(self, job: Job) -> None:
        self.hand_overs.labels(self._job(job.name)).inc()

    @hookimpl
    def anarchon_lease_lost(self, job: Job) -> None:
        self.leases_lost.labels(self._job(job.name)).inc()

    @hookimpl
    def anarchon_claims_decided(
        self, claims: int, latency_ms: float, won: int, lost: int, skipped: int, unknown: int
    ) -> None:
        self.claim_latency.observe(latency_ms / 1000)
        self.claim_batch.observe(claims)
        for answer, n in (("won", won), ("lost", lost), ("skipped", skipped), ("unknown", unknown)):
            if n:
                self.claims.labels(answer).inc(n)

    @hookimpl
    def anarchon_slot_skipped(self, job: Job, reason: str) -> None:
        self.skipped.labels(self._job(job.name), reason).inc()

    @hookimpl
    def anarchon_backend_error(self, operation: str, error: BaseException) -> None:
        self.backend_errors.labels(operation, type(error).__name__).inc()

    @hookimpl
    def anarchon_job_drift(self, scheduler: Any, job: FleetJob) -> None:
        name = self._job(job.name)
        self.definitions.labels(name).set(len(job.definitions))
        self.superseded.labels(name).set(1 if job.name in scheduler.superseded else 0)

    @hookimpl
    def anarchon_clock_checked(self, skew_ms: int) -> None:
        self.skew.set(skew_ms / 1000)
