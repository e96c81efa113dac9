"""The anarchon conformance suite against SQLiteBackend: one fresh file per test."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from anarchon.backend import Backend
from anarchon_conformance import BackendFactory, BackendSuite, HistoryLimitTests, PlantForeignRecord
from anarchon_sqlite import SQLiteBackend

_ROW = (
    "INSERT INTO anarchon_runs (job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed, "
    "started_at_us, finished_at_us, duration_ms, error, token, lease_ms, expires_ms) "
    "VALUES (?, ?, 0, ?, ?, ?, NULL, 0, 0, ?, NULL, NULL, NULL, 't', 1000, 0)"
)


class TestSQLiteBackend(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> BackendFactory:
        path = tmp_path / "conformance.sqlite3"  # one file per test: its own namespace
        return lambda: SQLiteBackend(path)

    @pytest.fixture
    def plant_foreign_record(self, tmp_path: Path) -> PlantForeignRecord:
        async def plant(backend: Backend, job: str, slot_ms: int) -> None:
            # SQLite keeps any type in any column: a status no version wrote, a slot as text, a time past
            # what datetime holds, an attempt of the wrong type.
            with sqlite3.connect(tmp_path / "conformance.sqlite3") as conn:
                conn.executemany(
                    _ROW,
                    [
                        (job, slot_ms, "bogus", "x", 1, None),
                        (job, slot_ms + 1, "succeeded", "x", 1, 10**19 // 2),
                        (job, str(slot_ms + 2), "succeeded", "x", 1, None),
                        (job, slot_ms + 3, "succeeded", "x", "one", None),
                        (job, slot_ms + 4, "succeeded", 5, 1, None),
                    ],
                )

        return plant
