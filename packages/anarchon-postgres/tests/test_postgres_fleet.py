"""Real instance processes on PostgreSQL: the conformance suite's multi-process part."""

from __future__ import annotations

from typing import Any

import pytest

from anarchon_conformance import FleetTests

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class TestPostgresFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, pg_dsn: str, schema: str) -> dict[str, Any]:
        return {
            "backend_class": "anarchon_postgres:PostgresBackend",
            "backend_kwargs": {"dsn": pg_dsn, "schema": schema},
        }
