"""A span per run and per claim batch, and anarchon's metrics as OpenTelemetry instruments.

A run's span starts when the run starts on this instance and ends when it
ends here; its attributes are the run's facts (``anarchon.job``,
``anarchon.slot``, ``anarchon.instance``, ``anarchon.attempt``,
``anarchon.fencing``, ``anarchon.manual``, ``anarchon.catch_up``,
``anarchon.missed``, ``anarchon.status``), and a failed run records its error
as an ``exception`` event with an error status. A claim batch's span covers
the one backend call, with its size and answers. The metric names match
anarchon-prometheus's, dotted.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from anarchon import Job, Run, RunContext, hookimpl

__all__ = ["OpenTelemetryObserver"]

SCOPE = "anarchon"
_FAILED = ("failed", "timed-out")


class OpenTelemetryObserver:
    def __init__(
        self, *, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
    ) -> None:
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        #: Open run spans by the identity of the run's context (one context per run attempt here).
        self._spans: dict[int, tuple[RunContext, Span]] = {}
        self._errors: dict[int, str] = {}
        self._skew_s: float | None = None
        self.runs = meter.create_counter("anarchon.runs", description="Runs this process ended, by job and status.")
        self.claims = meter.create_counter("anarchon.claims", description="Claims this process made, by answer.")
        self.take_overs = meter.create_counter("anarchon.take_overs", description="Runs this process took over.")
        self.hand_overs = meter.create_counter("anarchon.hand_overs", description="Runs handed over on stop.")
        self.catch_ups = meter.create_counter("anarchon.catch_ups", description="Catch-up runs started.")
        self.missed = meter.create_counter("anarchon.missed_slots", description="Slots covered by a later run.")
        self.skipped = meter.create_counter("anarchon.slots_skipped", description="Slots skipped, by reason.")
        self.backend_errors = meter.create_counter("anarchon.backend_errors", description="Failed backend calls.")
        self.start_delay = meter.create_histogram(
            "anarchon.start_delay", unit="s", description="From when a claim was due to the run's start."
        )
        self.claim_latency = meter.create_histogram("anarchon.claim.latency", unit="s", description="One claim call.")
        self.claim_batch = meter.create_histogram("anarchon.claim.batch_size", description="Claims per call.")
        self.duration = meter.create_histogram("anarchon.run.duration", unit="s", description="Recorded durations.")
        self.running = meter.create_up_down_counter("anarchon.runs.running", description="Runs in progress.")
        meter.create_observable_gauge(
            "anarchon.clock.skew", callbacks=[self._observe_skew], unit="s", description="Local minus backend clock."
        )

    def _observe_skew(self, options: CallbackOptions) -> list[Observation]:
        return [] if self._skew_s is None else [Observation(self._skew_s)]

    @staticmethod
    def _facts(ctx: RunContext) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "anarchon.job": ctx.job.name,
            "anarchon.slot": ctx.slot.isoformat(),
            "anarchon.slot_ms": ctx.slot_ms,
            "anarchon.instance": ctx.instance,
            "anarchon.attempt": ctx.attempt,
            "anarchon.manual": ctx.manual,
            "anarchon.catch_up": ctx.catch_up,
            "anarchon.missed": ctx.missed,
        }
        if ctx.fencing is not None:
            facts["anarchon.fencing"] = ctx.fencing
        return facts

    # -- runs --------------------------------------------------------------------

    @hookimpl
    def anarchon_run_started(self, job: Job, context: RunContext, delay_ms: int | None) -> None:
        span = self._tracer.start_span(f"anarchon run {job.name}", attributes=self._facts(context))
        self._spans[id(context)] = (context, span)
        self.running.add(1)
        if delay_ms is not None:
            self.start_delay.record(max(0, delay_ms) / 1000)
        if context.catch_up:
            self.catch_ups.add(1, {"job": job.name})
        if context.missed > 1 or (context.missed and context.catch_up):
            self.missed.add(context.missed, {"job": job.name})

    @hookimpl
    def anarchon_run_finished(self, job: Job, run: Run) -> None:
        if run.duration_ms is not None:
            self.duration.record(run.duration_ms / 1000)
        if run.error:
            opened = next(
                (k for k, (ctx, _) in self._spans.items() if ctx.job is job and ctx.slot_ms == run.slot_ms), None
            )
            if opened is not None:
                self._errors[opened] = run.error

    @hookimpl
    def anarchon_run_ended(self, job: Job, context: RunContext, status: str | None) -> None:
        self.running.add(-1)
        self.runs.add(1, {"job": job.name, "status": status or "unrecorded"})
        _, span = self._spans.pop(id(context), (None, None))
        error = self._errors.pop(id(context), None)
        if span is None:
            return
        span.set_attribute("anarchon.status", status or "unrecorded")
        if status in _FAILED:
            kind, _, message = (error or status or "").partition(": ")
            span.add_event("exception", {"exception.type": kind, "exception.message": message or kind})
            span.set_status(Status(StatusCode.ERROR, error or status))
        span.end()

    @hookimpl
    def anarchon_run_taken_over(self, job: Job) -> None:
        self.take_overs.add(1, {"job": job.name})

    @hookimpl
    def anarchon_run_handed_over(self, job: Job) -> None:
        self.hand_overs.add(1, {"job": job.name})

    # -- claims, skips, the backend ------------------------------------------------------

    @hookimpl
    def anarchon_claims_decided(
        self, claims: int, latency_ms: float, won: int, lost: int, skipped: int, unknown: int
    ) -> None:
        end = time.time_ns()
        answers = {"won": won, "lost": lost, "skipped": skipped, "unknown": unknown}
        span = self._tracer.start_span(
            "anarchon claim",
            start_time=end - int(latency_ms * 1_000_000),
            attributes={"anarchon.claims": claims, **{f"anarchon.claims.{k}": v for k, v in answers.items()}},
        )
        span.end(end_time=end)
        self.claim_latency.record(latency_ms / 1000)
        self.claim_batch.record(claims)
        for answer, n in answers.items():
            if n:
                self.claims.add(n, {"answer": answer})

    @hookimpl
    def anarchon_slot_skipped(self, job: Job, reason: str) -> None:
        self.skipped.add(1, {"job": job.name, "reason": reason})

    @hookimpl
    def anarchon_backend_error(self, operation: str, error: BaseException) -> None:
        self.backend_errors.add(1, {"operation": operation, "kind": type(error).__name__})

    @hookimpl
    def anarchon_clock_checked(self, skew_ms: int) -> None:
        self._skew_s = skew_ms / 1000
