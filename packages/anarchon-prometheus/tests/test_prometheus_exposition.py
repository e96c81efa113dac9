"""The exposition as Prometheus reads it: names, labels and units by its conventions, and promtool's check.

Every metric is fed through the hooks the scheduler calls, then the text
format is parsed back. ``promtool check metrics`` (Debian's ``prometheus``
package; CI installs it) must find nothing to say.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from anarchon import RunContext, Scheduler
from anarchon_prometheus import PrometheusMetrics

#: Labels Prometheus attaches to every target's series: a metric of ours must not carry them.
TARGET_LABELS = {"job", "instance"}
DOCUMENTED = {
    "status": {"succeeded", "failed", "timed-out", "cancelled", "unrecorded"},
    "reason": {"overlap", "late", "paused"},
    "answer": {"won", "lost", "skipped", "unknown"},
}


def _fed() -> tuple[CollectorRegistry, PrometheusMetrics]:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)
    job = Scheduler("memory://").add("report", "* * * * * *", lambda: None)
    metrics.anarchon_run_started(job, RunContext(job=job, slot_ms=1000, instance="i", catch_up=True, missed=13), 40)
    metrics.anarchon_run_ended(job, "succeeded")
    metrics.anarchon_run_started(job, RunContext(job=job, slot_ms=2000, instance="i"), 5)
    metrics.anarchon_run_ended(job, None)
    metrics.anarchon_run_taken_over(job)
    metrics.anarchon_slot_skipped(job, "paused")
    metrics.anarchon_claims_decided(claims=1, latency_ms=2.0, won=1, lost=0, skipped=0, unknown=0)
    metrics.anarchon_backend_error("claim", ConnectionError("down"))
    metrics.anarchon_clock_checked(-12)
    return registry, metrics


def test_names_labels_and_units_follow_the_conventions() -> None:
    registry, _ = _fed()
    families = list(text_string_to_metric_families(generate_latest(registry).decode()))
    assert families
    for family in families:
        assert family.name.startswith("anarchon_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        if family.type == "histogram" and not family.name.endswith("_batch_size"):
            assert family.name.endswith("_seconds"), f"{family.name}: a duration's unit is seconds, in the name"
        for sample in family.samples:
            assert not TARGET_LABELS & set(sample.labels), f"{sample.name} carries {sample.labels}"
            for label, allowed in DOCUMENTED.items():
                if label in sample.labels:
                    assert sample.labels[label] in allowed, (sample.name, sample.labels)
    assert registry.get_sample_value("anarchon_runs_total", {"anarchon_job": "report", "status": "unrecorded"}) == 1


def test_missed_slots_leave_out_the_covering_runs_own_slot() -> None:
    registry, _ = _fed()
    assert registry.get_sample_value("anarchon_missed_slots_total", {"anarchon_job": "report"}) == 12


def test_a_batch_of_one_is_not_read_as_a_fraction() -> None:
    """The lowest bucket holding batches of one starts at 0.999, so histogram_quantile cannot answer 0.6."""
    registry, _ = _fed()
    assert registry.get_sample_value("anarchon_claim_batch_size_bucket", {"le": "0.999"}) == 0
    assert registry.get_sample_value("anarchon_claim_batch_size_bucket", {"le": "1.0"}) == 1


def test_promtool_finds_nothing_to_say() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set: promtool (Debian's prometheus package) is needed")
        pytest.skip("!!! SKIPPED: promtool is not installed (apt-get install prometheus)")
    registry, _ = _fed()
    done = subprocess.run(
        [promtool, "check", "metrics"], input=generate_latest(registry), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (done.stdout, done.stderr)
