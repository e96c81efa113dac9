"""A real Prometheus server scrapes a scheduler with the README's scrape config and answers its queries.

Debian's ``prometheus`` (CI installs it) on a free port, scraping every
second; the scheduler's metrics served by ``prometheus_client``. The README's
query must give one series per job, labelled ``anarchon_job``, with no
``exported_job`` in sight.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from anarchon import Scheduler, start_in_background
from anarchon_conformance import eventually, free_port
from anarchon_prometheus import PrometheusMetrics

CONFIG = """
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: anarchon
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def _query(port: int, expr: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return list(json.loads(reply.read())["data"]["result"])
    except OSError:
        return []


async def test_the_readme_query_gives_one_series_per_job(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set: Debian's prometheus package is needed")
        pytest.skip("!!! SKIPPED: no prometheus binary (apt-get install prometheus)")
    registry = CollectorRegistry()
    scheduler = Scheduler("memory://", plugins=[PrometheusMetrics(registry=registry)])
    for name in ("report", "sync"):
        scheduler.add(name, "* * * * * *", lambda: None, jitter_ms=0)
    exporter = free_port()
    server, _thread = start_http_server(exporter, addr="127.0.0.1", registry=registry)
    web = free_port({exporter})
    (tmp_path / "prometheus.yml").write_text(CONFIG.format(port=exporter))
    argv = [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}"]
    argv += [f"--web.listen-address=127.0.0.1:{web}"]
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    handle = start_in_background(scheduler)
    try:
        query = 'sum by (anarchon_job) (rate(anarchon_runs_total{status="succeeded"}[5m]))'
        series = await eventually(lambda: len(found := _query(web, query)) == 2 and found, 60, interval_s=0.5,
                                  what="two series, one per job, from the README's query")  # fmt: skip
        assert sorted(s["metric"]["anarchon_job"] for s in series) == ["report", "sync"]  # type: ignore[index]
        raw = _query(web, "anarchon_runs_total")
        assert raw and all(s["metric"]["job"] == "anarchon" and "exported_job" not in s["metric"] for s in raw)  # type: ignore[index,operator]
    finally:
        handle.stop()
        proc.terminate()
        proc.wait(30)
        log.close()
        server.shutdown()
