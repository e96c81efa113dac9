"""Real instance processes on one NATS stream: the conformance suite's multi-process part."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from anarchon import Run, Scheduler
from anarchon.run import RunStatus
from anarchon_conformance import FleetTests
from anarchon_conformance.fleet import Fleet, build_backend

pytestmark = [pytest.mark.nats, pytest.mark.slow]


@pytest.fixture
def stream(nats_url: str) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:10]
    names = (f"FLEET_{tag}", f"fleet{tag}.cron.")
    yield names

    async def drop() -> None:
        nc = await nats.connect(nats_url)
        try:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(names[0])
        finally:
            await nc.close()

    asyncio.run(drop())


class TestNatsFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, nats_url: str, stream: tuple[str, str]) -> dict[str, Any]:
        name, prefix = stream
        return {
            "backend_class": "anarchon_nats:NatsBackend",
            "backend_kwargs": {"servers": nats_url, "stream": name, "prefix": prefix},
        }


def test_the_slot_of_a_killed_runner_is_run_by_no_other_instance(
    nats_url: str, stream: tuple[str, str], tmp_path: Path
) -> None:
    """Claim only: no lease a backup could see expire, so the run of a runner killed mid-run is lost.

    The other instances keep running later slots, which shows they were alive and scheduling
    while the killed slot went unrun; its record stays ``running`` under the dead instance.
    """
    name, prefix = stream
    spec: dict[str, Any] = {
        "backend_class": "anarchon_nats:NatsBackend",
        "backend_kwargs": {"servers": nats_url, "stream": name, "prefix": prefix},
    }
    with Fleet(
        tmp_path,
        **spec,
        instances=3,
        jobs=1,
        options={"jitter_ms": 300},
        slow_cron="*/3 * * * * *",
        slow_seconds=2,
        slow_options={"jitter_ms": 300},
    ) as f:
        f.start()
        first = f.wait_for(lambda r: r["e"] == "start" and r.get("job") == "job-slow", timeout=30)
        f.kill(f.member(first["instance"]))
        later = first["slot"] + 2 * 3000  # two slow slots on, well past any run the killed one could have left
        f.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-slow" and r["slot"] >= later, timeout=30)
        f.stop()
        ledger = f.ledger()
        report = f.report(since_ms=first["slot"])
    starts = [r for r in ledger if r["e"] == "start" and r["job"] == "job-slow" and r["slot"] == first["slot"]]
    assert starts == [first]
    assert report.duplicates == 0, report.duplicate_slots
    assert report.take_overs == 0
    assert {r["instance"] for r in ledger if r["e"] == "end" and r["slot"] >= later} <= {
        m.instance for m in f.members if m.killed_at is None
    }

    async def record() -> list[Run]:
        return [r for r in await Scheduler(build_backend(**spec)).history("job-slow") if r.slot_ms == first["slot"]]

    (dead,) = asyncio.run(record())
    assert (dead.status, dead.instance) == (RunStatus.RUNNING, first["instance"])
