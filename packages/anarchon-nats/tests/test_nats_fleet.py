"""Real instance processes on one NATS stream: every slot run exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator

import nats
import pytest

from anarchon_conformance.fleet import Fleet

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


def test_four_processes_run_every_slot_of_five_every_second_jobs_exactly_once(tmp_path, nats_url, stream) -> None:
    name, prefix = stream
    with Fleet(
        tmp_path / "fleet",
        backend_class="anarchon_nats:NatsBackend",
        backend_kwargs={"servers": nats_url, "stream": name, "prefix": prefix},
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
