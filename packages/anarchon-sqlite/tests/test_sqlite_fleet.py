"""Real instance processes sharing one SQLite file, judged by the fleet harness's ledger."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from anarchon.run import RunStatus
from anarchon_conformance.fleet import Fleet
from anarchon_sqlite import SQLiteBackend

pytestmark = pytest.mark.slow

#: The scheduler looks for expired leases every min(1 s, lease_ms / 3), give or take a quarter.
TAKE_OVER_POLL_MS = 1250


def fleet_on(tmp_path: Path, **kwargs: object) -> Fleet:
    path = tmp_path / "shared.sqlite3"
    return Fleet(tmp_path / "fleet", backend=f"sqlite:///{path}", **kwargs)  # type: ignore[arg-type]


def test_four_processes_run_every_slot_once(tmp_path):
    with fleet_on(tmp_path, instances=4, jobs=6, options={"jitter_ms": 300}) as fleet:
        fleet.start()
        time.sleep(22)
        fleet.stop()
        report = fleet.report()
    print(report.summary())
    assert report.slots >= 6 * 19
    assert report.duplicates == 0, report.duplicate_slots
    assert report.missed == 0, report.missed_slots
    assert report.runs == report.slots
    ran_on = {row.runs[0][0] for row in report.rows if row.runs}
    assert len(ran_on) == 4  # every process won some slots: they really shared the file


def test_kill_9_of_the_slow_runner_is_taken_over_with_attempt_two(tmp_path):
    lease_ms, jitter_ms = 3000, 200
    with fleet_on(
        tmp_path,
        instances=4,
        jobs=5,
        options={"jitter_ms": jitter_ms},
        slow_cron="*/20 * * * * *",
        slow_seconds=6,
        slow_options={"lease_ms": lease_ms, "jitter_ms": jitter_ms},
    ) as fleet:
        fleet.start()
        first = fleet.wait_for(lambda r: r["e"] == "start" and r.get("job") == "job-slow", timeout=30)
        killed_at = fleet.kill(fleet.member(first["instance"]))
        second = fleet.wait_for(
            lambda r: (
                r["e"] == "start" and r.get("job") == "job-slow" and r["slot"] == first["slot"] and r["attempt"] == 2
            ),
            timeout=30,
        )
        fleet.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-slow" and r["attempt"] == 2, timeout=30)
        time.sleep(3)  # every-second slots around the kill and the take-over
        fleet.stop()
        report = fleet.report()
    took_ms = second["t"] - killed_at
    print(f"take-over after kill -9: {took_ms} ms (lease {lease_ms} ms); {report.summary()}")
    assert second["instance"] != first["instance"]
    assert second["fencing"] > first["fencing"]
    assert took_ms <= lease_ms + jitter_ms + TAKE_OVER_POLL_MS
    assert report.duplicates == 0, report.duplicate_slots
    assert report.missed == 0, report.missed_slots

    async def slow_history() -> list:
        backend = SQLiteBackend(tmp_path / "shared.sqlite3")
        await backend.start()
        try:
            return await backend.history("job-slow")
        finally:
            await backend.close()

    (record,) = [r for r in asyncio.run(slow_history()) if r.slot_ms == first["slot"]]
    assert (record.attempt, record.instance, record.status) == (2, second["instance"], RunStatus.SUCCEEDED)
    assert record.fencing == second["fencing"]
