"""Real instance processes on PostgreSQL: every slot once, and take-over after kill -9."""

from __future__ import annotations

import time

import pytest

from anarchon_conformance.fleet import Fleet

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _fleet(tmp_path, pg_dsn: str, schema: str, **kwargs) -> Fleet:
    return Fleet(
        tmp_path / "fleet",
        backend_class="anarchon_postgres:PostgresBackend",
        backend_kwargs={"dsn": pg_dsn, "schema": schema},
        **kwargs,
    )


def test_four_processes_run_every_slot_of_five_every_second_jobs_exactly_once(tmp_path, pg_dsn, schema):
    with _fleet(tmp_path, pg_dsn, schema, instances=4, jobs=5, options={"jitter_ms": 500}) as fleet:
        fleet.start()
        time.sleep(22)
        fleet.stop()
        report = fleet.report()
    print(report.summary())
    assert report.slots >= 5 * 18
    assert report.duplicates == 0, report.duplicate_slots
    assert report.missed == 0, report.missed_slots
    assert report.runs == report.slots
    assert len({rec["instance"] for rec in fleet.ledger() if rec["e"] == "start"}) > 1, "the work is shared"


def test_kill_9_of_a_runner_is_taken_over_within_the_lease(tmp_path, pg_dsn, schema):
    lease_ms, jitter_ms = 1500, 300
    with _fleet(
        tmp_path,
        pg_dsn,
        schema,
        instances=4,
        jobs=5,
        options={"jitter_ms": jitter_ms},
        slow_cron="*/6 * * * * *",
        slow_seconds=4,
        slow_options={"lease_ms": lease_ms, "jitter_ms": jitter_ms},
    ) as fleet:
        fleet.start()
        first = fleet.wait_for(lambda r: r["e"] == "start" and r["job"].endswith("slow"), timeout=20)
        killed_at = fleet.kill(fleet.member(first["instance"]))
        taken = fleet.wait_for(
            lambda r: (
                r["e"] == "start" and r["job"] == first["job"] and r["slot"] == first["slot"] and r["attempt"] == 2
            ),
            timeout=15,
        )
        fleet.wait_for(
            lambda r: r["e"] == "end" and r["job"] == first["job"] and r["slot"] == first["slot"], timeout=15
        )
        time.sleep(3)
        fleet.stop()
        report = fleet.report()
    took = taken["t"] - killed_at
    print(f"take-over {took} ms after kill -9 (lease_ms={lease_ms}, jitter_ms={jitter_ms}); {report.summary()}")
    assert taken["instance"] != first["instance"]
    assert taken["fencing"] > first["fencing"]
    # The lease was renewed at most a third of it before the kill; take-over polls every third of it.
    assert took <= lease_ms + jitter_ms + lease_ms // 3 + 500
    assert report.duplicates == 0, report.duplicate_slots
    assert report.missed == 0, report.missed_slots
    assert report.take_overs >= 1
