"""Spans and metrics through the OpenTelemetry SDK's in-memory exporters, on a real SQLite backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from anarchon import Scheduler
from anarchon_conformance import eventually
from anarchon_opentelemetry import OpenTelemetryObserver


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]


async def test_a_span_per_run_and_per_claim_and_the_metrics(tmp_path: Path) -> None:
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    observer = OpenTelemetryObserver(tracer_provider=tracing, meter_provider=MeterProvider(metric_readers=[reader]))

    def boom() -> None:
        raise KeyError("missing row")

    s = Scheduler(f"sqlite:///{tmp_path / 'jobs.db'}", instance_id="otel-1", plugins=[observer])
    s.add("ok", "* * * * * *", lambda: None, jitter_ms=0)
    s.add("bad", "* * * * * *", boom, jitter_ms=0)

    def run_spans(job: str) -> list[Any]:
        return [x for x in spans.get_finished_spans() if x.name == f"anarchon run {job}"]

    async with s:
        await eventually(lambda: len(run_spans("ok")) >= 2 and len(run_spans("bad")) >= 2, 20)
    ok, bad = run_spans("ok")[0], run_spans("bad")[0]
    assert ok.attributes["anarchon.job"] == "ok" and ok.attributes["anarchon.instance"] == "otel-1"
    assert ok.attributes["anarchon.status"] == "succeeded" and ok.attributes["anarchon.attempt"] == 1
    assert ok.attributes["anarchon.fencing"] >= 1 and ok.attributes["anarchon.slot_ms"] % 1000 == 0
    assert ok.status.status_code is not StatusCode.ERROR
    assert bad.status.status_code is StatusCode.ERROR
    (event,) = [e for e in bad.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "KeyError" and "missing row" in event.attributes["exception.message"]
    claim_spans = [x for x in spans.get_finished_spans() if x.name == "anarchon claim"]
    assert claim_spans and all(x.end_time >= x.start_time for x in claim_spans)
    assert all(x.attributes["anarchon.claims"] == 2 for x in claim_spans), "both jobs' slots in one call"

    runs = {(p.attributes["job"], p.attributes["status"]): p.value for p in points(reader, "anarchon.runs")}
    assert runs[("ok", "succeeded")] == len(run_spans("ok"))
    assert runs[("bad", "failed")] == len(run_spans("bad"))
    (won,) = [p.value for p in points(reader, "anarchon.claims") if p.attributes["answer"] == "won"]
    assert won == len(run_spans("ok")) + len(run_spans("bad"))
    (delay,) = points(reader, "anarchon.start_delay")
    assert delay.count == won
    (running,) = points(reader, "anarchon.runs.running")
    assert running.value == 0
