"""Real instance processes on RabbitMQ: every slot run exactly once while all live."""

from __future__ import annotations

import time

import pytest

from anarchon_conformance.fleet import Fleet

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow]


def test_four_processes_run_every_slot_of_five_every_second_jobs_exactly_once(tmp_path, rabbit_url, prefix, broker):
    with Fleet(
        tmp_path / "fleet",
        backend_class="anarchon_rabbitmq:RabbitMQBackend",
        backend_kwargs={"url": rabbit_url, "prefix": prefix},
        instances=4,
        jobs=5,
        options={"jitter_ms": 500},
    ) as fleet:
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
    gates = [q for q in broker(prefix).values() if ".slot." in q["name"]]
    assert len(gates) >= report.slots and {q["messages"] for q in gates} == {1}
