"""The anarchon conformance suite, every part of it, on a fresh schema per test."""

from __future__ import annotations

import asyncpg
import pytest

from anarchon.backend import Backend
from anarchon_conformance import BackendFactory, BackendSuite, HistoryLimitTests, PlantForeignRecord
from anarchon_postgres import PostgresBackend

pytestmark = pytest.mark.postgres

_ROW = (
    'INSERT INTO "{schema}".runs (job, slot_ms, manual, status, instance, attempt, catch_up, missed, '
    "started_at, token, lease_ms, expires_ms) VALUES ($1, $2, false, $3, 'x', $4, false, $5, now(), 't', 1000, 0)"
)


class TestPostgresConformance(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    def backend_factory(self, pg_dsn: str, schema: str) -> BackendFactory:
        return lambda: PostgresBackend(pg_dsn, schema=schema)

    @pytest.fixture
    def plant_foreign_record(self, pg_dsn: str, schema: str) -> PlantForeignRecord:
        async def plant(backend: Backend, job: str, slot_ms: int) -> None:
            # The columns are typed, so what a foreign writer can leave is a status no version wrote,
            # a slot beyond what datetime holds, an attempt of 0 or a negative count.
            conn = await asyncpg.connect(pg_dsn)
            try:
                await conn.executemany(
                    _ROW.format(schema=schema),
                    [
                        (job, slot_ms, "bogus", 1, 0),
                        (job, 2**62, "succeeded", 1, 0),
                        (job, slot_ms + 1, "succeeded", 0, 0),
                        (job, slot_ms + 2, "succeeded", 1, -1),
                    ],
                )
            finally:
                await conn.close()

        return plant
