"""The anarchon conformance suite against SQLiteBackend: one fresh file per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from anarchon_conformance import BackendFactory, BackendSuite
from anarchon_sqlite import SQLiteBackend


class TestSQLiteBackend(BackendSuite):
    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> BackendFactory:
        path = tmp_path / "conformance.sqlite3"  # one file per test: its own namespace
        return lambda: SQLiteBackend(path)
