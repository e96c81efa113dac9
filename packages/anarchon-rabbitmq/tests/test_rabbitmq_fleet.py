"""Real instance processes on RabbitMQ: the conformance suite's multi-process part, and a kill -9."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from anarchon.backend import Outcome
from anarchon.run import Run, RunStatus
from anarchon_conformance import FleetTests
from anarchon_conformance.fleet import Fleet
from anarchon_rabbitmq import RabbitMQBackend

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow]


class TestRabbitMQFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, rabbit_url: str, prefix: str) -> dict[str, Any]:
        return {
            "backend_class": "anarchon_rabbitmq:RabbitMQBackend",
            "backend_kwargs": {"url": rabbit_url, "prefix": prefix},
        }


def test_kill_9_of_the_instance_running_a_job_loses_that_run(
    tmp_path: Path, rabbit_url: str, prefix: str, job: Any, claim: Any
) -> None:
    kwargs = {"url": rabbit_url, "prefix": prefix}
    with Fleet(
        tmp_path / "fleet",
        backend_class="anarchon_rabbitmq:RabbitMQBackend",
        backend_kwargs=kwargs,
        instances=3,
        jobs=0,
        slow_cron="*/3 * * * * *",
        slow_seconds=3,
        slow_options={"jitter_ms": 200},
    ) as f:
        f.start()
        first = f.wait_for(lambda r: r["e"] == "start" and r.get("job") == "job-slow", timeout=30)
        f.kill(f.member(first["instance"]))
        # The others live on and run the next slot, so they had their chance at this one.
        later = f.wait_for(
            lambda r: r["e"] == "start" and r.get("job") == "job-slow" and r["slot"] > first["slot"], timeout=30
        )
        f.stop()
        ledger = f.ledger()
    assert later["instance"] != first["instance"]
    assert [r for r in ledger if r.get("slot") == first["slot"]] == [first]  # started once, never ended

    async def afterwards() -> tuple[Outcome, list[Run]]:
        backend = RabbitMQBackend(**kwargs)
        await backend.start()
        try:
            (late,) = await backend.claim([claim(job("job-slow"), first["slot"], "late")])
            return late.outcome, await backend.history("job-slow")
        finally:
            await backend.close()

    outcome, runs = asyncio.run(afterwards())
    assert outcome is Outcome.LOST  # an instance started now cannot run it either
    (dead,) = [r for r in runs if r.slot_ms == first["slot"]]
    assert (dead.status, dead.instance) == (RunStatus.RUNNING, first["instance"])
