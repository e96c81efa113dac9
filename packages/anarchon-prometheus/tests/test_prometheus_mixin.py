"""The Grafana dashboard and the alert rules that ship: every metric they query is one the plugin exports,
and promtool checks the rules and runs their unit tests (alerts_test.yml)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import anarchon_prometheus
from anarchon_prometheus import PrometheusMetrics

MIXIN = Path(anarchon_prometheus.__file__).parent / "mixin"
TESTS = Path(__file__).parent
METRIC = re.compile(r"\banarchon_[a-z_]+")


def _exported() -> set[str]:
    """Every sample name the plugin exposes, with the _total, _bucket, _sum and _count suffixes."""
    registry = CollectorRegistry()
    PrometheusMetrics(registry=registry)
    names = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        names.add(family.name)
        kind = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(family.type, ("",))
        names.update(family.name + suffix for suffix in kind)
    return names


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads((MIXIN / "dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_every_metric_the_dashboard_and_the_rules_query_is_exported() -> None:
    exported = _exported()
    rules = "\n".join(line for line in (MIXIN / "alerts.yml").read_text().splitlines() if not line.startswith("#"))
    queried = {m for expr in [*_dashboard_exprs(), rules] for m in METRIC.findall(expr)} - {"anarchon_job"}
    assert queried, "no metric found in the mixin"
    assert queried <= exported, f"queried but not exported: {sorted(queried - exported)}"
    assert {"anarchon_runs_total", "anarchon_slots_skipped_total", "anarchon_backend_errors_total"} <= queried


def test_the_dashboard_filters_by_the_anarchon_job_label() -> None:
    per_job = [e for e in _dashboard_exprs() if "anarchon_job" in e]
    assert per_job and not any(re.search(r"by \(job\)|\bjob=", e) for e in _dashboard_exprs())


def test_promtool_checks_the_rules_and_runs_their_unit_tests(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set: promtool (Debian's prometheus package) is needed")
        pytest.skip("!!! SKIPPED: promtool is not installed (apt-get install prometheus)")
    check = subprocess.run([promtool, "check", "rules", str(MIXIN / "alerts.yml")], capture_output=True, text=True)
    assert check.returncode == 0 and "SUCCESS: 8 rules found" in check.stdout, check.stdout + check.stderr
    # The unit tests name the rules as the repository holds them; here, as the installed package does.
    units = (
        (TESTS / "alerts_test.yml")
        .read_text()
        .replace("../src/anarchon_prometheus/mixin/alerts.yml", str(MIXIN / "alerts.yml"))
    )
    (tmp_path / "alerts_test.yml").write_text(units)
    test = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert test.returncode == 0 and "SUCCESS" in test.stdout, test.stdout + test.stderr
