"""Real instance processes on one NATS stream: the conformance suite's multi-process part."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from anarchon_conformance import FleetTests

pytestmark = [pytest.mark.nats, pytest.mark.slow]


@pytest.fixture
def stream(nats_url: str) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:10]
    names = (f"FLEET_{tag}", f"fleet{tag}.cron.")
    yield names

    async def drop() -> None:
        nc = await nats.connect(nats_url)
        try:
            for name in (names[0], f"KV_{names[0]}_registry"):  # the stream and the fleet registry's bucket
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await nc.jetstream().delete_stream(name)
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
