"""The failover scenario's short run, one test per replicated referee: ``python -m chaos.failover --short``.

Each test starts its own replicated servers on free ports (never the shared
ones), five instance processes with five every-second jobs and a slow job,
and fails the referee over twice (a crash and, where the clients follow one
address, a promotion while the old primary still serves), with the
backend's default options, which promise that no slot runs twice across a
failover (each claim waits for a replica where the server has one): that is
asserted. The durable options (``min_replicas=1``, a synchronous standby)
make the same promise at the cost of more lost slots; ``python -m
chaos.failover --short`` (``make chaos-failover``) runs both kinds, and
``ANARCHON_FAILOVER_DURABLE=1`` adds the durable run here.
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
def test_short_failover_run_with_default_options_runs_no_slot_twice(backend: str) -> None:
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
        with_durable = os.environ.get("ANARCHON_FAILOVER_DURABLE") == "1" and FAILOVER_BROKERS[backend].has_durable
        variants = (False, True) if with_durable else (False,)
        results = [run_failover(backend, durable, config, every_s=5.0) for durable in variants]
        print(table(results))
        for r in results:
            assert r.verdict.error is None, r.verdict.error
            assert r.failovers, f"{backend}: no failover happened"
            assert r.across > 0, f"{backend}: no slot ran across a failover: the scenario measured nothing"
            kind = "durable" if r is not results[0] else "default"
            assert r.second_runs == [], f"{backend}, {kind} options: slots run twice: {r.second_runs}"
        kept = False
    finally:
        if kept:
            print(f"ledgers and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
