"""The anarchon conformance suite, run against RabbitMQ: one prefix per test."""

from __future__ import annotations

import aio_pika
import pytest

from anarchon.backend import Backend
from anarchon_conformance import BackendFactory, BackendSuite, HistoryLimitTests, PlantForeignRecord
from anarchon_rabbitmq import RabbitMQBackend

pytestmark = pytest.mark.rabbitmq


class TestRabbitMQConformance(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    def backend_factory(self, rabbit_url: str, prefix: str) -> BackendFactory:
        return lambda: RabbitMQBackend(url=rabbit_url, prefix=prefix)

    @pytest.fixture
    def plant_foreign_record(self, rabbit_url: str, prefix: str) -> PlantForeignRecord:
        async def plant(backend: Backend, job: str, slot_ms: int) -> None:
            # Messages published by hand to the job's history stream: not JSON, times beyond datetime.
            def record(slot: str, status: str = "succeeded") -> bytes:
                run = f'{{"job": "{job}", "slot_ms": {slot}, "status": "{status}", "instance": "x"}}'
                return f'{{"v": 1, "token": "t", "run": {run}}}'.encode()

            bodies = [b"not a record", record("1e20"), record("Infinity"), record(str(slot_ms), "bogus")]
            connection = await aio_pika.connect(rabbit_url)
            async with connection:
                channel = await connection.channel()
                for body in bodies:
                    await channel.default_exchange.publish(aio_pika.Message(body), routing_key=f"{prefix}{job}.history")

        return plant
