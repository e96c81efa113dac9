"""The anarchon conformance suite, every part of it, on a fresh schema per test."""

from __future__ import annotations

import pytest

from anarchon_conformance import BackendFactory, BackendSuite
from anarchon_postgres import PostgresBackend

pytestmark = pytest.mark.postgres


class TestPostgresConformance(BackendSuite):
    @pytest.fixture
    def backend_factory(self, pg_dsn: str, schema: str) -> BackendFactory:
        return lambda: PostgresBackend(pg_dsn, schema=schema)
