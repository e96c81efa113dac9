"""The anarchon conformance suite, run against RabbitMQ: one prefix per test."""

from __future__ import annotations

import pytest

from anarchon_conformance import BackendFactory, BackendSuite
from anarchon_rabbitmq import RabbitMQBackend

pytestmark = pytest.mark.rabbitmq


class TestRabbitMQConformance(BackendSuite):
    @pytest.fixture
    def backend_factory(self, rabbit_url: str, prefix: str) -> BackendFactory:
        return lambda: RabbitMQBackend(url=rabbit_url, prefix=prefix)
