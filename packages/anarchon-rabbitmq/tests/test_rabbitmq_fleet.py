"""Real instance processes on RabbitMQ: the conformance suite's multi-process part."""

from __future__ import annotations

from typing import Any

import pytest

from anarchon_conformance import FleetTests

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow]


class TestRabbitMQFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, rabbit_url: str, prefix: str) -> dict[str, Any]:
        return {
            "backend_class": "anarchon_rabbitmq:RabbitMQBackend",
            "backend_kwargs": {"url": rabbit_url, "prefix": prefix},
        }
