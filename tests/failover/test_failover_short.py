"""The failover scenario's short run, one test per replicated referee: ``python -m chaos.failover --short``.

Each test starts its own replicated servers on free ports (never the shared
ones), five instance processes with five every-second jobs and a slow job,
and fails the referee over twice (a crash and, where the clients follow one
address, a promotion while the old primary still serves), once with the
backend's default options and once with its durable option. With the
durable option (RabbitMQ has none: its defaults) no slot may run twice.
With the defaults a second run is what the scenario measures (asynchronous
replication loses the claim that decided it): it is printed, not asserted,
since its absence in a run proves nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from chaos.backends import FAILOVER_BROKERS
from chaos.failover import ORDER, available, table
from chaos.failover_scenario import run_failover
from chaos.scenario import Config

pytestmark = pytest.mark.slow

REASONS = available()


@pytest.mark.parametrize("backend", ORDER)
def test_short_failover_run_keeps_the_durable_promise(backend: str) -> None:
    reason = REASONS[backend]
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the {backend} failover run must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {backend} failover run cannot start here: {reason}")
    # Not tmp_path: initdb runs as the postgres user, who cannot enter pytest's 0700 dirs.
    workdir = Path(tempfile.mkdtemp(prefix="anarchon-failover-"))
    kept = True
    try:
        config = Config(short=True, seconds=20, jobs=5, seed=1, workdir=workdir)
        variants = (False, True) if FAILOVER_BROKERS[backend].has_durable else (False,)
        results = [run_failover(backend, durable, config, every_s=5.0) for durable in variants]
        print(table(results))
        for r in results:
            assert r.verdict.error is None, r.verdict.error
            assert r.failovers, f"{backend}: no failover happened"
            assert r.across > 0, f"{backend}: no slot ran across a failover: the scenario measured nothing"
        for line in results[0].second_runs:
            print(f"default options, second run: {line}")
        promised = results[-1]  # the durable run, or the defaults where there is no durable option
        assert promised.promised
        assert promised.second_runs == [], promised.second_runs
        kept = False
    finally:
        if kept:
            print(f"ledgers and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
