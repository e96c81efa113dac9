"""The metrics after a known sequence on a real backend: runs, a failure, a skipped slot, a take-over after kill -9."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from anarchon import Scheduler
from anarchon_conformance import eventually
from anarchon_conformance.fleet import Fleet
from anarchon_prometheus import OTHER_JOBS, PrometheusMetrics


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


async def test_runs_failures_skips_and_latencies_are_counted(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)
    s = Scheduler(sqlite_url(tmp_path), plugins=[metrics])
    release = threading.Event()

    def boom() -> None:
        raise RuntimeError("no")

    s.add("ok", "* * * * * *", lambda: None, jitter_ms=0)
    s.add("bad", "* * * * * *", boom, jitter_ms=0)
    s.add("slow", "* * * * * *", lambda: release.wait(10), jitter_ms=0)  # skips the next slots for overlap
    async with s:
        await eventually(
            lambda: (
                value(registry, "anarchon_runs_total", anarchon_job="ok", status="succeeded") >= 2
                and value(registry, "anarchon_runs_total", anarchon_job="bad", status="failed") >= 2
                and value(registry, "anarchon_slots_skipped_total", anarchon_job="slow", reason="overlap") >= 1
            )
        )
        assert value(registry, "anarchon_runs_running") >= 1, "the slow run is running"
        release.set()
    ok = value(registry, "anarchon_runs_total", anarchon_job="ok", status="succeeded")
    assert value(registry, "anarchon_runs_total", anarchon_job="bad", status="succeeded") == 0
    won = value(registry, "anarchon_claims_total", answer="won")
    assert won == ok + value(registry, "anarchon_runs_total", anarchon_job="bad", status="failed") + value(
        registry, "anarchon_runs_total", anarchon_job="slow", status="succeeded"
    ), "every won claim ended as one run"
    assert value(registry, "anarchon_claims_total", answer="skipped") == value(
        registry, "anarchon_slots_skipped_total", anarchon_job="slow", reason="overlap"
    )
    assert value(registry, "anarchon_runs_running") == 0
    assert value(registry, "anarchon_start_delay_seconds_count") == won
    assert value(registry, "anarchon_claim_latency_seconds_count") >= 2
    assert value(registry, "anarchon_claim_batch_size_sum") >= won, "slots due together are one batch"
    assert value(registry, "anarchon_run_duration_seconds_count") == won


def test_a_take_over_after_kill_9_is_counted(tmp_path: Path) -> None:
    """One instance process runs the slow job and is killed with SIGKILL; this process takes it over."""
    url = sqlite_url(tmp_path)
    fleet = Fleet(
        tmp_path / "fleet",
        backend=url,
        instances=1,
        jobs=0,
        slow_cron="*/4 * * * * *",
        slow_seconds=2.0,
        slow_options={"lease_ms": 1500, "jitter_ms": 0},
    )
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)
    with fleet:
        fleet.start()
        started = fleet.wait_for(lambda r: r["e"] == "start" and r["job"] == "job-slow")
        fleet.kill(fleet.member(started["instance"]))

        async def backup() -> None:
            s = Scheduler(url, instance_id="backup", plugins=[metrics])
            s.add("job-slow", "*/4 * * * * *", lambda: time.sleep(0.1), lease_ms=1500, jitter_ms=0)
            async with s:
                await eventually(lambda: value(registry, "anarchon_take_overs_total", anarchon_job="job-slow") >= 1, 20)
                await eventually(
                    lambda: value(registry, "anarchon_runs_total", anarchon_job="job-slow", status="succeeded") >= 1
                )

        asyncio.run(backup())
    assert value(registry, "anarchon_take_overs_total", anarchon_job="job-slow") == 1


def test_job_labels_are_bounded() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry, max_jobs=2)
    assert [metrics._job(n) for n in ("a", "b", "c", "a")] == ["a", "b", OTHER_JOBS, "a"]
    with pytest.raises(ValueError, match="max_jobs=0 must be a positive integer"):
        PrometheusMetrics(registry=CollectorRegistry(), max_jobs=0)


def test_the_entry_point_measures_every_scheduler_on_the_default_registry() -> None:
    from prometheus_client import REGISTRY

    s = Scheduler("memory://")
    assert "prometheus" in dict(s.plugins.pluggy.list_name_plugin())
    assert REGISTRY.get_sample_value("anarchon_runs_running") is not None


async def test_drift_sets_the_definitions_and_superseded_gauges(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    url = sqlite_url(tmp_path)
    old = Scheduler(url, instance_id="old", version="1", plugins=[PrometheusMetrics(registry=registry)])
    old.add("report", "*/5 * * * * *", lambda: None)
    new = Scheduler(url, instance_id="new", version="2")
    new.add("report", "* * * * * *", lambda: None)
    async with old:
        assert value(registry, "anarchon_job_definitions", anarchon_job="report") == 0, "no drift seen yet"
        async with new:
            await eventually(
                lambda: value(registry, "anarchon_job_superseded", anarchon_job="report") == 1, timeout_s=5
            )
            assert value(registry, "anarchon_job_definitions", anarchon_job="report") == 2
        await eventually(lambda: value(registry, "anarchon_job_definitions", anarchon_job="report") == 1, timeout_s=5)
        assert value(registry, "anarchon_job_superseded", anarchon_job="report") == 0
